"""gatehouse migrate --from sqlite:PATH --to URL: a single-node install
moved to PostgreSQL. After the copy a gatehouse on PostgreSQL with the same
key files takes the old API keys (a revoked one stays revoked), has the
thread, its messages and the memory (searchable there), lets the approval
that was still pending be approved and its run complete, and verifies the
same audit log, onto which its own rows chain; new rows get ids past the
copied ones. A target that holds data, a wrong password or URL, a source
that is no gatehouse database, a source whose audit log was altered and a
server still running on the source are all refused, writing nothing (and
never showing the password).

Needs a PostgreSQL server: GH_TEST_PG_URL (tests/pg/with_pg.sh; CTest's
pg fixture). Each test makes its own database."""

import json
import os
import re
import secrets
import shutil
import sqlite3
import time
import unittest
import urllib.parse

from harness import config
from pgtest import PgTest, psql


def tools_config(fake, model):
    tools = {"send_email": {"type": "http", "description": "Send an email",
                            "url": fake.url + "/tools/send-email",
                            "input_schema": {"type": "object",
                                             "properties": {"to": {"type": "string"}},
                                             "required": ["to"]}}}
    agents = {"assistant": {"provider": "fake", "model": model,
                            "tools": ["send_email", "memory_*"],
                            "memory": {"enabled": True, "last_messages": 10}, "max_steps": 5}}
    policies = {"default": {"agents": ["*"], "tools": {"allow": ["send_*", "memory_*"]},
                            "approval": {"require": ["send_*"], "approver": "admin",
                                         "ttl_seconds": 3600}}}
    return config(fake, agents=agents, tools=tools, policies=policies,
                  audit={"checkpoint_rows": 20, "checkpoint_seconds": 2})


def password(url):
    return urllib.parse.unquote(urllib.parse.urlsplit(url).password or "")


