"""OpenTelemetry traces: gatehouse sends OTLP/HTTP JSON to a receiver on
loopback; a run with a tool call is one span tree (invoke_agent > chat,
execute_tool) with the GenAI attributes and the audit row's seq; the
incoming traceparent's trace goes on to the provider and the tool; an
approval's resumption stays in the run's trace; a dead or silent collector
leaves requests alone and the lost spans are counted."""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import GatewayTest, closed_port, config

HERE = os.path.dirname(os.path.abspath(__file__))
MCP_SERVER = os.path.join(HERE, "mcp_test_server.py")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


class Receiver:
    """An OTLP/HTTP JSON receiver: keeps every span POSTed to /v1/traces."""

    def __init__(self):
        self.spans, self.requests, self.lock = [], [], threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with outer.lock:
                    outer.requests.append({"path": self.path,
                                           "headers": {k.lower(): v for k, v in self.headers.items()},
                                           "body": json.loads(body)})
                    for rs in outer.requests[-1]["body"]["resourceSpans"]:
                        for ss in rs["scopeSpans"]:
                            outer.spans.extend(ss["spans"])
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def wait(self, pred, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                spans = list(self.spans)
            if pred(spans):
                return spans
            time.sleep(0.05)
        raise AssertionError("spans never arrived; have: %s" % [s["name"] for s in spans])

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def attrs(span):
    out = {}
    for kv in span.get("attributes", []):
        v = kv["value"]
        out[kv["key"]] = (v.get("stringValue") if "stringValue" in v else
                          int(v["intValue"]) if "intValue" in v else v.get("boolValue"))
    return out


def by_name(spans, prefix):
    return [s for s in spans if s["name"].startswith(prefix)]


class OtelTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.rx = Receiver()
        self.m = self.model()

    def tearDown(self):
        super().tearDown()
        self.rx.stop()

    def start(self, otel=None, approval=False, env=None):
        f = self.fake.url
        tools = {"get_weather": {"type": "http", "description": "Weather",
                                 "url": f + "/tools/weather",
                                 "input_schema": {"type": "object"}}}
        agents = {"assistant": {"provider": "fake", "model": self.m,
                                "tools": ["get_*"], "max_steps": 4}}
        pol = {"agents": ["*"], "tools": {"allow": ["get_*"]}, "client_tools": {"allow": ["*"]}}
        if approval:
            pol["approval"] = {"require": ["get_*"], "approver": "admin"}
        o = {"endpoint": self.rx.url, "interval_ms": 50,
             "headers": {"Authorization": "Bearer ${OTLP_TOKEN}"}}
        o.update(otel or {})
        cfg = config(self.fake, agents=agents, tools=tools, policies={"default": pol}, otel=o)
        gw = self.gateway(cfg, env=dict({"OTLP_TOKEN": "otlp-secret-42"}, **(env or {})))
        return gw, gw.create_key("alice")

    def run_tool(self, gw, key, args=None, headers=None):
        self.fake.script(self.m, {"tool_calls": [{"id": "c1", "name": "get_weather",
                                                  "arguments": args or {"city": "Oslo"}}]},
                         {"text": "sunny"})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "weather?"}, key=key,
                           headers=headers)
        self.assertEqual(st, 200, b)
        return b

    def test_span_tree_attributes_and_propagation(self):
        gw, key = self.start()
        b = self.run_tool(gw, key, headers={"traceparent": "00-%s-%s-01" % (TRACE, PARENT),
                                            "tracestate": "acme=t61rcWkgMzE"})
        spans = self.rx.wait(lambda s: len(by_name(s, "chat ")) >= 2 and
                             by_name(s, "invoke_agent") and by_name(s, "execute_tool"))
        run = by_name(spans, "invoke_agent")[0]
        chats = by_name(spans, "chat ")
        tool = by_name(spans, "execute_tool")[0]
        self.assertEqual(run["name"], "invoke_agent assistant")
        self.assertEqual(tool["name"], "execute_tool get_weather")
        self.assertEqual(chats[0]["name"], "chat " + self.m)
        # one trace: the caller's; the run under the caller's span
        for s in [run, tool] + chats:
            self.assertEqual(s["traceId"], TRACE)
            self.assertRegex(s["spanId"], r"^[0-9a-f]{16}$")
            self.assertGreaterEqual(int(s["endTimeUnixNano"]), int(s["startTimeUnixNano"]))
        self.assertEqual(run["parentSpanId"], PARENT)
        for s in [tool] + chats:
            self.assertEqual(s["parentSpanId"], run["spanId"])
        ra = attrs(run)
        self.assertEqual(ra["gen_ai.operation.name"], "invoke_agent")
        self.assertEqual(ra["gen_ai.agent.id"], "assistant")
        self.assertEqual(ra["gen_ai.provider.name"], "openai")
        self.assertEqual(ra["gatehouse.run.id"], b["runId"])
        self.assertTrue(ra["gatehouse.key.id"])
        ca = attrs(chats[0])
        self.assertEqual(ca["gen_ai.operation.name"], "chat")
        self.assertEqual(ca["gen_ai.request.model"], self.m)
        self.assertEqual(ca["gen_ai.provider.name"], "openai")
        self.assertIn("gen_ai.usage.input_tokens", ca)
        self.assertIn("gen_ai.usage.output_tokens", ca)
        ta = attrs(tool)
        self.assertEqual(ta["gen_ai.operation.name"], "execute_tool")
        self.assertEqual(ta["gen_ai.tool.name"], "get_weather")
        self.assertTrue(ta["gen_ai.tool.call.id"])
        self.assertEqual(ta["gatehouse.decision"], "allowed")
        self.assertEqual(ta["gatehouse.tool.outcome"], "executed")
        self.assertEqual(ta["gatehouse.tool.source"], "server")
        self.assertIn("get_*", ta["gatehouse.policy.rule"])
        # the span names the audit row that let the call run
        row = gw.query("SELECT event, tool_call_id, run_id FROM audit_events WHERE seq = ?",
                       ta["gatehouse.audit.seq"])
        self.assertEqual(row, [{"event": "allowed", "tool_call_id": ta["gen_ai.tool.call.id"],
                                "run_id": b["runId"]}])
        # content stays out unless configured
        self.assertNotIn("gen_ai.tool.call.arguments", ta)
        self.assertNotIn("gen_ai.tool.call.result", ta)
        # the provider and the tool got the trace, under their own spans
        reqs = self.fake.requests(model=self.m)
        self.assertEqual(len(reqs), 2)
        sent = sorted(r["headers"]["traceparent"] for r in reqs)
        self.assertEqual(sent, sorted("00-%s-%s-01" % (TRACE, c["spanId"]) for c in chats))
        self.assertEqual(reqs[0]["headers"]["tracestate"], "acme=t61rcWkgMzE")
        treq = self.fake.requests(tool="weather")[-1]
        self.assertEqual(treq["headers"]["traceparent"], "00-%s-%s-01" % (TRACE, tool["spanId"]))
        # the export itself: OTLP/HTTP JSON with the configured header and the resource
        ex = self.rx.requests[0]
        self.assertEqual(ex["path"], "/v1/traces")
        self.assertEqual(ex["headers"]["content-type"], "application/json")
        self.assertEqual(ex["headers"]["authorization"], "Bearer otlp-secret-42")
        res = attrs(ex["body"]["resourceSpans"][0]["resource"])
        self.assertEqual(res["service.name"], "gatehouse")
        self.assertTrue(res["service.version"])
        st, h, _ = gw.get("/healthz")
        self.assertGreaterEqual(h["otel"]["exported"], 4)
        gw.stop()
        self.assertNotIn("otlp-secret-42", gw.logs())

    def test_an_invalid_traceparent_starts_a_new_trace(self):
        gw, key = self.start()
        for bad in ["00-%s-%s-01" % (TRACE.upper(), PARENT), "00-%s-%s-01" % ("0" * 32, PARENT),
                    "ff-%s-%s-01" % (TRACE, PARENT), "00-%s-%s-01x" % (TRACE, PARENT), "garbage"]:
            self.run_tool(gw, key, headers={"traceparent": bad})
        spans = self.rx.wait(lambda s: len(by_name(s, "invoke_agent")) >= 5)
        runs = by_name(spans, "invoke_agent")
        for r in runs:
            self.assertNotEqual(r["traceId"], TRACE)
            self.assertNotIn("parentSpanId", r)
        self.assertEqual(len({r["traceId"] for r in runs}), len(runs))

    def test_content_when_configured_is_redacted(self):
        gw, key = self.start(otel={"capture_content": True})
        self.run_tool(gw, key, args={"city": "Oslo", "password": "hunter2-secret"})
        spans = self.rx.wait(lambda s: by_name(s, "execute_tool"))
        ta = attrs(by_name(spans, "execute_tool")[0])
        self.assertIn("Oslo", ta["gen_ai.tool.call.arguments"])
        self.assertNotIn("hunter2-secret", ta["gen_ai.tool.call.arguments"])
        self.assertIn("REDACTED", ta["gen_ai.tool.call.arguments"])
        self.assertIn("gen_ai.tool.call.result", ta)
        self.assertNotIn("hunter2-secret", json.dumps(spans))

    def test_approval_resumption_stays_in_the_run_trace(self):
        gw, key = self.start(approval=True)
        admin = gw.create_key("root", admin=True)
        b = self.run_tool(gw, key, headers={"traceparent": "00-%s-%s-01" % (TRACE, PARENT)})
        self.assertEqual(b["status"], "suspended")
        apr = b["approvals"][0]["id"]
        time.sleep(0.1)
        st, _, _ = gw.post("/api/approvals/%s/approve" % apr, {}, key=admin)
        self.assertEqual(st, 200)
        spans = self.rx.wait(lambda s: len(by_name(s, "invoke_agent")) >= 2 and
                             len(by_name(s, "execute_tool")) >= 2)
        first, resumed = sorted(by_name(spans, "invoke_agent"),
                                key=lambda s: int(s["startTimeUnixNano"]))
        self.assertEqual(resumed["traceId"], TRACE)
        self.assertEqual(resumed["parentSpanId"], first["spanId"])
        self.assertTrue(attrs(resumed)["gatehouse.run.resumed"])
        asked, done = sorted(by_name(spans, "execute_tool"),
                             key=lambda s: int(s["startTimeUnixNano"]))
        self.assertEqual(attrs(asked)["gatehouse.decision"], "approval_requested")
        self.assertEqual(attrs(asked)["gatehouse.approval.id"], apr)
        self.assertEqual([e["name"] for e in asked["events"]], ["gatehouse.approval.requested"])
        da = attrs(done)
        self.assertEqual(done["parentSpanId"], resumed["spanId"])
        self.assertEqual(da["gatehouse.approval.id"], apr)
        self.assertEqual(da["gatehouse.tool.outcome"], "executed")
        self.assertGreaterEqual(da["gatehouse.approval.wait_ms"], 100)
        self.assertIn("gatehouse.approval.decided", [e["name"] for e in done["events"]])
        # the tool was called under the resumed call's span
        treq = self.fake.requests(tool="weather")[-1]
        self.assertEqual(treq["headers"]["traceparent"], "00-%s-%s-01" % (TRACE, done["spanId"]))

    def dead_collector(self, endpoint):
        gw, key = self.start(otel={"endpoint": endpoint, "max_queue": 4, "max_batch": 2,
                                   "timeout_ms": 200, "interval_ms": 20})
        for _ in range(6):
            b = self.run_tool(gw, key)
            self.assertEqual(b["text"], "sunny")
        deadline = time.time() + 15
        while time.time() < deadline:
            st, h, _ = gw.get("/healthz")
            o = h["otel"]
            if o["failedExports"] >= 1 and o["dropped"] >= 1:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(o["failedExports"], 1, o)
        self.assertGreaterEqual(o["dropped"], 1, o)
        self.assertEqual(o["exported"], 0)
        self.assertLessEqual(o["queued"], 4)
        self.assertEqual(h["status"], "ok")
        # /metrics counts the same (they only grow)
        st, text, _ = gw.get("/metrics", key=gw.create_key("root", admin=True))
        self.assertEqual(st, 200, text)
        m = dict(re.findall(r"^(gatehouse_otel_\w+) (\d+)$", text, re.M))
        self.assertGreaterEqual(int(m["gatehouse_otel_spans_dropped_total"]), o["dropped"], text)
        self.assertGreaterEqual(int(m["gatehouse_otel_export_failures_total"]),
                                o["failedExports"], text)
        self.assertEqual(int(m["gatehouse_otel_spans_exported_total"]), 0, text)
        self.assertLessEqual(int(m["gatehouse_otel_spans_queued"]), 4, text)
        gw.stop()

    def test_a_closed_port_leaves_requests_alone(self):
        self.dead_collector("http://127.0.0.1:%d" % closed_port())

    def test_a_collector_that_never_answers_leaves_requests_alone(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)  # connections complete in the backlog; nothing ever answers
        try:
            self.dead_collector("http://127.0.0.1:%d" % s.getsockname()[1])
        finally:
            s.close()

    def test_mcp_servers_get_the_tool_call_span(self):
        tdir = tempfile.mkdtemp(prefix="gh-otel-mcp-")
        self.addCleanup(shutil.rmtree, tdir, True)
        pf, hlog, slog = (os.path.join(tdir, n) for n in ("port", "hlog", "slog"))
        proc = subprocess.Popen(["python3", MCP_SERVER, "--http", pf],
                                env=dict(os.environ, MCP_TEST_LOG=hlog),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.wait, 10)
        self.addCleanup(proc.terminate)
        deadline = time.time() + 20
        while not os.path.exists(pf) and time.time() < deadline:
            time.sleep(0.05)
        with open(pf) as f:
            port = int(f.read())
        servers = {"h": {"transport": "http", "url": "http://127.0.0.1:%d/mcp" % port},
                   "s": {"transport": "stdio", "command": "python3", "args": [MCP_SERVER],
                         "env": {"MCP_TEST_LOG": slog}}}
        agents = {"assistant": {"provider": "fake", "model": self.m, "max_steps": 4,
                                "tools": ["h_*", "s_*"]}}
        gw = self.gateway(config(self.fake, agents=agents, mcp_servers=servers,
                                 otel={"endpoint": self.rx.url, "interval_ms": 50}))
        key = gw.create_key("alice")
        deadline = time.time() + 30
        while time.time() < deadline:
            st, h, _ = gw.get("/healthz")
            if all(x["state"] == "connected" for x in h.get("mcp", {}).get("servers", [])):
                break
            time.sleep(0.05)
        self.fake.script(self.m, {"tool_calls": [
            {"id": "c1", "name": "h_echo", "arguments": {"text": "one"}},
            {"id": "c2", "name": "s_echo", "arguments": {"text": "two"}}]}, {"text": "done"})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "go"}, key=key,
                           headers={"traceparent": "00-%s-%s-01" % (TRACE, PARENT)})
        self.assertEqual(st, 200, b)
        spans = self.rx.wait(lambda s: len(by_name(s, "execute_tool")) >= 2)
        ids = {s["name"]: "00-%s-%s-01" % (TRACE, s["spanId"]) for s in spans}
        self.assertEqual(attrs([s for s in spans if s["name"] == "execute_tool h_echo"][0])
                         ["gatehouse.mcp.server"], "h")

        def calls(path):
            with open(path) as f:
                msgs = [json.loads(line) for line in f if line.strip()]
            return [m for m in msgs if m.get("method") == "tools/call"]
        # over HTTP: the header and params._meta; over stdio: params._meta
        hc = calls(hlog)[-1]
        self.assertEqual(hc["traceparent"], ids["execute_tool h_echo"])
        self.assertEqual(hc["meta"]["traceparent"], ids["execute_tool h_echo"])
        sc = calls(slog)[-1]
        self.assertEqual(sc["params"]["_meta"]["traceparent"], ids["execute_tool s_echo"])
        # the connection's own requests (initialize, tools/list) carry none
        self.assertIsNone([m for m in (json.loads(x) for x in open(hlog) if x.strip())
                           if m.get("method") == "initialize"][0]["traceparent"])

    def test_no_otel_section_sends_no_traceparent(self):
        cfg_gw = self.gateway(config(self.fake, agents={
            "assistant": {"provider": "fake", "model": self.m, "max_steps": 2}}))
        key = cfg_gw.create_key("alice")
        self.fake.script(self.m, {"text": "hi"})
        st, b, _ = cfg_gw.post("/api/agents/assistant/generate", {"messages": "hi"}, key=key,
                               headers={"traceparent": "00-%s-%s-01" % (TRACE, PARENT)})
        self.assertEqual(st, 200, b)
        self.assertNotIn("traceparent", self.fake.requests(model=self.m)[-1]["headers"])
        st, h, _ = cfg_gw.get("/healthz")
        self.assertNotIn("otel", h)


if __name__ == "__main__":
    unittest.main()
