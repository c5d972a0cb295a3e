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
import subprocess
import unittest
import urllib.parse

from harness import GatewayTest

PG = os.environ.get("GH_TEST_PG_URL")
PG_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../pg/pg_server.sh")


def psql(url, sql):
    p = subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-X", "-At", "-c", sql],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("psql: %s\n%s" % (sql, p.stderr))
    return p.stdout


def with_db(url, name):
    """url with its database replaced by name."""
    u = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


def rows(url, sql):
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
