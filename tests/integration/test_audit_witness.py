"""What someone who can write the database can no longer hide: the
newest signed checkpoints deleted together with the rows they covered
(the witness saw them), checkpoints deleted from the middle (each signs the
one before it), all of them deleted (the tail rule), and a broken chain at
start (the start-up check: log, /healthz, an audit row). serve refuses a
database that is behind its witness, or serves it read-only. A call cut off
by a crash is closed as interrupted at the next start."""

import json
import os
import shutil
import signal
import tempfile
import threading
import time
import unittest

from harness import GatewayTest, HTTP, config


def agents(model, tools=("memory_*",)):
    return {"assistant": {"provider": "fake", "model": model, "tools": list(tools),
                          "memory": {"enabled": True}, "max_steps": 4}}


class WitnessTest(GatewayTest):

    def make_log(self, n_calls=6, cfg=None, **audit):
        m = self.model()
        cfg = cfg or config(self.fake, agents=agents(m))
        cfg["audit"].update({"checkpoint_rows": 4, "checkpoint_seconds": 3600})
        cfg["audit"].update(audit)
        gw = self.gateway(cfg)
        key = gw.create_key("alice")
        admin = gw.create_key("root", admin=True)
        for i in range(n_calls):
            self.fake.script(m, {"tool_calls": [{"id": "1", "name": "memory_save",
                                                 "arguments": {"content": "fact %d" % i}}]},
                             {"text": "ok"})
            st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "save"}, key=key)
            self.assertEqual(st, 200, b)
        gw.stop()  # the final checkpoint is signed (and witnessed) at shutdown
        gw.witness = gw.base + "-witness"
        return gw, key, admin

    def verify(self, gw, *extra):
        rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path, *extra)
        return rc, out + err

    def tamper(self, gw, *sql):
        gw.write(*sql)

    def checkpoints(self, gw):
        return [r["seq"] for r in gw.query("SELECT seq FROM audit_checkpoints ORDER BY seq")]

    def cut_at_checkpoint(self, gw):
        """Truncates the log at a checkpoint in the middle and deletes the
        checkpoints after it: the chain, every signature and the tail rule
        still hold. Returns the checkpoint's row."""
        ks = self.checkpoints(gw)
        self.assertGreaterEqual(len(ks), 4, ks)
        cut = ks[-3]
        self.tamper(gw, ("DELETE FROM audit_events WHERE seq > ?", (cut,)),
                    ("DELETE FROM audit_checkpoints WHERE seq > ?", (cut,)))
        return cut

    def test_the_witness_holds_every_checkpoint(self):
        gw, _, _ = self.make_log()
        rc, out = self.verify(gw)
        self.assertEqual(rc, 0, out)
        ks = self.checkpoints(gw)
        self.assertRegex(out, r"witness \S+: %d signed checkpoints seen \(newest row %d\), "
                              r"every one in the database" % (len(ks), ks[-1]))
        with open(gw.witness) as f:
            lines = f.read().splitlines()
        self.assertEqual(sorted(int(x.split(" seq=")[1].split()[0]) for x in lines), ks)
        self.assertEqual(os.stat(gw.witness).st_mode & 0o777, 0o600)
        # each checkpoint names the one before it
        rows = gw.query("SELECT seq, prev_seq FROM audit_checkpoints ORDER BY seq")
        self.assertEqual([r["prev_seq"] for r in rows], [0] + [r["seq"] for r in rows[:-1]])

    def test_truncation_with_the_newest_checkpoints_deleted(self):
        gw, _, _ = self.make_log()
        cut = self.cut_at_checkpoint(gw)
        # without the witness nothing shows: this was the hole
        hidden = gw.witness + ".elsewhere"
        shutil.move(gw.witness, hidden)
        rc, out = self.verify(gw)
        self.assertEqual(rc, 0, out)
        self.assertIn("nothing proves that no signed checkpoint was removed", out)
        # the witness saw the checkpoints that are gone
        rc, out = self.verify(gw, "--witness", hidden)
        self.assertEqual(rc, 1, out)
        self.assertIn("audit log NOT intact: first bad row %d" % (cut + 1), out)
        self.assertIn("the database is behind its witness", out)
        shutil.move(hidden, gw.witness)
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("behind its witness", out)
        # a witness named on the command line must exist
        rc, out = self.verify(gw, "--witness", hidden)
        self.assertEqual(rc, 1, out)
        self.assertIn("is missing", out)
        # and serve will not build on it
        with self.assertRaises(RuntimeError) as cm:
            gw.start()
        gw.proc = None  # it exited, as it should
        gw.out.close()
        gw.err.close()
        self.assertIn("behind its witness, refusing to start", str(cm.exception))
        self.assertIn("exited 1", str(cm.exception))

    def test_deleted_checkpoints_are_caught_without_the_witness(self):
        gw, _, _ = self.make_log()
        os.unlink(gw.witness)
        ks = self.checkpoints(gw)
        # one from the middle: the next one signs it
        self.tamper(gw, ("DELETE FROM audit_checkpoints WHERE seq = ?", (ks[2],)))
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("first bad row %d" % ks[3], out)
        self.assertIn("signs a checkpoint at row %d that is missing" % ks[2], out)
        # all of them: the whole log is unsigned, more than the writer leaves
        self.tamper(gw, "DELETE FROM audit_checkpoints")
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("first bad row 1\n", out)
        self.assertIn("more than the writer ever leaves unsigned", out)

    def test_old_unsigned_rows_fail_the_tail_rule(self):
        gw, _, _ = self.make_log(checkpoint_seconds=1, unsigned_grace_seconds=0)
        os.unlink(gw.witness)
        ks = self.checkpoints(gw)
        # the newest checkpoint gone: a few rows, fewer than checkpoint_rows
        self.tamper(gw, ("DELETE FROM audit_checkpoints WHERE seq = ?", (ks[-1],)))
        time.sleep(1.5)  # older than checkpoint_seconds + the grace
        rc, out = self.verify(gw)
        self.assertEqual(rc, 1, out)
        self.assertIn("first bad row %d" % (ks[-2] + 1), out)
        self.assertIn("older than the writer ever leaves a row unsigned", out)

    def test_read_only_when_behind_the_witness(self):
        m = self.model()
        cfg = config(self.fake, agents=agents(m), audit={
            "witness": {"when_behind": "read_only"}})
        gw, key, admin = self.make_log(cfg=cfg)
        self.cut_at_checkpoint(gw)
        rows_before = gw.query("SELECT count(*) AS n, max(seq) AS s FROM audit_events")[0]
        gw.start()
        self.assertIn("READ-ONLY", gw.logs())
        st, h, _ = gw.get("/healthz")
        self.assertEqual(st, 200)
        self.assertEqual(h["status"], "degraded")
        self.assertEqual(h["audit"]["chain"], "behind_witness")
        self.assertTrue(h["audit"]["readOnly"])
        self.assertIn("behind its witness", h["audit"]["message"])
        # reads work, admin and audit included
        st, b, _ = gw.get("/api/audit?limit=5", key=admin)
        self.assertEqual(st, 200, b)
        self.assertEqual(len(b["rows"]), 5)
        st, b, _ = gw.get("/api/agents", key=key)
        self.assertEqual(st, 200, b)
        st, v, _ = gw.get("/api/audit/verify", key=admin)
        self.assertEqual(st, 200, v)
        self.assertFalse(v["ok"])
        self.assertIn("behind its witness", v["message"])
        # writes are refused, clearly
        self.fake.script(m, {"text": "never"})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "hi"}, key=key)
        self.assertEqual(st, 503, b)
        self.assertIn("read-only", b["error"]["message"])
        st, b, _ = gw.post("/api/keys", {"name": "x"}, key=admin)
        self.assertEqual(st, 503, b)
        gw.stop()
        # nothing was written: no row, no checkpoint
        self.assertEqual(gw.query("SELECT count(*) AS n, max(seq) AS s FROM audit_events")[0],
                         rows_before)

    def test_start_up_check_finds_a_broken_chain(self):
        gw, _, admin = self.make_log()
        ks = self.checkpoints(gw)
        # the newest checkpoints deleted (the witness saw them: moved away
        # here, to show the chain check on its own), a row after the one
        # left altered
        os.unlink(gw.witness)
        self.tamper(gw, ("DELETE FROM audit_checkpoints WHERE seq > ?", (ks[-3],)),
                    ("UPDATE audit_events SET args = '{\"content\":\"forged\"}' WHERE seq = ?",
                     (ks[-3] + 2,)))
        gw.start()
        st, h, _ = gw.get("/healthz")
        self.assertEqual(h["status"], "degraded")
        self.assertEqual(h["audit"]["chain"], "broken")
        self.assertEqual(h["audit"]["badSeq"], ks[-3] + 2)
        self.assertEqual(h["audit"]["checkedBy"], "startup")
        self.assertIn("was modified", h["audit"]["message"])
        self.assertIn("AUDIT LOG NOT INTACT", gw.logs())
        # the finding is in the signed log itself
        rows = gw.query("SELECT reason, outcome FROM audit_events "
                        "WHERE event = 'audit_check_failed'")
        self.assertEqual(len(rows), 1)
        self.assertIn("row %d was modified" % (ks[-3] + 2), rows[0]["reason"])
        # a full verify agrees, and is what /healthz shows from then on
        st, v, _ = gw.get("/api/audit/verify", key=admin)
        self.assertFalse(v["ok"])
        self.assertEqual(v["badSeq"], ks[-3] + 2)
        st, h, _ = gw.get("/healthz")
        self.assertEqual(h["audit"]["checkedBy"], "verify")
        self.assertEqual(h["audit"]["chain"], "broken")

    def test_healthz_of_an_intact_log(self):
        gw, _, admin = self.make_log(n_calls=2)
        gw.start()
        st, h, _ = gw.get("/healthz")
        self.assertEqual(h["status"], "ok", h)
        self.assertEqual(h["audit"]["chain"], "intact")
        self.assertIsNone(h["audit"]["badSeq"])
        self.assertFalse(h["audit"]["readOnly"])
        self.assertEqual(h["audit"]["witness"]["state"], "ok")
        self.assertEqual(h["audit"]["signedSeq"], self.checkpoints(gw)[-1])
        self.assertNotIn(gw.dir, json.dumps(h))  # no paths to anonymous callers

    def test_a_missing_witness_is_flagged(self):
        gw, _, _ = self.make_log(n_calls=2)
        os.unlink(gw.witness)
        # the CLI does not quietly start a new one
        rc, out, err = gw.cli("keys", "create", "--config", gw.config_path, "--name", "late")
        self.assertEqual(rc, 0, err)
        self.assertIn("not signing a checkpoint: the witness", err)
        self.assertFalse(os.path.exists(gw.witness))
        gw.start()
        st, h, _ = gw.get("/healthz")
        self.assertEqual(h["status"], "degraded")
        self.assertEqual(h["audit"]["chain"], "intact")
        self.assertEqual(h["audit"]["witness"]["state"], "recreated")
        self.assertIn("witness", gw.logs())
        gw.stop()
        # it starts again from where the database stands
        rc, out = self.verify(gw)
        self.assertEqual(rc, 0, out)
        self.assertTrue(os.path.exists(gw.witness))

    def test_webhook_and_another_file(self):
        m = self.model()
        d = tempfile.mkdtemp(prefix="gh-witness-")
        self.addCleanup(shutil.rmtree, d, True)
        other = os.path.join(d, "witness.log")
        cfg = config(self.fake, agents=agents(m), audit={"witness": {
            "file": other, "webhook_url": self.fake.url + "/tools/witness",
            "webhook_timeout_ms": 2000}})
        gw, _, _ = self.make_log(cfg=cfg, n_calls=2)
        self.assertFalse(os.path.exists(gw.witness))
        ks = gw.query("SELECT seq, signature FROM audit_checkpoints ORDER BY seq")
        with open(other) as f:
            self.assertEqual(len(f.read().splitlines()), len(ks))
        sent = [r["body"] for r in self.fake.requests(tool="witness")]
        self.assertEqual(sorted(b["seq"] for b in sent), [k["seq"] for k in ks])
        by_seq = {b["seq"]: b for b in sent}
        for k in ks:
            self.assertEqual(by_seq[k["seq"]]["signature"], k["signature"].hex())
            self.assertEqual(by_seq[k["seq"]]["type"], "gatehouse.audit.checkpoint")
        rc, out = self.verify(gw)
        self.assertEqual(rc, 0, out)
        self.assertIn("witness %s:" % other, out)


