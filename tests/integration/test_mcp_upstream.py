"""Upstream MCP servers as governed server tools, against real programs:
the reference server @modelcontextprotocol/server-everything, unchanged,
over stdio and over Streamable HTTP, and the small stdio server in
mcp_test_server.py for what the reference server cannot do on demand
(change a tool's definition, die mid-call)."""

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import GH_SRC, Gateway, GatewayTest, config

HERE = os.path.dirname(os.path.abspath(__file__))
EVERYTHING = os.path.join(GH_SRC, "tests", "node_modules", "@modelcontextprotocol",
                          "server-everything", "dist", "index.js")
TEST_SERVER = os.path.join(HERE, "mcp_test_server.py")
LOOPBACK = os.path.join(HERE, "loopback.mjs")


def wait_for(fn, timeout=20.0, what="condition"):
    """Polls fn until it returns something true; bounded in time."""
    deadline = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


class EverythingHTTP:
    """server-everything in its Streamable HTTP mode on a loopback port."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gh-mcp-http-")
        self.log_path = os.path.join(self.dir, "server.log")
        # port 0: the kernel picks a free one, which loopback.mjs reports
        # once bound (a port picked here could be taken by a server of
        # another test before this one binds it); a restart takes it again
        self.port = 0
        try:
            self.start()
        except BaseException:
            # setUpClass failing skips tearDownClass: nothing may outlive it
            if getattr(self, "proc", None):
                self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def start(self):
        self.log = open(self.log_path, "a")
        since = self.log.tell()  # a restart's log goes on after the last one's
        env = dict(os.environ, PORT=str(self.port))
        self.proc = subprocess.Popen(["node", "--import", LOOPBACK, EVERYTHING, "streamableHttp"],
                                     stdout=self.log, stderr=self.log, env=env)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("server-everything exited: " + self.logs()[-2000:])
            with open(self.log_path) as f:
                f.seek(since)
                m = re.search(r"^loopback: listening on 127\.0\.0\.1:(\d+)$", f.read(), re.M)
            return m and int(m.group(1))
        self.port = wait_for(up, 30, "server-everything (HTTP) to listen")
        self.url = "http://127.0.0.1:%d/mcp" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def logs(self):
        with open(self.log_path) as f:
            return f.read()


def proc_children(pid):
    """[(pid, state, comm)] of the processes whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        rp = st.rindex(")")
        fields = st[rp + 2:].split()
        if int(fields[1]) == pid:
            out.append((int(d), fields[0], st[st.index("(") + 1:rp]))
    return out


def proc_counts(pid):
    """(threads, descriptors, children) of a live process."""
    return (len(os.listdir("/proc/%d/task" % pid)), len(os.listdir("/proc/%d/fd" % pid)),
            len(proc_children(pid)))


