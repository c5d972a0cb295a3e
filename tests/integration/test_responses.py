"""The OpenAI Responses API surface: POST /v1/responses (JSON and SSE) and
GET /v1/responses/:id, against the real binary and the scripted fake
upstream.

Checks the stream's wire format (named events, sequence numbers), that
server tools stay inside and a refused client call never reaches the
client, stored responses and their key, approvals on this endpoint (still
pending: an mcp_approval_request item; decided during the wait: the call
handed out), and errors in OpenAI's shape, before and during a stream.
"""

import http.client
import json
import threading
import time
import unittest

from harness import HTTP, GatewayTest, config

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}
EMAIL = {"type": "function", "name": "send_email", "description": "Send an email",
         "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}


def agent(model, tools=("memory_*",), memory=True):
    return {"provider": "fake", "model": model, "instructions": "Be brief.",
            "tools": list(tools), "memory": {"enabled": memory, "last_messages": 20},
            "max_steps": 6}


def parse_sse(text):
    """[(event name, data)] and comment lines of an SSE body."""
    events, comments, name = [], [], None
    for line in text.split("\n"):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, line[6:]))
            name = None
        elif line.startswith(":"):
            comments.append(line)
    return events, comments


class ResponsesTest(GatewayTest):

    def start(self, agents=None, tools=None, policies=None, **sections):
        self.m = self.model()
        cfg = config(self.fake, agents=agents or {"assistant": agent(self.m)}, tools=tools,
                     policies=policies, **sections)
        self.gw = self.gateway(cfg)
        self.key = self.gw.create_key("alice", owner="alice")
        return self.gw

    def create(self, body, key=None):
        return self.gw.post("/v1/responses", body, key=key or self.key)

    def stream(self, body, key=None):
        """(status, headers, [(event, parsed data)], comments, raw text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=60)
        c.request("POST", "/v1/responses", body=json.dumps(dict(body, stream=True)),
                  headers={"Content-Type": "application/json",
                           "Authorization": "Bearer " + (key or self.key)})
        r = c.getresponse()
        text = r.read().decode()
        rh = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        events, comments = parse_sse(text)
        out = []
        for name, data in events:
            self.assertNotEqual(data, "[DONE]", "Responses streams end without [DONE]")
            d = json.loads(data)
            self.assertEqual(name, d["type"], "the event line names the data's type")
            out.append(d)
        return r.status, rh, out, comments, text

    def sent(self):
        return [r["body"] for r in self.fake.requests(model=self.m)]

    # ------------------------------------------------------------ wire format

    def test_stream_wire_format(self):
        self.start()
        self.fake.script(self.m, {"text": "one two three",
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
        st, h, evs, _, _ = self.stream({"model": "assistant", "input": "count"})
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("text/event-stream"))
        self.assertEqual([e["sequence_number"] for e in evs], list(range(len(evs))))
        self.assertEqual([e["type"] for e in evs], [
            "response.created", "response.in_progress", "response.output_item.added",
            "response.content_part.added", "response.output_text.delta",
            "response.output_text.delta", "response.output_text.delta",
            "response.output_text.done", "response.content_part.done",
            "response.output_item.done", "response.completed"])
        rid = evs[0]["response"]["id"]
        self.assertTrue(rid.startswith("resp_"))
        self.assertEqual(evs[0]["response"]["status"], "in_progress")
        self.assertEqual(evs[0]["response"]["output"], [])
        item = evs[2]["item"]
        self.assertEqual((item["type"], item["status"], item["content"]),
                         ("message", "in_progress", []))
        self.assertTrue(all(e.get("item_id", item["id"]) == item["id"] for e in evs[3:10]))
        self.assertEqual(evs[7]["text"], "one two three")
        done = evs[-1]["response"]
        self.assertEqual(done["id"], rid)
        self.assertEqual(done["status"], "completed")
        self.assertEqual(done["output"], [evs[9]["item"]])
        self.assertEqual(done["usage"]["input_tokens"], 5)
        self.assertEqual(done["usage"]["output_tokens"], 3)
        self.assertEqual(done["usage"]["total_tokens"], 8)
        self.assertEqual(h["x-gatehouse-run"][:4], "run_")

    def test_server_tools_stay_inside(self):
        self.start()
        self.fake.script(self.m, {"text": "Noting.", "tool_calls": [
            {"name": "memory_save", "arguments": {"content": "likes tea"}}]},
            {"text": "Saved."})
        st, body, _ = self.create({"model": "assistant", "input": "remember I like tea",
                                   "tools": [WEATHER]})
        self.assertEqual(st, 200, body)
        # each step's text is a message of its own; the server call is not there
        self.assertEqual([(o["type"], o["content"][0]["text"]) for o in body["output"]],
                         [("message", "Noting."), ("message", "Saved.")])
        offered = [t["function"]["name"] for t in self.sent()[0]["tools"]]
        self.assertIn("get_weather", offered)
        self.assertIn("memory_save", offered)

    def test_reasoning_streams_as_a_reasoning_item(self):
        # an Anthropic model that thinks before it answers
        self.start(agents={"assistant": dict(agent(self.model()), provider="fake_anthropic")})
        events = [
            ("message_start", {"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": self.m, "stop_reason": None,
                "usage": {"input_tokens": 5, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "thinking", "thinking": "",
                                                       "signature": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "thinking_delta",
                                               "thinking": "Let me think."}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "signature_delta", "signature": "c2ln"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("content_block_start", {"type": "content_block_start", "index": 1,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                     "delta": {"type": "text_delta", "text": "Answer."}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 1}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 3}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        raw = "".join("event: %s\ndata: %s\n\n" % (n, json.dumps(d)) for n, d in events)
        self.fake.script(self.m, {"body": raw, "content_type": "text/event-stream"})
        st, _, evs, _, _ = self.stream({"model": "assistant", "input": "think"})
        self.assertEqual(st, 200, evs)
        types = [e["type"] for e in evs]
        self.assertEqual(types[2:7], [
            "response.output_item.added", "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done"])
        out = evs[-1]["response"]["output"]
        self.assertEqual([o["type"] for o in out], ["reasoning", "message"])
        self.assertEqual(out[0]["summary"], [{"type": "summary_text", "text": "Let me think."}])
        self.assertEqual(out[1]["content"][0]["text"], "Answer.")

    # ------------------------------------------------------------ the gate

    def test_a_refused_call_never_reaches_the_client(self):
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "client_tools": {"allow": ["*"]},
                           "rate_limits": {"tool_calls_per_minute": {"get_weather": 1}}}}
        self.start(policies=pol)
        self.fake.script(self.m, {"tool_calls": [
            {"id": "up_1", "name": "get_weather", "arguments": {"city": "Oslo"}},
            {"id": "up_2", "name": "get_weather", "arguments": {"city": "Rome"}}]})
        st, evs_h, evs, _, _ = self.stream({"model": "assistant", "input": "weather twice",
                                            "tools": [WEATHER]})
        self.assertEqual(st, 200)
        calls = [e["item"] for e in evs if e["type"] == "response.output_item.done"
                 and e["item"]["type"] == "function_call"]
        self.assertEqual(len(calls), 1, calls)
        self.assertEqual(json.loads(calls[0]["arguments"]), {"city": "Oslo"})
        self.assertNotIn("Rome", json.dumps(evs))
        rows = self.gw.query("SELECT event, reason, args FROM audit_events WHERE tool_name = ? "
                             "ORDER BY seq", "get_weather")
        self.assertEqual([r["event"] for r in rows], ["allowed", "rate_limited"])
        self.assertIn("tool_calls_per_minute", rows[1]["reason"])
        self.assertIn("Rome", rows[1]["args"])
        # the client's result continues the run, which asks the model again with both
        self.fake.script(self.m, {"text": "Oslo is mild."})
        st, body, _ = self.create({"model": "assistant", "store": False, "input": [
            {"role": "user", "content": "weather twice"}, calls[0],
            {"type": "function_call_output", "call_id": calls[0]["call_id"],
             "output": "mild"}]})
        self.assertEqual(st, 200, body)
        tools = [m for m in self.sent()[-1]["messages"] if m["role"] == "tool"]
        self.assertEqual(len(tools), 2)
        self.assertIn("rate limited", tools[0]["content"] + tools[1]["content"])
        self.assertIn("mild", tools[0]["content"] + tools[1]["content"])
        [cr] = self.gw.query("SELECT tool_call_id, outcome FROM audit_events "
                             "WHERE event = 'client_result'")
        self.assertEqual((cr["tool_call_id"], cr["outcome"]), (calls[0]["call_id"], "ok"))

    def test_a_declared_tool_the_policy_refuses_is_withheld_not_a_403(self):
        # coding agents declare their whole tool set: the request goes on
        # with the tools the key may use, and the model never sees the rest
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "client_tools": {"allow": ["get_*"]}}}
        self.start(policies=pol)
        self.fake.script(self.m, {"text": "fine"})
        st, body, _ = self.create({"model": "assistant", "input": "x",
                                   "tools": [WEATHER, EMAIL]})
        self.assertEqual(st, 200, body)
        offered = [t["function"]["name"] for t in self.sent()[0]["tools"]]
        self.assertIn("get_weather", offered)
        self.assertNotIn("send_email", offered)

    # ------------------------------------------------------------ stored responses

    def test_stored_responses_belong_to_their_key(self):
        self.start()
        self.fake.script(self.m, {"text": "first"}, {"text": "second"})
        st, one, _ = self.create({"model": "assistant", "input": "hi"})
        self.assertEqual(st, 200, one)
        [row] = self.gw.query("SELECT * FROM responses")
        self.assertEqual((row["id"], row["owner"], row["agent_id"]),
                         (one["id"], "alice", "assistant"))
        self.assertEqual(json.loads(row["conversation"]),
                         [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "first"}])
        same_owner = self.gw.create_key("alice-2", owner="alice")
        st, body, _ = self.gw.get("/v1/responses/" + one["id"], key=same_owner)
        self.assertEqual((st, body["error"]["type"]), (404, "not_found_error"))
        st, body, _ = self.create({"model": "assistant", "input": "and?",
                                   "previous_response_id": one["id"]}, key=same_owner)
        self.assertEqual(st, 404, body)
        self.assertIn("previous_response_id", body["error"]["message"])
        st, got, _ = self.gw.get("/v1/responses/" + one["id"], key=self.key)
        self.assertEqual((st, got), (200, one))
        # not stored: nothing kept
        st, two, _ = self.create({"model": "assistant", "input": "again", "store": False})
        self.assertEqual(st, 200, two)
        self.assertEqual(len(self.gw.query("SELECT id FROM responses")), 1)
        st, _, _ = self.gw.get("/v1/responses/" + two["id"], key=self.key)
        self.assertEqual(st, 404)

    def test_a_stored_conversation_is_bounded(self):
        self.start(server={"max_body_bytes": 10 << 20})
        big = "x" * (8 << 20)
        st, body, _ = self.create({"model": "assistant", "input": big})
        self.assertEqual(st, 413, body)
        self.assertIn('continue it with "store": false', body["error"]["message"])
        self.assertEqual(self.sent(), [], "refused before the model")
        self.assertEqual(self.gw.query("SELECT id FROM responses"), [])

    # ------------------------------------------------------------ approvals

    def approval_start(self, wait_ms, heartbeat_ms=1000):
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "client_tools": {"allow": ["*"]},
                           "approval": {"require": ["send_email"], "approver": "admin"}}}
        self.start(policies=pol, server={"approval_wait_ms": wait_ms,
                                         "heartbeat_ms": heartbeat_ms})
        self.fake.script(self.m, {"text": "Sending.", "tool_calls": [
            {"name": "send_email", "arguments": {"to": "bob"}}]})

    def test_approval_pending_stream_keeps_alive_and_names_it(self):
        self.approval_start(wait_ms=900, heartbeat_ms=100)
        st, h, evs, comments, _ = self.stream({"model": "assistant", "input": "mail bob",
                                               "tools": [EMAIL]})
        self.assertEqual(st, 200)
        self.assertGreaterEqual(comments.count(": keep-alive"), 3, comments)
        [ap] = self.gw.query("SELECT id, status FROM approvals")
        self.assertEqual(ap["status"], "pending")
        out = evs[-1]["response"]["output"]
        self.assertEqual([o["type"] for o in out],
                         ["message", "mcp_approval_request", "message"])
        self.assertEqual(out[1], {"id": ap["id"], "type": "mcp_approval_request",
                                  "server_label": "gatehouse", "name": "send_email",
                                  "arguments": '{"to":"bob"}'})
        self.assertIn("Waiting for approval %s (tool send_email needs an admin's approval)"
                      % ap["id"], out[2]["content"][0]["text"])

    def test_approval_decided_during_the_wait_hands_the_call_out(self):
        self.approval_start(wait_ms=20000)
        admin = self.gw.create_key("root", owner="ops", admin=True)
        out = {}

        def ask():
            c = HTTP(self.gw.port)
            out["res"] = c.request("POST", "/v1/responses",
                                   {"model": "assistant", "input": "mail bob",
                                    "tools": [EMAIL]},
                                   headers={"Authorization": "Bearer " + self.key})
            c.close()

        t = threading.Thread(target=ask)
        t.start()
        aid = None
        deadline = time.time() + 10
        while not aid and time.time() < deadline:
            rows = self.gw.query("SELECT id FROM approvals WHERE status = 'pending'")
            aid = rows[0]["id"] if rows else None
            time.sleep(0.05)
        self.assertTrue(aid, "an approval was requested")
        st, body, _ = self.gw.post("/api/approvals/%s/approve" % aid, {}, key=admin)
        self.assertEqual(st, 200, body)
        t.join(30)
        st, body, h = out["res"]
        self.assertEqual(st, 200, body)
        self.assertEqual([o["type"] for o in body["output"]], ["message", "function_call"])
        call = body["output"][1]
        self.assertEqual((call["name"], json.loads(call["arguments"])), ("send_email",
                                                                       {"to": "bob"}))
        self.assertNotIn("x-gatehouse-approval", h)

    def test_mcp_approval_response_decides_a_callers_approval(self):
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "client_tools": {"allow": ["*"]},
                           "approval": {"require": ["send_*"], "approver": "caller"}},
               "strict": {"agents": ["*"], "tools": {"allow": ["*"]},
                          "client_tools": {"allow": ["*"]},
                          "approval": {"require": ["send_*"], "approver": "admin"}}}
        self.start(policies=pol, server={"approval_wait_ms": 200})
        self.fake.script(self.m, {"tool_calls": [
            {"name": "send_email", "arguments": {"to": "bob"}}]})
        st, one, _ = self.create({"model": "assistant", "input": "mail bob", "tools": [EMAIL]})
        self.assertEqual(st, 200, one)
        [req] = [o for o in one["output"] if o["type"] == "mcp_approval_request"]
        # approved with the API's own item: the call is handed out at once
        st, two, h = self.create({"model": "assistant", "previous_response_id": one["id"],
                                  "tools": [EMAIL], "input": [
                                      {"type": "mcp_approval_response",
                                       "approval_request_id": req["id"], "approve": True}]})
        self.assertEqual(st, 200, two)
        [call] = [o for o in two["output"] if o["type"] == "function_call"]
        self.assertEqual((call["name"], json.loads(call["arguments"])),
                         ("send_email", {"to": "bob"}))
        [ap] = self.gw.query("SELECT status, decided_by FROM approvals WHERE id = ?", req["id"])
        self.assertEqual(ap["status"], "approved")
        self.assertIn("key:", ap["decided_by"])
        # a second decision is refused
        st, b, _ = self.create({"model": "assistant", "input": [
            {"type": "mcp_approval_response", "approval_request_id": req["id"],
             "approve": False}]})
        self.assertEqual(st, 409, b)

        # declined, with a reason: the model is told and answers
        self.fake.script(self.m, {"tool_calls": [
            {"name": "send_email", "arguments": {"to": "eve"}}]}, {"text": "Not sent."})
        st, one, _ = self.create({"model": "assistant", "input": "mail eve", "tools": [EMAIL],
                                  "store": False})
        [req] = [o for o in one["output"] if o["type"] == "mcp_approval_request"]
        st, two, _ = self.create({"model": "assistant", "store": False, "input": [
            {"role": "user", "content": "mail eve"},
            {"type": "mcp_approval_response", "approval_request_id": req["id"],
             "approve": False, "reason": "not eve"}]})
        self.assertEqual(st, 200, two)
        self.assertEqual(two["output"][-1]["content"][0]["text"], "Not sent.")
        told = [m for m in self.sent()[-1]["messages"] if m["role"] == "tool"][-1]
        self.assertIn("not eve", told["content"])

        # an admin's approval is not the caller's to decide: the answer waits for
        # the admin as any, and says it still waits
        strict = self.gw.create_key("carol", owner="carol", policy="strict")
        self.fake.script(self.m, {"tool_calls": [
            {"name": "send_email", "arguments": {"to": "dan"}}]})
        st, one, _ = self.create({"model": "assistant", "input": "mail dan", "tools": [EMAIL]},
                                 key=strict)
        [req] = [o for o in one["output"] if o["type"] == "mcp_approval_request"]
        st, b, _ = self.create({"model": "assistant", "input": [
            {"type": "mcp_approval_response", "approval_request_id": req["id"],
             "approve": True}]}, key=strict)
        self.assertEqual(st, 200, b)
        self.assertEqual([o["id"] for o in b["output"] if o["type"] == "mcp_approval_request"],
                         [req["id"]])
        self.assertIn("needs an admin's approval", b["output"][-1]["content"][0]["text"])
        [ap] = self.gw.query("SELECT status FROM approvals WHERE id = ?", req["id"])
        self.assertEqual(ap["status"], "pending")
        # nor another owner's, which it cannot even see
        st, b, _ = self.create({"model": "assistant", "input": [
            {"type": "mcp_approval_response", "approval_request_id": req["id"],
             "approve": True}]})
        self.assertEqual(st, 404, b)

    # ------------------------------------------------------------ errors

    def test_errors_in_openais_shape(self):
        self.start()
        cases = [
            ({"model": "assistant"}, 400, "input: required"),
            ({"model": "assistant", "input": [{"type": "local_shell_call"}]}, 400,
             'input[0].type: "local_shell_call" items are not supported'),
            ({"model": "assistant", "input": [{"type": "function_call", "call_id": "c",
                                               "name": "t", "arguments": "{no"}]}, 400,
             "input[0].arguments: not valid JSON"),
            ({"model": "assistant", "input": "x", "background": True}, 400, "background"),
            ({"model": "assistant", "input": "x", "tools": {"a": 1}}, 400, "tools"),
            ({"model": "nope", "input": "x"}, 404, 'model "nope" does not exist'),
            ({"model": "assistant", "input": [{"type": "function_call_output",
                                               "call_id": "call_unknown", "output": "x"}]},
             409, 'unknown toolCallId "call_unknown"'),
        ]
        for body, status, msg in cases:
            st, b, _ = self.create(body)
            self.assertEqual(st, status, (body, b))
            err = b["error"]
            self.assertIn(msg, err["message"])
            self.assertIsNone(err["param"])
            self.assertEqual(err["type"], {400: "invalid_request_error",
                                           404: "not_found_error",
                                           409: "conflict_error"}[status])
        st, b, _ = self.gw.post("/v1/responses", raw=b"{not json", key=self.key)
        self.assertEqual((st, b["error"]["type"]), (400, "invalid_request_error"))
        st, b, _ = self.gw.post("/v1/responses", {"model": "assistant", "input": "x"},
                                key="gh_wrong")
        self.assertEqual((st, b["error"]["type"]), (401, "authentication_error"))
        self.assertEqual(self.sent(), [])

    def test_upstream_failure_before_and_during_the_stream(self):
        self.start()
        self.fake.script(self.m, {"status": 500, "repeat": False},
                         {"status": 500}, {"status": 500})
        st, b, _ = self.create({"model": "assistant", "input": "x"})
        self.assertEqual(st, 502, b)
        self.assertEqual(b["error"]["type"], "server_error")
        self.fake.reset()
        self.fake.script(self.m, {"text": "a b c d e f",
                                  "stream": {"reset_after_chunks": 3}})
        st, _, evs, _, _ = self.stream({"model": "assistant", "input": "x"})
        self.assertEqual(st, 200)
        self.assertEqual(evs[-1]["type"], "response.failed")
        failed = evs[-1]["response"]
        self.assertEqual(failed["status"], "failed")
        self.assertEqual(failed["error"]["code"], "upstream_error")
        self.assertIn("provider fake (openai)", failed["error"]["message"])
        self.assertEqual([e["sequence_number"] for e in evs], list(range(len(evs))))


if __name__ == "__main__":
    unittest.main()
