"""The A2A surface: agent cards, JSON-RPC in the 1.0 and 0.3 dialects,
tasks persisted in SQLite, client tools through DataParts, approvals as
input-required, cancellation, owner isolation, errors and streaming."""

import http.client
import json
import signal
import socket
import threading
import time
import unittest

from harness import HTTP, GatewayTest, config

A2A = "/a2a/assistant"


def user_msg(text=None, dialect="1.0", **extra):
    """A user message in the given dialect; text None = no text part."""
    parts = []
    if text is not None:
        parts.append({"text": text} if dialect == "1.0" else {"kind": "text", "text": text})
    m = {"role": "ROLE_USER" if dialect == "1.0" else "user",
         "messageId": "m-%d" % int(time.time() * 1e6), "parts": parts}
    if dialect == "0.3":
        m["kind"] = "message"
    m.update(extra)
    return m


def data_part(data, type_=None, dialect="1.0"):
    p = {"data": data}
    if type_:
        p["metadata"] = {"type": type_}
    if dialect == "0.3":
        p["kind"] = "data"
    return p


def parts_of(msg, type_):
    return [p for p in (msg or {}).get("parts", [])
            if (p.get("metadata") or {}).get("type") == type_]


def text_of(parts):
    return "".join(p.get("text", "") for p in parts)