@unittest.skipUnless(os.path.exists(EVERYTHING), "tests/node_modules lacks server-everything")
class McpUpstreamTest(GatewayTest):

    http_server = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.http_server = EverythingHTTP()

    @classmethod
    def tearDownClass(cls):
        if cls.http_server:
            cls.http_server.stop()
            shutil.rmtree(cls.http_server.dir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.m = self.model()
        self.tdir = tempfile.mkdtemp(prefix="gh-mcp-t-")

    def mcp_servers(self, **extra):
        servers = {
            "everything": {"transport": "stdio", "command": "node",
                           "args": [EVERYTHING, "stdio"],
                           "env": {"FROM_CONFIG": "${GH_TEST_FROM_ENV}"},
                           "timeout_ms": 20000, "connect_timeout_ms": 20000},
            "remote": {"transport": "http", "url": self.http_server.url,
                       "headers": {"X-Upstream-Token": "${GH_TEST_MCP_TOKEN}"},
                       "timeout_ms": 20000, "connect_timeout_ms": 20000},
            "t": {"transport": "stdio", "command": "python3", "args": [TEST_SERVER],
                  "env": {"MCP_TEST_PIDFILE": os.path.join(self.tdir, "pid"),
                          "MCP_TEST_LOG": os.path.join(self.tdir, "log"),
                          "MCP_TEST_STATE": os.path.join(self.tdir, "state")},
                  "timeout_ms": 20000, "connect_timeout_ms": 20000,
                  "retry_base_ms": 100, "retry_max_ms": 1000, "shutdown_grace_ms": 500},
        }
        servers.update(extra)
        return servers

    def start(self, policies=None, servers=None, tools=None, server=None):
        agents = {"assistant": {"provider": "fake", "model": self.m, "max_steps": 4,
                                "tools": ["everything_*", "remote_*", "t_*"]}}
        policies = policies or {
            "default": {"agents": ["*"],
                        "tools": {"allow": ["*"], "deny": ["everything_get-env"]},
                        "client_tools": {"allow": ["*"]}},
            "open": {"agents": ["*"], "tools": {"allow": ["*"]},
                     "approval": {"exempt": ["t_write_*"]}},
        }
        cfg = config(self.fake, agents=agents, policies=policies, tools=tools or {},
                     mcp_servers=servers or self.mcp_servers(), server=server or {})
        self.gw = self.gateway(cfg, env={"GH_TEST_FROM_ENV": "configured-value",
                                         "GH_TEST_MCP_TOKEN": "mcp-token-secret",
                                         "GH_TEST_NOT_PASSED": "gatehouse-only-secret"})
        self.key = self.gw.create_key("alice")
        self.admin = self.gw.create_key("ops", admin=True)
        self.wait_connected()
        return self.gw

    def health(self):
        st, b, _ = self.gw.get("/healthz")
        self.assertEqual(st, 200, b)
        return b

    def server_state(self, name):
        """The admin API's view of an upstream (/healthz shows less)."""
        st, b, _ = self.gw.get("/api/mcp/servers", key=self.admin)
        self.assertEqual(st, 200, b)
        for s in b["servers"]:
            if s["name"] == name:
                return s
        raise AssertionError("no server " + name)

    def wait_connected(self, *names):
        names = names or ("everything", "remote", "t")
        for n in names:
            wait_for(lambda: self.server_state(n)["state"] == "connected", 40,
                     n + " to be connected")

    def child_pid(self):
        with open(os.path.join(self.tdir, "pid")) as f:
            return int(f.read())

    def child_log(self):
        try:
            with open(os.path.join(self.tdir, "log")) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def generate(self, tool, args, key=None, text="done"):
        self.fake.script(self.m, {"tool_calls": [{"id": "c1", "name": tool, "arguments": args}]},
                         {"text": text})
        st, b, _ = self.gw.post("/api/agents/assistant/generate", {"messages": "go"},
                                key=key or self.key)
        self.assertEqual(st, 200, b)
        return b

    def tool_result_seen_by_model(self):
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "tool")
        return json.loads(last["content"])

    def audit(self, tool):
        """The tool's call rows (not its pin events)."""
        return self.gw.query("SELECT event, outcome, error, reason, detail, source "
                             "FROM audit_events WHERE tool_name = ? AND event NOT LIKE 'mcp_%' "
                             "ORDER BY seq", tool)

    def tearDown(self):
        # a failed test shows the end of gatehouse's log (its MCP lines)
        result = getattr(getattr(self, "_outcome", None), "result", None)
        failed = result and any(t is self for t, _ in result.failures + result.errors)
        if failed and getattr(self, "gw", None):
            print("\n--- gatehouse log (last lines) ---\n" + self.gw.logs()[-4000:])
        shutil.rmtree(self.tdir, ignore_errors=True)
        super().tearDown()

    # ------------------------------------------------------------ calls

    def test_native_surface_calls_federated_tools_over_stdio_and_http(self):
        self.start()
        # stdio: the reference server's get-sum, as the model asks for it
        b = self.generate("everything_get-sum", {"a": 2, "b": 3})
        call = b["response"]["messages"][0]["content"][0]
        self.assertEqual(call["toolName"], "everything_get-sum")
        res = self.tool_result_seen_by_model()
        self.assertEqual(res["content"][0]["text"], "The sum of 2 and 3 is 5.")
        # structuredContent comes back as the upstream sent it
        self.generate("everything_get-structured-content", {"location": "Chicago"})
        res = self.tool_result_seen_by_model()
        self.assertEqual(res["structuredContent"],
                         {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
        # Streamable HTTP
        self.generate("remote_echo", {"message": "over http"})
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"],
                         "Echo: over http")
        # the tools the model was offered carry the upstream's schema
        offered = {t["function"]["name"]: t["function"]
                   for t in self.fake.requests(model=self.m)[-1]["body"]["tools"]}
        self.assertIn("remote_echo", offered)
        self.assertEqual(offered["everything_get-sum"]["parameters"]["required"], ["a", "b"])
        self.assertNotIn("everything_get-env", offered)  # denied by the policy
        # audit rows name the server, the tool and the upstream session
        rows = self.audit("remote_echo")
        self.assertEqual([r["event"] for r in rows], ["allowed", "executed"])
        detail = json.loads(rows[-1]["detail"])
        self.assertEqual(detail["mcp"]["server"], "remote")
        self.assertEqual(detail["mcp"]["tool"], "echo")
        self.assertEqual(detail["mcp"]["session"], self.server_state("remote")["session"])
        rows = self.audit("everything_get-sum")
        self.assertRegex(json.loads(rows[-1]["detail"])["mcp"]["session"], r"^pid \d+$")
        self.assertEqual(rows[-1]["source"], "server")

    def test_openai_surface_runs_federated_tools_inside(self):
        self.start()
        self.fake.script(self.m, {"tool_calls": [{"id": "c1", "name": "t_echo",
                                                  "arguments": {"text": "via openai"}}]},
                         {"text": "the tool said: echo: via openai"})
        st, b, _ = self.gw.post("/v1/chat/completions",
                                {"model": "assistant",
                                 "messages": [{"role": "user", "content": "go"}]}, key=self.key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["choices"][0]["message"]["content"], "the tool said: echo: via openai")
        # a server tool: never on the wire to the client
        self.assertNotIn("tool_calls", b["choices"][0]["message"])
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"],
                         "echo: via openai")
        self.assertEqual([r["event"] for r in self.audit("t_echo")], ["allowed", "executed"])

    def test_is_error_comes_back_and_is_audited_as_failed(self):
        self.start()
        self.generate("t_fail", {})
        res = self.tool_result_seen_by_model()
        self.assertIs(res["isError"], True)
        self.assertEqual(res["content"][0]["text"], "this tool always fails")
        rows = self.audit("t_fail")
        self.assertEqual(rows[-1]["event"], "failed")
        self.assertEqual(rows[-1]["error"], "this tool always fails")

    def test_invalid_arguments_never_leave(self):
        self.start()
        before = len([m for m in self.child_log() if m.get("method") == "tools/call"])
        self.generate("t_echo", {"text": "x", "extra": 1})
        self.assertIn("additional property", self.tool_result_seen_by_model()["error"])
        after = len([m for m in self.child_log() if m.get("method") == "tools/call"])
        self.assertEqual(before, after)

    def test_the_child_gets_no_secret_of_gatehouse(self):
        self.start(policies={"default": {"agents": ["*"], "tools": {"allow": ["*"]}}})
        self.generate("everything_get-env", {})
        env = json.loads(self.tool_result_seen_by_model()["content"][0]["text"])
        self.assertEqual(env.get("FROM_CONFIG"), "configured-value")
        self.assertNotIn("GH_TEST_NOT_PASSED", env)
        self.assertIn("PATH", env)
        # the configured header secret reached the HTTP upstream, never a log
        self.gw.stop()
        self.assertNotIn("mcp-token-secret", self.gw.logs())
        self.assertNotIn("mcp-token-secret",
                         json.dumps(self.gw.query("SELECT * FROM audit_events"), default=str))

    # ------------------------------------------------------------ policy

    def test_denied_call_is_refused_with_a_reason_and_audited(self):
        self.start()
        self.generate("everything_get-env", {})
        res = self.tool_result_seen_by_model()
        self.assertIn('denied by policy "default": tools.deny "everything_get-env"', res["error"])
        rows = self.audit("everything_get-env")
        self.assertEqual(rows[-1]["event"], "denied")
        self.assertIn("tools.deny", rows[-1]["reason"])
        self.assertEqual(json.loads(rows[-1]["detail"])["mcp"]["server"], "everything")

    def test_annotations_set_approval_defaults_that_explain_names(self):
        self.start()
        st, b, _ = self.gw.get("/api/policy/explain?agent=assistant&tool=t_echo", key=self.key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["tool"]["decision"], "allow")
        self.assertIn("annotation readOnlyHint true", b["tool"]["rule"])
        self.assertEqual(b["tool"]["decidedBy"], "annotation")
        self.assertEqual(b["tool"]["annotation"], "readOnlyHint true")
        self.assertEqual(b["tool"]["mcp"]["server"], "t")
        self.assertEqual(b["tool"]["mcp"]["tool"], "echo")
        st, b, _ = self.gw.get("/api/policy/explain?agent=assistant&tool=t_write_note",
                               key=self.key)
        self.assertEqual(b["tool"]["decision"], "approval")
        self.assertIn("annotation destructiveHint absent", b["tool"]["rule"])
        self.assertEqual(b["tool"]["decidedBy"], "annotation")
        self.assertEqual(b["tool"]["annotation"], "destructiveHint absent (MCP's default: true)")
        self.assertEqual(b["tool"]["approver"], "admin")
        # a rule decides a denied tool, whatever its annotations say
        st, b, _ = self.gw.get("/api/policy/explain?agent=assistant&tool=everything_get-env",
                               key=self.key)
        self.assertEqual(b["tool"]["decision"], "deny")
        self.assertEqual(b["tool"]["decidedBy"], "rule")
        self.assertNotIn("annotation", b["tool"])
        self.assertIn('tools.deny "everything_get-env"', b["tool"]["rule"])
        # a policy can waive it
        alt = self.gw.create_key("bob", policy="open")
        st, b, _ = self.gw.get("/api/policy/explain?agent=assistant&tool=t_write_note", key=alt)
        self.assertEqual(b["tool"]["decision"], "allow")
        self.assertIn('approval.exempt "t_write_*"', b["tool"]["rule"])
        self.assertEqual(b["tool"]["decidedBy"], "rule")
        # and the gate does what explain says: no approval under "open"
        self.generate("t_write_note", {"note": "hello"}, key=alt)
        self.assertEqual(self.tool_result_seen_by_model()["structuredContent"],
                         {"saved": True, "length": 5})

    def test_admin_approval_executes_exactly_once(self):
        self.start()
        b = self.generate("t_write_note", {"note": "approved note"})
        self.assertEqual(b["finishReason"], "suspended", b)
        apr = b["approvals"][0]
        rule = self.gw.query("SELECT rule FROM approvals WHERE id = ?", apr["id"])[0]["rule"]
        self.assertIn("annotation destructiveHint absent", rule)
        calls = lambda: [m for m in self.child_log()
                         if m.get("method") == "tools/call"
                         and m["params"]["name"] == "write_note"]
        self.assertEqual(calls(), [])  # held, not run
        st, r, _ = self.gw.post("/api/approvals/%s/approve" % apr["id"], {"reason": "ok"},
                                key=self.admin)
        self.assertEqual(st, 200, r)
        st, r, _ = self.gw.post("/api/approvals/%s/approve" % apr["id"], {"reason": "again"},
                                key=self.admin)
        self.assertEqual(st, 409, r)
        run = b["runId"]
        wait_for(lambda: self.gw.get("/api/runs/" + run, key=self.key)[1]["status"] == "completed",
                 30, "the run to complete")
        self.assertEqual(len(calls()), 1)
        events = [r["event"] for r in self.audit("t_write_note")]
        self.assertEqual(events, ["approval_requested", "approved", "executed"])

    def test_openai_surface_holds_a_destructive_call_for_an_admin(self):
        gw = self.start(server={"approval_wait_ms": 60000})
        self.fake.script(self.m, {"tool_calls": [{"id": "c1", "name": "t_write_note",
                                                  "arguments": {"note": "via openai"}}]},
                         {"text": "noted"})
        out = {}

        def ask():
            c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=90)
            c.request("POST", "/v1/chat/completions",
                      body=json.dumps({"model": "assistant",
                                       "messages": [{"role": "user", "content": "note it"}]}),
                      headers={"Authorization": "Bearer " + self.key,
                               "Content-Type": "application/json"})
            r = c.getresponse()
            out["status"], out["body"] = r.status, json.loads(r.read())
            c.close()

        t = threading.Thread(target=ask)
        t.start()
        pending = wait_for(lambda: self.gw.query("SELECT id, rule FROM approvals "
                                                 "WHERE status = 'pending'"), 30,
                           "the approval")
        self.assertIn("annotation destructiveHint absent", pending[0]["rule"])
        calls = lambda: [m for m in self.child_log()
                         if m.get("method") == "tools/call"
                         and m["params"]["name"] == "write_note"]
        self.assertEqual(calls(), [])  # held while the admin decides
        self.assertTrue(t.is_alive(), "the response waits for the decision")
        st, r, _ = self.gw.post("/api/approvals/%s/approve" % pending[0]["id"], {},
                                key=self.admin)
        self.assertEqual(st, 200, r)
        t.join(60)
        self.assertFalse(t.is_alive())
        self.assertEqual(out["status"], 200, out["body"])
        self.assertEqual(out["body"]["choices"][0]["message"]["content"], "noted")
        self.assertEqual(len(calls()), 1)
        self.assertEqual(self.tool_result_seen_by_model()["structuredContent"],
                         {"saved": True, "length": 10})
        rows = self.audit("t_write_note")
        self.assertEqual([r["event"] for r in rows],
                         ["approval_requested", "approved", "executed"])
        detail = json.loads(rows[-1]["detail"])
        self.assertEqual(detail["mcp"]["server"], "t")
        self.assertEqual(detail["approval_id"], pending[0]["id"])

    # ------------------------------------------------------------ pinning

    def test_changed_definition_is_held_until_accepted(self):
        self.start()
        self.generate("t_mutable", {"key": "a"})
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"], "value of a")
        os.kill(self.child_pid(), signal.SIGUSR1)

        def held():
            st, b, _ = self.gw.get("/api/mcp/servers/t/tools", key=self.admin)
            tool = [x for x in b["tools"] if x["upstreamName"] == "mutable"][0]
            return tool if tool["pin"]["status"] == "held" else None
        tool = wait_for(held, 20, "the changed tool to be held")
        self.assertFalse(tool["offered"])
        self.assertIn("deletes everything", tool["pin"]["offeredDefinition"]["description"])
        self.assertEqual(tool["pin"]["acceptedDefinition"]["description"], "Reads a value.")
        # not offered, and a call is refused with the reason
        self.generate("t_mutable", {"key": "b"})
        offered = [t["function"]["name"] for t in self.fake.requests(model=self.m)[-2]["body"]["tools"]]
        self.assertNotIn("t_mutable", offered)
        self.assertIn("definition changed", self.tool_result_seen_by_model()["error"])
        self.assertEqual(self.audit("t_mutable")[-1]["event"], "denied")
        self.assertEqual(self.server_state("t")["held"], 1)
        # the CLI shows it; accepting another digest than the one offered fails
        rc, out, err = self.gw.cli("mcp", "tools", "--config", self.gw.config_path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"t\s+t_mutable\s+held")
        rc, out, err = self.gw.cli("mcp", "accept", "--config", self.gw.config_path,
                                   "--server", "t", "--tool", "t_mutable", "--digest", "0" * 64)
        self.assertEqual(rc, 1)
        self.assertIn("review it again", err)
        rc, out, err = self.gw.cli("mcp", "accept", "--config", self.gw.config_path,
                                   "--server", "t", "--tool", "t_mutable",
                                   "--digest", tool["digest"])
        self.assertEqual(rc, 0, err)
        wait_for(lambda: self.server_state("t")["held"] == 0, 20, "the accepted tool")
        # offered again, with its new annotations: destructive now, so approval
        b = self.generate("t_mutable", {"key": "c"})
        self.assertEqual(b["finishReason"], "suspended")
        ev = self.gw.query("SELECT event, admin_user, detail FROM audit_events "
                           "WHERE event LIKE 'mcp_tool_%' AND tool_name = 't_mutable' ORDER BY seq")
        self.assertEqual([e["event"] for e in ev],
                         ["mcp_tool_pinned", "mcp_tool_changed", "mcp_tool_accepted"])
        self.assertEqual(ev[-1]["admin_user"], "cli")
        self.assertEqual(json.loads(ev[-1]["detail"])["digest"], tool["digest"])

    def test_admin_api_rejects_a_change_and_a_restart_keeps_it_held(self):
        self.start()
        os.kill(self.child_pid(), signal.SIGUSR1)
        wait_for(lambda: self.server_state("t")["held"] == 1, 20, "the held tool")
        st, b, _ = self.gw.post("/api/mcp/servers/t/tools/mutable/reject", {}, key=self.admin)
        self.assertEqual(st, 200, b)
        ops = self.gw.query("SELECT id FROM api_keys WHERE name = 'ops'")[0]["id"]
        tool = [x for x in b["tools"] if x["upstreamName"] == "mutable"][0]
        self.assertEqual(tool["pin"]["rejectedBy"], "key:" + ops)

        def status():
            b = self.gw.get("/api/mcp/servers/t/tools", key=self.admin)[1]
            return [x for x in b["tools"] if x["upstreamName"] == "mutable"][0]["pin"]["status"]
        wait_for(lambda: status() == "rejected", 20, "rejected")
        # a second decision on the same change is refused
        st, b, _ = self.gw.post("/api/mcp/servers/t/tools/mutable/reject", {}, key=self.admin)
        self.assertEqual(st, 409, b)
        # gatehouse restarts (and its child, which still offers the change):
        # the pin is in the database, the tool stays held
        self.gw.restart()
        self.wait_connected("t")
        self.assertEqual(status(), "rejected")
        self.assertEqual(self.server_state("t")["held"], 1)
        self.generate("t_mutable", {"key": "y"})
        self.assertIn("rejected the change", self.tool_result_seen_by_model()["error"])
        # the upstream goes back to the pinned definition: offered again
        os.kill(self.child_pid(), signal.SIGUSR2)
        wait_for(lambda: self.server_state("t")["held"] == 0, 20, "released")
        self.generate("t_mutable", {"key": "z"})
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"], "value of z")
        ev = [e["event"] for e in self.gw.query(
            "SELECT event FROM audit_events WHERE tool_name = 't_mutable' "
            "AND event LIKE 'mcp_tool_%' ORDER BY seq")]
        self.assertEqual(ev, ["mcp_tool_pinned", "mcp_tool_changed", "mcp_tool_rejected"])

    # ------------------------------------------------------------ failures

    def test_upstream_killed_mid_call(self):
        gw = self.start()
        pid = self.child_pid()
        self.fake.script(self.m, {"tool_calls": [{"id": "c1", "name": "t_slow",
                                                  "arguments": {"seconds": 30}}]},
                         {"text": "after the crash"})
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
        c.request("POST", "/api/agents/assistant/generate", body=json.dumps({"messages": "go"}),
                  headers={"Authorization": "Bearer " + self.key,
                           "Content-Type": "application/json"})
        wait_for(lambda: any(m.get("method") == "tools/call" for m in self.child_log()), 20,
                 "the call to reach the upstream")
        os.kill(pid, signal.SIGKILL)
        r = c.getresponse()
        b = json.loads(r.read())
        c.close()
        self.assertEqual(r.status, 200, b)
        err = self.tool_result_seen_by_model()["error"]
        self.assertIn("MCP server t", err)
        self.assertIn("closed its stdout", err)
        self.assertEqual(self.audit("t_slow")[-1]["event"], "failed")
        # the other upstreams did not notice
        self.assertEqual(self.server_state("everything")["state"], "connected")
        self.generate("everything_echo", {"message": "still here"})
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"],
                         "Echo: still here")
        # t comes back with a new child
        wait_for(lambda: os.path.exists(os.path.join(self.tdir, "pid")) and
                 self.child_pid() != pid, 30, "a new child")
        self.wait_connected("t")
        self.generate("t_echo", {"text": "back"})
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"], "echo: back")
        self.assertIn("killed by signal 9", gw.logs())

    def test_unavailable_upstream_is_a_tool_error_and_reported(self):
        servers = self.mcp_servers(t={"transport": "stdio", "command": "python3",
                                      "args": [TEST_SERVER],
                                      "env": {"MCP_TEST_PIDFILE": os.path.join(self.tdir, "pid")},
                                      "retry_base_ms": 10000, "retry_max_ms": 20000,
                                      "shutdown_grace_ms": 200})
        self.start(servers=servers)
        self.generate("t_echo", {"text": "pin it"})
        self.gw.stop()
        # the next start finds the command gone: t fails, its pinned tools
        # are known and unavailable, the others are fine
        self.gw.cfg["mcp_servers"]["t"]["command"] = "/nonexistent/python3"
        with open(self.gw.config_path, "w") as f:
            json.dump(self.gw.cfg, f)
        self.gw.start()
        wait_for(lambda: self.server_state("t")["state"] == "failing", 20, "t failing")
        h = self.health()
        self.assertEqual(h["status"], "degraded")
        # /healthz (no authentication) says t is failing, not what it said
        pub = [x for x in h["mcp"]["servers"] if x["name"] == "t"][0]
        self.assertEqual(pub["state"], "failing")
        self.assertNotIn("lastError", pub)
        self.assertNotIn("nonexistent", json.dumps(h))
        t = self.server_state("t")
        self.assertIn("cannot start", t["lastError"])
        self.assertIsNotNone(t["retryInMs"])
        self.generate("t_echo", {"text": "x"})
        err = self.tool_result_seen_by_model()["error"]
        self.assertIn("MCP server t is unavailable", err)
        self.generate("remote_echo", {"message": "fine"})
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"], "Echo: fine")
        rc, out, err = self.gw.cli("mcp", "list", "--config", self.gw.config_path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"t\s+stdio\s+failing")
        self.assertRegex(out, r"remote\s+http\s+connected")

    def test_http_upstream_restart_and_session_end(self):
        self.start()
        sid = self.server_state("remote")["session"]
        self.assertTrue(sid)
        self.generate("remote_echo", {"message": "one"})
        # the reference server restarts (forgetting every session)
        self.http_server.stop()
        self.http_server.start()
        def renewed():
            st = self.server_state("remote")
            return st["state"] == "connected" and st["session"] not in (None, sid)
        wait_for(renewed, 40, "a new session")
        self.generate("remote_echo", {"message": "two"})
        self.assertEqual(self.tool_result_seen_by_model()["content"][0]["text"], "Echo: two")
        # at shutdown the session is ended with a DELETE
        new_sid = self.server_state("remote")["session"]
        self.gw.stop()
        wait_for(lambda: "termination request for session " + new_sid in self.http_server.logs(),
                 10, "the DELETE")

    def test_progress_streams_and_a_caller_that_leaves_cancels(self):
        gw = self.start()
        # progress of the reference server's long-running operation, over HTTP
        self.fake.script(self.m, {"tool_calls": [{"id": "c1",
                                                  "name": "remote_trigger-long-running-operation",
                                                  "arguments": {"duration": 1, "steps": 3}}]},
                         {"text": "done"})
        st, events, _ = gw.stream("/api/agents/assistant/stream", {"messages": "go"},
                                  key=self.key)
        self.assertEqual(st, 200)
        chunks = [json.loads(e) for e in events if e != "[DONE]"]
        progress = [c["payload"] for c in chunks if c["type"] == "tool-progress"]
        self.assertGreaterEqual(len(progress), 1)
        self.assertEqual(progress[-1]["total"], 3)
        self.assertEqual(progress[-1]["toolName"], "remote_trigger-long-running-operation")
        # a streaming caller that goes away: the upstream is told
        self.fake.script(self.m, {"tool_calls": [{"id": "c2", "name": "t_slow",
                                                  "arguments": {"seconds": 20}}]},
                         {"text": "never"})
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
        c.request("POST", "/api/agents/assistant/stream", body=json.dumps({"messages": "go"}),
                  headers={"Authorization": "Bearer " + self.key,
                           "Content-Type": "application/json"})
        r = c.getresponse()
        buf = b""
        while b"tool-progress" not in buf:
            chunk = r.read1(4096)
            self.assertTrue(chunk, "the stream ended before any progress")
            buf += chunk
        c.close()
        cancel = wait_for(lambda: [m for m in self.child_log()
                                   if m.get("method") == "notifications/cancelled"], 20,
                          "notifications/cancelled")
        call = [m for m in self.child_log() if m.get("method") == "tools/call"][-1]
        self.assertEqual(cancel[-1]["params"]["requestId"], call["id"])
        self.assertEqual(cancel[-1]["params"]["reason"], "the caller went away")

    def test_no_leaked_process_thread_or_descriptor(self):
        gw = self.start()
        pid = gw.proc.pid
        self.generate("t_echo", {"text": "warm"})
        self.generate("remote_echo", {"message": "warm"})
        self.generate("everything_echo", {"message": "warm"})
        time.sleep(1)
        before = proc_counts(pid)
        kids = proc_children(pid)
        self.assertEqual(sorted(k[2] for k in kids), ["node", "python3"], kids)
        for i in range(3):
            old = self.child_pid()
            os.kill(old, signal.SIGKILL)
            wait_for(lambda: os.path.exists(os.path.join(self.tdir, "pid")) and
                     self.child_pid() != old, 30, "a new child")
            self.wait_connected("t")
            self.generate("t_echo", {"text": "round %d" % i})
            self.generate("remote_echo", {"message": "round %d" % i})
            self.generate("everything_echo", {"message": "round %d" % i})
        # counts settle back (a reader thread ends a moment after its child)
        after = wait_for(lambda: proc_counts(pid) if proc_counts(pid) == before else None, 20,
                         "threads %s and descriptors to settle back" % (before,))
        self.assertEqual(after, before)
        kids = proc_children(pid)
        self.assertTrue(all(k[1] != "Z" for k in kids), kids)  # no zombie
        self.assertEqual(len(kids), 2)
        print("\n  gatehouse pid %d: threads %d, descriptors %d, children %d before and "
              "after 3 kills and restarts of an upstream" % ((pid,) + before))
        # stopping gatehouse stops its children
        kid_pids = [k[0] for k in kids]
        gw.stop()
        for k in kid_pids:
            self.assertFalse(os.path.exists("/proc/%d" % k), "child %d outlived gatehouse" % k)


