"""What the integration tests that run on PostgreSQL share: the test
server's URL (GH_TEST_PG_URL, set by tests/pg/with_pg.sh under CTest's
pg fixture), psql, and a database of its own for each test.

    class T(PgTest):                 # skipped without GH_TEST_PG_URL
        def test_x(self):
            self.url                 # this test's empty database
            self.q("SELECT ...")     # rows as dicts, through psql
"""

import json
import os
import secrets
import unittest

from harness import GatewayTest, psql, with_db

PG = os.environ.get("GH_TEST_PG_URL")
PG_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../pg/pg_server.sh")


def rows(url, sql):
    """The rows of sql as JSON gives them (bytea as "\\x..." text)."""
    return json.loads(psql(url, "SELECT coalesce(json_agg(t), '[]') FROM (%s) t" % sql))


@unittest.skipUnless(PG, "needs PostgreSQL: GH_TEST_PG_URL (tests/pg/with_pg.sh)")
class PgTest(GatewayTest):
    """A GatewayTest with an empty database of its own on the test server
    (self.dbname, self.url), dropped at the end. A test that moves to a
    server of its own sets self.server_url to it."""

    db_prefix = "gh_test_"

    def setUp(self):
        super().setUp()
        self.server_url = PG
        self.dbname = self.db_prefix + secrets.token_hex(6)
        psql(PG, "CREATE DATABASE " + self.dbname)
        self.url = with_db(PG, self.dbname)

    def tearDown(self):
        super().tearDown()
        psql(self.server_url, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.dbname)

    def q(self, sql):
        return rows(self.url, sql)
