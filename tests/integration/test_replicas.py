"""Two gatehouse replicas on one PostgreSQL database: an approval asked on
one and decided on the other runs its tool exactly once and the run
completes; the approvals event stream (the admin UI's live page) and a
request waiting for a decision on one replica hear a decision taken on
the other; a key's rate limit holds across both; a replica killed with
SIGKILL under audited load loses no acknowledged audit row, the chain
verifies, and the survivor finishes the expiry and resume work the dead
one left; and a database restart under load fails requests fast (503),
leaves nothing half-written, and is served through without restarting
gatehouse.

Needs a PostgreSQL server: GH_TEST_PG_URL (tests/pg/with_pg.sh; CTest's
pg fixture). Each test makes its own database; the restart test starts a
server of its own so that the shared one is never taken down."""

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import HTTP, config
from pgtest import PG, PG_SERVER, PgTest, psql, with_db


def tools_config(fake, model, ttl=3600, **sections):
    f = fake.url
    tools = {"send_email": {"type": "http", "description": "Send an email",
                            "url": f + "/tools/send-email",
                            "input_schema": {"type": "object",
                                             "properties": {"to": {"type": "string"}},
                                             "required": ["to"]}}}
    agents = {"assistant": {"provider": "fake", "model": model,
                            "tools": ["send_email", "memory_*"],
                            "memory": {"enabled": True}, "max_steps": 5}}
    policies = {"default": {"agents": ["*"], "tools": {"allow": ["send_*", "memory_*"]},
                            "approval": {"require": ["send_*"], "approver": "admin",
                                         "ttl_seconds": ttl}}}
    return config(fake, agents=agents, tools=tools, policies=policies, **sections)


