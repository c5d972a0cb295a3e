"""Live reload: SIGHUP, `gatehouse reload` and POST /api/admin/reload
re-read the config file. A policy edit takes effect on the next request
while an open stream finishes under the config it started with; a broken
edit is refused (logged, audited, returned) and the old policy keeps
working; settings that need a restart are named and keep their running
value; an approval asked under a policy whose text changed is void. And
the json log format: one JSON object per line, request lines with their
fields."""

import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import ON_PG, GatewayTest, config


def blake2b_hex(path):
    with open(path, "rb") as f:
        return hashlib.blake2b(f.read(), digest_size=32).hexdigest()


class ReloadTest(GatewayTest):

    def start(self, **sections):
        self.m = self.model()
        agents = {"assistant": {"provider": "fake", "model": self.m, "max_steps": 4,
                                "tools": ["memory_*"], "memory": {"enabled": True}},
                  "other": {"provider": "fake", "model": self.m, "max_steps": 4}}
        gw = self.gateway(config(self.fake, agents=agents, **sections))
        return gw, gw.create_key("alice"), gw.create_key("root", admin=True)

    def edit(self, gw, fn):
        fn(gw.cfg)
        with open(gw.config_path + ".tmp", "w") as f:
            json.dump(gw.cfg, f, indent=2)
        os.replace(gw.config_path + ".tmp", gw.config_path)

    def write_raw(self, gw, text):
        with open(gw.config_path, "w") as f:
            f.write(text)

    def status_file(self, gw):
        try:
            with open(gw.base + ".reload.json") as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return None

    def sighup(self, gw):
        """Sends SIGHUP and waits for the outcome the server leaves."""
        before = (self.status_file(gw) or {}).get("signal", 0)
        gw.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 20
        while time.time() < deadline:
            s = self.status_file(gw)
            if s and s.get("signal", 0) > before:
                return s
            time.sleep(0.02)
        self.fail("no reload outcome after SIGHUP")

    def reload_rows(self, gw):
        return gw.query("SELECT outcome, reason, detail FROM audit_events "
                        "WHERE event = 'config_reload' ORDER BY seq")

    def chat(self, gw, key, agent="assistant"):
        self.fake.script(self.m, {"text": "fine"})
        return gw.post("/v1/chat/completions",
                       {"model": agent, "messages": [{"role": "user", "content": "hi"}]}, key=key)

    def test_sighup_applies_a_policy_edit_while_a_stream_finishes(self):
        gw, key, _ = self.start()
        words = " ".join("w%d" % i for i in range(30))
        self.fake.script(self.m, {"text": words, "stream": {"chunk_delay_ms": 60}})
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
        c.request("POST", "/v1/chat/completions",
                  body=json.dumps({"model": "assistant", "stream": True,
                                   "messages": [{"role": "user", "content": "count"}]}),
                  headers={"Authorization": "Bearer " + key,
                           "Content-Type": "application/json"})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        first = r.readline()
        while first.strip() == b"":
            first = r.readline()
        self.assertTrue(first.startswith(b"data: "), first)
        # the stream is open: the policy now allows agent "other" only
        self.edit(gw, lambda cfg: cfg["policies"]["default"].update(agents=["other"]))
        s = self.sighup(gw)
        self.assertTrue(s["ok"], s)
        self.assertIn("policies.default", s["changed"])
        self.assertEqual(s["digest"], blake2b_hex(gw.config_path))
        self.assertEqual(s["generation"], 2)
        # the next request runs under the new policy
        st, b, _ = self.chat(gw, key)
        self.assertEqual(st, 403, b)
        self.assertIn("policy", json.dumps(b))
        st, b, _ = self.chat(gw, key, agent="other")
        self.assertEqual(st, 200, b)
        # the open stream went on undisturbed, to the end
        rest = r.read().decode()
        c.close()
        text = first.decode() + rest
        got = ""
        for line in text.split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                for ch in json.loads(line[6:]).get("choices", []):
                    got += (ch.get("delta") or {}).get("content") or ""
        self.assertEqual(got, words)
        self.assertTrue(text.rstrip().endswith("data: [DONE]"), text[-200:])
        rows = self.reload_rows(gw)
        self.assertEqual(rows[-1]["outcome"], "ok")
        d = json.loads(rows[-1]["detail"])
        self.assertEqual(d["digest"], s["digest"])
        self.assertEqual(d["via"], "signal")
        self.assertIn("reload (signal): config", gw.logs())

    def test_a_broken_edit_is_refused_and_the_old_policy_keeps_working(self):
        gw, key, admin = self.start()
        with open(gw.config_path) as f:
            good = f.read()
        # not JSON at all
        self.write_raw(gw, good[: len(good) // 2])
        s = self.sighup(gw)
        self.assertFalse(s["ok"], s)
        self.assertIn("gatehouse.json", s["error"])
        st, b, _ = self.chat(gw, key)
        self.assertEqual(st, 200, b)
        # valid JSON, invalid config: the API says why, with a 400
        bad = json.loads(good)
        bad["policies"]["default"]["agents"] = ["other"]
        bad["agents"]["assistant"]["max_steps"] = 1000
        self.write_raw(gw, json.dumps(bad))
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 400, b)
        self.assertEqual(b["error"]["code"], "bad_request")
        self.assertIn("$.agents.assistant.max_steps", b["error"]["message"])
        # the old policy still governs (assistant allowed)
        st, b, _ = self.chat(gw, key)
        self.assertEqual(st, 200, b)
        rows = self.reload_rows(gw)
        self.assertEqual([r["outcome"] for r in rows], ["refused", "refused"])
        self.assertIn("max_steps", rows[-1]["reason"])
        self.assertEqual(json.loads(rows[-1]["detail"])["digest"], blake2b_hex(gw.config_path))
        self.assertEqual(json.loads(rows[-1]["detail"])["via"], "api")
        self.assertIn("config refused, the running config stays", gw.logs())
        # no secret reaches the audit rows or the answers
        for r in rows:
            self.assertNotIn("sk-test-provider-secret", json.dumps(r))
        # fixed: applied
        self.write_raw(gw, good.replace('"max_steps": 4', '"max_steps": 5', 1))
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        self.assertEqual(set(b), {"ok", "digest", "generation", "changed", "restart_required"})
        self.assertTrue(b["ok"])
        self.assertEqual(b["digest"], blake2b_hex(gw.config_path))
        self.assertEqual(b["changed"], ["agents.assistant"])
        self.assertEqual(b["restart_required"], [])
        self.assertNotIn("sk-test", json.dumps(b))

    def test_admin_only_and_unchanged_text(self):
        gw, key, admin = self.start()
        st, b, _ = gw.post("/api/admin/reload", {}, key=key)
        self.assertEqual(st, 403, b)
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        # the running text: nothing new installed
        self.assertEqual(b["changed"], [])
        self.assertEqual(b["generation"], 1)
        self.assertEqual(b["digest"], blake2b_hex(gw.config_path))

    def test_gatehouse_reload_command(self):
        gw, key, _ = self.start()
        self.edit(gw, lambda cfg: cfg["policies"]["default"].update(agents=["other"]))
        rc, out, err = gw.cli("reload", "--config", gw.config_path)
        self.assertEqual(rc, 0, err)
        o = json.loads(out)
        self.assertTrue(o["ok"])
        self.assertEqual(o["changed"], ["policies.default"])
        st, b, _ = self.chat(gw, key)
        self.assertEqual(st, 403, b)
        # a config that does not validate: said at once, the server untouched
        self.edit(gw, lambda cfg: cfg["policies"]["default"].update(agents=7))
        rc, out, err = gw.cli("reload", "--config", gw.config_path)
        self.assertEqual(rc, 1)
        self.assertIn("$.policies.default.agents", err)
        self.assertEqual(len(self.reload_rows(gw)), 1)
        # a stale pid file naming some other process: that one is left alone
        self.edit(gw, lambda cfg: cfg["policies"]["default"].update(agents=["*"]))
        other = subprocess.Popen(["sleep", "30"])
        try:
            with open(gw.base + ".pid", "w") as f:
                f.write("%d\n" % other.pid)
            rc, out, err = gw.cli("reload", "--config", gw.config_path)
            self.assertEqual(rc, 1)
            self.assertIn("is not gatehouse serve", err)
            self.assertIsNone(other.poll())
        finally:
            other.kill()
            other.wait()

    def test_listener_and_database_changes_need_a_restart(self):
        gw, key, admin = self.start()

        def change(cfg):
            cfg["server"]["listen"] = "127.0.0.1:1"
            if ON_PG:
                cfg["database"]["url"] = "postgresql://gatehouse@/elsewhere?host=/nonexistent"
                cfg["database"]["pool_size"] = 3
            else:
                cfg["database"]["path"] = "elsewhere.db"
            cfg["server"]["heartbeat_ms"] = 2000
        self.edit(gw, change)
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        self.assertEqual(sorted(b["restart_required"]),
                         ["database.pool_size", "database.url", "server.listen"] if ON_PG
                         else ["database.path", "server.listen"])
        self.assertIn("server", b["changed"])
        self.assertIn("needs a restart", gw.logs().replace("keeps its running value until a "
                                                           "restart", "needs a restart"))
        # still served where it was, on the database it opened
        st, b, _ = self.chat(gw, key)
        self.assertEqual(st, 200, b)
        self.assertFalse(os.path.exists(os.path.join(gw.dir, "elsewhere.db")))
        # the URL may hold a password: named, never shown
        self.assertNotIn("nonexistent", json.dumps(b) + gw.logs())

        # sections set up at start: named, and the rest of the edit applies
        # (notification targets follow a reload: not named)
        def started(cfg):
            cfg["notifications"] = {"targets": {"hook": {
                "kind": "webhook", "url": "http://127.0.0.1:9/hook",
                "secret": "0123456789abcdef0123"}}}
            cfg["otel"] = {"endpoint": "http://127.0.0.1:9"}
            cfg["metrics"] = {"listen": "127.0.0.1:0"}
            cfg["policies"]["default"]["agents"] = ["nobody"]
        self.edit(gw, started)
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        db = ["database.pool_size", "database.url"] if ON_PG else ["database.path"]
        self.assertEqual(sorted(b["restart_required"]),
                         sorted(db + ["metrics.listen", "otel", "server.listen"]))
        st, b, _ = self.chat(gw, key)
        self.assertEqual(st, 403, b)

    def test_an_open_event_stream_lets_the_old_generation_go(self):
        self.m = self.model()
        gw = self.gateway(config(self.fake), env={"GH_LOG": "debug"})
        admin = gw.create_key("root", admin=True)
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
        c.request("GET", "/api/approvals/events", headers={"Authorization": "Bearer " + admin})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.readline())
        self.edit(gw, lambda cfg: cfg["policies"]["default"].update(agents=["nobody"]))
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        # the watch moved to generation 2: generation 1 is freed while it is open
        deadline = time.time() + 10
        while time.time() < deadline and "config generation 1 released" not in gw.logs():
            time.sleep(0.05)
        self.assertIn("config generation 1 released", gw.logs())
        self.assertIsNone(gw.proc.poll())
        c.close()

    def test_an_approval_asked_under_a_changed_policy_is_void(self):
        f = self.fake.url
        tools = {"send_email": {"type": "http", "description": "Send an email",
                                "url": f + "/tools/send-email",
                                "input_schema": {"type": "object",
                                                 "properties": {"to": {"type": "string"}}}}}
        self.m = self.model()
        agents = {"assistant": {"provider": "fake", "model": self.m, "tools": ["send_email"],
                                "max_steps": 5}}
        policies = {"default": {"agents": ["*"], "tools": {"allow": ["send_*"]},
                                "approval": {"require": ["send_*"], "approver": "admin"}}}
        gw = self.gateway(config(self.fake, agents=agents, tools=tools, policies=policies))
        key, admin = gw.create_key("alice"), gw.create_key("root", admin=True)
        self.fake.script(self.m, {"tool_calls": [{"id": "e1", "name": "send_email",
                                                  "arguments": {"to": "bob"}}]},
                         {"text": "Not sent."})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "email bob"}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["status"], "suspended")
        apr = b["approvals"][0]
        # the policy's text changes (one more allow glob): its version with it
        self.edit(gw, lambda cfg: cfg["policies"]["default"].update(
            tools={"allow": ["send_*", "memory_*"]}))
        self.assertTrue(self.sighup(gw)["ok"])
        st, a, _ = gw.post("/api/approvals/%s/approve" % apr["id"], {}, key=admin)
        self.assertEqual(st, 200, a)
        deadline = time.time() + 15
        while time.time() < deadline:
            st, r, _ = gw.get("/api/runs/" + b["runId"], key=key)
            self.assertEqual(st, 200, r)
            if r["status"] not in ("suspended", "running"):
                break
            time.sleep(0.05)
        self.assertEqual(r["status"], "completed", r)
        # never executed: the model was told the approval no longer applies
        self.assertEqual(len(self.fake.requests(tool="send-email")), 0)
        last = self.fake.requests(self.m)[-1]
        self.assertIn("no longer applies", json.dumps(last))


