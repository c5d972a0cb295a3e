"""The Anthropic Messages surface (/v1/messages) on the wire: what reaches an
Anthropic upstream unchanged and what a provider of another API gets (the
rest dropped, logged), the API's error shapes, withheld tools, a held call
kept alive with ping events until the turn ends naming its approval, and a
result for a call nobody handed out."""

import json
import time

from harness import HTTP, GatewayTest, config

AGENTS = {
    "claude": {"provider": "fake_anthropic", "passthrough": True, "models": ["claude-*"],
               "max_steps": 4},
    "local": {"provider": "fake", "model": "local-model", "instructions": "Be brief.",
              "models": ["gpt-*", "local-*"], "max_steps": 4},
}


def sse_events(text):
    """(event name, parsed data) pairs of an SSE body."""
    out = []
    for block in text.split("\n\n"):
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if name:
            out.append((name, data))
    return out


class AnthropicTest(GatewayTest):
    def gw(self, **server):
        policies = {"default": {"agents": ["*"], "tools": {"allow": []},
                                "client_tools": {"allow": ["*"], "deny": ["rm_*"]},
                                "approval": {"require": ["deploy"]}}}
        cfg = config(self.fake, agents=AGENTS, policies=policies)
        cfg["server"].update(server)
        g = self.gateway(cfg)
        return g, g.create_key("dev", owner="dev")

    def test_unknown_blocks_and_system_messages_reach_anthropic_as_sent(self):
        g, key = self.gw()
        m = "claude-" + self.model()
        self.fake.script(m, {"text": "ok"})
        msgs = [{"role": "user", "content": [
                    {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                    "data": "a doc"}}]},
                {"role": "system", "content": "a reminder"}]
        st, body, _ = g.post("/v1/messages", {"model": m, "max_tokens": 50, "messages": msgs,
                                               "output_config": {"effort": "low"}},
                             headers={"x-api-key": key, "anthropic-version": "2023-06-01"})
        self.assertEqual(st, 200, body)
        self.assertEqual(body["content"], [{"type": "text", "text": "ok"}])
        sent = self.fake.requests(m)[0]
        self.assertEqual(sent["body"]["messages"], msgs)
        self.assertEqual(sent["body"]["output_config"], {"effort": "low"})
        self.assertNotIn("system", sent["body"])

    def test_other_providers_get_what_they_take_and_the_rest_is_logged(self):
        g, key = self.gw()
        self.fake.script("local-model", {"text": "from the local model"})
        st, body, _ = g.post("/v1/messages", {
            "model": "gpt-anything", "max_tokens": 50, "system": "Talk like a pirate.",
            "thinking": {"type": "enabled", "budget_tokens": 100},
            "context_management": {"edits": []},
            "messages": [{"role": "user", "content": "hi"}]}, key=key)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["content"][0]["text"], "from the local model")
        self.assertEqual(body["model"], "gpt-anything")
        sent = self.fake.requests("local-model")[0]["body"]
        self.assertNotIn("thinking", sent)
        self.assertNotIn("context_management", sent)
        self.assertEqual(sent["messages"][0], {"role": "system", "content": "Be brief."})
        self.assertIn({"role": "system", "content": "Talk like a pirate."}, sent["messages"])
        self.assertEqual(sent["max_tokens"], 50)
        logs = g.logs()
        self.assertIn("takes no anthropic fields; dropped: thinking, context_management", logs)

    def test_errors_have_the_api_shape(self):
        g, key = self.gw()
        cases = [
            (g.post("/v1/messages", {"model": "claude-x", "max_tokens": 5,
                                     "messages": [{"role": "user", "content": "hi"}]}),
             401, "authentication_error"),
            (g.post("/v1/messages", {"model": "claude-x", "max_tokens": 5,
                                     "messages": [{"role": "user", "content": "hi"}]},
                    headers={"x-api-key": "gh_not_a_key"}), 401, "authentication_error"),
            (g.post("/v1/messages", {"model": "claude-x", "max_tokens": 5, "messages": []},
                    key=key), 400, "invalid_request_error"),
            (g.post("/v1/messages", {"model": "nobody", "max_tokens": 5,
                                     "messages": [{"role": "user", "content": "hi"}]}, key=key),
             404, "not_found_error"),
            (g.get("/v1/messages", key=key), 405, "invalid_request_error"),
            (g.post("/v1/messages", raw=b"x" * 300000, key=key), 413, "request_too_large"),
        ]
        for (st, body, _), want_st, want_type in cases:
            self.assertEqual(st, want_st, body)
            self.assertEqual(body["type"], "error", body)
            self.assertEqual(body["error"]["type"], want_type, body)
            self.assertTrue(body["error"]["message"])

    def test_refused_tools_are_withheld_not_a_403(self):
        g, key = self.gw()
        m = "claude-" + self.model()
        self.fake.script(m, {"text": "fine"})
        tools = [{"name": "read_file", "input_schema": {"type": "object"}},
                 {"name": "rm_tree", "input_schema": {"type": "object"}}]
        st, body, _ = g.post("/v1/messages", {"model": m, "max_tokens": 50, "tools": tools,
                                               "messages": [{"role": "user", "content": "x"}]},
                             key=key)
        self.assertEqual(st, 200, body)
        sent = self.fake.requests(m)[0]["body"]
        self.assertEqual([t["name"] for t in sent["tools"]], ["read_file"])
        self.assertIn("tool rm_tree not offered to the model: policy \"default\": "
                      "client_tools.deny \"rm_*\"", g.logs())

    def test_a_held_call_pings_then_ends_naming_its_approval(self):
        g, key = self.gw(approval_wait_ms=1500, heartbeat_ms=400)
        m = "claude-" + self.model()
        self.fake.script(m, {"text": "Deploying now.",
                             "tool_calls": [{"name": "deploy", "arguments": {"env": "prod"}}]})
        tools = [{"name": "deploy", "input_schema": {"type": "object"}}]
        t0 = time.time()
        st, _, text = g.stream("/v1/messages", {
            "model": m, "max_tokens": 50, "stream": True, "tools": tools,
            "messages": [{"role": "user", "content": "deploy"}]}, key=key)
        self.assertEqual(st, 200)
        ev = sse_events(text)
        names = [n for n, _ in ev]
        self.assertEqual(names[0], "message_start")
        self.assertEqual(names[-2:], ["message_delta", "message_stop"])
        self.assertGreaterEqual(names.count("ping"), 3, names)
        self.assertGreaterEqual(time.time() - t0, 1.4)
        text_out = "".join(d["delta"]["text"] for n, d in ev
                           if n == "content_block_delta" and d["delta"]["type"] == "text_delta")
        self.assertIn("Deploying now.", text_out)
        apr = g.query("SELECT id, status FROM approvals")
        self.assertEqual(len(apr), 1)
        self.assertIn("waiting for approval %s" % apr[0]["id"], text_out)
        # the held call never reached the client
        self.assertFalse(any(d.get("content_block", {}).get("type") == "tool_use"
                             for n, d in ev if n == "content_block_start"))
        self.assertEqual(ev[-2][1]["delta"]["stop_reason"], "end_turn")

    def test_a_result_for_a_call_nobody_handed_out_is_a_conflict(self):
        g, key = self.gw()
        st, body, _ = g.post("/v1/messages", {
            "model": "claude-x", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": [
                             {"type": "tool_use", "id": "call_nope", "name": "x", "input": {}}]},
                         {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": "call_nope",
                              "content": "r"}]}]}, key=key)
        self.assertEqual(st, 409, body)
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        self.assertIn("call_nope", body["error"]["message"])

    def test_count_tokens(self):
        g, key = self.gw()
        st, body, _ = g.post("/v1/messages/count_tokens", {
            "model": "claude-x", "messages": [{"role": "user", "content": "one two three"}]},
            headers={"x-api-key": key})
        self.assertEqual(st, 200, body)
        self.assertGreater(body["input_tokens"], 0)

    def test_a_new_sessions_requests_at_once_share_its_thread(self):
        g, key = self.gw()
        m = "claude-" + self.model()
        self.fake.script(m, {"text": "one", "delay_ms": 400}, {"text": "two", "delay_ms": 400})
        results = []

        def send(text):
            c = HTTP(g.port)   # a connection of its own
            results.append(c.request("POST", "/v1/messages", {
                "model": m, "max_tokens": 20, "messages": [{"role": "user", "content": text}]},
                headers={"x-api-key": key, "X-Claude-Code-Session-Id": "sess-together"}))
            c.close()

        import threading
        ts = [threading.Thread(target=send, args=(t,)) for t in ("first", "second")]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        self.assertEqual(sorted(st for st, _, _ in results), [200, 200], results)
        self.assertEqual(len(g.query("SELECT id FROM threads WHERE id = 'sess-together'")), 1)
        runs = g.query("SELECT thread_id FROM runs")
        self.assertEqual([r["thread_id"] for r in runs], ["sess-together"] * 2)

    def test_a_held_call_denied_meanwhile_is_answered_to_the_model(self):
        g, key = self.gw(approval_wait_ms=8000)
        admin = g.create_key("reviewer", admin=True)
        m = "claude-" + self.model()
        self.fake.script(m, {"tool_calls": [{"name": "deploy", "arguments": {"env": "prod"}}]},
                         {"text": "Understood, I will not deploy."})
        tools = [{"name": "deploy", "input_schema": {"type": "object"}}]
        out = []

        def send():
            c = HTTP(g.port)
            out.append(c.request("POST", "/v1/messages", {
                "model": m, "max_tokens": 50, "tools": tools,
                "messages": [{"role": "user", "content": "deploy"}]},
                headers={"x-api-key": key}))
            c.close()

        import threading
        t = threading.Thread(target=send)
        t.start()
        apr = []
        for _ in range(100):
            apr = g.query("SELECT id FROM approvals WHERE status = 'pending'")
            if apr:
                break
            time.sleep(0.05)
        self.assertEqual(len(apr), 1)
        st, body, _ = g.post("/api/approvals/%s/deny" % apr[0]["id"], {"reason": "not today"},
                             key=admin)
        self.assertEqual(st, 200, body)
        t.join(30)
        st, body, _ = out[0]
        self.assertEqual(st, 200, body)
        self.assertEqual(body["stop_reason"], "end_turn")
        self.assertEqual([b["type"] for b in body["content"]], ["text"])
        self.assertIn("Understood, I will not deploy.", body["content"][0]["text"])
        sent = self.fake.requests(m)[1]["body"]["messages"]
        res = sent[-1]["content"][0]
        self.assertEqual(res["type"], "tool_result")
        self.assertTrue(res.get("is_error"))
        self.assertIn("not today", res["content"])
