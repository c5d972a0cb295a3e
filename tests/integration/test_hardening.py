"""Input hardening at the HTTP layer, driven from outside the way an
attacker would: deeply nested JSON on every route that takes a body (keyed
and keyless), request framing a proxy could read differently (two
Content-Length headers, a length with Transfer-Encoding), NUL bytes in the
path, the query and JSON strings, what the access log shows of a key,
idle or slow connections that must not take the server offline, and the
descriptors the server makes room for at start-up."""

import glob
import json
import os
import re
import resource
import socket
import time
import unittest

from harness import GH_SRC, Gateway, GatewayTest, config

NESTING = (10, 64, 65, 800, 100000)

# Routes that read no body: a nested one is not an error for them.
NO_BODY = {("POST", "/api/admin/logout"), ("POST", "/api/keys/:id/revoke"),
           ("POST", "/api/admin/reload"),
           ("DELETE", "/api/memory/threads/:id"), ("DELETE", "/mcp"), ("DELETE", "/mcp/:id")}
# JSON-RPC answers a parse error in its own envelope with HTTP 200
# (code -32700), as A2A clients expect.
JSON_RPC = {("POST", "/a2a/:id")}


def body_routes():
    """(method, pattern, auth) of every route in the route tables that is
    not a GET: read from src/http*.c, so a new route is covered too."""
    out = []
    for path in sorted(glob.glob(os.path.join(GH_SRC, "src", "http*.c"))):
        with open(path) as f:
            text = f.read()
        out += re.findall(r'\{"(POST|PUT|PATCH|DELETE)", "([^"]+)", (GH_AUTH_\w+), \w+\}', text)
    return out


def nested(kind, n, closed):
    if kind == "array":
        return "[" * n + ("1" + "]" * n if closed else "")
    return '{"a":' * n + ("1" + "}" * n if closed else "")