TEST_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_test_server.py")


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class McpReloadTest(GatewayTest):
    """Upstream MCP servers added and removed by a reload."""

    def server(self, tdir, name):
        return {"transport": "stdio", "command": "python3", "args": [TEST_SERVER],
                "env": {"MCP_TEST_PIDFILE": os.path.join(tdir, name + ".pid"),
                        "MCP_TEST_LOG": os.path.join(tdir, name + ".log"),
                        "MCP_TEST_STATE": os.path.join(tdir, name + ".state")},
                "timeout_ms": 20000, "connect_timeout_ms": 20000, "shutdown_grace_ms": 500}

    def states(self, gw, admin):
        st, b, _ = gw.get("/api/mcp/servers", key=admin)
        self.assertEqual(st, 200, b)
        return {s["name"]: s["state"] for s in b["servers"]}

    def wait(self, what, fn, timeout=40):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if fn():
                return
            time.sleep(0.1)
        self.fail("never: " + what)

    def test_servers_added_and_removed(self):
        m = self.model()
        agents = {"assistant": {"provider": "fake", "model": m, "tools": ["one_*", "two_*"]}}
        gw = self.gateway(config(self.fake, agents=agents,
                                 mcp_servers={"one": self.server(self.tdir, "one")}))
        admin = gw.create_key("root", admin=True)
        self.wait("one connected", lambda: self.states(gw, admin) == {"one": "connected"})
        with open(os.path.join(self.tdir, "one.pid")) as f:
            one_pid = int(f.read())
        # add two
        servers = {"one": self.server(self.tdir, "one"), "two": self.server(self.tdir, "two")}
        self.edit(gw, lambda cfg: cfg.update(mcp_servers=servers))
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["changed"], ["mcp_servers.two"])
        self.wait("both connected", lambda: self.states(gw, admin) == {"one": "connected",
                                                                       "two": "connected"})
        self.assertIn("upstream MCP servers restarted with the new set (2)", gw.logs())
        # the old set stopped once nothing used it: one runs as a new process
        self.wait("the first one's process to end", lambda: not alive(one_pid))
        # remove one
        self.edit(gw, lambda cfg: cfg.update(mcp_servers={"two": servers["two"]}))
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["changed"], ["mcp_servers.one"])
        self.assertEqual(self.states(gw, admin).keys(), {"two"})
        with open(os.path.join(self.tdir, "one.pid")) as f:
            one_pid = int(f.read())
        self.wait("one's process to end", lambda: not alive(one_pid))
        # a tools-only edit elsewhere keeps the running servers
        with open(os.path.join(self.tdir, "two.pid")) as f:
            two_pid = int(f.read())
        self.edit(gw, lambda cfg: cfg["policies"]["default"].update(agents=["assistant"]))
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        time.sleep(0.5)
        self.assertTrue(alive(two_pid))
        self.assertEqual(self.states(gw, admin), {"two": "connected"})

    def setUp(self):
        super().setUp()
        self.tdir = tempfile.mkdtemp(prefix="gh-reload-mcp-")

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.tdir, ignore_errors=True)

    edit = ReloadTest.edit


