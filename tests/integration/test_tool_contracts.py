"""Tool contracts both ways: a tool's result is held to its output schema
(HTTP tools from the config, a client's declared outputSchema, the memory
tools' own), and a client tool call never waits forever: the run expires,
across a restart too, and a late result is refused naming the run."""

import json
import time
import unittest

from harness import GatewayTest, config

WEATHER_OUT = {"type": "object",
               "properties": {"temp": {"type": "number"},
                              "sky": {"enum": ["clear", "cloudy", "rain"]}},
               "required": ["temp", "sky"]}


class OutputSchemaTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.m = self.model()
        f = self.fake.url
        tools = {
            "get_weather": {"type": "http", "description": "Weather", "url": f + "/tools/weather",
                            "input_schema": {"type": "object",
                                             "properties": {"city": {"type": "string"}},
                                             "required": ["city"]},
                            "output_schema": WEATHER_OUT},
            "get_any": {"type": "http", "description": "Anything", "url": f + "/tools/any",
                        "input_schema": {"type": "object"}},
        }
        agents = {"assistant": {"provider": "fake", "model": self.m,
                                "tools": ["get_*", "memory_*"], "memory": {"enabled": True},
                                "max_steps": 4}}
        policies = {"default": {"agents": ["*"], "tools": {"allow": ["get_*", "memory_*"]},
                                "client_tools": {"allow": ["*"]}}}
        self.gw = self.gateway(config(self.fake, agents=agents, tools=tools, policies=policies))
        self.key = self.gw.create_key("alice")

    def generate(self, name, args, body=None):
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": name, "arguments": args}]},
                         {"text": "done"})
        req = {"messages": "go"}
        req.update(body or {})
        st, b, _ = self.gw.post("/api/agents/assistant/generate", req, key=self.key)
        self.assertEqual(st, 200, b)
        return b

    def model_saw(self):
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "tool")
        return json.loads(last["content"])

    def tool_part(self, b):
        """The tool result as the client gets it (Mastra's response messages)."""
        tool = [m for m in b["response"]["messages"] if m["role"] == "tool"]
        self.assertEqual(len(tool), 1, b["response"]["messages"])
        return tool[0]["content"][0]

    def rows(self, name):
        return self.gw.query("SELECT event, outcome, error, reason FROM audit_events "
                             "WHERE tool_name = ? ORDER BY seq", name)

    def test_http_tool_result_that_does_not_conform_is_a_tool_error(self):
        self.fake.tool_script("weather", {"body": {"temp": "warm", "sky": "clear"}})
        b = self.generate("get_weather", {"city": "Oslo"})
        self.assertEqual(b["text"], "done")  # the run went on
        seen = self.model_saw()
        self.assertIn("error", seen)
        self.assertIn("does not match the output schema", seen["error"])
        self.assertIn("$.temp: expected number, got string", seen["error"])
        self.assertNotIn("warm", json.dumps(seen))  # the bad result is not passed on
        rows = self.rows("get_weather")
        self.assertEqual([(r["event"], r["outcome"]) for r in rows],
                         [("allowed", "allowed"), ("failed", "error")])
        self.assertIn("$.temp: expected number, got string", rows[-1]["error"])
        self.assertEqual(rows[-1]["reason"], "invalid result")
        res = self.tool_part(b)
        self.assertTrue(res.get("isError"), res)

    def test_http_tool_result_missing_a_required_property(self):
        self.fake.tool_script("weather", {"body": {"temp": 3}})
        self.generate("get_weather", {"city": "Oslo"})
        self.assertIn('$: missing required property "sky"', self.model_saw()["error"])

    def test_conforming_result_passes_through_structured(self):
        self.fake.tool_script("weather", {"body": {"temp": 21.5, "sky": "clear"}})
        b = self.generate("get_weather", {"city": "Oslo"})
        self.assertEqual(self.model_saw(), {"temp": 21.5, "sky": "clear"})
        res = self.tool_part(b)
        self.assertEqual(res["result"], {"temp": 21.5, "sky": "clear"})
        self.assertFalse(res.get("isError"))
        self.assertEqual(self.rows("get_weather")[-1]["event"], "executed")
        # a tool without an output schema passes anything on, as before
        self.fake.tool_script("any", {"body": {"temp": "warm"}})
        self.generate("get_any", {})
        self.assertEqual(self.model_saw(), {"temp": "warm"})

    def mcp(self, method, params=None):
        """A stateless (2026-07-28) MCP request to /mcp."""
        p = dict(params or {})
        p["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}
        h = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        if method == "tools/call":
            h["Mcp-Name"] = p["name"]
        return self.gw.post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": method, "params": p},
                            key=self.key, headers=h)

    def test_mcp_clients_get_structured_content_and_the_schema(self):
        st, b, _ = self.mcp("tools/list")
        self.assertEqual(st, 200, b)
        tools = {t["name"]: t for t in b["result"]["tools"]}
        self.assertEqual(tools["get_weather"]["outputSchema"], WEATHER_OUT)
        self.assertNotIn("outputSchema", tools["get_any"])
        # the memory tools declare theirs
        self.assertEqual(tools["memory_save"]["outputSchema"]["required"],
                         ["id", "content", "saved"])
        self.fake.tool_script("weather", {"body": {"temp": 1, "sky": "rain"}},
                              {"body": {"temp": 1, "sky": "snow"}})
        call = {"name": "get_weather", "arguments": {"city": "Oslo"}}
        st, b, _ = self.mcp("tools/call", call)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["result"]["structuredContent"], {"temp": 1, "sky": "rain"})
        self.assertFalse(b["result"]["isError"])
        st, b, _ = self.mcp("tools/call", call)
        self.assertEqual(st, 200, b)
        self.assertTrue(b["result"]["isError"])
        self.assertNotIn("structuredContent", b["result"])
        self.assertIn("$.sky: must be one of", b["result"]["content"][0]["text"])

    def test_memory_tools_results_conform(self):
        b = self.generate("memory_save", {"content": "likes tea"},
                          {"memory": {"thread": "t1", "resource": "r1"}})
        seen = self.model_saw()
        self.assertEqual(seen["saved"], True)
        self.assertEqual(self.rows("memory_save")[-1]["event"], "executed")
        self.assertEqual(b["text"], "done")

    def test_client_tool_output_schema(self):
        ct = {"lookup": {"description": "Look up", "inputSchema": {"type": "object"},
                         "outputSchema": {"type": "object",
                                          "properties": {"rows": {"type": "array",
                                                                  "items": {"type": "integer"}}},
                                          "required": ["rows"]}}}
        for result, ok in (({"rows": [1, "two"]}, False), ({"rows": [1, 2]}, True),
                           ('{"rows": [3]}', True)):
            self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "lookup",
                                                      "arguments": {}}]},
                             {"text": "done"})
            st, b1, _ = self.gw.post("/api/agents/assistant/generate",
                                     {"messages": "go", "clientTools": ct}, key=self.key)
            self.assertEqual(st, 200, b1)
            cid = b1["toolCalls"][0]["payload"]["toolCallId"]
            msg = {"role": "tool", "content": [{"type": "tool-result", "toolCallId": cid,
                                                "toolName": "lookup", "result": result}]}
            st, b2, _ = self.gw.post("/api/agents/assistant/generate",
                                     {"messages": [msg], "clientTools": ct}, key=self.key)
            self.assertEqual(st, 200, b2)
            self.assertEqual(b2["text"], "done")
            seen = self.model_saw()
            row = self.gw.query("SELECT event, error, reason FROM audit_events WHERE "
                                "tool_call_id = ? ORDER BY seq DESC LIMIT 1", cid)[0]
            if ok:
                self.assertEqual(row["event"], "client_result")
                # a text result that holds conforming JSON goes on structured
                self.assertEqual(seen, result if isinstance(result, dict)
                                 else json.loads(result))
            else:
                self.assertEqual(row["event"], "failed")
                self.assertEqual(row["reason"], "invalid result")
                self.assertIn("$.rows[1]: expected integer, got string", row["error"])
                self.assertIn("$.rows[1]: expected integer, got string", seen["error"])

    def test_bad_output_schemas_are_refused(self):
        ct = {"lookup": {"description": "x", "inputSchema": {"type": "object"},
                         "outputSchema": {"type": "strng"}}}
        st, b, _ = self.gw.post("/api/agents/assistant/generate",
                                {"messages": "go", "clientTools": ct}, key=self.key)
        self.assertEqual(st, 400, b)
        self.assertIn("clientTools.lookup: invalid output schema", b["error"]["message"])
        cfg = config(self.fake, agents={"a": {"provider": "fake", "model": "m"}},
                     tools={"t": {"type": "http", "description": "d", "url": "http://x.test/",
                                  "input_schema": {"type": "object"},
                                  "output_schema": {"required": "x"}}})
        with self.assertRaises(RuntimeError) as cm:
            self.gateway(cfg)
        self.assertIn("$.tools.t.output_schema", str(cm.exception))


