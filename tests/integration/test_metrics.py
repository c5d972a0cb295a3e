"""GET /metrics: requests, model calls, tokens, a denied tool call, an
approval requested and decided and the audit rows they wrote are each
counted with the exact delta; `promtool check metrics` (Debian's
prometheus package, installed by tests/install-deps.sh --test) accepts the
text; on the main listener only admins read it; metrics.listen serves it
alone, without authentication, and a non-loopback address is refused
unless allowed."""

import http.client
import os
import re
import shutil
import subprocess
import time
import unittest

from harness import GatewayTest, config

MCP_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_test_server.py")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset of (label, value)): value} of every sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = frozenset(LABEL.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples, name, **labels):
    """The sum over every series of name whose labels include labels."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def promtool_check(test, text):
    promtool = shutil.which("promtool")
    if not promtool:
        test.fail("promtool is missing: tests/install-deps.sh --test installs Debian's "
                  "prometheus package, which has it")
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    test.assertEqual(p.returncode, 0, "promtool check metrics:\n" + p.stdout + p.stderr)


def metrics_config(fake, model, ttl=3600, **sections):
    f = fake.url
    tools = {"send_email": {"type": "http", "description": "Send an email",
                            "url": f + "/tools/send-email",
                            "input_schema": {"type": "object",
                                             "properties": {"to": {"type": "string"}},
                                             "required": ["to"]}}}
    agents = {"assistant": {"provider": "fake", "model": model,
                            "tools": ["send_email", "memory_*"],
                            "memory": {"enabled": True}, "max_steps": 5}}
    policies = {"default": {"agents": ["*"],
                            "tools": {"allow": ["send_*", "memory_*"],
                                      "deny": ["memory_delete"]},
                            "approval": {"require": ["send_*"], "approver": "admin",
                                         "ttl_seconds": ttl}}}
    return config(fake, agents=agents, tools=tools, policies=policies, **sections)


USAGE = {"prompt_tokens": 11, "completion_tokens": 3}


class MetricsTest(GatewayTest):

    def scrape(self, gw, key):
        st, body, hdrs = gw.request("GET", "/metrics", key=key)
        self.assertEqual(st, 200, body)
        self.assertTrue(hdrs["content-type"].startswith("text/plain; version=0.0.4"), hdrs)
        text = body if isinstance(body, str) else body.decode()
        return text, parse(text)

    def wait_run(self, gw, key, run_id, status):
        deadline = time.time() + 30
        polls = 0
        while time.time() < deadline:
            st, r, _ = gw.get("/api/runs/" + run_id, key=key)
            polls += 1
            self.assertEqual(st, 200, r)
            if r["status"] == status:
                return polls
            time.sleep(0.05)
        self.fail("run %s never reached %s" % (run_id, status))

    def test_each_event_is_counted(self):
        m = self.model()
        gw = self.gateway(metrics_config(self.fake, m))
        key, admin = gw.create_key("alice"), gw.create_key("root", admin=True)
        _, s0 = self.scrape(gw, admin)
        rows0 = gw.query("SELECT count(*) AS n FROM audit_events")[0]["n"]

        # a plain answer
        self.fake.script(m, {"text": "hello", "usage": USAGE})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "hi"}, key=key)
        self.assertEqual(st, 200, b)
        # a denied tool call, then the answer
        self.fake.script(m, {"tool_calls": [{"id": "d1", "name": "memory_delete",
                                             "arguments": {"id": 1}}], "usage": USAGE},
                         {"text": "could not", "usage": USAGE})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "forget"}, key=key)
        self.assertEqual(st, 200, b)
        # an approval: requested, scraped while pending, approved, executed
        self.fake.script(m, {"tool_calls": [{"id": "e1", "name": "send_email",
                                             "arguments": {"to": "bob@example.com"}}],
                             "usage": USAGE},
                         {"text": "Email sent.", "usage": USAGE})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "mail"}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["status"], "suspended")
        _, mid = self.scrape(gw, admin)
        self.assertEqual(value(mid, "gatehouse_approvals_pending"), 1)
        st, d, _ = gw.post("/api/approvals/%s/approve" % b["approvals"][0]["id"], {},
                           key=admin)
        self.assertEqual(st, 200, d)
        polls = self.wait_run(gw, key, b["runId"], "completed")
        # a request for an agent that does not exist: no label of its name
        st, _, _ = gw.post("/api/agents/no-such-agent/generate", {"messages": "x"}, key=key)
        self.assertEqual(st, 404)

        text, s1 = self.scrape(gw, admin)
        promtool_check(self, text)
        rows1 = gw.query("SELECT count(*) AS n FROM audit_events")[0]["n"]

        def delta(name, **labels):
            return value(s1, name, **labels) - value(s0, name, **labels)

        def delta_total(name, **labels):
            return total(s1, name, **labels) - total(s0, name, **labels)

        # requests: three runs of the agent; the run polls and the unknown
        # agent under no agent; one approval; the two earlier scrapes
        self.assertEqual(delta("gatehouse_http_requests_total", surface="native",
                               status_class="2xx", agent="assistant"), 3)
        self.assertEqual(delta("gatehouse_http_requests_total", surface="native",
                               status_class="2xx", agent=""), polls)
        self.assertEqual(delta("gatehouse_http_requests_total", surface="native",
                               status_class="4xx", agent=""), 1)
        self.assertEqual(delta_total("gatehouse_http_requests_total", surface="admin"), 1)
        self.assertEqual(delta_total("gatehouse_http_requests_total", surface="metrics"), 2)
        self.assertEqual(delta_total("gatehouse_http_request_duration_seconds_count",
                                     surface="native", agent="assistant"), 3)
        self.assertNotIn("no-such-agent", text)
        # model calls: 1 + 2 + 2, each with its tokens
        up = dict(provider="fake", gen_ai_provider_name="openai")
        self.assertEqual(delta("gatehouse_upstream_calls_total", outcome="ok", **up), 5)
        self.assertEqual(delta("gen_ai_client_operation_duration_seconds_count",
                               gen_ai_operation_name="chat", **up), 5)
        for kind, n in (("input", 11), ("output", 3)):
            lab = dict(gen_ai_operation_name="chat", gen_ai_token_type=kind, **up)
            self.assertEqual(delta("gen_ai_client_token_usage_count", **lab), 5)
            self.assertEqual(delta("gen_ai_client_token_usage_sum", **lab), 5 * n)
        # tools: the denial, the approval asked and given, the execution
        self.assertEqual(delta("gatehouse_tool_calls_total", tool="memory_delete",
                               source="memory", decision="denied"), 1)
        self.assertEqual(delta("gatehouse_tool_calls_total", tool="send_email",
                               source="server", decision="approval_requested"), 1)
        self.assertEqual(delta("gatehouse_tool_calls_total", tool="send_email",
                               source="server", decision="approved"), 1)
        self.assertEqual(delta_total("gatehouse_tool_calls_total", decision="allowed"), 0)
        self.assertEqual(delta("gatehouse_tool_executions_total", tool="send_email",
                               source="server", outcome="ok"), 1)
        self.assertEqual(delta("gatehouse_tool_execution_duration_seconds_count",
                               tool="send_email", source="server"), 1)
        # approvals
        self.assertEqual(value(s1, "gatehouse_approvals_pending"), 0)
        self.assertEqual(delta("gatehouse_approval_decision_seconds_count",
                               decision="approved"), 1)
        # audit: every row committed meanwhile, and the group commits
        self.assertGreater(rows1 - rows0, 0)
        self.assertEqual(delta("gatehouse_audit_rows_appended_total"), rows1 - rows0)
        self.assertGreater(delta("gatehouse_store_group_commit_jobs_count"), 0)
        self.assertEqual(delta("gatehouse_store_group_commit_jobs_count"),
                         delta("gatehouse_store_group_commit_duration_seconds_count"))
        self.assertGreaterEqual(value(s1, "gatehouse_audit_checkpoint_age_seconds"), 0)
        self.assertIn(("gatehouse_audit_checkpoint_age_seconds", frozenset()), s1)
        self.assertEqual(value(s1, "gatehouse_audit_verify_ok"), 1)
        # streams
        self.assertEqual(value(s1, "gatehouse_streams_max"), 8)
        self.assertEqual(value(s1, "gatehouse_streams_active"), 0)

    def test_denied_by_reviewer_and_expired(self):
        m = self.model()
        gw = self.gateway(metrics_config(self.fake, m, ttl=10))
        key, admin = gw.create_key("alice"), gw.create_key("root", admin=True)
        runs = []
        calls = [{"tool_calls": [{"id": "e%d" % i, "name": "send_email",
                                  "arguments": {"to": "bob@example.com"}}]} for i in range(2)]
        self.fake.script(m, *calls, {"text": "done"}, {"text": "done"})
        for i in range(2):
            st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "mail"}, key=key)
            self.assertEqual(b["status"], "suspended", b)
            runs.append(b)
        _, s0 = self.scrape(gw, admin)
        self.assertEqual(value(s0, "gatehouse_approvals_pending"), 2)
        st, d, _ = gw.post("/api/approvals/%s/deny" % runs[0]["approvals"][0]["id"],
                           {"reason": "no"}, key=admin)
        self.assertEqual(st, 200, d)
        # the other one expires (ten seconds, the shortest time to live)
        self.wait_run(gw, key, runs[1]["runId"], "completed")
        _, s1 = self.scrape(gw, admin)
        lab = dict(tool="send_email", source="server")
        self.assertEqual(value(s1, "gatehouse_tool_calls_total", decision="approval_requested",
                               **lab), 2)
        self.assertEqual(value(s1, "gatehouse_tool_calls_total", decision="denied_by_reviewer",
                               **lab), 1)
        self.assertEqual(value(s1, "gatehouse_tool_calls_total", decision="expired", **lab), 1)
        self.assertEqual(value(s1, "gatehouse_tool_calls_total", decision="approved", **lab), 0)
        self.assertEqual(value(s1, "gatehouse_tool_executions_total", outcome="ok", **lab), 0)
        self.assertEqual(value(s1, "gatehouse_approval_decision_seconds_count",
                               decision="denied_by_reviewer"), 1)
        self.assertEqual(value(s1, "gatehouse_approval_decision_seconds_count",
                               decision="expired"), 1)
        self.assertGreaterEqual(value(s1, "gatehouse_approval_decision_seconds_sum",
                                      decision="expired"), 10)
        self.assertEqual(value(s1, "gatehouse_approval_decision_seconds_bucket",
                               decision="expired", le="5"), 0)
        self.assertEqual(value(s1, "gatehouse_approvals_pending"), 0)

    def test_main_listener_needs_an_admin(self):
        gw = self.gateway(metrics_config(self.fake, self.model()))
        key = gw.create_key("alice")
        st, b, _ = gw.get("/metrics")
        self.assertEqual(st, 401, b)
        st, b, _ = gw.get("/metrics", key=key)
        self.assertEqual(st, 403, b)
        self.assertIn("admin", b["error"]["message"])

    def test_turned_off(self):
        gw = self.gateway(metrics_config(self.fake, self.model(),
                                         metrics={"enabled": False}))
        st, b, _ = gw.get("/metrics", key=gw.create_key("root", admin=True))
        self.assertEqual(st, 404, b)

    def test_own_listener(self):
        mcp = {"t": {"transport": "stdio", "command": "python3", "args": [MCP_SERVER],
                     "shutdown_grace_ms": 200}}
        gw = self.gateway(metrics_config(self.fake, self.model(), mcp_servers=mcp,
                                         metrics={"listen": "127.0.0.1:0"}))
        gw.out.seek(0)
        port = int(re.search(r"gatehouse metrics on port (\d+)", gw.out.read()).group(1))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        deadline = time.time() + 20
        while True:
            c.request("GET", "/metrics")
            r = c.getresponse()
            text = r.read().decode()
            self.assertEqual(r.status, 200)
            scraped = parse(text)
            if value(scraped, "gatehouse_mcp_server_state", server="t", state="connected") \
                    or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertTrue(r.getheader("Content-Type").startswith("text/plain; version=0.0.4"))
        promtool_check(self, text)
        self.assertIn("gatehouse_streams_max 8\n", text)
        # the MCP server's state: one state of four, connected
        self.assertEqual(value(scraped, "gatehouse_mcp_server_state", server="t",
                               state="connected"), 1)
        self.assertEqual(total(scraped, "gatehouse_mcp_server_state", server="t"), 1)
        self.assertEqual(len([k for k in scraped if k[0] == "gatehouse_mcp_server_state"]), 4)
        # each scrape there is counted, by the next one
        before = value(scraped, "gatehouse_http_requests_total", surface="metrics",
                       status_class="2xx", agent="")
        c.request("GET", "/metrics")
        r = c.getresponse()
        again = parse(r.read().decode())
        self.assertEqual(value(again, "gatehouse_http_requests_total", surface="metrics",
                               status_class="2xx", agent=""), before + 1)
        # nothing else is served there
        for path in ("/healthz", "/api/agents", "/metrics/x"):
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 404, path)
        c.request("POST", "/metrics", body=b"")
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 405)
        c.close()
        # and the main listener no longer serves it
        st, b, _ = gw.get("/metrics", key=gw.create_key("root", admin=True))
        self.assertEqual(st, 404, b)
        self.assertIn("metrics.listen", b["error"]["message"])

    def test_remote_listen_refused_unless_allowed(self):
        with self.assertRaises(RuntimeError) as cm:
            self.gateway(metrics_config(self.fake, self.model(),
                                        metrics={"listen": "0.0.0.0:0"}))
        self.assertIn("metrics.listen", str(cm.exception))
        self.assertIn("allow_remote", str(cm.exception))
        gw = self.gateway(metrics_config(self.fake, self.model(),
                                         metrics={"listen": "0.0.0.0:0",
                                                  "allow_remote": True}))
        gw.out.seek(0)
        self.assertRegex(gw.out.read(), r"gatehouse metrics on port \d+")


if __name__ == "__main__":
    unittest.main()
