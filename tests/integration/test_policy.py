"""Policies: which agents a key may use, which tools and client tools, who
approves, and rate limits (requests, tool calls, tokens) that are exact
under concurrency and survive a restart."""

import json
import threading
import time
import unittest

from harness import GatewayTest, HTTP, config


def agents(model, **kw):
    a = {"provider": "fake", "model": model, "tools": ["memory_*"],
         "memory": {"enabled": True}, "max_steps": 4}
    a.update(kw)
    return {"assistant": a, "secret-agent": dict(a)}


class PolicyTest(GatewayTest):

    def test_no_default_policy_means_nothing_is_allowed(self):
        m = self.model()
        gw = self.gateway(config(self.fake, agents=agents(m),
                                 policies={"ops": {"agents": ["*"], "tools": {"allow": ["*"]}}}))
        self.assertIn("no policy named \"default\"", gw.logs())
        rc, out, err = gw.cli("keys", "create", "--config", gw.config_path, "--name", "x")
        self.assertEqual(rc, 0)
        self.assertIn("may use nothing", err)
        key = out.strip().splitlines()[-1]
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "hi"}, key=key)
        self.assertEqual(st, 403, b)
        self.assertIn("no policy applies", b["error"]["message"])
        st, b, _ = gw.get("/api/agents", key=key)
        self.assertEqual(b, {})
        rc, out, err = gw.cli("keys", "create", "--config", gw.config_path, "--name", "y",
                              "--policy", "nope")
        self.assertEqual(rc, 2)
        self.assertIn("no policy \"nope\"", err)

    def test_agents_and_client_tools_refused_at_request_time(self):
        m = self.model()
        pol = {"default": {"agents": ["assistant"], "tools": {"allow": ["memory_*"],
                                                              "deny": ["memory_delete"]},
                           "client_tools": {"allow": ["get_*"], "deny": ["get_secrets"]}}}
        gw = self.gateway(config(self.fake, agents=agents(m), policies=pol))
        key = gw.create_key("alice")
        st, b, _ = gw.post("/api/agents/secret-agent/generate", {"messages": "hi"}, key=key)
        self.assertEqual(st, 403, b)
        self.assertIn("matches nothing in agents", b["error"]["message"])
        st, lst, _ = gw.get("/api/agents", key=key)
        self.assertEqual(list(lst), ["assistant"])
        for name, frag in (("get_secrets", "client_tools.deny \"get_secrets\""),
                           ("run_shell", "matches nothing in client_tools.allow")):
            st, b, _ = gw.post("/api/agents/assistant/generate",
                               {"messages": "hi", "clientTools": {
                                   name: {"description": "d", "inputSchema": {"type": "object"}}}},
                               key=key)
            self.assertEqual(st, 403, b)
            self.assertIn(frag, b["error"]["message"])
        # deny wins over allow: memory_delete is not offered and refused if called
        self.fake.script(m, {"tool_calls": [{"id": "1", "name": "memory_delete",
                                             "arguments": {"id": 1}}]}, {"text": "ok"})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "x"}, key=key)
        self.assertEqual(st, 200, b)
        up = self.fake.requests(model=m)
        self.assertNotIn("memory_delete", [t["function"]["name"] for t in up[0]["body"]["tools"]])
        err = json.loads(up[1]["body"]["messages"][-1]["content"])["error"]
        self.assertIn("tools.deny \"memory_delete\"", err)

    def test_explain(self):
        m = self.model()
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["memory_*"]},
                           "approval": {"require": ["memory_delete"], "approver": "caller"},
                           "rate_limits": {"tool_calls_per_minute": {"*": 100,
                                                                     "memory_save": 3}}},
               "strict": {"agents": ["nothing"]}}
        gw = self.gateway(config(self.fake, agents=agents(m), policies=pol))
        key = gw.create_key("alice")
        other = gw.create_key("bob", policy="strict")
        admin = gw.create_key("root", admin=True)
        st, x, _ = gw.get("/api/policy/explain?agent=assistant&tool=memory_save", key=key)
        self.assertEqual(st, 200, x)
        self.assertEqual(x["policy"], "default")
        self.assertTrue(x["agent"]["allowed"])
        self.assertEqual(x["tool"]["decision"], "allow")
        self.assertIn("tools.allow \"memory_*\"", x["tool"]["rule"])
        self.assertEqual(x["tool"]["rateLimit"], {"perMinute": 3, "rule": "memory_save"})
        st, x, _ = gw.get("/api/policy/explain?agent=assistant&tool=memory_delete", key=key)
        self.assertEqual(x["tool"]["decision"], "approval")
        self.assertEqual(x["tool"]["approver"], "caller")
        st, x, _ = gw.get("/api/policy/explain?agent=assistant&tool=send_email", key=key)
        self.assertEqual(x["tool"]["decision"], "deny")
        # another key: admins only
        kid = gw.query("SELECT id FROM api_keys WHERE name = 'bob'")[0]["id"]
        st, x, _ = gw.get("/api/policy/explain?agent=assistant&key=" + kid, key=key)
        self.assertEqual(st, 403)
        st, x, _ = gw.get("/api/policy/explain?agent=assistant&key=" + kid, key=admin)
        self.assertEqual(st, 200, x)
        self.assertEqual(x["policy"], "strict")
        self.assertFalse(x["agent"]["allowed"])

    def test_request_rate_limit_headers(self):
        m = self.model()
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "rate_limits": {"requests_per_minute": 6, "burst": 4}}}
        gw = self.gateway(config(self.fake, agents=agents(m), policies=pol))
        key = gw.create_key("alice")
        codes = []
        for _ in range(7):
            st, b, h = gw.get("/api/agents", key=key)
            codes.append(st)
        self.assertEqual(codes, [200] * 5 + [429] * 2)
        self.assertEqual(h["ratelimit-limit"], "5")
        self.assertEqual(h["ratelimit-remaining"], "0")
        self.assertGreaterEqual(int(h["retry-after"]), 1)
        self.assertIn("requests_per_minute", b["error"]["message"])
        # another key has its own budget
        other = gw.create_key("bob")
        self.assertEqual(gw.get("/api/agents", key=other)[0], 200)
        # the state survives a restart
        gw.restart()
        st, b, h = gw.get("/api/agents", key=key)
        self.assertEqual(st, 429, b)

    def test_request_limit_is_exact_under_concurrency(self):
        m = self.model()
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "rate_limits": {"requests_per_minute": 30, "burst": 9}}}
        gw = self.gateway(config(self.fake, agents=agents(m), policies=pol))
        key = gw.create_key("alice")
        allowed = []
        lock = threading.Lock()

        def hammer():
            h = HTTP(gw.port)
            for _ in range(25):
                st, _, _ = h.request("GET", "/api/agents",
                                     headers={"Authorization": "Bearer " + key})
                with lock:
                    allowed.append(st)
            h.close()
        t0 = time.time()
        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        ok = allowed.count(200)
        # limit + burst in any window; at 30/min one more cell frees every
        # 2 s, so a run of `elapsed` seconds may add that many
        self.assertLessEqual(ok, 10 + int(elapsed / 2) + 1, (ok, elapsed))
        self.assertGreaterEqual(ok, 10)
        self.assertEqual(allowed.count(200) + allowed.count(429), 200)

    def test_tool_call_rate_limit(self):
        m = self.model()
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "rate_limits": {"tool_calls_per_minute": {"memory_save": 2}}}}
        gw = self.gateway(config(self.fake, agents=agents(m), policies=pol))
        key = gw.create_key("alice")
        call = {"tool_calls": [{"id": "1", "name": "memory_save",
                                "arguments": {"content": "x"}}]}
        for _ in range(3):
            self.fake.script(m, call, {"text": "ok"})
            st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "x"}, key=key)
            self.assertEqual(st, 200, b)
        last = json.loads(self.fake.requests(model=m)[-1]["body"]["messages"][-1]["content"])
        self.assertIn("rate limited, retry after", last["error"])
        self.assertEqual(gw.query("SELECT count(*) AS n FROM memories")[0]["n"], 2)
        rows = gw.query("SELECT event, reason FROM audit_events WHERE event = 'rate_limited'")
        self.assertEqual(len(rows), 1)
        self.assertIn("tool_calls_per_minute \"memory_save\" = 2", rows[0]["reason"])

    def test_token_budget(self):
        m = self.model()
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "rate_limits": {"tokens_per_minute": 100}}}
        gw = self.gateway(config(self.fake, agents=agents(m), policies=pol))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "big", "usage": {"prompt_tokens": 90,
                                                      "completion_tokens": 30}})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "x"}, key=key)
        self.assertEqual(st, 200, b)
        st, b, h = gw.post("/api/agents/assistant/generate", {"messages": "x"}, key=key)
        self.assertEqual(st, 429, b)
        self.assertIn("tokens_per_minute", b["error"]["message"])
        self.assertIn("retry-after", h)
        self.assertEqual(len(self.fake.requests(model=m)), 1)

    def test_client_tool_asking_for_approval(self):
        m = self.model()
        gw = self.gateway(config(self.fake, agents=agents(m)))
        key = gw.create_key("alice")
        ct = {"pay": {"description": "Pay", "inputSchema": {"type": "object"},
                      "requireApproval": True}}
        self.fake.script(m, {"tool_calls": [{"id": "1", "name": "pay", "arguments": {"n": 5}}]})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "pay", "clientTools": ct},
                           key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["finishReason"], "suspended")
        self.assertEqual(b["approvals"][0]["toolName"], "pay")
        row = gw.query("SELECT reason FROM audit_events WHERE event = 'approval_requested'")[0]
        self.assertIn("requireApproval", row["reason"])


if __name__ == "__main__":
    unittest.main()
