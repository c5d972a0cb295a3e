"""Bad input gets a clear error with the right status, and nothing is left
half-written: no thread, message or run from a request that failed."""

import json
import unittest

from harness import GatewayTest, closed_port, config


def agents(model, provider="fake"):
    return {"assistant": {"provider": provider, "model": model,
                          "tools": ["memory_*"], "memory": {"enabled": True}, "max_steps": 4}}


class ErrorsTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.m = self.model()
        self.gw = self.gateway(config(self.fake, agents=agents(self.m)))
        self.key = self.gw.create_key("alice")

    def assertNothingWritten(self):
        for table in ("threads", "messages", "runs", "run_tool_calls"):
            n = self.gw.query("SELECT count(*) AS n FROM %s" % table)[0]["n"]
            self.assertEqual(n, 0, "%s has %d rows after a failed request" % (table, n))

    def assertError(self, st, body, status, code, fragment):
        self.assertEqual(st, status, body)
        self.assertEqual(body["error"]["code"], code, body)
        self.assertIn(fragment, body["error"]["message"])

    def gen(self, body=None, raw=None, key=None, agent="assistant", headers=None):
        return self.gw.post("/api/agents/%s/generate" % agent, body, raw=raw,
                            key=key if key is not None else self.key, headers=headers)

    def test_auth(self):
        st, b, _ = self.gen({"messages": "x"}, key="")
        self.assertError(st, b, 401, "unauthorized", "missing API key")
        st, b, _ = self.gen({"messages": "x"}, key="gh_not-a-real-key")
        self.assertError(st, b, 401, "unauthorized", "invalid API key")
        st, b, _ = self.gw.post("/api/agents/assistant/generate", {"messages": "x"},
                                headers={"Authorization": "Basic abc"})
        self.assertError(st, b, 401, "unauthorized", "Bearer")
        # revoked keys stop at once, though the server has just looked the
        # key up (its lookups are cached) and another process revokes it
        self.assertEqual(self.gw.get("/v1/models", key=self.key)[0], 200)
        kid = self.gw.query("SELECT id FROM api_keys")[0]["id"]
        self.gw.cli("keys", "revoke", "--config", self.gw.config_path, "--id", kid, check=True)
        st, b, _ = self.gen({"messages": "x"})
        self.assertError(st, b, 401, "unauthorized", "revoked")
        # health needs no key
        st, b, _ = self.gw.get("/healthz")
        self.assertEqual(st, 200)
        self.assertEqual(b["status"], "ok")
        self.assertGreaterEqual(b["schemaVersion"], 2)

    def test_malformed_json(self):
        st, b, _ = self.gen(raw='{"messages": "x",', headers={"Content-Type": "application/json"})
        self.assertError(st, b, 400, "bad_request", "not valid JSON (line 1")
        st, b, _ = self.gen(raw='[1,2]', headers={"Content-Type": "application/json"})
        self.assertError(st, b, 400, "bad_request", "must be a JSON object")
        st, b, _ = self.gen(raw='', headers={"Content-Type": "application/json"})
        self.assertError(st, b, 400, "bad_request", "empty")
        self.assertNothingWritten()

    def test_wrong_types(self):
        cases = [
            ({}, "messages: required"),
            ({"messages": 42}, "messages: expected a string or an array"),
            ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
            ({"messages": [{"role": "user"}]}, "messages[0]: content is missing"),
            ({"messages": "x", "maxSteps": "ten"}, "maxSteps"),
            ({"messages": "x", "memory": {"thread": 5}}, "memory.thread"),
            ({"messages": "x", "clientTools": []}, "clientTools"),
            ({"messages": []}, "at least one message"),
        ]
        for body, frag in cases:
            st, b, _ = self.gen(body)
            self.assertError(st, b, 400, "bad_request", frag)
        self.assertNothingWritten()

    def test_unknown_agent(self):
        st, b, _ = self.gen({"messages": "x"}, agent="nobody")
        self.assertError(st, b, 404, "not_found", "no agent \"nobody\"")

    def test_oversized_body(self):
        big = json.dumps({"messages": "x" * 300000})
        st, b, h = self.gen(raw=big, headers={"Content-Type": "application/json"})
        self.assertError(st, b, 413, "payload_too_large", "max_body_bytes")
        self.assertNothingWritten()
        # the server is still fine afterwards
        st, b, _ = self.gw.get("/healthz")
        self.assertEqual(st, 200)

    def test_invalid_client_tool_schema(self):
        st, b, _ = self.gen({"messages": "x", "clientTools": {
            "bad": {"description": "d", "inputSchema": {"type": "strng"}}}})
        self.assertError(st, b, 400, "bad_request", "clientTools.bad: invalid input schema")
        st, b, _ = self.gen({"messages": "x", "clientTools": {
            "memory save": {"description": "d", "inputSchema": {"type": "object"}}}})
        self.assertError(st, b, 400, "bad_request", "collision")
        self.assertIn("memory_save", b["error"]["message"])
        self.assertIn("memory save", b["error"]["message"])
        self.assertNothingWritten()

    def test_upstream_down(self):
        port = closed_port()
        cfg = config(self.fake, agents=agents("m-down", provider="dead"))
        cfg["providers"]["dead"] = {"type": "openai", "base_url": "http://127.0.0.1:%d/v1" % port,
                                    "api_key": "sk-very-secret-value", "timeout_ms": 2000,
                                    "max_retries": 1, "retry_base_ms": 10}
        gw = self.gateway(cfg)
        key = gw.create_key("bob")
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "x"}, key=key)
        self.assertEqual(st, 502, b)
        self.assertEqual(b["error"]["code"], "upstream_error")
        self.assertIn("dead", b["error"]["message"])  # names the provider
        self.assertNotIn("sk-very-secret-value", json.dumps(b))
        self.assertEqual(gw.query("SELECT count(*) AS n FROM runs")[0]["n"], 0)
        self.assertEqual(gw.query("SELECT count(*) AS n FROM threads")[0]["n"], 0)
        gw.stop()
        self.assertNotIn("sk-very-secret-value", gw.logs())

    def test_upstream_errors_and_retries(self):
        self.fake.script(self.m, {"status": 500, "body": {"error": {"message": "boom"}}},
                         {"status": 500, "body": {"error": {"message": "boom"}}},
                         {"status": 500, "body": {"error": {"message": "still boom"}}})
        st, b, _ = self.gen({"messages": "x"})
        self.assertEqual(st, 502, b)
        # the provider's name and the status; its own words go to the
        # log and the audit row
        self.assertEqual(b["error"]["message"], "provider fake (openai): HTTP 500")
        self.assertEqual(len(self.fake.requests(model=self.m)), 3)  # 1 + 2 retries
        rows = self.gw.query("SELECT error, reason, outcome FROM audit_events "
                             "WHERE event = 'model_failed'")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0]["error"], "provider fake (openai): HTTP 500: still boom")
        self.assertEqual(rows[0]["reason"], "provider fake (openai): HTTP 500")
        self.assertIn("HTTP 500: still boom", self.gw.logs())
        # 429 then success: retried, honouring Retry-After
        self.fake.script(self.m, {"status": 429, "headers": {"Retry-After": "0"}},
                         {"text": "finally"})
        st, b, _ = self.gen({"messages": "x"})
        self.assertEqual(st, 200, b)
        self.assertEqual(b["text"], "finally")

    def test_upstream_errors_show_tenants_no_address(self):
        # a provider that refuses connections, and one whose error names
        # an internal host: every surface tells tenants the provider and
        # the status, never where it lives or what it said
        port = closed_port()
        where = "127.0.0.1:%d" % port
        cfg = config(self.fake, agents={
            "dead": {"provider": "dead", "model": "m", "memory": {"enabled": True},
                     "max_steps": 2},
            "loud": {"provider": "fake", "model": self.m + "-loud", "max_steps": 2}})
        cfg["providers"]["dead"] = {"type": "openai", "base_url": "http://%s/v1" % where,
                                    "timeout_ms": 2000, "max_retries": 0}
        gw = self.gateway(cfg)
        key = gw.create_key("dave")
        self.fake.script(self.m + "-loud", {"status": 503, "repeat": True, "body": {
            "error": {"message": "backend db01.internal:5432 is down"}}})
        seen = []

        def check(text, provider):
            seen.append(text)
            self.assertIn("provider %s (openai)" % provider, text)
            for secret in (where, "127.0.0.1", "db01.internal", "is down"):
                self.assertNotIn(secret, text)

        for agent in ("dead", "loud"):
            status = "connection refused" if agent == "dead" else "HTTP 503"
            st, b, _ = gw.post("/api/agents/%s/generate" % agent, {"messages": "x"}, key=key)
            self.assertEqual(st, 502, b)
            check(json.dumps(b), agent if agent == "dead" else "fake")
            self.assertIn(status, b["error"]["message"])
            st, events, raw = gw.stream("/api/agents/%s/stream" % agent, {"messages": "x"},
                                        key=key)
            self.assertEqual(st, 200, raw)
            errs = [json.loads(x) for x in events if x != "[DONE]"]
            errs = [x for x in errs if x["type"] == "error"]
            self.assertEqual(len(errs), 1, raw)
            self.assertIn(status, errs[0]["payload"]["error"]["message"])
            check(raw, agent if agent == "dead" else "fake")
            st, b, _ = gw.post("/v1/chat/completions", {
                "model": agent, "messages": [{"role": "user", "content": "x"}]}, key=key)
            self.assertEqual(st, 502, b)
            check(json.dumps(b), agent if agent == "dead" else "fake")
            st, events, raw = gw.stream("/v1/chat/completions", {
                "model": agent, "stream": True,
                "messages": [{"role": "user", "content": "x"}]}, key=key)
            self.assertIn(status, raw)
            check(raw, agent if agent == "dead" else "fake")
            st, b, _ = gw.post("/a2a/" + agent, {
                "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {"role": "ROLE_USER", "messageId": "m1",
                                       "parts": [{"text": "x"}]}}}, key=key)
            self.assertEqual(st, 200, b)
            self.assertIn(status, json.dumps(b))
            check(json.dumps(b), agent if agent == "dead" else "fake")
        # the whole story is in the audit log and the log, for operators
        rows = gw.query("SELECT agent_id, error, reason FROM audit_events "
                        "WHERE event = 'model_failed' ORDER BY seq")
        self.assertEqual(len(rows), 10, rows)
        dead = [r for r in rows if r["agent_id"] == "dead"]
        self.assertTrue(all(where in r["error"] and where not in r["reason"] for r in dead))
        loud = [r for r in rows if r["agent_id"] == "loud"]
        self.assertTrue(all("db01.internal:5432 is down" in r["error"] for r in loud), loud)
        gw.stop()
        self.assertIn(where, gw.logs())
        self.assertIn("db01.internal:5432", gw.logs())

    def test_upstream_timeout(self):
        cfg = config(self.fake, agents=agents(self.m + "-slow"))
        cfg["providers"]["fake"]["timeout_ms"] = 500
        cfg["providers"]["fake"]["max_retries"] = 0
        gw = self.gateway(cfg)
        key = gw.create_key("carol")
        self.fake.script(self.m + "-slow", {"delay_ms": 3000, "text": "late"})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "x"}, key=key)
        self.assertEqual(st, 504, b)
        self.assertEqual(b["error"]["code"], "upstream_timeout")
        self.assertEqual(gw.query("SELECT count(*) AS n FROM runs")[0]["n"], 0)

    def test_failed_step_after_a_tool_leaves_no_run(self):
        # the tool ran (and is audited); the model then failed: no run,
        # no thread, no messages — the client can simply retry
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "memory_save",
                                                  "arguments": {"content": "c"}}]},
                         {"status": 500}, {"status": 500}, {"status": 500})
        st, b, _ = self.gen({"messages": "x"})
        self.assertEqual(st, 502, b)
        self.assertNothingWritten()
        ev = [r["event"] for r in self.gw.query(
            "SELECT event FROM audit_events WHERE tool_name = 'memory_save' ORDER BY seq")]
        self.assertEqual(ev, ["allowed", "executed"])

    def test_not_found_routes_and_methods(self):
        st, b, _ = self.gw.get("/api/nothing-here", key=self.key)
        self.assertError(st, b, 404, "not_found", "no route")
        st, b, _ = self.gw.request("DELETE", "/api/agents", key=self.key)
        self.assertError(st, b, 405, "method_not_allowed", "not allowed")


if __name__ == "__main__":
    unittest.main()
