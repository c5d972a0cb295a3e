"""The audit log is complete, tamper-evident and queryable. These tests
tamper with the database directly (with the server stopped, as an
attacker with the SQLite file or PostgreSQL access would) and check that `gatehouse audit verify`
points at the first bad row, including a consistent rewrite of the whole
chain, which only the Ed25519-signed checkpoints can catch."""

import csv
import hashlib
import http.client
import io
import json
import os
import shutil
import sqlite3
import struct
import time
import unittest

from harness import GatewayTest, Gateway, config, sqlite_only

COLS = ["ts", "event", "key_id", "owner", "admin_user", "agent_id", "thread_id", "run_id",
        "tool_call_id", "tool_name", "source", "args", "outcome", "duration_ms", "error",
        "reason", "detail"]


def row_hash(prev, seq, row):
    """The chain's hash, reimplemented from its documented encoding (see
    src/audit.c): BLAKE2b-256 over a domain tag, prev_hash, seq, ts, and
    each field as presence byte + length + bytes, duration as int64."""
    h = hashlib.blake2b(digest_size=32)
    h.update(b"gatehouse-audit-v1\0")
    h.update(prev)
    h.update(struct.pack(">q", seq))
    h.update(struct.pack(">q", row["ts"]))
    for col in COLS[1:]:
        v = row[col]
        if col == "duration_ms":
            h.update(struct.pack(">q", -1 if v is None else v))
            continue
        if v is None:
            h.update(b"\0")
        else:
            b = v.encode()
            h.update(b"\1" + struct.pack(">q", len(b)) + b)
    return h.digest()


def agents(model):
    return {"assistant": {"provider": "fake", "model": model, "tools": ["memory_*"],
                          "memory": {"enabled": True}, "max_steps": 4}}