class ExpiryTest(GatewayTest):

    def start(self, timeout_s=2, **kw):
        self.m = self.model()
        agents = {"assistant": {"provider": "fake", "model": self.m, "max_steps": 4,
                                "client_tool_timeout_s": timeout_s}}
        policies = {"default": {"agents": ["*"], "client_tools": {"allow": ["*"]}}}
        gw = self.gateway(config(self.fake, agents=agents, policies=policies, **kw))
        return gw, gw.create_key("alice")

    def hand_out(self, gw, key, body=None):
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "ask", "arguments": {}},
                                                 {"id": "2", "name": "ask", "arguments": {}}]})
        req = {"messages": "go", "clientTools": {"ask": {"description": "Ask the user",
                                                         "inputSchema": {"type": "object"}}}}
        req.update(body or {})
        st, b, _ = gw.post("/api/agents/assistant/generate", req, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["finishReason"], "tool-calls")
        return b

    def test_unanswered_call_expires_across_a_restart_and_a_late_result_is_409(self):
        gw, key = self.start(timeout_s=2)
        b = self.hand_out(gw, key)
        run = gw.query("SELECT status, wait_until, updated_at FROM runs WHERE id = ?",
                       b["runId"])[0]
        self.assertEqual(run["status"], "waiting")
        # the deadline is stored with the run: 2 s after the calls were handed out
        self.assertLess(abs(run["wait_until"] - run["updated_at"] - 2000), 1000)
        st, view, _ = gw.get("/api/runs/" + b["runId"], key=key)
        self.assertEqual(st, 200, view)
        self.assertEqual(len(view["pending"]), 2)
        self.assertTrue(all(p["dueAt"].endswith("Z") for p in view["pending"]), view)
        gw.stop()
        while time.time() * 1000 < run["wait_until"] + 200:
            time.sleep(0.1)
        gw.start()
        r = self.wait_run(gw, key, b["runId"], "expired")
        self.assertIn("client_tool_timeout_s", r["error"])
        rows = gw.query("SELECT event, outcome, tool_call_id, reason FROM audit_events "
                        "WHERE run_id = ? AND tool_name = 'ask' ORDER BY seq", b["runId"])
        ids = sorted(c["payload"]["toolCallId"] for c in b["toolCalls"])
        expired = [r for r in rows if r["event"] == "expired"]
        self.assertEqual(sorted(r["tool_call_id"] for r in expired), ids)
        self.assertTrue(all(r["outcome"] == "expired" for r in expired))
        self.assertIn("no client tool result within 2 s", expired[0]["reason"])
        # the result that comes now is refused, naming the run and why
        msg = {"role": "tool", "content": [{"type": "tool-result", "toolCallId": ids[0],
                                            "toolName": "ask", "result": "yes"}]}
        st, late, _ = gw.post("/api/agents/assistant/generate", {"messages": [msg]}, key=key)
        self.assertEqual(st, 409, late)
        self.assertIn("run %s expired: no client tool result within 2 s "
                      "(agents.assistant.client_tool_timeout_s)" % b["runId"],
                      late["error"]["message"])
        # the model was asked once: nothing went on after the expiry
        self.assertEqual(len(self.fake.requests(model=self.m)), 1)

    def test_request_may_ask_for_less_and_answer_in_time(self):
        gw, key = self.start(timeout_s=3600)
        b = self.hand_out(gw, key, {"clientToolTimeoutS": 1})
        r = self.wait_run(gw, key, b["runId"], "expired")
        self.assertIn("within 1 s", r["error"])
        # never more than the agent allows
        b = self.hand_out(gw, key, {"clientToolTimeoutS": 7200})
        run = gw.query("SELECT wait_until, updated_at FROM runs WHERE id = ?", b["runId"])[0]
        self.assertLess(run["wait_until"] - run["updated_at"], 3600 * 1000 + 1000)
        # answered in time: the run completes and its deadline is gone
        results = [{"type": "tool-result", "toolCallId": c["payload"]["toolCallId"],
                    "toolName": "ask", "result": "ok"} for c in b["toolCalls"]]
        self.fake.script(self.m, {"text": "thanks"})
        st, b2, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": [{"role": "tool", "content": results}]}, key=key)
        self.assertEqual(st, 200, b2)
        self.assertEqual(b2["text"], "thanks")
        run = gw.query("SELECT status, wait_until FROM runs WHERE id = ?", b["runId"])[0]
        self.assertEqual((run["status"], run["wait_until"]), ("completed", None))
        st, bad, _ = gw.post("/api/agents/assistant/generate",
                             {"messages": "go", "clientToolTimeoutS": 0}, key=key)
        self.assertEqual(st, 400, bad)

    def test_approval_expires_across_a_restart(self):
        self.m = self.model()
        f = self.fake.url
        tools = {"send_email": {"type": "http", "description": "Send", "url": f + "/tools/send",
                                "input_schema": {"type": "object"}}}
        agents = {"assistant": {"provider": "fake", "model": self.m, "tools": ["send_email"],
                                "max_steps": 4}}
        policies = {"default": {"agents": ["*"], "tools": {"allow": ["send_*"]},
                                "approval": {"require": ["send_*"], "ttl_seconds": 10}}}
        gw = self.gateway(config(self.fake, agents=agents, tools=tools, policies=policies))
        key = gw.create_key("alice")
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "send_email",
                                                  "arguments": {"to": "bob"}}]},
                         {"text": "{{result}}"})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "go"}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["status"], "suspended")
        gw.restart()
        self.wait_run(gw, key, b["runId"], "completed", timeout=40)
        rows = gw.query("SELECT event FROM audit_events WHERE run_id = ? ORDER BY seq",
                        b["runId"])
        self.assertIn("expired", [r["event"] for r in rows])
        self.assertEqual(self.fake.requests(tool="send"), [])


if __name__ == "__main__":
    unittest.main()