def raw_exchange(port, data, timeout=10.0):
    """Sends bytes on a fresh connection and reads until the server closes
    or a whole response has come; returns (status, headers, body text)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        buf = b""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            buf += chunk
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
                if m and len(rest) >= int(m.group(1)):
                    break
    finally:
        s.close()
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body.decode("utf-8", "replace")


class DeepJsonTest(GatewayTest):
    """cJSON recursed once per level before gatehouse's depth check ran: a
    1.6 KB body of '[' overflowed a worker's stack and killed the server
    without a key."""

    def test_every_route_refuses_deep_nesting_and_the_server_lives(self):
        gw = self.gateway(config(self.fake, server={"max_body_bytes": 1 << 20}))
        admin = gw.create_key("root", admin=True)
        routes = body_routes()
        self.assertGreater(len(routes), 15)
        seen = set()
        for method, pattern, auth in routes:
            path = pattern.replace(":id", "assistant")
            for n in NESTING:
                for kind in ("array", "object"):
                    for closed in (False, True):
                        raw = nested(kind, n, closed)
                        for key in (None, admin):
                            st, b, _ = gw.request(method, path, raw=raw, key=key,
                                                  headers={"Content-Type": "application/json"})
                            what = "%s %s, %d levels (%s, %s), %s" % (
                                method, pattern, n, kind, "closed" if closed else "open",
                                "keyed" if key else "keyless")
                            self.assertLess(st, 500, "%s: %s" % (what, b))
                            if (method, pattern) in NO_BODY:
                                continue
                            if key is None and auth != "GH_AUTH_NONE":
                                self.assertEqual(st, 401, "%s: %s" % (what, b))
                                continue
                            seen.add((method, pattern))
                            if (method, pattern) in JSON_RPC:
                                self.assertEqual(st, 200, "%s: %s" % (what, b))
                                if n > 64 or not closed:
                                    self.assertEqual(b["error"]["code"], -32700, what)
                                continue
                            if closed and n <= 64:
                                continue  # valid JSON: the route's own checks answer
                            self.assertEqual(st, 400, "%s: %s" % (what, b))
                            if n > 64:
                                self.assertIn("nests deeper than 64 levels", b["error"]["message"],
                                              what)
            # the server lives: a fresh connection is answered
            st, b, _ = raw_get(gw, "/healthz")
            self.assertEqual(st, 200, "after %s %s" % (method, pattern))
        self.assertIn(("POST", "/api/admin/login"), seen)
        self.assertIn(("POST", "/v1/chat/completions"), seen)
        self.assertIsNone(gw.proc.poll())

    def test_the_deepest_accepted_arguments_go_all_the_way(self):
        """A tool call whose arguments nest the full 64 levels is checked,
        hashed into the audit log, stored in the run state (deeper than 64
        with gatehouse's envelope around it), handed to the client and
        resumed on a worker thread; one level more is refused as arguments
        and the model is told."""
        m = self.model()
        agents = {"assistant": {"provider": "fake", "model": m, "tools": [], "max_steps": 4}}
        gw = self.gateway(config(self.fake, agents=agents))
        key = gw.create_key("alice")
        deep = 1
        for _ in range(63):
            deep = {"a": deep}
        args = {"city": "Paris", "deep": deep}       # 64 levels
        too_deep = {"x": args}                       # 65 levels
        client_tools = {"lookup": {"id": "lookup", "description": "d",
                                   "inputSchema": {"type": "object"}}}
        self.fake.script(m, {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": args}]},
                         {"tool_calls": [{"id": "c2", "name": "lookup",
                                          "arguments": too_deep}]},
                         {"text": "done"})
        st, b1, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": "go", "clientTools": client_tools,
                             "memory": {"thread": "t-deep", "resource": "r"}}, key=key)
        self.assertEqual(st, 200, b1)
        self.assertEqual(b1["finishReason"], "tool-calls")
        self.assertEqual(b1["toolCalls"][0]["payload"]["args"], args)
        # the client's answer nests the full 64 levels too, counted from its body
        answer = 1
        for _ in range(59):
            answer = {"a": answer}
        call_id = b1["toolCalls"][0]["payload"]["toolCallId"]
        result = {"role": "tool", "content": [{"type": "tool-result", "toolCallId": call_id,
                                               "toolName": "lookup", "result": answer}]}
        st, b2, _ = gw.post("/api/agents/assistant/generate",
                            {"messages": [result], "clientTools": client_tools,
                             "memory": {"thread": "t-deep", "resource": "r"}}, key=key)
        self.assertEqual(st, 200, b2)
        self.assertEqual(b2["text"], "done")
        # the 65-level arguments never reached the client: the model got an error
        up = self.fake.requests(model=m)[2]["body"]["messages"]
        self.assertIn("arguments for lookup are not valid JSON", json.dumps(up[-1]))
        self.assertIsNone(gw.proc.poll())


def raw_get(gw, path):
    st, hdrs, body = raw_exchange(gw.port, ("GET %s HTTP/1.1\r\nHost: x\r\n"
                                            "Connection: close\r\n\r\n" % path).encode())
    return st, body, hdrs


class FramingTest(GatewayTest):
    """Framing a proxy in front could read differently from gatehouse."""

    def setUp(self):
        super().setUp()
        self.gw = self.gateway(config(self.fake))
        self.key = self.gw.create_key("alice")

    def send(self, head, body=b""):
        req = ("POST /api/memory/threads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\n%s\r\n" % (self.key, head)).encode() + body
        return raw_exchange(self.gw.port, req)

    def assertRefused(self, res, fragment):
        st, hdrs, body = res
        self.assertEqual(st, 400, body)
        self.assertIn(fragment, json.loads(body)["error"]["message"])
        self.assertEqual(hdrs.get("connection"), "close")

    def test_conflicting_content_lengths(self):
        body = b'{"resourceId":"r"}'
        self.assertRefused(self.send("Content-Length: %d\r\nContent-Length: 5\r\n" % len(body),
                                     body), "2 Content-Length headers")
        # the same value twice is refused too: no client sends that
        self.assertRefused(self.send("Content-Length: %d\r\nContent-Length: %d\r\n"
                                     % (len(body), len(body)), body), "Content-Length headers")
        self.assertRefused(self.send("Content-Length: 18abc\r\n", body), "is not a number")
        self.assertRefused(self.send("Content-Length: 9, 18\r\n", body), "is not a number")
        self.assertEqual(self.gw.query("SELECT count(*) AS n FROM threads")[0]["n"], 0)
        # one plain length still works
        st, _, b = self.send("Content-Length: %d\r\n" % len(body), body)
        self.assertEqual(st, 200, b)

    def test_length_with_transfer_encoding(self):
        body = b'12\r\n{"resourceId":"r"}\r\n0\r\n\r\n'
        self.assertRefused(self.send("Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", body),
                           "both Content-Length and Transfer-Encoding")
        self.assertRefused(self.send("Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", body),
                           "both Content-Length and Transfer-Encoding")
        self.assertRefused(self.send("Transfer-Encoding: chunked\r\n"
                                     "Transfer-Encoding: chunked\r\n", body),
                           "2 Transfer-Encoding headers")
        self.assertEqual(self.gw.query("SELECT count(*) AS n FROM threads")[0]["n"], 0)
        st, _, b = self.send("Transfer-Encoding: chunked\r\n", body)
        self.assertEqual(st, 200, b)

    def test_nul_and_bad_escapes_in_the_target(self):
        gw, key = self.gw, self.key
        cases = [("/api/agents/assistant%00x", "contains %00"),
                 ("/api/agents/assistant%00", "contains %00"),
                 ("/api/agents/assist%zzant", "invalid percent escape"),
                 ("/api/agents/assistant%4", "invalid percent escape"),
                 ("/api/agents/%2e%2e/assistant", "escaped dot segment"),
                 ("/api/memory/threads?resourceId=r%00x", "query string contains %00"),
                 ("/api/memory/threads?resourceId=r%g1", "query string has an invalid")]
        for path, fragment in cases:
            st, b, _ = gw.get(path, key=key)
            self.assertEqual(st, 400, "%s: %s" % (path, b))
            self.assertIn(fragment, b["error"]["message"], path)
        # well-formed escapes are decoded as before
        st, b, _ = gw.get("/api/agents/assist%61nt", key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["id"], "assistant")


class NulInJsonTest(GatewayTest):
    """cJSON keeps strings as C strings: a NUL in one cut it, so what was
    checked and what was used could differ."""

    def test_requests_name_the_field(self):
        gw = self.gateway(config(self.fake))
        key = gw.create_key("alice")
        st, b, _ = gw.post("/api/memory/threads",
                           raw='{"resourceId":"r","title":"a\\u0000b"}', key=key,
                           headers={"Content-Type": "application/json"})
        self.assertEqual(st, 400, b)
        self.assertIn("NUL character (\\u0000) in the string at $.title", b["error"]["message"])
        st, b, _ = gw.post("/api/agents/assistant/generate",
                           raw=b'{"messages":[{"role":"user","content":"hi\x00there"}]}', key=key,
                           headers={"Content-Type": "application/json"})
        self.assertEqual(st, 400, b)
        self.assertIn("in the string at $.messages[0].content", b["error"]["message"])
        self.assertEqual(gw.query("SELECT count(*) AS n FROM threads")[0]["n"], 0)

    def test_config_names_file_and_path(self):
        good = config(self.fake)
        for raw in (b'"http://\\u0000\\u0000evil.example/v1"', b'"http://\x00\x00evil.example/v1"'):
            text = json.dumps(good, indent=2).encode()
            text = text.replace(json.dumps(good["providers"]["fake"]["base_url"]).encode(), raw)
            gw = self.gateway(config(self.fake))
            gw.stop()
            with open(gw.config_path, "wb") as f:
                f.write(text)
            with self.assertRaises(RuntimeError) as cm:
                gw.start()
            gw.proc = None  # it exited, as it should
            gw.out.close()
            gw.err.close()
            msg = str(cm.exception)
            self.assertIn(gw.config_path, msg)
            self.assertIn("in the string at $.providers.fake.base_url", msg)
            self.assertIn("strings may not contain NUL", msg)


class AccessLogTest(GatewayTest):

    def test_the_log_shows_the_key_id_and_no_part_of_the_secret(self):
        gw = self.gateway(config(self.fake))
        admin = gw.create_key("root", admin=True)
        key = gw.create_key("alice")
        st, _, _ = gw.get("/api/agents", key=key)
        self.assertEqual(st, 200)
        st, made, _ = gw.post("/api/keys", {"name": "bob"}, key=admin)
        self.assertEqual(st, 201, made)
        ids = {r["name"]: r["id"] for r in gw.query("SELECT id, name FROM api_keys")}
        log = gw.logs()
        self.assertIn("key=%s" % ids["alice"], log)
        for secret in (admin, key, made["secret"]):
            self.assertTrue(secret.startswith("gh_"), made)
            # no run of 6 characters of the secret's random part
            body = secret[3:]
            for i in range(0, len(body) - 6):
                self.assertNotIn(body[i:i + 6], log, "part of a secret in the log")


def connect_from(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((addr, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def read_all(s, timeout=10.0):
    s.settimeout(timeout)
    buf = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return buf


class SlowClientsTest(GatewayTest):
    """With one worker per connection from accept on, 100 idle sockets (or
    70 sending a byte a second) held every worker and /healthz went
    unanswered. The front holds connections until their head is there."""

    CAP = 150
    HEAD_MS = 3000

    def test_idle_and_slow_connections_leave_the_server_answering(self):
        gw = self.gateway(config(self.fake, server={
            "head_timeout_ms": self.HEAD_MS, "max_connections_per_address": self.CAP}))
        threads = gw.cfg["server"]["threads"]
        idle, slow = [], []
        try:
            # 450 connections, far more than the 24 workers: from three
            # addresses, up to the cap of each; half send nothing, half the
            # start of a head and then a byte now and then
            for addr in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
                for i in range(self.CAP):
                    s = connect_from(addr, gw.port)
                    if i % 2:
                        s.sendall(b"GET /healthz HTTP/1.1\r\nHo")
                        slow.append(s)
                    else:
                        idle.append(s)
            self.assertGreater(len(idle) + len(slow), 10 * threads)
            # one more from a full address is refused at once, with a reason
            extra = connect_from("127.0.0.2", gw.port)
            reply = read_all(extra).decode("latin-1")
            extra.close()
            self.assertTrue(reply.startswith("HTTP/1.1 503"), reply)
            self.assertIn("max_connections_per_address = %d" % self.CAP, reply)
            # everyone else is served, while the slow ones keep dribbling
            for i in range(20):
                st, b, _ = raw_get(gw, "/healthz")
                self.assertEqual(st, 200, "request %d with %d idle and %d slow connections open"
                                 % (i, len(idle), len(slow)))
                if i % 5 == 0:
                    for s in slow:
                        s.sendall(b"s")
            st, b, _ = gw.get("/api/agents/assistant", key=gw.create_key("alice"))
            self.assertEqual(st, 200, b)
            # past the head deadline: the idle ones were closed without a
            # word, the partial heads answered 408
            time.sleep(self.HEAD_MS / 1000.0 + 1.0)
            for s in idle[:20]:
                self.assertEqual(read_all(s, 5), b"")
            for s in slow[:20]:
                got = read_all(s, 5).decode("latin-1")
                self.assertTrue(got.startswith("HTTP/1.1 408"), got)
            # and their addresses may connect again
            again = connect_from("127.0.0.2", gw.port)
            again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            self.assertTrue(read_all(again).startswith(b"HTTP/1.1 200"))
            again.close()
        finally:
            for s in idle + slow:
                s.close()
        self.assertIsNone(gw.proc.poll())

    def test_keep_alive_and_pipelined_requests_pass_the_front(self):
        gw = self.gateway(config(self.fake))
        # two requests in one segment: the front hands the connection over
        # at the first head; CivetWeb reads both
        s = connect_from("127.0.0.1", gw.port)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = read_all(s)
        s.close()
        self.assertEqual(got.count(b"HTTP/1.1 200"), 2, got)
        # a head larger than 16 KiB is refused by the front
        s = connect_from("127.0.0.1", gw.port)
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 17000)
        got = read_all(s)
        s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 431"), got[:200])


class DescriptorsTest(GatewayTest):
    """Descriptors: the soft limit is raised to what server.threads may
    hold (4 per worker and 1,024 besides), within the hard limit, and the
    descriptor table is grown to it at start-up, before any thread: Linux
    grows a table that is full by doubling it, and in a process of many
    threads each growth held the accept() that needed it (and every new
    connection behind it) for an RCU grace period of several milliseconds.
    /proc/PID/status shows the table's size as FDSize."""

    THREADS = 600
    WANT = THREADS * 4 + 1024

    def proc_limits(self, gw):
        with open("/proc/%d/limits" % gw.proc.pid) as f:
            line = next(l for l in f if l.startswith("Max open files"))
        soft, hard = line.split()[3:5]
        with open("/proc/%d/status" % gw.proc.pid) as f:
            size = int(re.search(r"^FDSize:\s+(\d+)$", f.read(), re.M).group(1))
        return int(soft), int(hard), size

    def start(self, soft, hard):
        gw = self.gateway(config(self.fake, server={"threads": self.THREADS}),
                          nofile=(soft, hard))
        st, _, _ = gw.get("/healthz")
        self.assertEqual(st, 200)
        return gw

    def test_the_limit_rises_and_the_table_is_sized_before_serving(self):
        # a hard limit above what is wanted, and at most this process's
        # (only root may raise its own)
        cur = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        top = 65536 if cur == resource.RLIM_INFINITY else min(cur, 65536)
        if top <= self.WANT:
            self.skipTest("the hard limit on descriptors here is %d" % cur)
        gw = self.start(1024, top)
        soft, hard, size = self.proc_limits(gw)
        self.assertEqual((soft, hard), (self.WANT, top))
        # the table holds every descriptor up to the limit: a power of two
        # at least that large, where an idle server's would be 64 or 128
        self.assertGreaterEqual(size, self.WANT)
        self.assertNotIn("descriptors:", gw.logs())

    def test_a_low_hard_limit_is_used_whole_and_named(self):
        gw = self.start(1024, 2000)
        soft, hard, size = self.proc_limits(gw)
        self.assertEqual((soft, hard), (2000, 2000))
        self.assertGreaterEqual(size, 2000)
        log = gw.logs()
        self.assertIn("descriptors: the limit is 2000 (hard limit 2000), and server.threads "
                      "= 600 may hold about %d at once" % self.WANT, log)


if __name__ == "__main__":
    unittest.main()