class AuditTest(GatewayTest):

    def make_log(self, n_calls=6, **audit):
        m = self.model()
        cfg = config(self.fake, agents=agents(m))
        cfg["audit"].update({"checkpoint_rows": 4, "checkpoint_seconds": 3600})
        cfg["audit"].update(audit)
        gw = self.gateway(cfg)
        key = gw.create_key("alice")
        for i in range(n_calls):
            self.fake.script(m, {"tool_calls": [{"id": "1", "name": "memory_save",
                                                 "arguments": {"content": "fact %d" % i,
                                                               "tags": ["t"]}}]},
                             {"text": "ok"})
            st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "save"}, key=key)
            self.assertEqual(st, 200, b)
        gw.stop()  # the final checkpoint is signed at shutdown
        return gw, key

    def verify(self, gw):
        rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path)
        return rc, out + err

    def tamper(self, gw, *sql):
        gw.write(*sql)

    def test_intact_log_verifies(self):
        gw, _ = self.make_log()
        rc, out = self.verify(gw)
        self.assertEqual(rc, 0, out)
        self.assertIn("audit log intact", out)
        last = gw.query("SELECT max(seq) AS s FROM audit_events")[0]["s"]
        # the final checkpoint covers every row
        self.assertIn("last signed checkpoint: row %d" % last, out)
        self.assertIn("0 newer rows not yet signed", out)

    def test_modified_row(self):
        gw, _ = self.make_log()
        target = gw.query("SELECT seq FROM audit_events WHERE event = 'executed' LIMIT 1 OFFSET 2")
        seq = target[0]["seq"]
        self.tamper(gw, ("UPDATE audit_events SET args = '{\"content\":\"forged\"}' WHERE seq = ?",
                         (seq,)))
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("first bad row %d" % seq, out)
        self.assertIn("modified", out)

    def test_deleted_row(self):
        gw, _ = self.make_log()
        self.tamper(gw, "DELETE FROM audit_events WHERE seq = 5")
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("first bad row 5", out)
        self.assertIn("missing", out)

    def test_inserted_row(self):
        gw, _ = self.make_log()
        rows = gw.query("SELECT * FROM audit_events ORDER BY seq")
        # shift rows 6.. up by one and slip a forged row in at 6
        sql = [("UPDATE audit_events SET seq = seq + 1 WHERE seq = ?", (r["seq"],))
               for r in reversed(rows[5:])]
        forged = dict(rows[5])
        forged["seq"] = 6
        forged["event"] = "executed"
        forged["tool_name"] = "send_money"
        forged["hash"] = row_hash(forged["prev_hash"], 6, forged)
        sql.append(("INSERT INTO audit_events (%s) VALUES (%s)" % (
            ",".join(forged.keys()), ",".join("?" * len(forged))), list(forged.values())))
        self.tamper(gw, *sql)
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        # row 7 no longer chains; if a signed checkpoint covers row 6, the
        # forged row itself is caught there first
        self.assertRegex(out, r"first bad row (6|7)\n")

    def test_reordered_rows(self):
        gw, _ = self.make_log()
        a, b = [tuple(r.values()) for r in gw.query(
            "SELECT event, tool_name, args FROM audit_events WHERE seq IN (4, 5) ORDER BY seq")]
        self.tamper(gw, ("UPDATE audit_events SET event=?, tool_name=?, args=? WHERE seq = 4", b),
                    ("UPDATE audit_events SET event=?, tool_name=?, args=? WHERE seq = 5", a))
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("first bad row 4", out)

    def test_truncation_beyond_the_last_checkpoint(self):
        gw, _ = self.make_log()
        last = gw.query("SELECT max(seq) AS s FROM audit_events")[0]["s"]
        self.tamper(gw, ("DELETE FROM audit_events WHERE seq > ?", (last - 3,)))
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("truncated", out)
        self.assertIn("first bad row %d" % (last - 2), out)

    def test_consistent_rewrite_is_caught_by_the_signatures(self):
        gw, _ = self.make_log()
        rows = gw.query("SELECT * FROM audit_events ORDER BY seq")
        # rewrite row 5 and recompute every hash after it, exactly as the
        # server would: the chain itself is now perfectly consistent
        rows[4]["args"] = '{"content":"rewritten history"}'
        prev = rows[4]["prev_hash"]
        sql = []
        for r in rows[4:]:
            r["prev_hash"] = prev
            r["hash"] = row_hash(prev, r["seq"], r)
            prev = r["hash"]
            sql.append(("UPDATE audit_events SET args=?, prev_hash=?, hash=? WHERE seq=?",
                        (r["args"], r["prev_hash"], r["hash"], r["seq"])))
        self.tamper(gw, *sql)
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("does not match the signed checkpoint", out)
        # and forging the checkpoint too does not help without the key
        self.tamper(gw, "UPDATE audit_checkpoints SET hash = (SELECT hash FROM audit_events "
                        "WHERE audit_events.seq = audit_checkpoints.seq)")
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("bad signature", out)

    def test_python_reimplementation_matches(self):
        # keeps the documented encoding honest: every stored hash recomputes
        gw, _ = self.make_log(n_calls=2)
        prev = bytes(32)
        for r in gw.query("SELECT * FROM audit_events ORDER BY seq"):
            self.assertEqual(r["prev_hash"], prev)
            self.assertEqual(row_hash(prev, r["seq"], r), r["hash"])
            prev = r["hash"]

    def test_pubkey_and_key_file(self):
        gw, _ = self.make_log(n_calls=1)
        rc, out, _ = gw.cli("audit", "pubkey", "--config", gw.config_path, check=True)
        pk = out.strip()
        self.assertRegex(pk, r"^[0-9a-f]{64}$")
        row = gw.query("SELECT public_key FROM audit_checkpoints LIMIT 1")[0]
        self.assertEqual(row["public_key"].hex(), pk)
        keyfile = gw.base + "-audit.key"
        self.assertEqual(os.stat(keyfile).st_mode & 0o777, 0o600)
        # verifying against a different pinned key fails
        rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path, "--pubkey", "00" * 32)
        self.assertEqual(rc, 1)
        self.assertIn("unknown key", out)

    def test_redaction(self):
        m = self.model()
        gw = self.gateway(config(self.fake, agents={"assistant": {
            "provider": "fake", "model": m, "max_steps": 3}}))
        key = gw.create_key("alice")
        ct = {"login": {"description": "log in", "inputSchema": {"type": "object"}}}
        self.fake.script(m, {"tool_calls": [{"id": "1", "name": "login", "arguments": {
            "user": "al", "Password": "hunter2", "nested": {"api_key": "sk-123", "ok": 1},
            "list": [{"token": "t0k3n"}]}}]})
        st, b, _ = gw.post("/api/agents/assistant/generate",
                           {"messages": "log in", "clientTools": ct}, key=key)
        self.assertEqual(st, 200, b)
        row = gw.query("SELECT args FROM audit_events WHERE tool_name = 'login'")[0]
        args = json.loads(row["args"])
        self.assertEqual(args, {"user": "al", "Password": "[REDACTED]",
                                "nested": {"api_key": "[REDACTED]", "ok": 1},
                                "list": [{"token": "[REDACTED]"}]})
        dump = json.dumps(gw.query("SELECT * FROM audit_events"), default=str)
        for secret in ("hunter2", "sk-123", "t0k3n"):
            self.assertNotIn(secret, dump)

    def test_query_api_and_export(self):
        gw, key = self.make_log(n_calls=5)
        gw.start()
        admin = gw.create_key("root", admin=True)
        st, b, _ = gw.get("/api/audit?event=executed&limit=2", key=admin)
        self.assertEqual(st, 200, b)
        self.assertEqual(len(b["rows"]), 2)
        self.assertTrue(all(r["event"] == "executed" for r in b["rows"]))
        self.assertGreater(b["rows"][0]["seq"], b["rows"][1]["seq"])  # newest first
        seen = [r["seq"] for r in b["rows"]]
        cursor = b["nextCursor"]
        while cursor:
            st, b, _ = gw.get("/api/audit?event=executed&limit=2&cursor=" + cursor, key=admin)
            seen += [r["seq"] for r in b["rows"]]
            cursor = b["nextCursor"]
        self.assertEqual(len(seen), 5)
        self.assertEqual(seen, sorted(seen, reverse=True))
        # filters combine
        st, b, _ = gw.get("/api/audit?tool=memory_save&event=allowed", key=admin)
        self.assertEqual(len(b["rows"]), 5)
        st, b, _ = gw.get("/api/audit?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z",
                          key=admin)
        self.assertEqual(b["rows"], [])
        # admins only
        st, b, _ = gw.get("/api/audit", key=key)
        self.assertEqual(st, 403, b)
        # export: NDJSON and CSV of the filter, oldest first
        st, text, h = gw.get("/api/audit/export?format=ndjson&tool=memory_save", key=admin)
        self.assertEqual(st, 200)
        lines = [json.loads(x) for x in text.strip().split("\n")]
        self.assertEqual(len(lines), 10)
        self.assertEqual([x["seq"] for x in lines], sorted(x["seq"] for x in lines))
        st, text, h = gw.get("/api/audit/export?format=csv&event=executed", key=admin)
        self.assertEqual(st, 200)
        self.assertIn("text/csv", h["content-type"])
        rows = list(csv.DictReader(io.StringIO(text)))
        self.assertEqual(len(rows), 5)
        self.assertEqual(rows[0]["event"], "executed")
        st, v, _ = gw.get("/api/audit/verify", key=admin)
        self.assertTrue(v["ok"], v)
        # the CLI query speaks the same filters
        rc, out, _ = gw.cli("audit", "query", "--config", gw.config_path, "--event", "executed",
                            "--format", "ndjson", check=True)
        self.assertEqual(len(out.strip().split("\n")), 5)
        rc, out, _ = gw.cli("audit", "export", "--config", gw.config_path, "--format", "csv",
                            check=True)
        self.assertTrue(out.startswith("seq,ts,event"))

    @sqlite_only("damages a b-tree page of the SQLite file to make the store fail midway")
    def test_export_that_fails_midway_looks_incomplete(self):
        """A store failure half way through an export must not look like a
        complete file: over HTTP the body ends without its terminating
        chunk (after an NDJSON error line), and the CLI exits non-zero
        after the same error line. The failure is a damaged page of the
        audit table, past the export's first page of rows."""
        m = self.model()
        cfg = config(self.fake, agents=agents(m))
        gw = self.gateway(cfg)
        key = gw.create_key("alice")
        calls = [{"id": str(i), "name": "memory_search", "arguments": {"query": "q%d" % i}}
                 for i in range(50)]
        for _ in range(24):   # 2 rows per call: 2,400 rows, three export pages
            self.fake.script(m, {"tool_calls": calls}, {"text": "ok"})
            st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "look"}, key=key)
            self.assertEqual(st, 200, b)
        admin = gw.create_key("root", admin=True)
        gw.stop()
        c = sqlite3.connect(gw.db_path)
        leaves = [r[0] for r in c.execute(
            "SELECT pageno FROM dbstat WHERE name = 'audit_events' AND pagetype = 'leaf' "
            "ORDER BY path")]
        page_size = c.execute("PRAGMA page_size").fetchone()[0]
        c.close()
        self.assertGreater(len(leaves), 20)
        bad = leaves[len(leaves) * 3 // 4]     # rows well past the first 1,000
        with open(gw.db_path, "r+b") as f:
            f.seek((bad - 1) * page_size)
            f.write(b"\xff" * 64)              # no valid b-tree page starts so
        gw.start()

        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
        conn.request("GET", "/api/audit/export?format=ndjson",
                     headers={"Authorization": "Bearer " + admin})
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        with self.assertRaises(http.client.IncompleteRead) as cm:
            r.read()
        conn.close()
        lines = cm.exception.partial.decode().strip().split("\n")
        self.assertGreaterEqual(len(lines), 1000)
        self.assertEqual(json.loads(lines[0])["seq"], 1)
        last = json.loads(lines[-1])
        self.assertNotIn("seq", last)          # not a row: the error line
        self.assertIn("incomplete", last["error"]["message"])

        rc, out, err = gw.cli("audit", "export", "--config", gw.config_path, "--format",
                              "ndjson")
        self.assertNotEqual(rc, 0)
        lines = out.strip().split("\n")
        self.assertGreaterEqual(len(lines), 1000)
        last = json.loads(lines[-1])
        self.assertNotIn("seq", last)
        self.assertIn("incomplete", last["error"]["message"])
        self.assertIn("gatehouse:", err)

    def test_retention_keeps_the_chain_verifiable(self):
        m = self.model()
        cfg = config(self.fake, agents=agents(m))
        cfg["audit"].update({"checkpoint_rows": 2, "checkpoint_seconds": 1,
                             "retention_seconds": 2})
        gw = self.gateway(cfg)
        key = gw.create_key("alice")
        for i in range(3):
            self.fake.script(m, {"tool_calls": [{"id": "1", "name": "memory_save",
                                                 "arguments": {"content": "x"}}]}, {"text": "ok"})
            gw.post("/api/agents/assistant/generate", {"messages": "save"}, key=key)
        # (on a slow machine the first prune may already have run here:
        # retention is 2 s)
        first_before = gw.query("SELECT min(seq) AS s FROM audit_events")[0]["s"]
        self.assertGreaterEqual(first_before, 1)
        deadline = time.time() + 15
        while time.time() < deadline:
            if gw.query("SELECT min(seq) AS s FROM audit_events")[0]["s"] > 1:
                break
            time.sleep(0.3)
        anchor = gw.query("SELECT seq FROM audit_anchor")
        self.assertEqual(len(anchor), 1)
        self.assertGreater(anchor[0]["seq"], 1)
        gw.stop()
        rc, out = self.verify(gw)
        self.assertEqual(rc, 0, out)
        self.assertIn("rows %d.." % anchor[0]["seq"], out)


if __name__ == "__main__":
    unittest.main()
