"""The OpenAI-compatible surface: POST /v1/chat/completions (JSON and SSE)
and GET /v1/models, against the real binary and the scripted fake upstream.

Checks the wire format the openai clients parse, that server tools stay
inside, client tool round trips (pinned thread and stateless), approvals
on this endpoint, and that a client leaving mid-stream cancels the upstream
transfer.
"""

import http.client
import json
import os
import socket
import threading
import time
import unittest

from harness import HTTP, GatewayTest, config

WEATHER = {"type": "function",
           "function": {"name": "get_weather", "description": "Weather for a city",
                        "parameters": {"type": "object",
                                       "properties": {"city": {"type": "string"}},
                                       "required": ["city"]}}}


def agent(model, tools=("memory_*",), memory=True):
    return {"provider": "fake", "model": model, "instructions": "Be brief.",
            "tools": list(tools), "memory": {"enabled": memory, "last_messages": 20},
            "max_steps": 6}


def sse(text):
    """data payloads and comment lines of an SSE body."""
    data, comments = [], []
    for line in text.split("\n"):
        if line.startswith("data: "):
            data.append(line[6:])
        elif line.startswith(":"):
            comments.append(line)
    return data, comments


def upstream_conns(pid, port, states=("01",)):
    """TCP connections from process pid to 127.0.0.1:port in the given
    /proc/net/tcp states (01 established, 08 close-wait: the peer closed
    its end and gatehouse still holds the socket)."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            rem_port = int(fields[2].rsplit(":", 1)[1], 16)
            if rem_port == port and fields[3] in states and fields[9] in inodes:
                n += 1
    return n


class OpenAITest(GatewayTest):

    def start(self, model=None, agents=None, tools=None, policies=None, **sections):
        self.m = model or self.model()
        cfg = config(self.fake, agents=agents or {"assistant": agent(self.m)}, tools=tools,
                     policies=policies, **sections)
        self.gw = self.gateway(cfg)
        self.key = self.gw.create_key("alice", owner="alice")
        return self.gw

    def chat(self, body, key=None, headers=None):
        return self.gw.post("/v1/chat/completions", body, key=key or self.key, headers=headers)

    def stream(self, body, key=None, headers=None):
        """(status, headers, data payloads, comments, raw text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=60)
        h = {"Content-Type": "application/json",
             "Authorization": "Bearer " + (key or self.key)}
        h.update(headers or {})
        c.request("POST", "/v1/chat/completions", body=json.dumps(dict(body, stream=True)),
                  headers=h)
        r = c.getresponse()
        text = r.read().decode()
        rh = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        data, comments = sse(text)
        return r.status, rh, data, comments, text

    def chunks(self, data):
        self.assertEqual(data[-1], "[DONE]")
        return [json.loads(d) for d in data[:-1]]

    def sent(self):
        """Bodies of the requests gatehouse made to the fake, for this test's model."""
        return [r["body"] for r in self.fake.requests(model=self.m)]

    # ------------------------------------------------------------ wire format

    def test_json_completion_shape(self):
        gw = self.start()
        self.fake.script(self.m, {"text": "Hello there.",
                                  "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
        st, body, h = self.chat({"model": "assistant",
                                 "messages": [{"role": "system", "content": "Say hello."},
                                              {"role": "user", "content": "hi"}]})
        self.assertEqual(st, 200, body)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["model"], "assistant")
        self.assertTrue(body["id"].startswith("chatcmpl-run_"), body["id"])
        self.assertEqual(h["x-gatehouse-run"], body["id"][len("chatcmpl-"):])
        self.assertNotIn("x-gatehouse-thread", h)          # stateless: no thread
        self.assertIsInstance(body["created"], int)
        self.assertEqual(len(body["choices"]), 1)
        ch = body["choices"][0]
        self.assertEqual(ch["index"], 0)
        self.assertEqual(ch["finish_reason"], "stop")
        self.assertEqual(ch["message"]["role"], "assistant")
        self.assertEqual(ch["message"]["content"], "Hello there.")
        self.assertNotIn("tool_calls", ch["message"])
        self.assertEqual(body["usage"], {"prompt_tokens": 7, "completion_tokens": 3,
                                         "total_tokens": 10})
        # the agent's instructions and the client's system message both reach the model
        up = self.sent()[0]["messages"]
        self.assertEqual(up[0], {"role": "system", "content": "Be brief."})
        self.assertIn({"role": "system", "content": "Say hello."}, up)
        self.assertEqual(up[-1]["role"], "user")

    def test_stream_wire_format(self):
        self.start()
        self.fake.script(self.m, {"text": "one two three",
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
        st, h, data, _, _ = self.stream({"model": "assistant",
                                         "messages": [{"role": "user", "content": "count"}],
                                         "stream_options": {"include_usage": True}})
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("text/event-stream"))
        chunks = self.chunks(data)
        run = h["x-gatehouse-run"]
        for c in chunks:
            self.assertEqual(c["object"], "chat.completion.chunk")
            self.assertEqual(c["id"], "chatcmpl-" + run)
            self.assertEqual(c["model"], "assistant")
        first, finish, usage = chunks[0], chunks[-2], chunks[-1]
        self.assertEqual(first["choices"][0]["delta"], {"role": "assistant", "content": ""})
        self.assertIsNone(first["usage"])
        body = chunks[1:-2]
        self.assertGreaterEqual(len(body), 2, "text arrives in several deltas")
        for c in body:
            self.assertIsNone(c["choices"][0]["finish_reason"])
            self.assertIsNone(c["usage"])
        self.assertEqual("".join(c["choices"][0]["delta"]["content"] for c in body),
                         "one two three")
        self.assertEqual(finish["choices"][0]["delta"], {})
        self.assertEqual(finish["choices"][0]["finish_reason"], "stop")
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"], {"prompt_tokens": 5, "completion_tokens": 3,
                                          "total_tokens": 8})
        # the upstream was asked to stream too
        self.assertTrue(self.sent()[0]["stream"])

    def test_stream_without_usage_option_has_no_usage(self):
        self.start()
        self.fake.script(self.m, {"text": "fine"})
        _, _, data, _, _ = self.stream({"model": "assistant",
                                        "messages": [{"role": "user", "content": "x"}]})
        chunks = self.chunks(data)
        self.assertTrue(all("usage" not in c for c in chunks))
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")

    def test_stream_tool_call_deltas_by_index(self):
        self.start()
        time_tool = {"type": "function", "function": {"name": "clock.now",
                                                      "parameters": {"type": "object"}}}
        self.fake.script(self.m, {"text": "Checking.", "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "clock_now", "arguments": {}}]})
        st, _, data, _, _ = self.stream({"model": "assistant", "tools": [WEATHER, time_tool],
                                         "messages": [{"role": "user", "content": "w?"}]})
        self.assertEqual(st, 200)
        chunks = self.chunks(data)
        calls = {}
        order = []
        for c in chunks:
            for tc in c["choices"][0]["delta"].get("tool_calls", []):
                i = tc["index"]
                if i not in calls:
                    # the first delta of a call carries id, type and name
                    self.assertTrue(tc["id"].startswith("call_"), tc)
                    self.assertEqual(tc["type"], "function")
                    calls[i] = {"id": tc["id"], "name": tc["function"]["name"],
                                "args": tc["function"].get("arguments", "")}
                    order.append(i)
                else:
                    self.assertNotIn("id", tc)
                    calls[i]["args"] += tc["function"]["arguments"]
        self.assertEqual(order, [0, 1])
        self.assertEqual(calls[0]["name"], "get_weather")
        # a client tool's name comes back as the client declared it
        self.assertEqual(calls[1]["name"], "clock.now")
        self.assertEqual(json.loads(calls[0]["args"]), {"city": "Paris"})
        self.assertEqual(json.loads(calls[1]["args"]), {})
        self.assertNotEqual(calls[0]["id"], calls[1]["id"])
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        self.assertEqual(text, "Checking.")
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "tool_calls")
        # the model saw the normalised name
        names = [t["function"]["name"] for t in self.sent()[0]["tools"]]
        self.assertIn("clock_now", names)

    # ------------------------------------------------------------ server tools

    def test_server_tools_run_inside_and_stay_hidden(self):
        self.start()
        for _ in range(2):
            self.fake.script(self.m,
                             {"text": "Let me note that.",
                              "tool_calls": [{"name": "memory_save",
                                              "arguments": {"content": "likes green tea"}}]},
                             {"text": "Noted."})
        st, body, _ = self.chat({"model": "assistant", "tools": [WEATHER],
                                 "messages": [{"role": "user", "content": "I like green tea"}]})
        self.assertEqual(st, 200, body)
        msg = body["choices"][0]["message"]
        self.assertNotIn("tool_calls", msg)
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.assertEqual(msg["content"], "Let me note that.\n\nNoted.")
        st, _, data, _, raw = self.stream({"model": "assistant",
                                           "messages": [{"role": "user", "content": "again"}]})
        self.assertEqual(st, 200)
        chunks = self.chunks(data)
        self.assertNotIn("tool_calls", raw)
        self.assertNotIn("memory_save", raw)
        self.assertEqual("".join(c["choices"][0]["delta"].get("content") or ""
                                 for c in chunks), "Let me note that.\n\nNoted.")
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")
        # it really ran: the model got its result, the memory is stored
        sent = self.sent()
        self.assertEqual(len(sent), 4)
        tool_msgs = [m for m in sent[1]["messages"] if m["role"] == "tool"]
        self.assertEqual(len(tool_msgs), 1)
        self.assertIn("likes green tea", tool_msgs[0]["content"])
        rows = self.gw.query("SELECT content FROM memories WHERE owner = 'alice'")
        self.assertEqual([r["content"] for r in rows], ["likes green tea"] * 2)

    # ------------------------------------------------------------ client tools

    def test_client_tool_round_trip_pinned_thread(self):
        self.start()
        tool = {"type": "function", "function": dict(WEATHER["function"], name="get.weather")}
        self.fake.script(self.m,
                         {"tool_calls": [{"name": "get_weather",
                                          "arguments": {"city": "Paris"}}]},
                         {"text": "Sunny in Paris."},
                         {"text": "Rain tomorrow."})
        hdr = {"X-Gatehouse-Thread": "trip-1"}
        history = [{"role": "user", "content": "Weather in Paris?"}]
        st, b1, h1 = self.chat({"model": "assistant", "messages": history, "tools": [tool]},
                               headers=hdr)
        self.assertEqual(st, 200, b1)
        self.assertEqual(h1["x-gatehouse-thread"], "trip-1")
        ch = b1["choices"][0]
        self.assertEqual(ch["finish_reason"], "tool_calls")
        self.assertIsNone(ch["message"]["content"])
        [call] = ch["message"]["tool_calls"]
        self.assertEqual(call["type"], "function")
        self.assertEqual(call["function"]["name"], "get.weather")
        self.assertEqual(json.loads(call["function"]["arguments"]), {"city": "Paris"})

        # the client runs the tool and resends everything, as openai clients do
        history += [ch["message"], {"role": "tool", "tool_call_id": call["id"],
                                    "content": json.dumps({"temp": 21})}]
        st, b2, h2 = self.chat({"model": "assistant", "messages": history, "tools": [tool]},
                               headers=hdr)
        self.assertEqual(st, 200, b2)
        self.assertEqual(b2["choices"][0]["message"]["content"], "Sunny in Paris.")
        self.assertEqual(b2["choices"][0]["finish_reason"], "stop")
        self.assertEqual(h2["x-gatehouse-run"], h1["x-gatehouse-run"], "the same run goes on")
        self.assertEqual(h2["x-gatehouse-thread"], "trip-1")
        up = self.sent()[1]["messages"]
        self.assertEqual([m["role"] for m in up].count("user"), 1)
        self.assertEqual(json.loads(up[-1]["content"]), {"temp": 21})
        self.assertEqual(up[-1]["tool_call_id"], call["id"])

        history += [b2["choices"][0]["message"], {"role": "user", "content": "Tomorrow?"}]
        st, b3, _ = self.chat({"model": "assistant", "messages": history, "tools": [tool]},
                              headers=hdr)
        self.assertEqual(st, 200, b3)
        self.assertEqual(b3["choices"][0]["message"]["content"], "Rain tomorrow.")
        up = self.sent()[2]["messages"]
        self.assertEqual([m["content"] for m in up if m["role"] == "user"],
                         ["Weather in Paris?", "Tomorrow?"])
        rows = self.gw.query("SELECT role FROM messages WHERE thread_id = 'trip-1' ORDER BY seq")
        self.assertEqual([r["role"] for r in rows],
                         ["user", "assistant", "tool", "assistant", "user", "assistant"])

    def test_user_field_pins_thread_and_resource(self):
        self.start()
        self.fake.script(self.m, {"text": "a"}, {"text": "b"})
        st, b, h = self.chat({"model": "assistant", "user": "u-42",
                              "messages": [{"role": "user", "content": "first"}]})
        self.assertEqual(st, 200, b)
        # "user" is unique only within an owner: the thread it names is
        # derived from owner, agent and user
        tid = h["x-gatehouse-thread"]
        self.assertTrue(tid.startswith("usr_"), tid)
        st, b, h = self.chat({"model": "assistant", "user": "u-42",
                              "messages": [{"role": "user", "content": "first"},
                                           {"role": "assistant", "content": "a"},
                                           {"role": "user", "content": "second"}]})
        self.assertEqual(st, 200, b)
        self.assertEqual(h["x-gatehouse-thread"], tid)
        rows = self.gw.query("SELECT resource_id FROM threads WHERE id = ?", tid)
        self.assertEqual(rows, [{"resource_id": "u-42"}])
        rows = self.gw.query("SELECT role FROM messages WHERE thread_id = ? ORDER BY seq", tid)
        self.assertEqual([r["role"] for r in rows], ["user", "assistant", "user", "assistant"])
        # another owner's end user with the same id gets a thread of its own
        other = self.gw.create_key("other-app")
        self.fake.script(self.m, {"text": "c"})
        st, b, h = self.gw.post("/v1/chat/completions",
                                {"model": "assistant", "user": "u-42",
                                 "messages": [{"role": "user", "content": "hi"}]}, key=other)
        self.assertEqual(st, 200, b)
        self.assertNotEqual(h["x-gatehouse-thread"], tid)

    def test_stateless_stores_no_thread(self):
        self.start()
        self.fake.script(self.m,
                         {"tool_calls": [{"name": "get_weather",
                                          "arguments": {"city": "Oslo"}}]},
                         {"text": "Cold in Oslo."},
                         {"text": "You asked about Oslo."})
        history = [{"role": "user", "content": "Weather in Oslo?"}]
        st, b1, h1 = self.chat({"model": "assistant", "messages": history, "tools": [WEATHER]})
        self.assertEqual(st, 200, b1)
        self.assertNotIn("x-gatehouse-thread", h1)
        call = b1["choices"][0]["message"]["tool_calls"][0]
        history += [b1["choices"][0]["message"],
                    {"role": "tool", "tool_call_id": call["id"], "content": "-5 C"}]
        st, b2, _ = self.chat({"model": "assistant", "messages": history, "tools": [WEATHER]})
        self.assertEqual(st, 200, b2)
        self.assertEqual(b2["choices"][0]["message"]["content"], "Cold in Oslo.")
        # a later turn resends the finished tool round: told to the model, not re-answered
        history += [b2["choices"][0]["message"],
                    {"role": "user", "content": "What did I ask?"}]
        st, b3, h3 = self.chat({"model": "assistant", "messages": history, "tools": [WEATHER]})
        self.assertEqual(st, 200, b3)
        self.assertEqual(b3["choices"][0]["message"]["content"], "You asked about Oslo.")
        # a run that ran no tool has its record committed after the answer: the
        # next read through gatehouse finds it (and the database has it after)
        st, r3, _ = self.gw.get("/api/runs/" + h3["x-gatehouse-run"], key=self.key)
        self.assertEqual(st, 200, r3)
        self.assertEqual(r3["status"], "completed")
        up = self.sent()[2]["messages"]
        self.assertEqual([m["role"] for m in up], ["system", "user", "assistant", "user"])
        self.assertIn('[called get_weather({"city":"Oslo"}) -> "-5 C"]', up[2]["content"])
        self.assertIn("Cold in Oslo.", up[2]["content"])
        self.assertEqual(self.gw.query("SELECT count(*) AS n FROM threads"), [{"n": 0}])
        self.assertEqual(self.gw.query("SELECT count(*) AS n FROM messages"), [{"n": 0}])
        runs = self.gw.query("SELECT status, thread_id FROM runs ORDER BY created_at")
        self.assertEqual(runs, [{"status": "completed", "thread_id": None}] * 2)

    def test_tool_choice_none_offers_no_client_tools(self):
        self.start()
        self.fake.script(self.m, {"text": "ok"}, {"text": "ok"})
        for choice in ("none", "auto"):
            st, b, _ = self.chat({"model": "assistant", "tools": [WEATHER],
                                  "tool_choice": choice,
                                  "messages": [{"role": "user", "content": "hi"}]})
            self.assertEqual(st, 200, b)
        none, auto = self.sent()
        self.assertNotIn("get_weather", [t["function"]["name"] for t in none.get("tools", [])])
        self.assertIn("get_weather", [t["function"]["name"] for t in auto["tools"]])

    # ------------------------------------------------------------ models, errors

    def test_models_filtered_by_policy(self):
        m = self.model()
        self.start(agents={"assistant": agent(m), "finance": agent(m)},
                   policies={"default": {"agents": ["assistant"], "tools": {"allow": ["*"]}},
                             "all": {"agents": ["*"], "tools": {"allow": ["*"]}}})
        other = self.gw.create_key("bob", owner="bob", policy="all")
        st, body, _ = self.gw.get("/v1/models", key=self.key)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["object"], "list")
        self.assertEqual([d["id"] for d in body["data"]], ["assistant"])
        d = body["data"][0]
        self.assertEqual((d["object"], d["owned_by"]), ("model", "gatehouse"))
        self.assertIsInstance(d["created"], int)
        st, body, _ = self.gw.get("/v1/models", key=other)
        self.assertEqual(sorted(x["id"] for x in body["data"]), ["assistant", "finance"])
        st, body, _ = self.gw.get("/v1/models/assistant", key=self.key)
        self.assertEqual((st, body["id"]), (200, "assistant"))
        st, body, _ = self.gw.get("/v1/models/finance", key=self.key)
        self.assertEqual(st, 403, body)
        self.assertIn("finance", body["error"]["message"])
        st, _, _ = self.chat({"model": "finance",
                              "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(st, 403)
        st, body, _ = self.gw.get("/v1/models/nope", key=self.key)
        self.assertEqual(st, 404, body)

    def test_errors(self):
        self.start()
        msgs = [{"role": "user", "content": "hi"}]
        st, body, _ = self.gw.post("/v1/chat/completions", {"model": "assistant",
                                                            "messages": msgs})
        self.assertEqual(st, 401, body)
        self.assertTrue(body["error"]["message"])
        st, body, _ = self.gw.post("/v1/chat/completions",
                                   {"model": "assistant", "messages": msgs}, key="gh_wrong")
        self.assertEqual(st, 401, body)
        st, body, _ = self.gw.get("/v1/models")
        self.assertEqual(st, 401, body)

        st, body, _ = self.chat({"model": "nope", "messages": msgs})
        self.assertEqual(st, 404, body)
        self.assertIn('"nope"', body["error"]["message"])
        # a stream refused before it starts is a plain JSON error
        st, h, _, _, raw = self.stream({"model": "nope", "messages": msgs})
        self.assertEqual(st, 404)
        self.assertIn("application/json", h["content-type"])
        self.assertIn("nope", json.loads(raw)["error"]["message"])

        cases = [
            ({"messages": msgs}, "model"),
            ({"model": "assistant"}, "messages"),
            ({"model": "assistant", "messages": []}, "messages"),
            ({"model": "assistant", "messages": msgs, "n": 2}, "n:"),
            ({"model": "assistant", "messages": msgs, "stream": "yes"}, "stream"),
            ({"model": "assistant", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}]},
             "messages[0].content[1]: \"image_url\" parts are not supported"),
            ({"model": "assistant", "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "f", "arguments": "{not json"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "1"}]},
             "messages[1].tool_calls[0].function.arguments"),
            ({"model": "assistant", "messages": [{"role": "tool", "content": "1"}]},
             "messages[0].tool_call_id"),
            ({"model": "assistant", "messages": [{"role": "wizard", "content": "x"}]},
             "messages[0].role"),
            ({"model": "assistant", "messages": msgs, "tools": [{"type": "function"}]}, "tools"),
            ({"model": "assistant", "messages": msgs, "user": "a\r\nX-Evil: 1"}, "user"),
        ]
        for body_in, needle in cases:
            st, body, _ = self.chat(body_in)
            self.assertEqual(st, 400, (body_in, body))
            self.assertIn(needle, body["error"]["message"], body_in)
        st, body, _ = self.gw.post("/v1/chat/completions", raw="{nope", key=self.key,
                                   headers={"Content-Type": "application/json"})
        self.assertEqual(st, 400, body)
        # a tool result nobody waits for
        st, body, _ = self.chat({"model": "assistant", "messages": [
            {"role": "user", "content": "x"},
            {"role": "tool", "tool_call_id": "call_unknown", "content": "1"}]})
        self.assertEqual(st, 409, body)
        self.assertIn("call_unknown", body["error"]["message"])
        self.assertEqual(self.sent(), [], "nothing reached the model")

    def test_upstream_failure_mid_stream_is_an_error_event(self):
        self.start()
        self.fake.script(self.m, {"text": "partial answer here",
                                  "stream": {"reset_after_chunks": 3}},
                         {"text": "x", "stream": {"reset_after_chunks": 3}},
                         {"text": "x", "stream": {"reset_after_chunks": 3}})
        st, _, data, _, _ = self.stream({"model": "assistant",
                                         "messages": [{"role": "user", "content": "x"}]})
        self.assertEqual(st, 200)
        self.assertEqual(data[-1], "[DONE]")
        last = json.loads(data[-2])
        self.assertIn("error", last)
        self.assertTrue(last["error"]["message"])

    # ------------------------------------------------------------ approvals

    def approval_config(self, wait_ms, heartbeat_ms=1000, approver="admin"):
        m = self.model()
        tools = {"send_email": {"type": "http", "description": "Send an email",
                                "input_schema": {"type": "object",
                                                 "properties": {"to": {"type": "string"}}},
                                "url": self.fake.url + "/tools/send_email_" + m[-20:]}}
        pol = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                           "client_tools": {"allow": ["*"]},
                           "approval": {"require": ["send_email"], "approver": approver}}}
        self.start(model=m, agents={"assistant": agent(m, tools=("memory_*", "send_email"))},
                   tools=tools, policies=pol,
                   server={"approval_wait_ms": wait_ms, "heartbeat_ms": heartbeat_ms})
        self.tool_name = "send_email_" + m[-20:]
        self.fake.script(m, {"text": "Sending.",
                             "tool_calls": [{"name": "send_email", "arguments": {"to": "bob"}}]},
                         {"text": "Email sent to bob."})

    def test_approval_still_pending_answers_with_a_message(self):
        self.approval_config(wait_ms=400)
        t0 = time.time()
        st, body, h = self.chat({"model": "assistant", "user": "u-appr",
                                 "messages": [{"role": "user", "content": "mail bob"}]})
        self.assertEqual(st, 200, body)
        self.assertGreaterEqual(time.time() - t0, 0.35, "it waited for a decision")
        [ap] = self.gw.query("SELECT id, status FROM approvals")
        self.assertEqual(ap["status"], "pending")
        self.assertEqual(h["x-gatehouse-approval"], ap["id"])
        ch = body["choices"][0]
        self.assertEqual(ch["finish_reason"], "stop")
        self.assertNotIn("tool_calls", ch["message"])
        self.assertIn("Waiting for approval %s (tool send_email needs an admin's approval). "
                      "Ask an administrator to review it, then send your message again."
                      % ap["id"], ch["message"]["content"])
        self.assertTrue(ch["message"]["content"].startswith("Sending."))
        self.assertEqual(self.fake.requests(tool=self.tool_name), [], "the tool did not run")

    def test_approval_by_the_caller_says_how(self):
        self.approval_config(wait_ms=0, approver="caller")
        st, body, h = self.chat({"model": "assistant",
                                 "messages": [{"role": "user", "content": "mail bob"}]})
        self.assertEqual(st, 200, body)
        aid = h["x-gatehouse-approval"]
        self.assertIn("Waiting for approval %s (tool send_email needs your approval). Approve "
                      "or deny it with POST /api/approvals/%s/approve (or /deny), then send "
                      "your message again." % (aid, aid),
                      body["choices"][0]["message"]["content"])
        # the caller may indeed decide it; the run then finishes in the background
        st, _, _ = self.gw.post("/api/approvals/%s/approve" % aid, {}, key=self.key)
        self.assertEqual(st, 200)
        deadline = time.time() + 10
        while time.time() < deadline:
            rows = self.gw.query("SELECT status, output FROM runs WHERE id = ?",
                                 h["x-gatehouse-run"])
            if rows[0]["status"] == "completed":
                break
            time.sleep(0.05)
        self.assertEqual(json.loads(rows[0]["output"])["text"], "Email sent to bob.")

    def test_approval_pending_stream_keeps_alive(self):
        self.approval_config(wait_ms=900, heartbeat_ms=100)
        st, h, data, comments, _ = self.stream({"model": "assistant",
                                                "messages": [{"role": "user",
                                                              "content": "mail bob"}]})
        self.assertEqual(st, 200)
        self.assertGreaterEqual(comments.count(": keep-alive"), 3, comments)
        chunks = self.chunks(data)
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        [ap] = self.gw.query("SELECT id FROM approvals")
        self.assertIn("Waiting for approval " + ap["id"], text)
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")

    def test_approval_decided_during_the_wait(self):
        self.approval_config(wait_ms=20000)
        admin = self.gw.create_key("root", owner="ops", admin=True)
        out = {}

        def ask():
            # its own connection: the harness's one serves this thread's requests
            c = HTTP(self.gw.port)
            t0 = time.time()
            out["res"] = c.request("POST", "/v1/chat/completions",
                                   {"model": "assistant",
                                    "messages": [{"role": "user", "content": "mail bob"}]},
                                   headers={"Authorization": "Bearer " + self.key})
            out["secs"] = time.time() - t0
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
        time.sleep(0.3)
        self.assertTrue(t.is_alive(), "the response waits for the decision")
        st, body, _ = self.gw.post("/api/approvals/%s/approve" % aid, {}, key=admin)
        self.assertEqual(st, 200, body)
        t.join(30)
        st, body, h = out["res"]
        self.assertEqual(st, 200, body)
        self.assertLess(out["secs"], 15)
        ch = body["choices"][0]
        self.assertEqual(ch["finish_reason"], "stop")
        self.assertEqual(ch["message"]["content"], "Sending.\n\nEmail sent to bob.")
        self.assertNotIn("x-gatehouse-approval", h)
        self.assertEqual(len(self.fake.requests(tool=self.tool_name)), 1, "ran exactly once")
        [run] = self.gw.query("SELECT status FROM runs WHERE id = ?", h["x-gatehouse-run"])
        self.assertEqual(run["status"], "completed")

    # ------------------------------------------------------------ upstream connections

    def test_idle_upstream_connections_closed_without_traffic(self):
        # Requests leave their upstream connections open in the pool for
        # the next one. With no request after them, those unused for
        # server.upstream_idle_ms are closed all the same (here 1 s); a
        # gateway with the default (a minute) keeps them meanwhile.
        gw = self.start(server={"upstream_idle_ms": 1000})
        other = self.gateway(config(self.fake, agents={"assistant": agent(self.m)}))
        other_key = other.create_key("bob", owner="bob")
        held = ("01", "08")
        for g, k in ((gw, self.key), (other, other_key)):
            for i in range(3):
                self.fake.script(self.m, {"text": "ok %d" % i})
                st, body, _ = g.post("/v1/chat/completions",
                                     {"model": "assistant",
                                      "messages": [{"role": "user", "content": "hi"}]}, key=k)
                self.assertEqual(st, 200, body)
            self.assertGreaterEqual(upstream_conns(g.proc.pid, self.fake.port, held), 1)
        deadline = time.time() + 15
        while upstream_conns(gw.proc.pid, self.fake.port, held) and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(upstream_conns(gw.proc.pid, self.fake.port, held), 0,
                         "idle upstream connections closed without another request")
        self.assertGreaterEqual(upstream_conns(other.proc.pid, self.fake.port, held), 1,
                                "the default keeps them for a minute")

    # ------------------------------------------------------------ disconnects

    def test_client_disconnect_cancels_upstream(self):
        # long gaps between upstream chunks and no heartbeats: only noticing
        # the closed socket while idle can stop the transfer in time
        self.start(server={"heartbeat_ms": 60000})
        words = " ".join("w%d" % i for i in range(60))
        self.fake.script(self.m, {"text": words, "stream": {"chunk_delay_ms": 1500}})
        self.assertEqual(upstream_conns(self.gw.proc.pid, self.fake.port), 0)
        s = socket.create_connection(("127.0.0.1", self.gw.port), timeout=30)
        body = json.dumps({"model": "assistant", "stream": True,
                           "messages": [{"role": "user", "content": "talk"}]}).encode()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: Bearer " + self.key.encode() + b"\r\n"
                  b"Content-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while b'"content":"w0"' not in got.replace(b" ", b""):
            part = s.recv(4096)
            self.assertTrue(part, got)
            got += part
        head = got.split(b"\r\n\r\n")[0].decode()
        run = [l.split(":", 1)[1].strip() for l in head.split("\r\n")
               if l.lower().startswith("x-gatehouse-run:")][0]
        # the upstream transfer is live while the client reads
        self.assertEqual(upstream_conns(self.gw.proc.pid, self.fake.port), 1)
        s.close()
        t0 = time.time()
        while upstream_conns(self.gw.proc.pid, self.fake.port) and time.time() - t0 < 5:
            time.sleep(0.05)
        self.assertEqual(upstream_conns(self.gw.proc.pid, self.fake.port), 0,
                         "the upstream connection was torn down")
        self.assertLess(time.time() - t0, 1.0)
        time.sleep(0.2)
        rows = self.gw.query("SELECT status FROM runs WHERE id = ?", run)
        self.assertNotIn({"status": "running"}, rows)
        # the gateway is fine afterwards
        self.fake.script(self.m, {"text": "still here"})
        st, body, _ = self.chat({"model": "assistant",
                                 "messages": [{"role": "user", "content": "x"}]})
        self.assertEqual((st, body["choices"][0]["message"]["content"]), (200, "still here"))


if __name__ == "__main__":
    unittest.main()