class McpJsonHttpTest(GatewayTest):
    """An HTTP upstream that answers with JSON bodies, speaks 2025-06-18
    only and forgets sessions (the test server in --http mode)."""

    def setUp(self):
        super().setUp()
        self.m = self.model()
        self.tdir = tempfile.mkdtemp(prefix="gh-mcp-j-")
        self.env = dict(os.environ, MCP_TEST_LOG=os.path.join(self.tdir, "log"),
                        MCP_TEST_PIDFILE=os.path.join(self.tdir, "pid"))
        pf = os.path.join(self.tdir, "port")
        self.proc = subprocess.Popen(["python3", TEST_SERVER, "--http", pf], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        def port_file():
            if not os.path.exists(pf):
                return None
            with open(pf) as f:
                return f.read()
        port = int(wait_for(port_file, 20, "the port"))
        agents = {"assistant": {"provider": "fake", "model": self.m, "max_steps": 4,
                                "tools": ["j_*"]}}
        servers = {"j": {"transport": "http", "url": "http://127.0.0.1:%d/mcp" % port,
                         "retry_base_ms": 100, "retry_max_ms": 500}}
        self.gw = self.gateway(config(self.fake, agents=agents, mcp_servers=servers))
        self.key = self.gw.create_key("alice")

    def tearDown(self):
        super().tearDown()
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.tdir, ignore_errors=True)

    def log(self):
        with open(os.path.join(self.tdir, "log")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def call(self, text):
        self.fake.script(self.m, {"tool_calls": [{"id": "c1", "name": "j_echo",
                                                  "arguments": {"text": text}}]},
                         {"text": "done"})
        st, b, _ = self.gw.post("/api/agents/assistant/generate", {"messages": "go"},
                                key=self.key)
        self.assertEqual(st, 200, b)
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        return json.loads(last["content"])

    def test_json_replies_older_protocol_and_a_renewed_session(self):
        self.assertEqual(self.call("one")["content"][0]["text"], "echo: one")
        posts = [m for m in self.log() if m.get("http") == "POST"]
        self.assertEqual(posts[0]["method"], "initialize")
        self.assertIsNone(posts[0]["version"])
        # after initialize: the session and the agreed (older) revision
        first = posts[-1]["session"]
        self.assertTrue(first)
        self.assertTrue(all(p["version"] == "2025-06-18" for p in posts[1:]), posts)
        self.assertIn("text/event-stream", posts[-1]["accept"])
        # the server forgets its sessions: the next call gets a 404, and
        # gatehouse makes a new session and sends the call once more
        os.kill(self.proc.pid, signal.SIGUSR1)
        self.assertEqual(self.call("two")["content"][0]["text"], "echo: two")
        calls = [m for m in self.log() if m.get("method") == "tools/call"]
        self.assertEqual(len(calls), 3)  # one, two refused (404), two again
        self.assertEqual(calls[1]["session"], first)
        self.assertNotEqual(calls[2]["session"], first)
        detail = json.loads(self.gw.query(
            "SELECT detail FROM audit_events WHERE tool_name = 'j_echo' AND event = 'executed' "
            "ORDER BY seq DESC LIMIT 1")[0]["detail"])
        self.assertEqual(detail["mcp"]["session"], calls[2]["session"])
        # at shutdown the session is ended
        self.gw.stop()
        deletes = [m for m in self.log() if m.get("http") == "DELETE"]
        self.assertEqual(deletes[-1]["session"], calls[2]["session"])


class McpStartupTest(unittest.TestCase):
    """A name two tools resolve to stops gatehouse at start, naming both."""

    def test_collision_is_a_startup_error(self):
        tdir = tempfile.mkdtemp(prefix="gh-mcp-c-")
        servers = {
            "one": {"transport": "stdio", "command": "python3", "args": [TEST_SERVER],
                    "prefix": "x_", "shutdown_grace_ms": 200},
            "two": {"transport": "stdio", "command": "python3", "args": [TEST_SERVER],
                    "prefix": "x_", "shutdown_grace_ms": 200},
        }
        cfg = config(None, mcp_servers=servers)
        with self.assertRaises(RuntimeError) as ctx:
            Gateway(cfg, dirname=tdir)
        msg = str(ctx.exception)
        shutil.rmtree(tdir, ignore_errors=True)
        self.assertIn("name collision", msg)
        self.assertIn("MCP server one", msg)
        self.assertIn("MCP server two", msg)
        self.assertRegex(msg, r'both resolve to "x_[a-z_]+"')

    def start_fails(self, cfg):
        tdir = tempfile.mkdtemp(prefix="gh-mcp-c-")
        try:
            with self.assertRaises(RuntimeError) as ctx:
                Gateway(cfg, dirname=tdir)
        finally:
            shutil.rmtree(tdir, ignore_errors=True)
        return str(ctx.exception)

    def test_collision_with_an_http_tool_is_a_startup_error(self):
        servers = {"one": {"transport": "stdio", "command": "python3", "args": [TEST_SERVER],
                           "prefix": "x_", "shutdown_grace_ms": 200}}
        tools = {"x_echo": {"type": "http", "description": "Echo", "url": "http://127.0.0.1:9/e",
                            "input_schema": {"type": "object"}}}
        msg = self.start_fails(config(None, tools=tools, mcp_servers=servers))
        self.assertIn('tool "echo" of MCP server one and HTTP tool "x_echo" both resolve to '
                      '"x_echo"', msg)

    def test_collision_with_a_memory_tool_is_a_startup_error(self):
        servers = {"one": {"transport": "stdio", "command": "python3", "args": [TEST_SERVER],
                           "env": {"MCP_TEST_EXTRA_TOOL": "search"},
                           "prefix": "memory_", "shutdown_grace_ms": 200}}
        msg = self.start_fails(config(None, mcp_servers=servers))
        self.assertIn('tool "search" of MCP server one and memory tool "memory_search" both '
                      'resolve to "memory_search"', msg)


if __name__ == "__main__":
    unittest.main()
