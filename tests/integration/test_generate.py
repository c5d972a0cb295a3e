"""The native generate API end to end: the tool-call loop, server (memory)
tools, client tools with a round trip, max steps, and what lands in the
database."""

import json
import unittest

from harness import GatewayTest, config


def agents(model, **kw):
    a = {"provider": "fake", "model": model, "instructions": "Be brief.",
         "tools": ["memory_*", "working_memory_update"],
         "memory": {"enabled": True, "last_messages": 20}, "max_steps": 6}
    a.update(kw)
    return {"assistant": a}


class GenerateTest(GatewayTest):

    def start(self, **agent_kw):
        m = self.model()
        gw = self.gateway(config(self.fake, agents=agents(m, **agent_kw)))
        return gw, gw.create_key("alice"), m

    def test_plain_text_reply_and_persistence(self):
        gw, key, m = self.start()
        self.fake.script(m, {"text": "Hello there.", "usage": {"prompt_tokens": 11,
                                                                "completion_tokens": 3}})
        st, body, hdrs = gw.post("/api/agents/assistant/generate",
                                 {"messages": "hi", "memory": {"resource": "r1"}}, key=key)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["text"], "Hello there.")
        self.assertEqual(body["finishReason"], "stop")
        self.assertEqual(body["usage"]["inputTokens"], 11)
        self.assertEqual(body["usage"]["outputTokens"], 3)
        self.assertTrue(body["runId"].startswith("run_"))
        self.assertTrue(hdrs["x-request-id"].startswith("req_"))
        # the upstream got the system prompt, the message and the provider key
        reqs = self.fake.requests(model=m)
        self.assertEqual(len(reqs), 1)
        up = reqs[0]["body"]
        self.assertEqual(up["messages"][0], {"role": "system", "content": "Be brief."})
        self.assertEqual(up["messages"][-1]["content"], "hi")
        self.assertEqual(reqs[0]["headers"]["authorization"], "Bearer sk-test-provider-secret")
        self.assertIn("memory_save", [t["function"]["name"] for t in up["tools"]])
        # thread, messages and run are in the database
        th = gw.query("SELECT * FROM threads WHERE id = ?", body["threadId"])
        self.assertEqual(len(th), 1)
        self.assertEqual(th[0]["resource_id"], "r1")
        msgs = gw.query("SELECT role, content FROM messages WHERE thread_id = ? ORDER BY seq",
                        body["threadId"])
        self.assertEqual([x["role"] for x in msgs], ["user", "assistant"])
        run = gw.query("SELECT status, output FROM runs WHERE id = ?", body["runId"])[0]
        self.assertEqual(run["status"], "completed")
        self.assertEqual(json.loads(run["output"])["text"], "Hello there.")

    def test_history_is_sent_with_the_next_turn(self):
        gw, key, m = self.start()
        self.fake.script(m, {"text": "first answer"}, {"text": "second answer"})
        st, b1, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": "question one", "memory": {"resource": "r1"}}, key=key)
        self.assertEqual(st, 200, b1)
        st, b2, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": "question two",
                             "memory": {"thread": b1["threadId"], "resource": "r1"}}, key=key)
        self.assertEqual(st, 200, b2)
        self.assertEqual(b2["threadId"], b1["threadId"])
        up = self.fake.requests(model=m)[1]["body"]["messages"]
        self.assertEqual([x.get("content") for x in up[1:]],
                         ["question one", "first answer", "question two"])

    def test_server_tool_runs_inside_the_loop(self):
        gw, key, m = self.start()
        self.fake.script(m,
                         {"tool_calls": [{"id": "up_1", "name": "memory_save",
                                          "arguments": {"content": "likes tea"}}]},
                         {"text": "Saved."})
        st, body, _ = gw.post("/api/agents/assistant/generate",
                              {"messages": "remember I like tea", "resourceId": "r1"}, key=key)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["text"], "Saved.")
        self.assertEqual(body["finishReason"], "stop")
        reqs = self.fake.requests(model=m)
        self.assertEqual(len(reqs), 2)
        second = reqs[1]["body"]["messages"]
        # the assistant tool call and its result went back to the model, in order
        self.assertEqual(second[-2]["role"], "assistant")
        call = second[-2]["tool_calls"][0]
        self.assertEqual(call["function"]["name"], "memory_save")
        self.assertTrue(call["id"].startswith("call_"))  # gateway ids, not the upstream's
        self.assertEqual(second[-1]["role"], "tool")
        self.assertEqual(second[-1]["tool_call_id"], call["id"])
        self.assertEqual(json.loads(second[-1]["content"])["saved"], True)
        mem = gw.query("SELECT content, resource_id FROM memories")
        self.assertEqual(mem, [{"content": "likes tea", "resource_id": "r1"}])
        rows = gw.query("SELECT event, tool_name, source, outcome, run_id, args FROM audit_events "
                        "WHERE tool_name IS NOT NULL ORDER BY seq")
        self.assertEqual([(r["event"], r["outcome"]) for r in rows],
                         [("allowed", "allowed"), ("executed", "ok")])
        self.assertEqual(rows[1]["source"], "memory")
        self.assertEqual(rows[1]["run_id"], body["runId"])
        self.assertEqual(json.loads(rows[1]["args"]), {"content": "likes tea"})

    def test_several_calls_in_one_step_run_in_order(self):
        gw, key, m = self.start()
        self.fake.script(m,
                         {"tool_calls": [
                             {"id": "a", "name": "memory_save", "arguments": {"content": "one"}},
                             {"id": "b", "name": "memory_save", "arguments": {"content": "two"}},
                             {"id": "c", "name": "memory_search", "arguments": {"query": "one"}}]},
                         {"text": "done"})
        st, body, _ = gw.post("/api/agents/assistant/generate", {"messages": "go"}, key=key)
        self.assertEqual(st, 200, body)
        second = self.fake.requests(model=m)[1]["body"]["messages"]
        calls = second[-4]["tool_calls"]
        results = second[-3:]
        self.assertEqual([r["tool_call_id"] for r in results], [c["id"] for c in calls])
        found = json.loads(results[2]["content"])["memories"]
        self.assertEqual(found[0]["content"], "one")
        self.assertEqual([r["content"] for r in gw.query("SELECT content FROM memories ORDER BY id")],
                         ["one", "two"])

    def test_client_tool_round_trip(self):
        gw, key, m = self.start()
        client_tools = {"get_weather": {"id": "get_weather", "description": "Weather for a city",
                                        "inputSchema": {"type": "object",
                                                        "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}
        self.fake.script(m,
                         {"tool_calls": [{"id": "x1", "name": "get_weather",
                                          "arguments": {"city": "Paris"}}]},
                         {"text": "It is sunny in Paris."})
        st, b1, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": [{"role": "user", "content": "weather in Paris?"}],
                             "clientTools": client_tools,
                             "memory": {"thread": "t-weather", "resource": "r1"}}, key=key)
        self.assertEqual(st, 200, b1)
        self.assertEqual(b1["finishReason"], "tool-calls")
        tc = b1["toolCalls"][0]
        self.assertEqual(tc["payload"]["toolName"], "get_weather")
        self.assertEqual(tc["payload"]["args"], {"city": "Paris"})
        self.assertEqual(tc["toolName"], "get_weather")  # flat fields too
        call_id = tc["payload"]["toolCallId"]
        run = gw.query("SELECT status FROM runs WHERE id = ?", b1["runId"])[0]
        self.assertEqual(run["status"], "waiting")
        # the client answers without resending its message, matched by toolCallId
        tool_msg = {"role": "tool", "content": [{"type": "tool-result", "toolCallId": call_id,
                                                 "toolName": "get_weather",
                                                 "result": {"sky": "sunny"}}]}
        st, b2, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": b1["response"]["messages"] + [tool_msg],
                             "clientTools": client_tools,
                             "memory": {"thread": "t-weather", "resource": "r1"}}, key=key)
        self.assertEqual(st, 200, b2)
        self.assertEqual(b2["text"], "It is sunny in Paris.")
        self.assertEqual(b2["runId"], b1["runId"])
        up = self.fake.requests(model=m)[1]["body"]["messages"]
        self.assertEqual(up[-1]["role"], "tool")
        self.assertEqual(json.loads(up[-1]["content"]), {"sky": "sunny"})
        # the thread holds the user message once, and the whole exchange
        msgs = gw.query("SELECT role FROM messages WHERE thread_id = 't-weather' ORDER BY seq")
        self.assertEqual([x["role"] for x in msgs], ["user", "assistant", "tool", "assistant"])
        rows = gw.query("SELECT event, source FROM audit_events WHERE tool_name = 'get_weather' "
                        "ORDER BY seq")
        self.assertEqual([(r["event"], r["source"]) for r in rows],
                         [("allowed", "client"), ("client_result", "client")])
        # answering again, or an unknown id: 409
        st, b3, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": [tool_msg], "clientTools": client_tools}, key=key)
        self.assertEqual(st, 409, b3)
        self.assertIn("already answered", b3["error"]["message"])
        bogus = {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call_nope",
                                              "toolName": "x", "result": 1}]}
        st, b4, _ = gw.post("/api/agents/assistant/generate", {"messages": [bogus]}, key=key)
        self.assertEqual(st, 409, b4)
        self.assertIn("unknown toolCallId", b4["error"]["message"])

    def test_two_client_calls_answered_one_at_a_time(self):
        # Mastra's client answers the first client call it can run and
        # resends: the gateway hands back the remaining call without
        # calling the model again.
        gw, key, m = self.start()
        ct = {"a": {"description": "A", "inputSchema": {"type": "object"}},
              "b": {"description": "B", "inputSchema": {"type": "object"}}}
        self.fake.script(m, {"tool_calls": [{"id": "1", "name": "a", "arguments": {}},
                                            {"id": "2", "name": "b", "arguments": {}}]},
                         {"text": "both done"})
        st, b1, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": "go", "clientTools": ct}, key=key)
        self.assertEqual(st, 200, b1)
        ids = [c["payload"]["toolCallId"] for c in b1["toolCalls"]]
        self.assertEqual(len(ids), 2)
        r1 = {"role": "tool", "content": [{"type": "tool-result", "toolCallId": ids[0],
                                           "toolName": "a", "result": "A!"}]}
        st, b2, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": [r1], "clientTools": ct}, key=key)
        self.assertEqual(st, 200, b2)
        self.assertEqual(b2["finishReason"], "tool-calls")
        self.assertEqual([c["payload"]["toolCallId"] for c in b2["toolCalls"]], [ids[1]])
        self.assertEqual(len(self.fake.requests(model=m)), 1)
        r2 = {"role": "tool", "content": [{"type": "tool-result", "toolCallId": ids[1],
                                           "toolName": "b", "result": "B!"}]}
        # echoed history with the first result again is fine
        st, b3, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": [r1, r2], "clientTools": ct}, key=key)
        self.assertEqual(st, 200, b3)
        self.assertEqual(b3["text"], "both done")
        results = self.fake.requests(model=m)[1]["body"]["messages"][-2:]
        self.assertEqual([r["content"] for r in results], ["A!", "B!"])

    def test_max_steps_stops_the_loop(self):
        gw, key, m = self.start(max_steps=3)
        self.fake.script(m, {"tool_calls": [{"id": "z", "name": "memory_search",
                                             "arguments": {"query": "x"}}], "repeat": True})
        st, body, _ = gw.post("/api/agents/assistant/generate", {"messages": "loop"}, key=key)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["finishReason"], "max-steps")
        self.assertEqual(len(self.fake.requests(model=m)), 3)
        # the client may lower it, never raise it
        st, body, _ = gw.post("/api/agents/assistant/generate",
                              {"messages": "loop", "maxSteps": 1}, key=key)
        self.assertEqual(body["finishReason"], "max-steps")
        self.assertEqual(len(self.fake.requests(model=m)), 4)
        st, body, _ = gw.post("/api/agents/assistant/generate",
                              {"messages": "loop", "maxSteps": 50}, key=key)
        self.assertEqual(len(self.fake.requests(model=m)), 7)

    def test_bad_tool_calls_become_tool_errors_the_model_sees(self):
        gw, key, m = self.start()
        self.fake.script(m,
                         {"tool_calls": [
                             {"id": "1", "name": "memory_save", "arguments": {"nope": 1}},
                             {"id": "2", "name": "memory_save", "arguments_raw": "{broken"},
                             {"id": "3", "name": "no_such_tool", "arguments": {}}]},
                         {"text": "ok"})
        st, body, _ = gw.post("/api/agents/assistant/generate", {"messages": "x"}, key=key)
        self.assertEqual(st, 200, body)
        results = self.fake.requests(model=m)[1]["body"]["messages"][-3:]
        errs = [json.loads(r["content"])["error"] for r in results]
        self.assertIn("missing required property \"content\"", errs[0])
        self.assertIn("not valid JSON", errs[1])
        self.assertIn("unknown tool", errs[2])
        self.assertEqual(gw.query("SELECT count(*) AS n FROM memories")[0]["n"], 0)
        ev = [(r["event"], r["tool_name"]) for r in gw.query(
            "SELECT event, tool_name FROM audit_events WHERE tool_name IS NOT NULL ORDER BY seq")]
        self.assertEqual(ev, [("failed", "memory_save"), ("failed", "memory_save"),
                              ("denied", "no_such_tool")])

    def test_a_run_without_memory_is_found_right_after_its_answer(self):
        # A native run with no thread commits its record after the answer;
        # a read made after the answer still finds it, and observe replays
        # the stream from the run's journal.
        gw, key, m = self.start(memory={"enabled": False}, tools=[])
        self.fake.script(m, {"text": "one"}, {"text": "two"})
        st, body, _ = gw.post("/api/agents/assistant/generate", {"messages": "hi"}, key=key)
        self.assertEqual(st, 200, body)
        self.assertIsNone(body["threadId"])
        st, run, _ = gw.get("/api/runs/" + body["runId"], key=key)
        self.assertEqual(st, 200, run)
        self.assertEqual(run["status"], "completed")
        st, events, _ = gw.stream("/api/agents/assistant/stream", {"messages": "again"}, key=key)
        self.assertEqual(st, 200)
        first = json.loads(events[0])
        self.assertEqual(json.loads(events[-1] if events[-1] != "[DONE]" else events[-2])["type"],
                         "finish")
        st, run, _ = gw.get("/api/runs/" + first["runId"], key=key)
        self.assertEqual(st, 200, run)
        self.assertEqual((run["status"], run["output"]["text"]), ("completed", "two"))
        st, again, _ = gw.stream("/api/agents/assistant/observe", {"runId": first["runId"]},
                                 key=key)
        self.assertEqual(st, 200)
        self.assertEqual([json.loads(e)["type"] for e in again if e != "[DONE]"],
                         [json.loads(e)["type"] for e in events if e != "[DONE]"])

    def test_agents_listing(self):
        gw, key, m = self.start()
        st, body, _ = gw.get("/api/agents", key=key)
        self.assertEqual(st, 200)
        self.assertIn("assistant", body)
        self.assertIn("memory_search", body["assistant"]["tools"])
        st, body, _ = gw.get("/api/agents/assistant", key=key)
        self.assertEqual(body["modelId"], m)
        st, body, _ = gw.get("/api/agents/nobody", key=key)
        self.assertEqual(st, 404)
        self.assertEqual(body["error"]["code"], "not_found")


if __name__ == "__main__":
    unittest.main()
