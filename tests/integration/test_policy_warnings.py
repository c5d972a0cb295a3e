"""A policy rule that can match nothing (a misspelt agent, a tool that does
not exist) still starts, but never silently: serve warns at start and
GET /api/policy/explain lists the same warnings for the key's policy."""

import unittest

from harness import GatewayTest, config

POLICIES = {
    "default": {"agents": ["asistant"],                       # misspelt: allows nothing
                "tools": {"allow": ["memroy_*", "memory_search"], "deny": ["no_such_tool"]},
                "client_tools": {"allow": ["get_*"]},
                "approval": {"require": ["send_*"]}},
    "good": {"agents": ["assist*"], "tools": {"allow": ["memory_*"]}},
}

AGENT = 'policy "default": agents "asistant" matches no agent (the agents are: assistant)'
ALLOW = 'policy "default": tools.allow "memroy_*" matches no server or memory tool'
DENY = 'policy "default": tools.deny "no_such_tool" matches no server or memory tool'
APPROVAL = ('policy "default": approval.require "send_*" matches no server or memory tool '
            '(it may be meant for a client tool, which each request declares: that cannot be '
            'checked here)')


class PolicyWarningsTest(GatewayTest):

    needs_fake = False

    def test_start_warns_for_every_rule_that_matches_nothing(self):
        gw = self.gateway(config(None, policies=POLICIES))
        logs = gw.logs()
        for w in (AGENT, ALLOW, DENY, APPROVAL):
            self.assertIn("warn  " + w, logs)
        self.assertNotIn('policy "good"', logs)
        self.assertNotIn('"memory_search" matches', logs)
        self.assertNotIn('"get_*" matches', logs)       # client_tools: not checkable

    def test_explain_lists_the_warnings_of_the_keys_policy(self):
        gw = self.gateway(config(None, policies=POLICIES))
        key = gw.create_key("alice")
        st, body, _ = gw.get("/api/policy/explain?agent=assistant&tool=memory_save", key=key)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["agent"]["allowed"], False)
        self.assertEqual(body["warnings"], [AGENT, ALLOW, DENY, APPROVAL])
        self.assertIn("client_tools globs are not checked", body["clientToolsNote"])
        good = gw.create_key("bob", policy="good")
        st, body, _ = gw.get("/api/policy/explain?agent=assistant", key=good)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["warnings"], [])
        self.assertNotIn("clientToolsNote", body)
        self.assertEqual(body["agent"]["allowed"], True)


if __name__ == "__main__":
    unittest.main()
