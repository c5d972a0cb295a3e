"""GET /api/audit/values: what the admin UI's audit filters offer. Events
and outcomes are gatehouse's vocabulary; tools are the configured and
memory tools plus every tool the log names; admins only."""

import unittest

from harness import GatewayTest, config


class AuditValuesTest(GatewayTest):

    def test_values(self):
        m = self.model()
        agents = {"assistant": {"provider": "fake", "model": m, "tools": ["memory_*", "get_*"],
                                "memory": {"enabled": True}, "max_steps": 4}}
        tools = {"get_weather": {"type": "http", "description": "Weather",
                                 "url": self.fake.url + "/tools/get_weather",
                                 "input_schema": {"type": "object"}}}
        gw = self.gateway(config(self.fake, agents=agents, tools=tools))
        key = gw.create_key("alice")
        admin = gw.create_key("root", admin=True)
        # a client tool the model calls: the log names it, the config does not
        self.fake.script(m, {"tool_calls": [{"id": "c1", "name": "pick_colour",
                                             "arguments": {}}]})
        st, b, _ = gw.post("/api/agents/assistant/generate", {
            "messages": "pick one",
            "clientTools": {"pick_colour": {"description": "d",
                                            "inputSchema": {"type": "object"}}}}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["finishReason"], "tool-calls")

        st, v, _ = gw.get("/api/audit/values", key=admin)
        self.assertEqual(st, 200, v)
        # the vocabulary, whether or not the log holds it yet
        for ev in ("allowed", "denied", "rate_limited", "approval_requested", "approved",
                   "expired", "executed", "failed", "client_result", "model_failed",
                   "key_created", "key_revoked", "policy_reload", "admin_login",
                   "admin_login_failed"):
            self.assertIn(ev, v["events"])
        self.assertEqual(len(v["events"]), len(set(v["events"])))
        for oc in ("ok", "error", "allowed", "denied", "pending", "approved", "rate_limited",
                   "expired", "cancelled"):
            self.assertIn(oc, v["outcomes"])
        # every event and outcome the log holds is offered
        for row in gw.query("SELECT DISTINCT event, outcome FROM audit_events"):
            self.assertIn(row["event"], v["events"])
            self.assertIn(row["outcome"], v["outcomes"])
        # tools: configured, memory, and seen in the log; sorted, once each
        self.assertEqual(v["tools"], sorted(set(v["tools"])))
        for t in ("get_weather", "memory_save", "memory_search", "pick_colour"):
            self.assertIn(t, v["tools"])

        st, b, _ = gw.get("/api/audit/values", key=key)
        self.assertEqual(st, 403, b)


if __name__ == "__main__":
    unittest.main()
