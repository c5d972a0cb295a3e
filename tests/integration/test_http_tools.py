"""Configured HTTP server tools: arguments POSTed as JSON to the one
configured URL, secrets from the environment in headers, bounded in time and
size, redirects not followed, and refused calls never reaching the tool."""

import json
import unittest

from harness import GatewayTest, config


class HttpToolsTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.m = self.model()
        f = self.fake.url
        schema = {"type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"], "additionalProperties": False}
        tools = {
            "get_weather": {"type": "http", "description": "Weather", "url": f + "/tools/weather",
                            "headers": {"Authorization": "Bearer ${TOOL_TOKEN}"},
                            "input_schema": schema, "timeout_ms": 1000,
                            "max_response_bytes": 4096,
                            "annotations": {"readOnlyHint": True}},
            "get_slow": {"type": "http", "description": "Slow", "url": f + "/tools/slow",
                         "input_schema": {"type": "object"}, "timeout_ms": 300},
            "get_moved": {"type": "http", "description": "Moved", "url": f + "/tools/moved",
                          "input_schema": {"type": "object"}},
            "delete_all": {"type": "http", "description": "Dangerous", "url": f + "/tools/delete",
                           "input_schema": {"type": "object"}},
        }
        agents = {"assistant": {"provider": "fake", "model": self.m,
                                "tools": ["get_*", "delete_all"], "max_steps": 4}}
        policies = {"default": {"agents": ["*"], "tools": {"allow": ["get_*"]},
                                "client_tools": {"allow": ["*"]}}}
        self.gw = self.gateway(config(self.fake, agents=agents, tools=tools, policies=policies),
                               env={"TOOL_TOKEN": "tool-secret-123"})
        self.key = self.gw.create_key("alice")

    def run_call(self, name, args):
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": name, "arguments": args}]},
                         {"text": "done"})
        st, b, _ = self.gw.post("/api/agents/assistant/generate", {"messages": "go"}, key=self.key)
        self.assertEqual(st, 200, b)
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "tool")
        return json.loads(last["content"])

    def test_posts_arguments_to_the_configured_url(self):
        self.fake.tool_script("weather", {"body": {"temp": 21, "sky": "clear"}})
        res = self.run_call("get_weather", {"city": "Oslo"})
        self.assertEqual(res, {"temp": 21, "sky": "clear"})
        req = self.fake.requests(tool="weather")[-1]
        self.assertEqual(req["path"], "/tools/weather")
        self.assertEqual(req["body"], {"city": "Oslo"})
        self.assertEqual(req["headers"]["authorization"], "Bearer tool-secret-123")
        self.assertEqual(req["headers"]["content-type"], "application/json")
        # the secret never reaches the audit log or the logs
        audit = json.dumps(self.gw.query("SELECT * FROM audit_events"), default=str)
        self.assertNotIn("tool-secret-123", audit)
        self.gw.stop()
        self.assertNotIn("tool-secret-123", self.gw.logs())

    def test_invalid_arguments_never_reach_the_tool(self):
        before = len(self.fake.requests(tool="weather"))
        res = self.run_call("get_weather", {"city": "Oslo", "url": "http://evil/"})
        self.assertIn("additional property", res["error"])
        self.assertEqual(len(self.fake.requests(tool="weather")), before)

    def test_timeout_is_a_tool_error(self):
        self.fake.tool_script("slow", {"delay_ms": 3000, "body": {"ok": True}})
        res = self.run_call("get_slow", {})
        self.assertIn("get_slow failed", res["error"])
        row = self.gw.query("SELECT event, outcome, error FROM audit_events "
                            "WHERE tool_name = 'get_slow' AND event = 'failed'")
        self.assertEqual(len(row), 1)

    def test_redirects_are_not_followed(self):
        self.fake.tool_script("moved", {"redirect": self.fake.url + "/tools/elsewhere"})
        res = self.run_call("get_moved", {})
        self.assertIn("HTTP 302", res["error"])
        self.assertEqual(self.fake.requests(tool="elsewhere"), [])

    def test_oversized_and_non_json_responses(self):
        self.fake.tool_script("weather", {"size": 100000}, {"body": "not json at all"})
        res = self.run_call("get_weather", {"city": "a"})
        self.assertIn("error", res)
        res = self.run_call("get_weather", {"city": "b"})
        self.assertIn("not JSON", res["error"])

    def test_policy_denied_tool_is_not_offered_and_never_runs(self):
        self.fake.script(self.m, {"text": "hi"})
        self.gw.post("/api/agents/assistant/generate", {"messages": "hi"}, key=self.key)
        offered = [t["function"]["name"]
                   for t in self.fake.requests(model=self.m)[-1]["body"]["tools"]]
        self.assertIn("get_weather", offered)
        self.assertNotIn("delete_all", offered)
        # the model calls it anyway
        res = self.run_call("delete_all", {})
        self.assertIn("denied by policy \"default\"", res["error"])
        self.assertEqual(self.fake.requests(tool="delete"), [])
        row = self.gw.query("SELECT event, reason FROM audit_events WHERE tool_name = 'delete_all'")
        self.assertEqual(row[0]["event"], "denied")
        self.assertIn("tools.allow", row[0]["reason"])


if __name__ == "__main__":
    unittest.main()