class A2ATest(GatewayTest):

    def cfg(self, model, memory=True, tools=None, agent_tools=None, policies=None, **kw):
        agent = {"provider": "fake", "model": model, "description": "A brief assistant.",
                 "instructions": "Be brief.", "tools": agent_tools or ["memory_*"],
                 "memory": {"enabled": memory, "last_messages": 20}, "max_steps": 6}
        return config(self.fake, agents={"assistant": agent}, tools=tools, policies=policies,
                      **kw)

    def rpc(self, gw, key, method, params, id_=1, path=A2A, headers=None):
        st, body, _ = gw.post(path, {"jsonrpc": "2.0", "id": id_, "method": method,
                                     "params": params}, key=key, headers=headers)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["jsonrpc"], "2.0")
        self.assertEqual(body["id"], id_)
        return body

    def ok(self, gw, key, method, params, **kw):
        body = self.rpc(gw, key, method, params, **kw)
        self.assertIn("result", body, body)
        return body["result"]

    def err(self, gw, key, method, params, code, **kw):
        body = self.rpc(gw, key, method, params, **kw)
        self.assertIn("error", body, body)
        self.assertEqual(body["error"]["code"], code, body)
        return body["error"]

    def send(self, gw, key, text, **extra):
        return self.ok(gw, key, "SendMessage", {"message": user_msg(text, **extra)})["task"]

    # ------------------------------------------------------------ cards

    def test_cards(self):
        gw = self.gateway(self.cfg(self.model(), server={"public_url": "https://gh.example/"}))
        for path in ("/.well-known/agent-card.json", "/a2a/assistant/.well-known/agent-card.json"):
            st, card, hdrs = gw.get(path, headers={"A2A-Version": "1.0"})
            self.assertEqual(st, 200, card)
            self.assertIn("A2A-Version", hdrs.get("vary", ""))
            self.assertEqual(card["name"], "assistant")
            self.assertEqual(card["description"], "A brief assistant.")
            self.assertNotIn("url", card)
            ifaces = {i["protocolVersion"]: i for i in card["supportedInterfaces"]}
            self.assertEqual(ifaces["1.0"]["url"], "https://gh.example/a2a/assistant")
            self.assertEqual(ifaces["1.0"]["protocolBinding"], "JSONRPC")
            self.assertIn("0.3", ifaces)
            self.assertTrue(card["capabilities"]["streaming"])
            ext = card["capabilities"]["extensions"]
            self.assertEqual(len(ext), 1)
            self.assertIn("client-tools", ext[0]["uri"])
            self.assertFalse(ext[0]["required"])
            self.assertIn("tool-definitions", ext[0]["description"])
            self.assertEqual(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
                             "Bearer")
            self.assertEqual(card["securityRequirements"], [{"schemes": {"bearer": {"list": []}}}])
            self.assertEqual(card["skills"][0]["id"], "assistant")
            self.assertEqual(card["skills"][0]["description"], "A brief assistant.")
            self.assertIn("text/plain", card["defaultInputModes"])

            # no version header: a 0.3 client, which gets the 0.3 card
            st, old, _ = gw.get(path)
            self.assertEqual(st, 200)
            self.assertEqual(old["url"], "https://gh.example/a2a/assistant")
            self.assertEqual(old["preferredTransport"], "JSONRPC")
            self.assertTrue(old["protocolVersion"].startswith("0.3"))
            self.assertEqual(old["securitySchemes"]["bearer"]["type"], "http")
            self.assertEqual(old["security"], [{"bearer": []}])
            self.assertIn("client-tools", old["capabilities"]["extensions"][0]["uri"])

        # without public_url the card names the listen address, whatever
        # Host the client sends (a card built from it would send other
        # clients wherever the asker liked), and serve warns at start
        gw2 = self.gateway(self.cfg(self.model()))
        for host in (None, "evil.example:666", "127.0.0.1:1"):
            st, card, _ = gw2.get("/.well-known/agent-card.json",
                                  headers=dict({"A2A-Version": "1.0"},
                                               **({"Host": host} if host else {})))
            self.assertEqual(st, 200, card)
            self.assertEqual(card["supportedInterfaces"][0]["url"],
                             "http://127.0.0.1:%d/a2a/assistant" % gw2.port)
            self.assertEqual(card["provider"]["url"], "http://127.0.0.1:%d" % gw2.port)
            st, old, _ = gw2.get("/a2a/assistant/.well-known/agent-card.json",
                                 headers={"Host": host} if host else None)
            self.assertEqual(old["url"], "http://127.0.0.1:%d/a2a/assistant" % gw2.port)
        self.assertIn("server.public_url is not set: A2A agent cards announce "
                      "http://127.0.0.1:%d" % gw2.port, gw2.logs())
        self.assertNotIn("server.public_url is not set", gw.logs())
        st, body, _ = gw2.get("/a2a/nobody/.well-known/agent-card.json")
        self.assertEqual(st, 404)

    # ------------------------------------------------------- send / get

    def test_send_both_dialects(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "Hello from 1.0."}, {"text": "Hello from 0.3."})

        task = self.send(gw, key, "Hi there", dialect="1.0")
        self.assertTrue(task["id"].startswith("task_"))
        self.assertNotIn("kind", task)
        self.assertEqual(task["status"]["state"], "TASK_STATE_COMPLETED")
        self.assertRegex(task["status"]["timestamp"], r"^\d{4}-\d\d-\d\dT.*Z$")
        self.assertEqual(len(task["artifacts"]), 1)
        self.assertEqual(task["artifacts"][0]["parts"], [{"text": "Hello from 1.0."}])
        self.assertEqual([h["role"] for h in task["history"]], ["ROLE_USER", "ROLE_AGENT"])
        self.assertEqual(task["history"][0]["parts"], [{"text": "Hi there"}])
        self.assertEqual(task["history"][0]["taskId"], task["id"])
        self.assertEqual(task["history"][1]["parts"], [{"text": "Hello from 1.0."}])

        old = self.ok(gw, key, "message/send", {"message": user_msg("Hi again", dialect="0.3")})
        self.assertEqual(old["kind"], "task")
        self.assertEqual(old["status"]["state"], "completed")
        self.assertEqual(old["artifacts"][0]["parts"],
                         [{"kind": "text", "text": "Hello from 0.3."}])
        self.assertEqual([h["role"] for h in old["history"]], ["user", "agent"])
        self.assertEqual(old["history"][1]["kind"], "message")

        # the same task read in the other dialect
        got = self.ok(gw, key, "tasks/get", {"id": task["id"]})
        self.assertEqual(got["kind"], "task")
        self.assertEqual(got["status"]["state"], "completed")
        got = self.ok(gw, key, "GetTask", {"id": old["id"]})
        self.assertEqual(got["status"]["state"], "TASK_STATE_COMPLETED")
        self.assertEqual(got["artifacts"][0]["parts"], [{"text": "Hello from 0.3."}])

        # the upstream saw the user's words; the task is in the database
        reqs = self.fake.requests(model=m)
        self.assertEqual(reqs[0]["body"]["messages"][-1]["content"], "Hi there")
        rows = gw.query("SELECT state, owner, run_id FROM a2a_tasks WHERE id = ?", task["id"])
        self.assertEqual(rows[0]["state"], "completed")
        self.assertEqual(rows[0]["run_id"], task["metadata"]["runId"])
        runs = gw.query("SELECT status FROM runs WHERE id = ?", rows[0]["run_id"])
        self.assertEqual(runs[0]["status"], "completed")

    def test_history_length(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "Answer."})
        task = self.send(gw, key, "Question?")
        self.assertEqual(len(self.ok(gw, key, "GetTask", {"id": task["id"]})["history"]), 2)
        one = self.ok(gw, key, "GetTask", {"id": task["id"], "historyLength": 1})
        self.assertEqual(len(one["history"]), 1)
        self.assertEqual(one["history"][0]["role"], "ROLE_AGENT")
        none = self.ok(gw, key, "tasks/get", {"id": task["id"], "historyLength": 0})
        self.assertEqual(none["history"], [])
        self.assertEqual(len(none["artifacts"]), 1)
        self.err(gw, key, "GetTask", {"id": task["id"], "historyLength": -1}, -32602)
        # SendMessage honours configuration.historyLength too
        self.fake.script(m, {"text": "Again."})
        t2 = self.ok(gw, key, "SendMessage", {"message": user_msg("More?"),
                                              "configuration": {"historyLength": 0}})["task"]
        self.assertEqual(t2["history"], [])

    def test_context_continuity(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "Nice to meet you."}, {"text": "You are Ada."},
                         {"text": "Who?"})
        first = self.send(gw, key, "My name is Ada.")
        second = self.send(gw, key, "What is my name?", contextId=first["contextId"])
        self.assertEqual(second["contextId"], first["contextId"])
        self.assertNotEqual(second["id"], first["id"])
        upstream = self.fake.requests(model=m)[-1]["body"]["messages"]
        contents = json.dumps(upstream)
        self.assertIn("My name is Ada.", contents)
        self.assertIn("Nice to meet you.", contents)
        # the context is the memory thread, under the "a2a" resource
        rows = gw.query("SELECT resource_id, owner FROM threads WHERE id = ?", first["contextId"])
        self.assertEqual(rows, [{"resource_id": "a2a", "owner": "alice"}])
        # a new context does not see it
        third = self.send(gw, key, "And now?")
        self.assertNotEqual(third["contextId"], first["contextId"])
        self.assertNotIn("Ada", json.dumps(self.fake.requests(model=m)[-1]["body"]["messages"]))

    # ----------------------------------------------------- client tools

    def test_client_tool_round_trip(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "Let me check.",
                             "tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC"}}]},
                         {"text": "It is noon in UTC."})
        tools = [{"type": "function", "function": {
            "name": "get_time", "description": "Current time in a zone",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                           "required": ["tz"]}}}]
        msg = user_msg("What time is it?")
        msg["parts"].append(data_part({"tools": tools}, "tool-definitions"))
        task = self.ok(gw, key, "SendMessage", {"message": msg})["task"]
        self.assertEqual(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED")
        status = task["status"]["message"]
        self.assertEqual(status["role"], "ROLE_AGENT")
        self.assertEqual(status["parts"][0], {"text": "Let me check."})
        calls = parts_of(status, "tool-calls")
        self.assertEqual(len(calls), 1)
        call = calls[0]["data"]["toolCalls"][0]
        self.assertEqual(call["toolName"], "get_time")
        self.assertEqual(call["args"], {"tz": "UTC"})
        self.assertTrue(call["toolCallId"].startswith("call_"))
        self.assertEqual(task["history"][-1], status)
        # the model was offered the client's tool
        first = self.fake.requests(model=m)[0]["body"]
        offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
        self.assertEqual(offered["get_time"]["parameters"]["required"], ["tz"])

        # a message without results is refused and changes nothing
        e = self.err(gw, key, "SendMessage", {"message": user_msg("well?", taskId=task["id"])},
                     -32602)
        self.assertIn("results", e["message"])
        # results for a call of another task are refused
        bad = data_part({"results": [{"toolCallId": "call_unknown", "result": 1}]},
                        "tool-results")
        e = self.err(gw, key, "SendMessage",
                     {"message": user_msg(None, taskId=task["id"], parts=[bad])}, -32602)
        self.assertIn("call_unknown", e["message"])

        # 0.3 spelling of the results message
        res = user_msg(None, dialect="0.3", taskId=task["id"], contextId=task["contextId"])
        res["parts"] = [data_part({"results": [{"toolCallId": call["toolCallId"],
                                                "result": {"time": "12:00"}}]},
                                  "tool-results", dialect="0.3")]
        done = self.ok(gw, key, "message/send", {"message": res})
        self.assertEqual(done["id"], task["id"])
        self.assertEqual(done["status"]["state"], "completed")
        self.assertEqual(done["artifacts"][-1]["parts"],
                         [{"kind": "text", "text": "It is noon in UTC."}])
        roles = [h["role"] for h in done["history"]]
        self.assertEqual(roles, ["user", "agent", "user", "agent"])
        self.assertEqual(done["history"][2]["parts"][0]["kind"], "data")
        # the upstream got the result as a tool message
        second = self.fake.requests(model=m)[-1]["body"]["messages"]
        tool_msgs = [x for x in second if x["role"] == "tool"]
        self.assertEqual(tool_msgs[-1]["tool_call_id"], call["toolCallId"])
        self.assertIn("12:00", tool_msgs[-1]["content"])
        # a finished task takes no more messages
        e = self.err(gw, key, "SendMessage", {"message": user_msg(None, taskId=task["id"], parts=[
            data_part({"results": [{"toolCallId": call["toolCallId"], "result": 2}]},
                      "tool-results")])}, -32004)
        self.assertIn("completed", e["message"])

    def test_client_tool_refused_by_policy(self):
        m = self.model()
        gw = self.gateway(self.cfg(m, policies={"default": {
            "agents": ["*"], "tools": {"allow": ["*"]},
            "client_tools": {"allow": ["safe_*"]}}}))
        key = gw.create_key("alice")
        msg = user_msg("Go")
        msg["parts"].append(data_part({"tools": [{"type": "function", "function": {
            "name": "rm_rf", "parameters": {"type": "object"}}}]}, "tool-definitions"))
        e = self.err(gw, key, "SendMessage", {"message": msg}, -32602)
        self.assertIn("rm_rf", e["message"])
        self.assertEqual(self.fake.requests(model=m), [])
        self.assertEqual(gw.query("SELECT count(*) AS n FROM a2a_tasks")[0]["n"], 0)

    # -------------------------------------------------------- approvals

    def test_approval_input_required(self):
        m = self.model()
        tools = {"lookup": {"type": "http", "description": "Look something up",
                            "input_schema": {"type": "object",
                                             "properties": {"q": {"type": "string"}}},
                            "url": self.fake.url + "/tools/lookup"}}
        policies = {"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                                "client_tools": {"allow": ["*"]},
                                "approval": {"require": ["lookup"], "approver": "admin"}}}
        gw = self.gateway(self.cfg(m, tools=tools, agent_tools=["lookup"], policies=policies))
        key = gw.create_key("alice")
        admin = gw.create_key("root", admin=True)
        self.fake.script(m, {"tool_calls": [{"name": "lookup", "arguments": {"q": "gatehouse"}}]},
                         {"text": "Found it."})
        task = self.send(gw, key, "Look up gatehouse")
        self.assertEqual(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED")
        ap = parts_of(task["status"]["message"], "approval-required")
        self.assertEqual(len(ap), 1)
        approval = ap[0]["data"]["approval"]
        self.assertEqual(approval["toolName"], "lookup")
        self.assertEqual(approval["args"], {"q": "gatehouse"})
        self.assertEqual(approval["approver"], "admin")
        self.assertTrue(approval["id"])
        self.assertEqual(parts_of(task["status"]["message"], "tool-calls"), [])
        self.assertEqual(self.fake.requests(tool="lookup"), [])
        # the caller cannot push it on with a message
        e = self.err(gw, key, "SendMessage", {"message": user_msg("please", taskId=task["id"])},
                     -32602)
        self.assertIn("approval", e["message"])

        # an admin approves; the run goes on in the background and GetTask
        # shows where it got to
        st, body, _ = gw.post("/api/approvals/%s/approve" % approval["id"], {}, key=admin)
        self.assertEqual(st, 200, body)
        deadline = time.time() + 15
        while True:
            got = self.ok(gw, key, "GetTask", {"id": task["id"]})
            if got["status"]["state"] not in ("TASK_STATE_INPUT_REQUIRED",
                                              "TASK_STATE_WORKING") or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(got["status"]["state"], "TASK_STATE_COMPLETED", got)
        self.assertEqual(got["artifacts"][-1]["parts"], [{"text": "Found it."}])
        self.assertEqual(len(self.fake.requests(tool="lookup")), 1)
        rows = gw.query("SELECT state FROM a2a_tasks WHERE id = ?", task["id"])
        self.assertEqual(rows[0]["state"], "completed")

    # ----------------------------------------------------------- cancel

    def test_cancel_waiting_task(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"tool_calls": [{"name": "ask_user", "arguments": {}}]},
                         {"text": "Done."})
        msg = user_msg("Ask me")
        msg["parts"].append(data_part({"tools": [{"type": "function", "function": {
            "name": "ask_user", "parameters": {"type": "object"}}}]}, "tool-definitions"))
        task = self.ok(gw, key, "SendMessage", {"message": msg})["task"]
        self.assertEqual(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED")
        call_id = parts_of(task["status"]["message"], "tool-calls")[0]["data"]["toolCalls"][0][
            "toolCallId"]

        canceled = self.ok(gw, key, "CancelTask", {"id": task["id"]})
        self.assertEqual(canceled["status"]["state"], "TASK_STATE_CANCELED")
        run = gw.query("SELECT status FROM runs WHERE id = ?", task["metadata"]["runId"])
        self.assertEqual(run[0]["status"], "cancelled")
        self.assertEqual(self.ok(gw, key, "tasks/get", {"id": task["id"]})["status"]["state"],
                         "canceled")
        self.err(gw, key, "tasks/cancel", {"id": task["id"]}, -32002)
        self.err(gw, key, "SendMessage", {"message": user_msg(None, taskId=task["id"], parts=[
            data_part({"results": [{"toolCallId": call_id, "result": "x"}]}, "tool-results")])},
            -32004)
        self.assertEqual(len(self.fake.requests(model=m)), 1)

        # a completed task cannot be canceled
        self.fake.reset()
        self.fake.script(m, {"text": "Quick."})
        done = self.send(gw, key, "Quick one")
        e = self.err(gw, key, "CancelTask", {"id": done["id"]}, -32002)
        self.assertIn("completed", e["message"])

    def test_cancel_working_task(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "Too late.", "delay_ms": 5000})
        out = {}

        def slow():
            out["body"] = self.rpc(gw, key, "SendMessage", {"message": user_msg("Slow one")})

        th = threading.Thread(target=slow)
        th.start()
        deadline = time.time() + 10
        rows = []
        while not rows and time.time() < deadline:
            rows = gw.query("SELECT id FROM a2a_tasks WHERE state = 'working'")
            time.sleep(0.02)
        self.assertTrue(rows, "the task shows as working while its run waits on the model")
        other = HTTP(gw.port)   # the first connection waits on SendMessage
        try:
            body = other.request("POST", A2A, {"jsonrpc": "2.0", "id": 7, "method": "CancelTask",
                                               "params": {"id": rows[0]["id"]}},
                                 headers={"Authorization": "Bearer " + key})[1]
        finally:
            other.close()
        t0 = time.time()
        th.join(15)
        self.assertLess(time.time() - t0, 4.5, "the upstream wait was cut short")
        self.assertEqual(body["result"]["status"]["state"], "TASK_STATE_CANCELED", body)
        self.assertEqual(out["body"]["result"]["task"]["status"]["state"], "TASK_STATE_CANCELED")
        # the run never finished: it is recorded as cancelled, or not at all
        self.assertIn([r["status"] for r in gw.query("SELECT status FROM runs")],
                      ([], ["cancelled"]))

    # -------------------------------------------------------- isolation

    def test_owner_isolation(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        alice = gw.create_key("alice", owner="alice")
        alice2 = gw.create_key("alice-laptop", owner="alice")
        bob = gw.create_key("bob", owner="bob")
        self.fake.script(m, {"text": "Secret answer."}, {"text": "Mine."})
        task = self.send(gw, alice, "Secret question")
        # another key of the same owner sees it
        self.assertEqual(self.ok(gw, alice2, "GetTask", {"id": task["id"]})["id"], task["id"])
        e = self.err(gw, bob, "GetTask", {"id": task["id"]}, -32001)
        self.assertNotIn("Secret", json.dumps(e))
        self.err(gw, bob, "CancelTask", {"id": task["id"]}, -32001)
        self.err(gw, bob, "SendMessage", {"message": user_msg("hijack", taskId=task["id"])}, -32001)
        # the same for an id no task ever had
        self.err(gw, bob, "SendMessage", {"message": user_msg("hijack", taskId="task_none")},
                 -32001)
        self.assertEqual(len(self.fake.requests(model=m)), 1)
        # contexts are per owner: bob naming alice's context gets one of his
        # own, exactly as for a context id nobody used; alice's stays hers
        joined = self.send(gw, bob, "join", contextId=task["contextId"])
        fresh = self.send(gw, bob, "join", contextId="ctx-nobody-used")
        for t, ctx in ((joined, task["contextId"]), (fresh, "ctx-nobody-used")):
            self.assertEqual(t["status"]["state"], "TASK_STATE_COMPLETED", t)
            self.assertEqual(t["contextId"], ctx)
        seen = self.fake.requests(model=m)[1]["body"]["messages"]
        self.assertNotIn("Secret", json.dumps(seen))
        rows = gw.query("SELECT owner FROM threads WHERE id = ? ORDER BY owner", task["contextId"])
        self.assertEqual([r["owner"] for r in rows], ["alice", "bob"])
        self.fake.script(m, {"text": "Still secret."})
        again = self.send(gw, alice, "And?", contextId=task["contextId"])
        self.assertEqual(again["status"]["state"], "TASK_STATE_COMPLETED")
        sent = json.dumps(self.fake.requests(model=m)[-1]["body"]["messages"])
        self.assertIn("Secret question", sent)
        self.assertNotIn("join", sent)
        # bob's own context works
        mine = self.send(gw, bob, "My own question")
        self.assertEqual(mine["status"]["state"], "TASK_STATE_COMPLETED")

    # ----------------------------------------------------------- errors

    def test_errors(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        # no key: HTTP 401 before any JSON-RPC
        st, body, _ = gw.post(A2A, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                    "params": {"id": "x"}})
        self.assertEqual(st, 401)
        # parse error: HTTP 200, id null
        st, body, _ = gw.post(A2A, raw="{not json", key=key,
                              headers={"Content-Type": "application/json"})
        self.assertEqual(st, 200)
        self.assertEqual(body["error"]["code"], -32700)
        self.assertIsNone(body["id"])
        st, body, _ = gw.post(A2A, [{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}], key=key)
        self.assertEqual(body["error"]["code"], -32600)
        st, body, _ = gw.post(A2A, {"id": 3, "method": "GetTask", "params": {}}, key=key)
        self.assertEqual((body["id"], body["error"]["code"]), (3, -32600))
        e = self.err(gw, key, "tasks/frobnicate", {}, -32601)
        self.assertIn("tasks/frobnicate", e["message"])
        self.err(gw, key, "SubscribeToTask", {"id": "x"}, -32004)
        self.err(gw, key, "tasks/pushNotificationConfig/set", {}, -32003)
        self.err(gw, key, "GetTask", {"id": "task_unknown"}, -32001, id_="abc")
        self.err(gw, key, "CancelTask", {"id": "task_unknown"}, -32001)
        self.err(gw, key, "GetTask", {}, -32602)
        self.err(gw, key, "SendMessage", {}, -32602)
        self.err(gw, key, "SendMessage", {"message": user_msg("x", role="ROLE_AGENT")}, -32602)
        self.err(gw, key, "SendMessage", {"message": user_msg(None)}, -32602)
        self.err(gw, key, "SendMessage", {"message": user_msg("x", taskId="task_nope")}, -32001)
        self.err(gw, key, "message/send", {"message": {"role": "user", "parts": [
            {"kind": "text", "text": "no id"}]}}, -32602)
        self.err(gw, key, "SendMessage", {"message": user_msg(None, parts=[
            {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"}])}, -32005)
        e = self.err(gw, key, "SendMessage", {"message": user_msg("x", parts=[
            {"text": "x"}, data_part({"tools": [{"type": "function", "function": {
                "name": "bad", "parameters": {"type": "nonsense"}}}]}, "tool-definitions")])},
            -32602)
        self.assertIn("bad", e["message"])
        self.err(gw, key, "GetTask", {"id": "x"}, -32009, headers={"A2A-Version": "9.9"})
        # unknown agent: not found before JSON-RPC
        st, body, _ = gw.post("/a2a/nobody", {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                              "params": {"id": "x"}}, key=key)
        self.assertEqual(st, 404)
        # nothing reached the model
        self.assertEqual(self.fake.requests(model=m), [])

    # -------------------------------------------------------- streaming

    def sse(self, gw, key, method, params, id_=9):
        st, events, raw = gw.stream(A2A, {"jsonrpc": "2.0", "id": id_, "method": method,
                                          "params": params}, key=key)
        self.assertEqual(st, 200, raw)
        out = [json.loads(e) for e in events]
        for e in out:
            self.assertEqual((e["jsonrpc"], e["id"]), ("2.0", id_), e)
        return out, raw

    def test_streaming_events(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "alpha beta gamma", "stream": {"chunk_delay_ms": 5}},
                         {"text": "delta epsilon", "stream": {"chunk_delay_ms": 5}})

        evs, _ = self.sse(gw, key, "SendStreamingMessage", {"message": user_msg("Stream it")})
        res = [e["result"] for e in evs]
        self.assertIn("task", res[0])
        self.assertEqual(res[0]["task"]["status"]["state"], "TASK_STATE_WORKING")
        task_id = res[0]["task"]["id"]
        chunks = [r["artifactUpdate"] for r in res[1:-1]]
        self.assertGreaterEqual(len(chunks), 2)
        self.assertEqual("".join(c["artifact"]["parts"][0]["text"] for c in chunks),
                         "alpha beta gamma")
        self.assertFalse(chunks[0].get("append"))
        self.assertTrue(all(c["append"] for c in chunks[1:]))
        self.assertTrue(chunks[-1]["lastChunk"])
        self.assertFalse(any(c["lastChunk"] for c in chunks[:-1]))
        self.assertEqual({c["taskId"] for c in chunks}, {task_id})
        final = res[-1]["statusUpdate"]
        self.assertEqual(final["status"]["state"], "TASK_STATE_COMPLETED")
        self.assertNotIn("final", final)
        got = self.ok(gw, key, "GetTask", {"id": task_id})
        self.assertEqual(got["artifacts"][0]["artifactId"], chunks[0]["artifact"]["artifactId"])
        self.assertEqual(got["artifacts"][0]["parts"], [{"text": "alpha beta gamma"}])

        # 0.3: kinds and final
        evs, _ = self.sse(gw, key, "message/stream", {"message": user_msg("Again", dialect="0.3")})
        kinds = [e["result"]["kind"] for e in evs]
        self.assertEqual(kinds[0], "task")
        self.assertEqual(kinds[-1], "status-update")
        self.assertEqual(set(kinds[1:-1]), {"artifact-update"})
        self.assertEqual(evs[-1]["result"]["status"]["state"], "completed")
        self.assertTrue(evs[-1]["result"]["final"])
        self.assertEqual(evs[1]["result"]["artifact"]["parts"][0]["kind"], "text")

        # errors before the stream starts are plain JSON-RPC answers
        st, events, raw = gw.stream(A2A, {"jsonrpc": "2.0", "id": 1, "method": "message/stream",
                                          "params": {"message": user_msg(None)}}, key=key)
        self.assertEqual(st, 200)
        self.assertEqual(json.loads(raw)["error"]["code"], -32602)

    def test_streaming_client_tools(self):
        m = self.model()
        gw = self.gateway(self.cfg(m, memory=False))
        key = gw.create_key("alice")
        self.fake.script(m, {"tool_calls": [{"name": "get_time", "arguments": {"tz": "CET"}}]},
                         {"text": "It is one o'clock.", "stream": {"chunk_delay_ms": 2}})
        msg = user_msg("Time?")
        msg["parts"].append(data_part({"tools": [{"type": "function", "function": {
            "name": "get_time", "parameters": {"type": "object"}}}]}, "tool-definitions"))
        evs, _ = self.sse(gw, key, "SendStreamingMessage", {"message": msg})
        final = evs[-1]["result"]["statusUpdate"]
        self.assertEqual(final["status"]["state"], "TASK_STATE_INPUT_REQUIRED")
        call = parts_of(final["status"]["message"], "tool-calls")[0]["data"]["toolCalls"][0]
        self.assertEqual(call["args"], {"tz": "CET"})

        res = user_msg(None, taskId=final["taskId"], parts=[data_part(
            {"results": [{"toolCallId": call["toolCallId"], "result": "13:00"}]}, "tool-results")])
        evs, _ = self.sse(gw, key, "SendStreamingMessage", {"message": res})
        res_ = [e["result"] for e in evs]
        self.assertEqual(res_[0]["task"]["id"], final["taskId"])
        self.assertEqual(res_[0]["task"]["status"]["state"], "TASK_STATE_WORKING")
        text = "".join(r["artifactUpdate"]["artifact"]["parts"][0]["text"] for r in res_[1:-1])
        self.assertEqual(text, "It is one o'clock.")
        self.assertEqual(res_[-1]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED")
        got = self.ok(gw, key, "GetTask", {"id": final["taskId"]})
        self.assertEqual(got["artifacts"][-1]["parts"], [{"text": "It is one o'clock."}])
        self.assertEqual(len(got["history"]), 4)

        # the same results again: already answered, the task stays completed
        self.err(gw, key, "SendMessage", {"message": res}, -32004)

    def test_continuation_failure_keeps_task_waiting(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"tool_calls": [{"name": "ping", "arguments": {}}]},
                         {"status": 500}, {"status": 500}, {"status": 500}, {"text": "Pong."})
        msg = user_msg("Ping")
        msg["parts"].append(data_part({"tools": [{"type": "function", "function": {
            "name": "ping", "parameters": {"type": "object"}}}]}, "tool-definitions"))
        task = self.ok(gw, key, "SendMessage", {"message": msg})["task"]
        call_id = parts_of(task["status"]["message"], "tool-calls")[0]["data"]["toolCalls"][0][
            "toolCallId"]
        res = user_msg(None, taskId=task["id"], parts=[data_part(
            {"results": [{"toolCallId": call_id, "result": "pong"}]}, "tool-results")])
        e = self.err(gw, key, "SendMessage", {"message": res}, -32603)
        self.assertTrue(e["message"])
        got = self.ok(gw, key, "GetTask", {"id": task["id"]})
        self.assertEqual(got["status"]["state"], "TASK_STATE_INPUT_REQUIRED")
        self.assertEqual(got["history"], task["history"])
        # the results can be sent again once the upstream is back
        done = self.ok(gw, key, "SendMessage", {"message": res})["task"]
        self.assertEqual(done["status"]["state"], "TASK_STATE_COMPLETED")
        self.assertEqual(done["artifacts"][-1]["parts"], [{"text": "Pong."}])

    def test_stream_client_gone_cancels_the_task(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": " ".join(["word"] * 40),
                             "stream": {"chunk_delay_ms": 150}})
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
        c.request("POST", A2A, body=json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": user_msg("Talk slowly")}}),
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        first = r.fp.readline()
        while not first.startswith(b"data: "):
            first = r.fp.readline()
        task_id = json.loads(first[6:])["result"]["task"]["id"]
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        deadline = time.time() + 15
        while True:
            got = self.ok(gw, key, "GetTask", {"id": task_id})
            if got["status"]["state"] != "TASK_STATE_WORKING" or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(got["status"]["state"], "TASK_STATE_CANCELED")
        self.assertIn("went away", text_of(got["status"]["message"]["parts"]))
        self.assertLess(time.time(), deadline - 8, "the run stopped soon after the client left")

    def test_streaming_failure_is_a_failed_task(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"status": 500}, {"status": 500}, {"status": 500})
        evs, _ = self.sse(gw, key, "SendStreamingMessage", {"message": user_msg("Fail")})
        final = evs[-1]["result"]["statusUpdate"]
        self.assertEqual(final["status"]["state"], "TASK_STATE_FAILED")
        err = parts_of(final["status"]["message"], "error")[0]["data"]["error"]
        self.assertTrue(err["message"])
        got = self.ok(gw, key, "GetTask", {"id": final["taskId"]})
        self.assertEqual(got["status"]["state"], "TASK_STATE_FAILED")

    # ------------------------------------------------------ persistence

    def test_tasks_survive_restart(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "Persisted answer."},
                         {"tool_calls": [{"name": "ping", "arguments": {}}]}, {"text": "Pong."})
        done = self.send(gw, key, "Remember this")
        msg = user_msg("Ping me")
        msg["parts"].append(data_part({"tools": [{"type": "function", "function": {
            "name": "ping", "parameters": {"type": "object"}}}]}, "tool-definitions"))
        waiting = self.ok(gw, key, "SendMessage", {"message": msg})["task"]
        self.assertEqual(waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED")
        gw.restart()
        got = self.ok(gw, key, "GetTask", {"id": done["id"]})
        self.assertEqual(got["status"]["state"], "TASK_STATE_COMPLETED")
        self.assertEqual(got["artifacts"], done["artifacts"])
        self.assertEqual(got["history"], done["history"])
        # a waiting task can still be continued after the restart
        call_id = parts_of(waiting["status"]["message"], "tool-calls")[0]["data"]["toolCalls"][0][
            "toolCallId"]
        res = data_part({"results": [{"toolCallId": call_id, "result": "pong"}]}, "tool-results")
        fin = self.ok(gw, key, "SendMessage",
                      {"message": user_msg(None, taskId=waiting["id"], parts=[res])})
        self.assertEqual(fin["task"]["status"]["state"], "TASK_STATE_COMPLETED")
        self.assertEqual(fin["task"]["artifacts"][-1]["parts"], [{"text": "Pong."}])

    def test_task_interrupted_by_a_crash(self):
        m = self.model()
        gw = self.gateway(self.cfg(m))
        key = gw.create_key("alice")
        self.fake.script(m, {"text": "Never seen.", "delay_ms": 4000})

        def doomed():
            try:
                HTTP(gw.port).request("POST", A2A, {"jsonrpc": "2.0", "id": 1,
                                                    "method": "SendMessage",
                                                    "params": {"message": user_msg("Crash")}},
                                      headers={"Authorization": "Bearer " + key})
            except OSError:
                pass

        th = threading.Thread(target=doomed)
        th.start()
        deadline = time.time() + 10
        rows = []
        while not rows and time.time() < deadline:
            rows = gw.query("SELECT id FROM a2a_tasks WHERE state = 'working'")
            time.sleep(0.02)
        self.assertTrue(rows)
        gw.stop(sig=signal.SIGKILL, check=False)
        th.join(10)
        gw.start()
        got = self.ok(gw, key, "GetTask", {"id": rows[0]["id"]})
        self.assertEqual(got["status"]["state"], "TASK_STATE_FAILED")
        err = parts_of(got["status"]["message"], "error")[0]["data"]["error"]
        self.assertEqual(err["code"], "interrupted")
        self.assertEqual(gw.query("SELECT state FROM a2a_tasks WHERE id = ?", rows[0]["id"]),
                         [{"state": "failed"}])


if __name__ == "__main__":
    unittest.main()