class ReplicasTest(PgTest):

    db_prefix = "gh_replicas_"

    def setUp(self):
        super().setUp()
        self.own_server = None

    def tearDown(self):
        try:
            super().tearDown()
        finally:
            if self.own_server:
                subprocess.run(["sh", PG_SERVER, "stop", self.own_server], timeout=120)
                shutil.rmtree(self.own_server, ignore_errors=True)

    def pair(self, cfg):
        """Replica A, then B on the same database with A's key files (the
        API key hashing key and the audit signing key every replica
        shares). A starts first, and so leads the background work."""
        cfg = json.loads(json.dumps(cfg))
        cfg["database"] = {"url": "${GH_TEST_DB_URL}", "pool_size": 4}
        env = {"GH_TEST_DB_URL": self.url}
        a = self.gateway(cfg, env=env)
        cfg["auth"] = dict(cfg.get("auth", {}),
                           key_hash_file=os.path.join(a.dir, "gatehouse-hashkey"))
        cfg["audit"] = dict(cfg.get("audit", {}),
                            signing_key_file=os.path.join(a.dir, "gatehouse-audit.key"))
        b = self.gateway(cfg, env=env)
        self.wait_leader(a)
        return a, b

    def wait_leader(self, gw, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st, h, _ = gw.get("/healthz")
            if st == 200 and h["database"].get("leader"):
                return
            time.sleep(0.1)
        self.fail("replica never led")

    def suspend(self, gw, key, model, to="bob@example.com"):
        self.fake.script(model, {"tool_calls": [{"id": "e-" + secrets.token_hex(4),
                                                 "name": "send_email",
                                                 "arguments": {"to": to}}]},
                         {"text": "Email sent."})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "email " + to},
                           key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["status"], "suspended", b)
        return b

    def verify(self, gw):
        rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path)
        self.assertEqual(rc, 0, out + err)
        return out

    # ---- approvals across replicas ----

    def test_approval_on_one_decided_on_the_other_runs_once(self):
        m = self.model()
        a, b = self.pair(tools_config(self.fake, m))
        key = a.create_key("alice")
        admin = a.create_key("ops", admin=True)
        # a key made through one replica's CLI works on the other
        run = self.suspend(a, key, m)
        apr = run["approvals"][0]
        st, lst, _ = b.get("/api/approvals?status=pending", key=admin)
        self.assertEqual([x["id"] for x in lst["approvals"]], [apr["id"]])
        # both replicas approve at the same moment: one wins
        results = []

        def approve(gw):
            h = HTTP(gw.port)
            st, body, _ = h.request("POST", "/api/approvals/%s/approve" % apr["id"],
                                    {"reason": "ok"}, {"Authorization": "Bearer " + admin})
            results.append((st, body))
            h.close()
        ts = [threading.Thread(target=approve, args=(g,)) for g in (b, a)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(sorted(s for s, _ in results), [200, 409], results)
        for gw in (a, b):
            r = self.wait_run(gw, key, run["runId"], "completed")
            self.assertEqual(r["output"]["text"], "Email sent.")
        self.assertEqual(len(self.fake.requests(tool="send-email")), 1)
        ev = [x["event"] for x in self.q("SELECT event FROM audit_events WHERE "
                                         "tool_name = 'send_email' ORDER BY seq")]
        self.assertEqual(ev, ["approval_requested", "approved", "executed"])
        self.verify(b)

    def test_events_and_waiting_requests_hear_the_other_replica(self):
        m = self.model()
        a, b = self.pair(tools_config(self.fake, m, server={"approval_wait_ms": 20000}))
        key = a.create_key("alice")
        admin = a.create_key("ops", admin=True)
        # the admin UI's live approvals page on A
        got = []
        h = HTTP(a.port)
        c = h._conn()
        c.request("GET", "/api/approvals/events",
                  headers={"Authorization": "Bearer " + admin, "Accept": "text/event-stream"})
        resp = c.getresponse()
        self.assertEqual(resp.status, 200)

        def read_events():
            # the page's first event is the list as it is (empty); then
            # the list again on every change
            deadline = time.time() + 20
            while time.time() < deadline and not got:
                line = resp.fp.readline()
                if not line:
                    return
                if line.startswith(b"data: ") and b"apr_" in line:
                    got.append(line)
        reader = threading.Thread(target=read_events)
        reader.start()
        time.sleep(0.3)
        # a request made on B appears on A's page
        run = self.suspend(b, key, m)
        reader.join(25)
        c.close()
        self.assertTrue(got, "no approval event reached replica A")
        self.assertIn(run["approvals"][0]["id"].encode(), got[0])
        # a call held on A for its decision (MCP tools/call waits up to
        # approval_wait_ms) is released by a decision taken on B
        sid = self.mcp(a, key)
        held = []

        def call_on_a():
            hh = HTTP(a.port)
            held.append(hh.request("POST", "/mcp", {
                "jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "held@example.com"}}},
                {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid,
                 "Authorization": "Bearer " + key})[:2])
            hh.close()
        self.fake.tool_script("send-email", {"body": {"sent": True}})
        w = threading.Thread(target=call_on_a)
        w.start()
        apr = None
        deadline = time.time() + 10
        while time.time() < deadline and not apr:
            st, pend, _ = b.get("/api/approvals?status=pending", key=admin)
            apr = [x["id"] for x in pend["approvals"] if x["args"].get("to") == "held@example.com"]
            time.sleep(0.05)
        self.assertTrue(apr, "the held call's approval never showed on B")
        st, body, _ = b.post("/api/approvals/%s/approve" % apr[0], {}, key=admin)
        self.assertEqual(st, 200, body)
        w.join(25)
        self.assertTrue(held, "the held call on A never returned")
        st, res = held[0]
        self.assertEqual(st, 200, res)
        self.assertFalse(res["result"]["isError"], res)
        self.assertEqual(res["result"]["structuredContent"], {"sent": True})

    # ---- rate limits ----

    def test_rate_limit_holds_across_replicas(self):
        policies = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                                "rate_limits": {"requests_per_minute": 6, "burst": 4}}}
        cfg = config(self.fake, policies=policies)
        a, b = self.pair(cfg)
        key = a.create_key("alice")
        codes = []
        for i in range(20):
            st, _, _ = (a if i % 2 else b).get("/api/agents", key=key)
            codes.append(st)
        # burst + 1 at once; the next cell comes after 10 s
        self.assertEqual(codes.count(200), 5, codes)
        self.assertEqual(codes.count(429), 15, codes)

    # ---- a replica killed under audited load ----

    def mcp(self, gw, key):
        h = {"Accept": "application/json, text/event-stream"}
        st, b, hd = gw.post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": {"protocolVersion": "2025-11-25",
                                                "capabilities": {},
                                                "clientInfo": {"name": "t", "version": "1"}}},
                            key=key, headers=h)
        self.assertEqual(st, 200, b)
        sid = hd["mcp-session-id"]
        gw.post("/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, key=key,
                headers=dict(h, **{"Mcp-Session-Id": sid}))
        return sid

    def load(self, gw, key, tag, stop, acked, errors):
        """memory_save over MCP until stop is set; acked gets every call
        gatehouse answered as done."""
        http = HTTP(gw.port)
        try:
            sid = self.mcp(gw, key)
        except Exception:
            return
        h = {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid,
             "Authorization": "Bearer " + key}
        i = 0
        deadline = time.time() + 60
        while not stop.is_set() and i < 5000 and time.time() < deadline:
            i += 1
            text = "%s-%d" % (tag, i)
            try:
                st, b, _ = http.request("POST", "/mcp", {
                    "jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "memory_save", "arguments": {"content": text}}}, h)
            except Exception:
                return  # the replica died under this connection
            if st == 200 and isinstance(b, dict) and "result" in b and \
                    not b["result"].get("isError"):
                acked.append(text)
            else:
                errors.append((st, b))
                time.sleep(0.05)
        http.close()

    def test_sigkill_under_audited_load(self):
        m = self.model()
        f = self.fake.url
        cfg = tools_config(self.fake, m, ttl=10, server={"approval_wait_ms": 0})
        cfg["tools"]["slow_email"] = {"type": "http", "description": "Slow mail",
                                      "url": f + "/tools/slow-email",
                                      "input_schema": {"type": "object"}, "timeout_ms": 30000}
        cfg["agents"]["assistant"]["tools"].append("slow_email")
        cfg["agents"]["late"] = dict(cfg["agents"]["assistant"], model=m + "-late")
        cfg["policies"]["default"]["tools"]["allow"].append("slow_*")
        cfg["policies"]["default"]["approval"]["require"].append("slow_*")
        a, b = self.pair(cfg)
        key = a.create_key("alice")
        admin = a.create_key("ops", admin=True)
        # 1. a run on A whose approved tool is still running on A at the kill
        self.fake.tool_script("slow-email", {"delay_ms": 8000, "body": {"ok": True}})
        self.fake.script(m, {"tool_calls": [{"id": "slow1", "name": "slow_email",
                                             "arguments": {"to": "x"}}]},
                         {"text": "after the slow call"})
        st, slow, _ = a.post("/api/agents/assistant/generate", {"messages": "slow"}, key=key)
        self.assertEqual(slow["status"], "suspended", slow)
        st, body, _ = a.post("/api/approvals/%s/approve" % slow["approvals"][0]["id"], {},
                             key=admin)
        self.assertEqual(st, 200, body)
        deadline = time.time() + 10
        while time.time() < deadline and not self.fake.requests(tool="slow-email"):
            time.sleep(0.05)
        self.assertEqual(len(self.fake.requests(tool="slow-email")), 1)
        # 2. an approval asked on A that nobody decides: it expires after A is gone
        self.fake.script(m + "-late", {"tool_calls": [{"id": "exp1", "name": "send_email",
                                                       "arguments": {"to": "late@x.org"}}]},
                         {"text": "gave up"})
        st, pending, _ = a.post("/api/agents/late/generate", {"messages": "late"}, key=key)
        self.assertEqual(pending["status"], "suspended", pending)
        # 3. audited load on both replicas
        stop = threading.Event()
        acked, errors = [], []
        workers = [threading.Thread(target=self.load, args=(gw, key, "%s%d" % (n, i), stop,
                                                             acked, errors))
                   for i in range(2) for n, gw in (("a", a), ("b", b))]
        for w in workers:
            w.start()
        time.sleep(1.5)
        a.stop(sig=signal.SIGKILL, check=False)
        time.sleep(1.0)
        stop.set()
        for w in workers:
            w.join(30)
        self.assertGreater(len(acked), 20, errors[:3])
        # no acknowledged call lost its audit rows (A's included)
        done = {r["args"] for r in self.q("SELECT args FROM audit_events WHERE event = "
                                          "'executed' AND tool_name = 'memory_save'")}
        missing = [t for t in acked if not any('"%s"' % t in d for d in done)]
        self.assertEqual(missing, [])
        # B takes over: the slow call is recorded as cut off, its run resumes
        # without running the tool again, and the expired approval ends its run
        self.wait_leader(b, timeout=20)
        r = self.wait_run(b, key, slow["runId"], "completed", timeout=40)
        self.assertEqual(r["output"]["text"], "after the slow call")
        self.assertEqual(len(self.fake.requests(tool="slow-email")), 1)
        cut = self.q("SELECT outcome FROM audit_events WHERE event = 'interrupted' "
                     "AND tool_name = 'slow_email'")
        self.assertEqual([c["outcome"] for c in cut], ["unknown"])
        r = self.wait_run(b, key, pending["runId"], "completed", timeout=40)
        self.assertEqual(r["output"]["text"], "gave up")
        st, apr, _ = b.get("/api/approvals/" + pending["approvals"][0]["id"], key=admin)
        self.assertEqual(apr["status"], "expired")
        self.assertEqual(self.q("SELECT count(*) AS n FROM audit_open_calls")[0]["n"], 0)
        self.assertIn("intact", self.verify(b))

    # ---- the database restarted under load ----

    def test_database_restart_under_load(self):
        self.own_server = tempfile.mkdtemp(prefix="gh-pg-own-")
        subprocess.run(["sh", PG_SERVER, "start", self.own_server], check=True, timeout=120)
        with open(os.path.join(self.own_server, "url")) as fh:
            own = fh.read().strip()
        psql(PG, "DROP DATABASE IF EXISTS %s" % self.dbname)
        self.server_url = own
        psql(own, "CREATE DATABASE " + self.dbname)
        self.url = with_db(own, self.dbname)
        cfg = config(self.fake, server={"request_timeout_ms": 30000})
        cfg["database"] = {"url": "${GH_TEST_DB_URL}", "pool_size": 4,
                           "connect_timeout_ms": 2000, "statement_timeout_ms": 5000}
        gw = self.gateway(cfg, env={"GH_TEST_DB_URL": self.url})
        key = gw.create_key("alice")
        stop = threading.Event()
        acked, errors = [], []
        ws = [threading.Thread(target=self.load, args=(gw, key, "w%d" % i, stop, acked, errors))
              for i in range(2)]
        for w in ws:
            w.start()
        time.sleep(1.0)
        subprocess.run(["sh", PG_SERVER, "halt", self.own_server], check=True, timeout=120)
        # during the outage: what needs the database is answered at once
        # with 503, never a hang (what needs only the config and a key
        # looked up less than a second ago may still be served)
        outage = []
        h = HTTP(gw.port)
        for _ in range(5):
            t0 = time.monotonic()
            st, body, _ = h.request("GET", "/api/memory/threads?resourceId=r", None,
                                    {"Authorization": "Bearer " + key})
            outage.append((st, time.monotonic() - t0))
        h.close()
        subprocess.run(["sh", PG_SERVER, "restart", self.own_server], check=True, timeout=120)
        before = len(acked)
        time.sleep(3.0)
        stop.set()
        for w in ws:
            w.join(60)
        self.assertTrue(all(st == 503 for st, _ in outage), outage)
        # clients are not told where the database lives
        for st, body in errors:
            self.assertNotIn("gh-pg", json.dumps(body))
        self.assertGreater(len(acked), before, "service did not resume: %s" % errors[-3:])
        # a call answered with an error during the outage wrote nothing of
        # itself or closed what it opened; every acknowledged one is whole
        st, hz, _ = gw.get("/healthz")
        self.assertTrue(hz["database"]["reachable"], hz)
        done = {r["args"] for r in self.q("SELECT args FROM audit_events WHERE event = "
                                          "'executed' AND tool_name = 'memory_save'")}
        self.assertEqual([t for t in acked if not any('"%s"' % t in d for d in done)], [])
        opened = self.q("SELECT count(*) AS n FROM audit_open_calls")[0]["n"]
        self.assertEqual(opened, 0, "calls left open after the outage")
        # a memory saved is a call recorded as executed, and the reverse:
        # no effect without its audit row (fail closed), no row without
        # its effect
        saved = sorted(r["content"] for r in self.q("SELECT content FROM memories"))
        recorded = sorted(json.loads(r["args"])["content"] for r in self.q(
            "SELECT args FROM audit_events WHERE event = 'executed' "
            "AND tool_name = 'memory_save'"))
        self.assertEqual(saved, recorded)
        self.assertTrue(set(acked) <= set(saved))
        self.assertIn("intact", self.verify(gw))

    # ---- keys ----

    def test_revocation_on_one_replica_holds_on_the_other_at_once(self):
        a, b = self.pair(tools_config(self.fake, self.model()))
        admin = a.create_key("root", admin=True)
        key = a.create_key("alice")
        # both replicas have just looked the key up (lookups are cached)
        self.assertEqual(a.get("/v1/models", key=key)[0], 200)
        self.assertEqual(b.get("/v1/models", key=key)[0], 200)
        kid = [k["id"] for k in b.get("/api/keys", key=admin)[1]["keys"] if k["name"] == "alice"]
        st, body, _ = b.post("/api/keys/%s/revoke" % kid[0], {}, key=admin)
        self.assertEqual(st, 200, body)
        # the other replica heard it: well before a cached lookup would age
        # (GH_STORE_KEY_CACHE_MS, 1 s), it refuses the key
        t0 = time.time()
        while a.get("/v1/models", key=key)[0] == 200 and time.time() - t0 < 5:
            time.sleep(0.01)
        took = time.time() - t0
        st, body, _ = a.get("/v1/models", key=key)
        self.assertEqual(st, 401, body)
        self.assertIn("revoked", json.dumps(body))
        self.assertLess(took, 0.6, "replica A accepted a revoked key for %.2f s" % took)
        self.assertEqual(b.get("/v1/models", key=key)[0], 401)

    def test_working_memory_written_on_one_replica_is_read_on_the_other(self):
        m = self.model()
        cfg = tools_config(self.fake, m)
        cfg["agents"]["assistant"]["tools"].append("working_memory_update")
        cfg["policies"]["default"]["tools"]["allow"].append("working_memory_update")
        a, b = self.pair(cfg)
        key = a.create_key("alice")

        def system_on_b():
            st, body, _ = b.post("/api/agents/assistant/generate",
                                 {"messages": "who am I?", "memory": {"resource": "r"}}, key=key)
            self.assertEqual(st, 200, body)
            return self.fake.requests(model=m)[-1]["body"]["messages"][0]["content"]

        # B has read (and keeps) that alice has no working memory
        self.assertNotIn("Name: Alice", system_on_b())
        self.fake.script(m, {"tool_calls": [{"id": "w", "name": "working_memory_update",
                                             "arguments": {"content": "Name: Alice"}}]},
                         {"text": "noted"})
        st, body, _ = a.post("/api/agents/assistant/generate",
                             {"messages": "I am Alice", "memory": {"resource": "r"}}, key=key)
        self.assertEqual(st, 200, body)
        # B heard of the write: well before a kept read would age
        # (GH_STORE_KEY_CACHE_MS, 1 s), its prompt has it
        t0 = time.time()
        while "Name: Alice" not in system_on_b() and time.time() - t0 < 5:
            time.sleep(0.01)
        took = time.time() - t0
        self.assertIn("Name: Alice", system_on_b())
        self.assertLess(took, 0.6, "replica B served old working memory for %.2f s" % took)

    # ---- one chain, one signing key ----

    def test_replica_with_another_signing_key_refuses_to_start(self):
        cfg = json.loads(json.dumps(tools_config(self.fake, self.model())))
        cfg["database"] = {"url": "${GH_TEST_DB_URL}", "pool_size": 4}
        env = {"GH_TEST_DB_URL": self.url}
        a = self.gateway(cfg, env=env)
        a.create_key("alice")
        deadline = time.time() + 15
        while not self.q("SELECT seq FROM audit_checkpoints") and time.time() < deadline:
            time.sleep(0.1)
        self.assertTrue(self.q("SELECT seq FROM audit_checkpoints"), "no checkpoint was signed")
        # B shares the API key hashing key but was given a signing key of
        # its own: its checkpoints would not verify with the chain's key
        cfg["auth"] = {"key_hash_file": os.path.join(a.dir, "gatehouse-hashkey")}
        with self.assertRaises(RuntimeError) as cm:
            self.gateway(cfg, env=env)
        self.assertIn("signed with another key", str(cm.exception))
        self.assertIn("audit.signing_key_file", str(cm.exception))
        # A serves on, and the chain holds one key
        st, _, _ = a.get("/healthz")
        self.assertEqual(st, 200)
        self.assertEqual(len(self.q("SELECT DISTINCT public_key FROM audit_checkpoints")), 1)
        self.assertIn("intact", self.verify(a))


if __name__ == "__main__":
    unittest.main()