class LogFormatTest(GatewayTest):

    def test_json_lines_with_request_fields(self):
        gw = self.gateway(config(self.fake, log={"format": "json"}))
        key = gw.create_key("alice")
        self.fake.script("m", {"text": "hi \"there\"\n\u00e9"})
        st, b, _ = gw.post("/v1/chat/completions",
                           {"model": "assistant",
                            "messages": [{"role": "user", "content": "hi"}]}, key=key)
        self.assertEqual(st, 200, b)
        # a path with a quote, a control character and UTF-8, decoded
        st, _, _ = gw.get("/nope%22%09%C3%A9")
        self.assertEqual(st, 404)
        gw.stop()
        with open(os.path.join(gw.dir, "serve.err")) as f:
            lines = [ln for ln in f.read().split("\n") if ln]
        reqs = []
        for ln in lines:
            o = json.loads(ln)
            self.assertLessEqual(len(ln.encode()), 2048)
            for k in ("ts", "level", "msg"):
                self.assertIn(k, o)
            if "request_id" in o:
                reqs.append(o)
        chat = [o for o in reqs if o.get("route") == "/v1/chat/completions"]
        self.assertEqual(len(chat), 1, reqs)
        o = chat[0]
        self.assertEqual(o["status"], 200)
        self.assertEqual(o["method"], "POST")
        self.assertTrue(o["request_id"].startswith("req_"))
        self.assertTrue(o["key_id"])
        self.assertIsInstance(o["duration_ms"], float)
        self.assertNotIn(key, json.dumps(reqs))
        nf = [o for o in reqs if o["status"] == 404]
        self.assertEqual(len(nf), 1)
        self.assertNotIn("route", nf[0])
        self.assertEqual(nf[0]["path"], "/nope\"\t\u00e9")

    def test_text_request_lines_carry_the_route_and_a_reload_switches_to_json(self):
        gw = self.gateway(config(self.fake))
        key = gw.create_key("alice")
        admin = gw.create_key("root", admin=True)
        st, _, _ = gw.get("/v1/models", key=key)
        self.assertEqual(st, 200)
        cfg = dict(gw.cfg, log={"format": "json", "level": "info"})
        with open(gw.config_path, "w") as f:
            json.dump(cfg, f)
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        self.assertIn("log", b["changed"])
        st, _, _ = gw.get("/v1/models", key=key)
        gw.stop()
        with open(os.path.join(gw.dir, "serve.err")) as f:
            lines = [ln for ln in f.read().split("\n") if ln]
        text = [ln for ln in lines if " GET /v1/models 200 " in ln]
        self.assertEqual(len(text), 1, lines)
        self.assertIn(" route=/v1/models", text[0])
        self.assertIn(" key=", text[0])
        js = [json.loads(ln) for ln in lines if ln.startswith("{")]
        self.assertTrue(any(o.get("route") == "/v1/models" for o in js), js)


if __name__ == "__main__":
    unittest.main()
