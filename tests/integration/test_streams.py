"""Native streaming (Mastra chunks over SSE) against streaming upstreams
(OpenAI and Anthropic wire formats): chunk order, the stream cap, client
disconnects, and upstream streams that break (truncated, reset, malformed)."""

import http.client
import json
import socket
import threading
import time
import unittest

from harness import GatewayTest, config


def agents(model, provider="fake", **kw):
    a = {"provider": provider, "model": model, "tools": ["memory_*", "send_*"],
         "memory": {"enabled": True}, "max_steps": 4}
    a.update(kw)
    return {"assistant": a}


def chunks(events):
    out = []
    for e in events:
        if e == "[DONE]":
            out.append("[DONE]")
        else:
            out.append(json.loads(e))
    return out



def streams_settled(gw, seconds=5.0):
    """activeStreams on /healthz once it is 0, or after `seconds`: a stream's
    slot is given back just after its last byte, so a client that read the
    end may ask before the handler has returned."""
    end = time.time() + seconds
    while True:
        st, h, _ = gw.get("/healthz")
        if h["activeStreams"] == 0 or time.time() > end:
            return h["activeStreams"]
        time.sleep(0.02)

class StreamTest(GatewayTest):

    def start(self, provider="fake", **server):
        self.m = self.model()
        cfg = config(self.fake, agents=agents(self.m, provider))
        cfg["server"].update(server)
        gw = self.gateway(cfg)
        return gw, gw.create_key("alice")

    def test_chunks_in_order_with_a_server_tool(self):
        gw, key = self.start()
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "memory_save",
                                                  "arguments": {"content": "tea"}}]},
                         {"text": "Saved that you like tea.", "stream": {"words_per_chunk": 1}})
        st, events, raw = gw.stream("/api/agents/assistant/stream",
                                    {"messages": "remember tea", "memory": {"resource": "r"}},
                                    key=key)
        self.assertEqual(st, 200, raw)
        cs = chunks(events)
        self.assertEqual(cs[-1], "[DONE]")
        types = [c["type"] for c in cs[:-1]]
        self.assertEqual(types[0], "start")
        self.assertEqual(types[1], "step-start")
        self.assertIn("tool-call", types)
        self.assertLess(types.index("tool-call"), types.index("tool-result"))
        self.assertEqual(types[-1], "finish")
        self.assertEqual(types.count("step-finish"), 2)
        run_ids = {c["runId"] for c in cs[:-1]}
        self.assertEqual(len(run_ids), 1)
        self.assertTrue(all(c["from"] == "AGENT" for c in cs[:-1]))
        deltas = [c["payload"]["text"] for c in cs[:-1] if c["type"] == "text-delta"]
        self.assertGreater(len(deltas), 3, "the upstream's deltas are passed on as they come")
        self.assertEqual("".join(deltas), "Saved that you like tea.")
        fin = cs[-2]["payload"]
        self.assertEqual(fin["stepResult"]["reason"], "stop")
        self.assertIn("usage", fin["output"])
        reqs = self.fake.requests(model=self.m)
        self.assertTrue(all(r["body"].get("stream") for r in reqs))
        self.assertEqual(reqs[0]["body"]["stream_options"], {"include_usage": True})

    def test_anthropic_upstream_streams_too(self):
        gw, key = self.start(provider="fake_anthropic")
        self.fake.script(self.m, {"tool_calls": [{"id": "t", "name": "memory_save",
                                                  "arguments": {"content": "x"}}]},
                         {"text": "Done and dusted.", "stream": {"words_per_chunk": 1}})
        st, events, raw = gw.stream("/api/agents/assistant/stream", {"messages": "go"}, key=key)
        self.assertEqual(st, 200, raw)
        cs = chunks(events)
        text = "".join(c["payload"]["text"] for c in cs[:-1] if c["type"] == "text-delta")
        self.assertEqual(text, "Done and dusted.")
        reqs = self.fake.requests(model=self.m)
        self.assertEqual(reqs[0]["path"], "/v1/messages")
        self.assertEqual(reqs[0]["headers"]["x-api-key"], "sk-ant-test-secret")
        second = reqs[1]["body"]["messages"]
        self.assertEqual(second[-1]["content"][0]["type"], "tool_result")
        self.assertEqual(gw.query("SELECT count(*) AS n FROM memories")[0]["n"], 1)

    def test_approval_chunk_in_a_stream(self):
        self.m = self.model()
        cfg = config(self.fake, agents=agents(self.m),
                     tools={"send_note": {"type": "http", "description": "d",
                                          "url": self.fake.url + "/tools/note",
                                          "input_schema": {"type": "object"}}},
                     policies={"default": {"agents": ["*"], "tools": {"allow": ["*"]},
                                           "approval": {"require": ["send_*"]}}})
        gw = self.gateway(cfg)
        key = gw.create_key("alice")
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "send_note",
                                                  "arguments": {"n": 1}}]})
        st, events, raw = gw.stream("/api/agents/assistant/stream", {"messages": "x"}, key=key)
        cs = chunks(events)
        appr = [c for c in cs[:-1] if c["type"] == "tool-call-approval"]
        self.assertEqual(len(appr), 1)
        self.assertTrue(appr[0]["payload"]["approvalId"].startswith("apr_"))
        self.assertEqual(cs[-2]["payload"]["stepResult"]["reason"], "suspended")
        # times are ISO-8601 strings, the same as /api/approvals/:id says
        st, a, _ = gw.get("/api/approvals/" + appr[0]["payload"]["approvalId"], key=key)
        self.assertEqual(st, 200, a)
        self.assertEqual(appr[0]["payload"]["expiresAt"], a["expiresAt"])
        self.assertRegex(a["expiresAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

    def test_stream_cap_and_plain_requests_still_served(self):
        gw, key = self.start(max_streams=2, threads=8)
        slow = {"text": " ".join(["word"] * 40), "stream": {"chunk_delay_ms": 100}}
        self.fake.script(self.m, slow, slow)
        held = []

        def hold():
            c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
            c.request("POST", "/api/agents/assistant/stream", body=json.dumps({"messages": "x"}),
                      headers={"Authorization": "Bearer " + key,
                               "Content-Type": "application/json"})
            r = c.getresponse()
            r.read(64)
            held.append((c, r))
        ts = [threading.Thread(target=hold) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(len(held), 2)
        st, b, h = gw.post("/api/agents/assistant/stream", {"messages": "y"}, key=key)
        self.assertEqual(st, 503, b)
        self.assertIn("max_streams", b["error"]["message"])
        self.assertEqual(h["retry-after"], "1")
        # plain requests are still served while the streams are held
        self.assertEqual(gw.get("/healthz")[0], 200)
        st, b, _ = gw.get("/api/agents", key=key)
        self.assertEqual(st, 200)
        for c, r in held:
            r.read()
            c.close()
        # once released, streaming works again
        self.fake.script(self.m, {"text": "ok"})
        st, events, raw = gw.stream("/api/agents/assistant/stream", {"messages": "z"}, key=key)
        self.assertEqual(st, 200, raw)

    def test_client_disconnect_cancels_the_run(self):
        gw, key = self.start()
        # a long, slow upstream stream: 200 words at 100 ms each
        self.fake.script(self.m, {"text": " ".join(["w%d" % i for i in range(200)]),
                                  "stream": {"chunk_delay_ms": 100}})
        s = socket.create_connection(("127.0.0.1", gw.port))
        body = json.dumps({"messages": "talk", "memory": {"resource": "r"}}).encode()
        s.sendall(b"POST /api/agents/assistant/stream HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: Bearer " + key.encode() + b"\r\n"
                  b"Content-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while got.count(b"text-delta") < 3:
            got += s.recv(4096)
        run_id = json.loads(got.split(b"data: ")[1].split(b"\n")[0])["runId"]
        t0 = time.time()
        s.close()
        deadline = t0 + 10  # the upstream stream would take 20 s
        status = None
        while time.time() < deadline:
            rows = gw.query("SELECT status, error FROM runs WHERE id = ?", run_id)
            if rows and rows[0]["status"] == "cancelled":
                status = rows[0]
                break
            time.sleep(0.02)
        self.assertIsNotNone(status, "the run was not recorded as cancelled")
        print("\n  disconnect -> run recorded cancelled in %.0f ms" % ((time.time() - t0) * 1000))
        self.assertIn("client went away", status["error"])
        # no half exchange in the thread
        self.assertEqual(gw.query("SELECT count(*) AS n FROM messages")[0]["n"], 0)
        # and the gateway stays healthy, its stream slot given back
        self.assertEqual(streams_settled(gw), 0)

    def test_a_client_that_stops_reading_holds_up_no_other_stream(self):
        # Streamed replies from a plain-HTTP upstream are read by one relay
        # thread for every stream; a client that stops reading must cost
        # only its own stream (it goes back to its worker), and get all of
        # its text, in order, once it reads again.
        gw, key = self.start()
        words = ["w%05d" % i for i in range(20000)]
        self.fake.script(self.m, {"text": " ".join(words), "stream": {"words_per_chunk": 1}},
                         {"text": "the other stream", "stream": {"chunk_delay_ms": 5}})
        a = socket.socket()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        a.connect(("127.0.0.1", gw.port))
        body = json.dumps({"messages": "talk"}).encode()
        a.sendall(b"POST /api/agents/assistant/stream HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: Bearer " + key.encode() + b"\r\n"
                  b"Content-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        got = a.recv(4096)
        self.assertIn(b"200 OK", got)
        time.sleep(0.5)  # a's buffers fill up; it reads nothing more for now
        t0 = time.time()
        st, events, raw = gw.stream("/api/agents/assistant/stream", {"messages": "more"},
                                    key=key, timeout=10)
        took = time.time() - t0
        self.assertEqual(st, 200, raw)
        text = "".join(c["payload"]["text"] for c in chunks(events)[:-1]
                       if c["type"] == "text-delta")
        self.assertEqual(text, "the other stream")
        self.assertLess(took, 5, "a stalled client held up another stream")
        a.settimeout(30)
        while not got.endswith(b"0\r\n\r\n"):
            b = a.recv(65536)
            self.assertTrue(b, "the stream ended early")
            got += b
        a.close()
        body_text = got.split(b"\r\n\r\n", 1)[1]
        data, rest = b"", body_text
        while rest:  # de-chunk
            size, rest = rest.split(b"\r\n", 1)
            n = int(size, 16)
            data += rest[:n]
            rest = rest[n + 2:]
            if n == 0:
                break
        cs = [json.loads(l[6:]) for l in data.decode().split("\n") if l.startswith("data: {")]
        text = "".join(c["payload"]["text"] for c in cs if c["type"] == "text-delta")
        self.assertEqual(text.split(), words)
        self.assertEqual(cs[-1]["type"], "finish")
        self.assertEqual(streams_settled(gw), 0)

    def broken(self, stream_opts):
        gw, key = self.start()
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "memory_save",
                                                  "arguments": {"content": "c"}}]},
                         {"text": "one two three four five six", "stream": stream_opts})
        st, events, raw = gw.stream("/api/agents/assistant/stream", {"messages": "x"}, key=key)
        self.assertEqual(st, 200, raw)
        cs = chunks(events)
        self.assertEqual(cs[-1], "[DONE]")
        err = [c for c in cs[:-1] if c["type"] == "error"]
        self.assertEqual(len(err), 1, raw)
        self.assertEqual(err[0]["payload"]["error"]["code"], "upstream_error")
        # the tool involved has its audit rows; nothing half-written
        ev = [r["event"] for r in gw.query(
            "SELECT event FROM audit_events WHERE tool_name = 'memory_save' ORDER BY seq")]
        self.assertEqual(ev, ["allowed", "executed"])
        self.assertEqual(gw.query("SELECT count(*) AS n FROM runs")[0]["n"], 0)
        self.assertEqual(gw.query("SELECT count(*) AS n FROM messages")[0]["n"], 0)
        self.assertEqual(streams_settled(gw), 0)
        return err[0]["payload"]["error"]["message"]

    def test_truncated_upstream_stream(self):
        msg = self.broken({"truncate": True})
        self.assertIn("ended", msg)

    def test_upstream_reset_mid_stream(self):
        self.broken({"reset_after_chunks": 3})

    def test_malformed_upstream_chunk(self):
        msg = self.broken({"malformed_after_chunks": 2})
        self.assertIn("malformed", msg)

    def test_tool_call_cut_off_mid_stream_is_audited(self):
        gw, key = self.start()
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": "memory_save",
                                                  "arguments": {"content": "never saved"}}],
                                  "stream": {"truncate": True}})
        st, events, raw = gw.stream("/api/agents/assistant/stream", {"messages": "x"}, key=key)
        cs = chunks(events)
        self.assertEqual([c["type"] for c in cs[:-1]][-1], "error")
        rows = gw.query("SELECT event, outcome, reason FROM audit_events "
                        "WHERE tool_name = 'memory_save'")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0]["event"], "failed")
        self.assertIn("not run", rows[0]["reason"])
        self.assertEqual(gw.query("SELECT count(*) AS n FROM memories")[0]["n"], 0)

    def test_errors_before_the_stream_are_plain_json(self):
        gw, key = self.start()
        st, b, _ = gw.post("/api/agents/assistant/stream", {"messages": 1}, key=key)
        self.assertEqual(st, 400, b)
        st, b, _ = gw.post("/api/agents/nobody/stream", {"messages": "x"}, key=key)
        self.assertEqual(st, 404, b)


if __name__ == "__main__":
    unittest.main()