def counts(out):
    """The per-table row counts migrate prints: {table: (sqlite, postgresql)}."""
    got = {}
    for line in out.splitlines():
        m = re.match(r"^(\w+)\s+(\d+)\s+(\d+)$", line)
        if m:
            got[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return got


class MigrateTest(PgTest):

    db_prefix = "gh_migrate_"

    def migrate(self, gw, src=None, to=None, env=None):
        """Runs migrate on gw's config; --to names the password through
        ${GH_TEST_MIGRATE_PW}, never on the command line."""
        to = to or self.url
        pw = password(to)
        if pw:
            to = to.replace(":" + urllib.parse.quote(pw, safe="") + "@",
                            ":${GH_TEST_MIGRATE_PW}@", 1)
            gw.env["GH_TEST_MIGRATE_PW"] = pw
        gw.env.update(env or {})
        rc, out, err = gw.cli("migrate", "--config", gw.config_path,
                              "--from", "sqlite:" + (src or gw.db_path), "--to", to)
        if pw:
            self.assertNotIn(pw, out + err)
        return rc, out, err

    def key(self, gw, name, admin=False):
        args = ["keys", "create", "--config", gw.config_path, "--name", name]
        if admin:
            args.append("--admin")
        _, out, _ = gw.cli(*args, check=True)
        kid = re.search(r"created key (key_\w+)", out).group(1)
        return kid, out.strip().splitlines()[-1]

    def generate(self, gw, key, model, *replies, **memory):
        self.fake.script(model, *replies)
        st, b, _ = gw.post("/api/agents/assistant/generate",
                           {"messages": "go", "memory": memory}, key=key)
        self.assertEqual(st, 200, b)
        return b

    def email(self, to):
        return {"tool_calls": [{"id": "e-" + secrets.token_hex(4), "name": "send_email",
                                "arguments": {"to": to}}]}

    def sqlite_install(self):
        """A stopped SQLite install with something in most tables: keys (an
        admin, a revoked one), a thread with messages, 60 memories, working
        memory, a decided approval and a pending one, a few checkpoints."""
        m = self.model()
        gw = self.gateway(tools_config(self.fake, m))
        s = {"model": m}
        s["admin_id"], s["admin"] = self.key(gw, "ops", admin=True)
        s["alice_id"], s["alice"] = self.key(gw, "alice")
        s["bob_id"], s["bob"] = self.key(gw, "bob")
        gw.cli("keys", "revoke", "--config", gw.config_path, "--id", s["bob_id"], check=True)
        # memory in a thread: 3 turns of 20 saves
        for turn in range(3):
            saves = [{"id": "s%d-%d" % (turn, i), "name": "memory_save",
                      "arguments": {"content": "fact %d.%d about marathons" % (turn, i)}}
                     for i in range(20)]
            self.generate(gw, s["alice"], m, {"tool_calls": saves}, {"text": "saved %d" % turn},
                          thread="t1", resource="r1")
        self.generate(gw, s["alice"], m, {"tool_calls": [{
            "id": "w1", "name": "working_memory_update",
            "arguments": {"content": "Name:\tAlice\nRuns: yes \\o/"}}]}, {"text": "noted"},
            thread="t1", resource="r1")
        # an approval decided (its run completes), and one left pending
        self.fake.tool_script("send-email", {"body": {"sent": True}}, {"body": {"sent": True}})
        done = self.generate(gw, s["alice"], m, self.email("done@example.com"),
                             {"text": "Email sent."})
        self.assertEqual(done["status"], "suspended", done)
        st, b, _ = gw.post("/api/approvals/%s/approve" % done["approvals"][0]["id"], {},
                           key=s["admin"])
        self.assertEqual(st, 200, b)
        self.wait_run(gw, s["alice"], done["runId"], "completed")
        held = self.generate(gw, s["alice"], m, self.email("held@example.com"))
        self.assertEqual(held["status"], "suspended", held)
        s["held_run"], s["held_approval"] = held["runId"], held["approvals"][0]["id"]
        gw.stop()
        s["audit_rows"] = gw.query("SELECT count(*) AS n FROM audit_events")[0]["n"]
        s["checkpoints"] = gw.query("SELECT count(*) AS n FROM audit_checkpoints")[0]["n"]
        self.assertGreaterEqual(s["checkpoints"], 4)
        return gw, s

    def pg_config(self, sq):
        """sq's config on this test's database, with sq's key files."""
        cfg = json.loads(json.dumps(sq.cfg))
        cfg["database"] = {"url": "${GH_TEST_DB_URL}", "pool_size": 4}
        cfg["auth"] = dict(cfg.get("auth", {}), key_hash_file=sq.db_path + "-hashkey")
        cfg["audit"] = dict(cfg.get("audit", {}), signing_key_file=sq.db_path + "-audit.key")
        return cfg

    def verify(self, gw):
        rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path)
        self.assertEqual(rc, 0, out + err)
        return int(re.search(r"audit log intact: (\d+) rows verified", out).group(1))

    # ---- the move ----

    def test_a_single_node_install_moves_to_postgresql(self):
        sq, s = self.sqlite_install()
        before = sq.query("SELECT name FROM sqlite_schema WHERE type = 'table'")
        rc, out, err = self.migrate(sq)
        self.assertEqual(rc, 0, out + err)
        got = counts(out)
        self.assertEqual(got["api_keys"], (3, 3))
        self.assertEqual(got["audit_events"], (s["audit_rows"], s["audit_rows"]))
        self.assertEqual(got["audit_checkpoints"], (s["checkpoints"], s["checkpoints"]))
        self.assertEqual(got["memories"], (60, 60))
        self.assertEqual(got["approvals"], (2, 2))
        self.assertGreaterEqual(got["messages"][0], 4)
        self.assertTrue(all(a == b for a, b in got.values()), got)
        for t in ("schema_migrations", "memories_fts", "audit_postings", "audit_index_state"):
            self.assertNotIn(t, got)
        self.assertIn("audit log: the same on both: %d rows, %d checkpoints"
                      % (s["audit_rows"], s["checkpoints"]), out)
        # both verifications say what `audit verify` says on the source
        self.assertEqual(out.count("audit log intact: %d rows verified" % s["audit_rows"]), 2)
        self.assertIn(sq.db_path + "-audit.key", out)
        # the source is as it was: same tables, same rows, nothing written
        self.assertEqual(sq.query("SELECT name FROM sqlite_schema WHERE type = 'table'"), before)
        self.assertEqual(sq.query("SELECT count(*) AS n FROM audit_events")[0]["n"],
                         s["audit_rows"])

        # `audit verify` on PostgreSQL: the same log
        pg_json = os.path.join(sq.dir, "pg.json")
        with open(pg_json, "w") as f:
            json.dump(self.pg_config(sq), f)
        sq.env["GH_TEST_DB_URL"] = self.url
        rc, vout, verr = sq.cli("audit", "verify", "--config", pg_json)
        self.assertEqual(rc, 0, vout + verr)
        self.assertIn("audit log intact: %d rows verified" % s["audit_rows"], vout)
        # gatehouse on PostgreSQL with the same key files
        pg = self.gateway(self.pg_config(sq), env={"GH_TEST_DB_URL": self.url})
        st, _, _ = pg.get("/api/agents", key=s["alice"])
        self.assertEqual(st, 200)
        st, _, _ = pg.get("/api/agents", key=s["bob"])
        self.assertEqual(st, 401)
        st, msgs, _ = pg.get("/api/memory/threads/t1/messages?perPage=200", key=s["alice"])
        self.assertEqual(st, 200, msgs)
        self.assertIn("saved 2", json.dumps(msgs))
        # memory search on PostgreSQL finds what SQLite saved
        m = s["model"]
        self.generate(pg, s["alice"], m, {"tool_calls": [{
            "id": "q", "name": "memory_search", "arguments": {"query": "marathon fact"}}]},
            {"text": "found"}, thread="t1", resource="r1")
        res = json.loads(self.fake.requests(model=m)[-1]["body"]["messages"][-1]["content"])
        self.assertTrue(res["memories"], res)
        self.assertIn("marathons", res["memories"][0]["content"])
        # the approval left pending is approved here and its run completes
        st, pend, _ = pg.get("/api/approvals?status=pending", key=s["admin"])
        self.assertEqual([a["id"] for a in pend["approvals"]], [s["held_approval"]])
        sent = len(self.fake.requests(tool="send-email"))
        self.fake.script(m, {"text": "Held email sent."})
        st, b, _ = pg.post("/api/approvals/%s/approve" % s["held_approval"], {},
                           key=s["admin"])
        self.assertEqual(st, 200, b)
        r = self.wait_run(pg, s["alice"], s["held_run"], "completed")
        self.assertEqual(r["output"]["text"], "Held email sent.")
        self.assertEqual(len(self.fake.requests(tool="send-email")), sent + 1)
        # new rows: ids past the copied ones, and a chain that goes on
        self.generate(pg, s["alice"], m, {"tool_calls": [{
            "id": "n", "name": "memory_save", "arguments": {"content": "after the move"}}]},
            {"text": "ok"}, thread="t1", resource="r1")
        ids = self.q("SELECT id FROM memories WHERE content = 'after the move'")
        self.assertEqual(len(ids), 1)
        self.assertGreater(ids[0]["id"], 60)
        n = s["audit_rows"]
        link = self.q("SELECT (SELECT hash FROM audit_events WHERE seq = %d) = "
                      "(SELECT prev_hash FROM audit_events WHERE seq = %d) AS chained"
                      % (n, n + 1))
        self.assertTrue(link[0]["chained"])
        pg.stop()
        self.assertGreater(self.verify(pg), n + 3)

    # ---- refusals ----

    def test_a_target_holding_data_is_refused_and_left_as_it_was(self):
        sq, s = self.sqlite_install()
        rc, out, err = self.migrate(sq)
        self.assertEqual(rc, 0, out + err)
        psql(self.url, "DELETE FROM audit_events WHERE seq > 10")
        rc, out, err = self.migrate(sq)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("already holds gatehouse data (rows in", err)
        self.assertIn("has written nothing", err)
        self.assertEqual(self.q("SELECT count(*) AS n FROM audit_events")[0]["n"], 10)
        self.assertEqual(self.q("SELECT count(*) AS n FROM api_keys")[0]["n"], 3)

    def test_a_wrong_password_or_url_never_shows_the_password(self):
        sq, _ = self.sqlite_install()
        u = urllib.parse.urlsplit(self.url)
        secret = "Wr0ng-" + secrets.token_hex(8)
        netloc = "%s:%s@%s" % (u.username, secret, u.netloc.rsplit("@", 1)[1])
        bad = urllib.parse.urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))
        rc, out, err = self.migrate(sq, to=bad)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("password authentication failed", err)
        self.assertIn(":***@", err)
        self.assertNotIn(secret, out + err)
        # a URL libpq refuses, the password on the command line this time
        rc, out, err = sq.cli("migrate", "--config", sq.config_path, "--from",
                              "sqlite:" + sq.db_path,
                              "--to", "postgresql://gh:%s@h/db?no_such_option=1" % secret)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("--to is not a URL libpq accepts", err)
        self.assertNotIn(secret, out + err)
        self.assertEqual(self.q("SELECT count(*) AS n FROM information_schema.tables "
                                "WHERE table_schema = 'public'")[0]["n"], 0)

    def test_a_source_that_is_no_gatehouse_database_is_named(self):
        sq, _ = self.sqlite_install()
        text = os.path.join(sq.dir, "notes.txt")
        with open(text, "w") as f:
            f.write("not a database\n" * 100)
        rc, out, err = self.migrate(sq, src=text)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("is not a gatehouse database: it is not a SQLite file", err)
        other = os.path.join(sq.dir, "other.db")
        c = sqlite3.connect(other)
        c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        c.commit()
        c.close()
        rc, out, err = self.migrate(sq, src=other)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("is not a gatehouse database: it has no schema_migrations table", err)
        rc, out, err = self.migrate(sq, src=os.path.join(sq.dir, "missing.db"))
        self.assertEqual(rc, 1, out + err)
        self.assertIn("No such file or directory", err)
        self.assertEqual(self.q("SELECT count(*) AS n FROM information_schema.tables "
                                "WHERE table_schema = 'public'")[0]["n"], 0)

    def test_an_altered_audit_log_is_reported_and_not_copied(self):
        sq, s = self.sqlite_install()
        altered = os.path.join(sq.dir, "altered.db")
        src = sqlite3.connect("file:%s?mode=ro" % sq.db_path, uri=True)
        dst = sqlite3.connect(altered)
        src.backup(dst)
        src.close()
        dst.execute("UPDATE audit_events SET tool_name = 'memory_delete' WHERE seq = 7")
        dst.commit()
        dst.close()
        for suffix in ("-hashkey", "-audit.key"):
            shutil.copy(sq.db_path + suffix, altered + suffix)
        rc, out, err = self.migrate(sq, src=altered)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("audit log NOT intact: first bad row 7", out)
        self.assertIn("nothing was copied", err)
        self.assertEqual(self.q("SELECT count(*) AS n FROM information_schema.tables "
                                "WHERE table_schema = 'public'")[0]["n"], 0)

    def test_a_running_server_is_refused(self):
        sq, _ = self.sqlite_install()
        sq.start()
        rc, out, err = self.migrate(sq)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("is running on %s: stop it first" % sq.db_path, err)
        sq.stop()
        self.assertEqual(self.q("SELECT count(*) AS n FROM information_schema.tables "
                                "WHERE table_schema = 'public'")[0]["n"], 0)


if __name__ == "__main__":
    unittest.main()