class InterruptedTest(GatewayTest):

    def test_a_call_cut_off_by_a_crash_is_closed_at_start(self):
        m = self.model()
        tools = {"slow": {"type": "http", "description": "slow", "url": self.fake.url + "/tools/slow",
                          "timeout_ms": 20000, "input_schema": {"type": "object"}}}
        cfg = config(self.fake, agents=agents(m, tools=["slow"]), tools=tools)
        gw = self.gateway(cfg)
        key = gw.create_key("alice")
        self.fake.tool_script("slow", {"delay_ms": 15000})
        self.fake.script(m, {"tool_calls": [{"id": "1", "name": "slow", "arguments": {"a": 1}}]},
                         {"text": "done"})
        t = threading.Thread(target=lambda: self._call(gw, key), daemon=True)
        t.start()
        deadline = time.time() + 20
        while time.time() < deadline and not self.fake.requests(tool="slow"):
            time.sleep(0.05)
        self.assertTrue(self.fake.requests(tool="slow"), "the tool was never called")
        # the tool is running: crash
        gw.proc.send_signal(signal.SIGKILL)
        gw.proc.wait()
        gw.proc = None
        gw.out.close()
        gw.err.close()
        t.join(20)
        rows = gw.query("SELECT event FROM audit_events WHERE tool_name = 'slow' ORDER BY seq")
        self.assertEqual([r["event"] for r in rows], ["allowed"])
        gw.start()
        self.assertIn("1 tool calls were cut off", gw.logs())
        rows = gw.query("SELECT event, outcome, tool_call_id, args, run_id FROM audit_events "
                        "WHERE tool_name = 'slow' ORDER BY seq")
        self.assertEqual([r["event"] for r in rows], ["allowed", "interrupted"])
        self.assertEqual(rows[1]["outcome"], "unknown")
        self.assertEqual(rows[1]["tool_call_id"], rows[0]["tool_call_id"])
        self.assertEqual(rows[1]["run_id"], rows[0]["run_id"])
        self.assertEqual(json.loads(rows[1]["args"]), {"a": 1})
        self.assertEqual(gw.query("SELECT count(*) AS n FROM audit_open_calls")[0]["n"], 0)
        gw.stop()
        rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path)
        self.assertEqual(rc, 0, out + err)

    def _call(self, gw, key):
        h = HTTP(gw.port)
        try:
            h.request("POST", "/api/agents/assistant/generate", {"messages": "go"},
                      {"Authorization": "Bearer " + key})
        except Exception:
            pass
        h.close()


if __name__ == "__main__":
    unittest.main()
