"""gatehouse as an MCP server at /mcp: the protocol's edges over raw HTTP
(sessions, the 400/404 rules, DELETE, GET, Origin, notifications, bad
JSON-RPC, oversized bodies, the 2026-07-28 header checks) and the gate
behind tools/call (policy, audit rows, approvals held and repeated)."""

import json
import threading
import time
import unittest

from harness import GatewayTest, config

V = "2025-11-25"
MODERN = "2026-07-28"


class McpServerTest(GatewayTest):

    def setUp(self):
        super().setUp()
        f = self.fake.url
        tools = {
            "get_weather": {"type": "http", "description": "Weather", "url": f + "/tools/weather",
                            "input_schema": {"type": "object",
                                             "properties": {"city": {"type": "string"}},
                                             "required": ["city"]},
                            "annotations": {"readOnlyHint": True, "destructiveHint": False}},
            "send_mail": {"type": "http", "description": "Send mail", "url": f + "/tools/mail",
                          "input_schema": {"type": "object"}},
            "delete_all": {"type": "http", "description": "Dangerous", "url": f + "/tools/delete",
                           "input_schema": {"type": "object"}},
        }
        agents = {"assistant": {"provider": "offline", "model": "m",
                                "tools": ["memory_*", "get_weather", "send_mail", "delete_all"],
                                "memory": {"enabled": True}, "max_steps": 4}}
        policies = {
            "default": {"agents": ["*"], "tools": {"allow": ["memory_*", "get_*", "send_*"]},
                        "approval": {"require": ["send_*"], "approver": "admin"}},
            "narrow": {"agents": ["*"], "tools": {"allow": ["get_*"]}},
        }
        self.gw = self.gateway(config(self.fake, agents=agents, tools=tools, policies=policies,
                                      server={"approval_wait_ms": 1500}))
        self.key = self.gw.create_key("alice")
        self.admin = self.gw.create_key("ops", admin=True)

    # ---- helpers ----

    def rpc(self, method, params=None, id=1, session=None, key=None, headers=None):
        body = {"jsonrpc": "2.0", "method": method}
        if id is not None:
            body["id"] = id
        if params is not None:
            body["params"] = params
        h = {"Accept": "application/json, text/event-stream"}
        if session:
            h["Mcp-Session-Id"] = session
        h.update(headers or {})
        return self.gw.post("/mcp", body, key=key or self.key, headers=h)

    def init(self, key=None, caps=None, version=V):
        st, b, h = self.rpc("initialize", {"protocolVersion": version,
                                           "capabilities": caps or {},
                                           "clientInfo": {"name": "t", "version": "1"}},
                            key=key)
        self.assertEqual(st, 200, b)
        sid = h.get("mcp-session-id")
        self.assertTrue(sid and len(sid) >= 64, h)
        st, _, _ = self.rpc("notifications/initialized", id=None, session=sid, key=key)
        self.assertEqual(st, 202)
        return sid, b["result"]

    def call(self, sid, name, args, key=None, id=7):
        st, b, _ = self.rpc("tools/call", {"name": name, "arguments": args}, id=id, session=sid,
                            key=key)
        self.assertEqual(st, 200, b)
        return b

    # ---- lifecycle ----

    def test_initialize_negotiates_the_version(self):
        _, res = self.init()
        self.assertEqual(res["protocolVersion"], V)
        self.assertEqual(res["serverInfo"]["name"], "gatehouse")
        self.assertIn("tools", res["capabilities"])
        _, res = self.init(version="2025-06-18")
        self.assertEqual(res["protocolVersion"], "2025-06-18")
        _, res = self.init(version="2024-01-01")
        self.assertEqual(res["protocolVersion"], V)

    def test_session_rules(self):
        sid, _ = self.init()
        # no session: 400; an unknown one: 404; another key's: 404
        st, b, _ = self.rpc("tools/list")
        self.assertEqual(st, 400, b)
        self.assertEqual(b["error"]["code"], -32600)
        st, _, _ = self.rpc("tools/list", session="mcps_" + "0" * 64)
        self.assertEqual(st, 404)
        other = self.gw.create_key("bob")
        st, _, _ = self.rpc("tools/list", session=sid, key=other)
        self.assertEqual(st, 404)
        st, b, _ = self.rpc("ping", session=sid)
        self.assertEqual((st, b["result"]), (200, {}))
        # DELETE ends it
        h = {"Mcp-Session-Id": sid}
        st, _, _ = self.gw.request("DELETE", "/mcp", key=self.key, headers=h)
        self.assertEqual(st, 204)
        st, _, _ = self.rpc("ping", session=sid)
        self.assertEqual(st, 404)
        st, _, _ = self.gw.request("DELETE", "/mcp", key=self.key, headers=h)
        self.assertEqual(st, 404)
        st, _, _ = self.gw.request("DELETE", "/mcp", key=self.key)
        self.assertEqual(st, 400)

    def test_an_agent_by_path(self):
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": V, "capabilities": {}}}
        st, b, h = self.gw.post("/mcp/assistant", body, key=self.key)
        self.assertEqual(st, 200, b)
        st, b, _ = self.gw.post("/mcp/assistant", {"jsonrpc": "2.0", "id": 2,
                                                   "method": "tools/list"},
                                key=self.key, headers={"Mcp-Session-Id": h["mcp-session-id"]})
        self.assertIn("get_weather", [t["name"] for t in b["result"]["tools"]])
        st, _, _ = self.gw.post("/mcp/nobody", body, key=self.key)
        self.assertEqual(st, 404)

    def test_get_is_405_and_keys_are_required(self):
        st, _, h = self.gw.get("/mcp", key=self.key)
        self.assertEqual(st, 405)
        self.assertIn("POST", h.get("allow", ""))
        st, _, _ = self.gw.post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        self.assertEqual(st, 401)

    def test_origin_is_checked(self):
        bad = {"Origin": "http://evil.example"}
        st, b, _ = self.rpc("initialize", {"protocolVersion": V, "capabilities": {}},
                            headers=bad)
        self.assertEqual(st, 403, b)
        good = {"Origin": "http://127.0.0.1:%d" % self.gw.port}
        st, b, _ = self.rpc("initialize", {"protocolVersion": V, "capabilities": {}},
                            headers=good)
        self.assertEqual(st, 200, b)

    def test_notifications_and_responses_are_202(self):
        sid, _ = self.init()
        st, _, _ = self.rpc("notifications/cancelled", {"requestId": 3}, id=None, session=sid)
        self.assertEqual(st, 202)
        st, _, _ = self.gw.post("/mcp", {"jsonrpc": "2.0", "id": "x", "result": {}},
                                key=self.key, headers={"Mcp-Session-Id": sid})
        self.assertEqual(st, 202)

    def test_bad_json_rpc(self):
        sid, _ = self.init()
        h = {"Mcp-Session-Id": sid}
        st, b, _ = self.gw.post("/mcp", raw="{not json", key=self.key, headers=h)
        self.assertEqual(st, 400)
        self.assertEqual(b["error"]["code"], -32700)
        self.assertIsNone(b["id"])
        st, b, _ = self.gw.post("/mcp", [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
                                key=self.key, headers=h)
        self.assertEqual((st, b["error"]["code"]), (400, -32600))
        st, b, _ = self.gw.post("/mcp", {"jsonrpc": "1.0", "id": 4, "method": "ping"},
                                key=self.key, headers=h)
        self.assertEqual((st, b["error"]["code"], b["id"]), (400, -32600, 4))
        st, b, _ = self.gw.post("/mcp", {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
                                key=self.key, headers=h)
        self.assertEqual((st, b["error"]["code"]), (400, -32600))
        st, b, _ = self.rpc("resources/list", session=sid)
        self.assertEqual((st, b["error"]["code"]), (200, -32601))
        st, b, _ = self.rpc("tools/call", {"arguments": {}}, session=sid)
        self.assertEqual((st, b["error"]["code"]), (200, -32602))
        st, b, _ = self.rpc("tools/call", {"name": "get_weather", "arguments": [1]}, session=sid)
        self.assertEqual((st, b["error"]["code"]), (200, -32602))
        st, b, _ = self.rpc("initialize", {"capabilities": {}})
        self.assertEqual((st, b["error"]["code"]), (200, -32602))

    def test_oversized_body_is_413(self):
        sid, _ = self.init()
        big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "get_weather", "arguments": {"city": "x" * 300000}}}
        st, _, _ = self.gw.post("/mcp", big, key=self.key, headers={"Mcp-Session-Id": sid})
        self.assertEqual(st, 413)

    def test_sessions_per_key_are_bounded(self):
        cfg = json.load(open(self.gw.config_path))
        cfg["server"]["mcp_sessions_per_key"] = 2
        gw = self.gateway(cfg)
        key = gw.create_key("carol")
        self.gw, old = gw, self.gw
        first, _ = self.init(key=key)
        self.init(key=key)
        self.init(key=key)
        # the least recently used one made room
        st, _, _ = self.rpc("ping", session=first, key=key)
        self.assertEqual(st, 404)
        self.gw = old

    # ---- the gate ----

    def test_tools_list_is_filtered_by_policy(self):
        sid, _ = self.init()
        st, b, _ = self.rpc("tools/list", session=sid)
        tools = {t["name"]: t for t in b["result"]["tools"]}
        self.assertEqual(sorted(tools), ["get_weather", "memory_delete", "memory_save",
                                         "memory_search", "send_mail"])
        self.assertEqual(tools["get_weather"]["annotations"]["readOnlyHint"], True)
        self.assertEqual(tools["memory_search"]["annotations"]["readOnlyHint"], True)
        self.assertEqual(tools["memory_delete"]["annotations"]["destructiveHint"], True)
        self.assertEqual(tools["get_weather"]["inputSchema"]["required"], ["city"])
        self.assertEqual(tools["send_mail"]["_meta"]["gatehouse/approval"], "admin")
        narrow = self.gw.create_key("nina", policy="narrow")
        sid2, _ = self.init(key=narrow)
        st, b, _ = self.rpc("tools/list", session=sid2, key=narrow)
        self.assertEqual([t["name"] for t in b["result"]["tools"]], ["get_weather"])

    def test_call_is_gated_and_audited(self):
        sid, _ = self.init()
        self.fake.tool_script("weather", {"body": {"temp": 21}})
        b = self.call(sid, "get_weather", {"city": "Oslo"})
        res = b["result"]
        self.assertFalse(res["isError"])
        self.assertEqual(res["structuredContent"], {"temp": 21})
        self.assertEqual(json.loads(res["content"][0]["text"]), {"temp": 21})
        rows = self.gw.query("SELECT event, detail FROM audit_events WHERE tool_name = "
                             "'get_weather' ORDER BY seq")
        self.assertEqual([r["event"] for r in rows], ["allowed", "executed"])
        self.assertEqual(json.loads(rows[0]["detail"])["surface"], "mcp")
        # a schema violation never reaches the tool
        before = len(self.fake.requests(tool="weather"))
        res = self.call(sid, "get_weather", {})["result"]
        self.assertTrue(res["isError"])
        self.assertIn("invalid arguments", res["content"][0]["text"])
        self.assertEqual(len(self.fake.requests(tool="weather")), before)
        # memory tools run inside
        res = self.call(sid, "memory_save", {"content": "the sky is blue"})["result"]
        self.assertFalse(res["isError"], res)

    def test_denied_call_is_refused_with_a_reason_and_audited(self):
        sid, _ = self.init()
        res = self.call(sid, "delete_all", {})["result"]
        self.assertTrue(res["isError"])
        self.assertIn("denied by policy \"default\"", res["content"][0]["text"])
        self.assertEqual(self.fake.requests(tool="delete"), [])
        rows = self.gw.query("SELECT event, reason FROM audit_events WHERE tool_name = "
                             "'delete_all'")
        self.assertEqual([r["event"] for r in rows], ["denied"])
        self.assertIn("tools.allow", rows[0]["reason"])
        res = self.call(sid, "no_such_tool", {})["result"]
        self.assertTrue(res["isError"])

    def test_admin_approval_held_then_repeated_runs_once(self):
        sid, _ = self.init()
        self.fake.tool_script("mail", {"body": {"sent": True}})
        t0 = time.time()
        res = self.call(sid, "send_mail", {"to": "bob"})["result"]
        self.assertGreaterEqual(time.time() - t0, 1.0)   # held for approval_wait_ms
        self.assertTrue(res["isError"])
        text = res["content"][0]["text"]
        self.assertIn("Waiting for approval apr_", text)
        apr = "apr_" + text.split("apr_")[1].split()[0]
        self.assertEqual(self.fake.requests(tool="mail"), [])
        # the same call again while pending: the same approval, not a new one
        res = self.call(sid, "send_mail", {"to": "bob"})["result"]
        self.assertIn(apr, res["content"][0]["text"])
        self.assertEqual(len(self.gw.query("SELECT id FROM approvals")), 1)
        st, b, _ = self.gw.post("/api/approvals/%s/approve" % apr, {"reason": "ok"},
                                key=self.admin)
        self.assertEqual(st, 200, b)
        # repeated after the approval: the result of its one execution
        for _ in range(50):
            res = self.call(sid, "send_mail", {"to": "bob"})["result"]
            if not res["isError"]:
                break
            time.sleep(0.1)
        self.assertEqual(res["structuredContent"], {"sent": True})
        self.assertEqual(len(self.fake.requests(tool="mail")), 1)
        events = [r["event"] for r in self.gw.query(
            "SELECT event FROM audit_events WHERE tool_name = 'send_mail' ORDER BY seq")]
        self.assertEqual(events, ["approval_requested", "approved", "executed"])
        # once more: a new call, asking for a new approval
        res = self.call(sid, "send_mail", {"to": "bob"})["result"]
        self.assertTrue(res["isError"])
        self.assertNotIn(apr, res["content"][0]["text"])
        self.assertEqual(len(self.fake.requests(tool="mail")), 1)

    def test_admin_approval_during_the_hold_answers_with_progress(self):
        cfg = json.load(open(self.gw.config_path))
        cfg["server"]["approval_wait_ms"] = 20000
        cfg["server"]["heartbeat_ms"] = 200
        self.gw = gw = self.gateway(cfg)
        key, admin = gw.create_key("al"), gw.create_key("op", admin=True)
        sid, _ = self.init(key=key)
        self.fake.tool_script("mail", {"body": {"sent": 2}})

        def approve():
            for _ in range(100):
                rows = gw.query("SELECT id FROM approvals WHERE status = 'pending'")
                if rows:
                    gw.http.__class__(gw.port).request(
                        "POST", "/api/approvals/%s/approve" % rows[0]["id"], {},
                        {"Authorization": "Bearer " + admin})
                    return
                time.sleep(0.1)

        th = threading.Thread(target=approve)
        th.start()
        st, events, _ = gw.stream("/mcp", {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                           "params": {"name": "send_mail", "arguments": {},
                                                      "_meta": {"progressToken": "p1"}}},
                                  key=key, headers={"Mcp-Session-Id": sid,
                                                    "Accept": "application/json, "
                                                              "text/event-stream"})
        th.join()
        self.assertEqual(st, 200)
        msgs = [json.loads(e) for e in events]
        self.assertEqual(msgs[-1]["id"], 9)
        self.assertEqual(msgs[-1]["result"]["structuredContent"], {"sent": 2})
        self.assertEqual(len(self.fake.requests(tool="mail")), 1)
        for m in msgs[:-1]:
            self.assertEqual(m["method"], "notifications/progress")
            self.assertEqual(m["params"]["progressToken"], "p1")

    def test_revoked_key_ends_its_sessions(self):
        sid, _ = self.init()
        st, b, _ = self.gw.get("/api/keys", key=self.admin)
        kid = [k["id"] for k in b["keys"] if k["name"] == "alice"][0]
        st, _, _ = self.gw.post("/api/keys/%s/revoke" % kid, {}, key=self.admin)
        self.assertEqual(st, 200)
        st, _, _ = self.rpc("ping", session=sid)
        self.assertEqual(st, 401)

    def test_restart_invalidates_sessions(self):
        sid, _ = self.init()
        self.gw.restart()
        st, _, _ = self.rpc("ping", session=sid)
        self.assertEqual(st, 404)
        sid2, _ = self.init()
        self.assertNotEqual(sid, sid2)

    # ---- 2026-07-28 ----

    def modern(self, method, params=None, headers=None, id=1):
        p = dict(params or {})
        p["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                      "io.modelcontextprotocol/clientCapabilities": {}}
        h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if method == "tools/call":
            h["Mcp-Name"] = p.get("name", "")
        h.update(headers or {})
        return self.gw.post("/mcp", {"jsonrpc": "2.0", "id": id, "method": method, "params": p},
                            key=self.key, headers={k: v for k, v in h.items() if v is not None})

    def test_modern_discover_and_header_checks(self):
        st, b, _ = self.modern("server/discover")
        self.assertEqual(st, 200, b)
        self.assertIn(MODERN, b["result"]["supportedVersions"])
        self.assertEqual(b["result"]["resultType"], "complete")
        st, b, _ = self.modern("tools/list")
        self.assertEqual(st, 200, b)
        self.assertIn("ttlMs", b["result"])
        st, b, _ = self.modern("tools/list", headers={"Mcp-Method": "tools/call"})
        self.assertEqual((st, b["error"]["code"]), (400, -32020))
        st, b, _ = self.modern("tools/list", headers={"Mcp-Method": None})
        self.assertEqual((st, b["error"]["code"]), (400, -32020))
        st, b, _ = self.modern("tools/list", headers={"MCP-Protocol-Version": V})
        self.assertEqual((st, b["error"]["code"]), (400, -32020))
        st, b, _ = self.modern("tools/call", {"name": "get_weather", "arguments": {"city": "a"}},
                               headers={"Mcp-Name": "memory_save"})
        self.assertEqual((st, b["error"]["code"]), (400, -32020))
        self.fake.tool_script("weather", {"body": {"temp": 3}})
        st, b, _ = self.modern("tools/call", {"name": "get_weather", "arguments": {"city": "a"}},
                               headers={"Mcp-Name": "=?base64?Z2V0X3dlYXRoZXI=?="})
        self.assertEqual(st, 200, b)
        self.assertEqual(b["result"]["structuredContent"], {"temp": 3})
        self.assertEqual(b["result"]["resultType"], "complete")

    def test_modern_admin_approval_is_input_required(self):
        st, b, _ = self.modern("tools/call", {"name": "send_mail", "arguments": {"x": 1}})
        self.assertEqual(st, 200, b)
        self.assertEqual(b["result"]["resultType"], "input_required")
        apr = b["result"]["requestState"]
        self.assertTrue(apr.startswith("apr_"))
        # requestState must name this call's approval
        st, b, _ = self.modern("tools/call", {"name": "send_mail", "arguments": {"x": 2},
                                              "requestState": apr})
        self.assertEqual(b["error"]["code"], -32602)
        self.fake.tool_script("mail", {"body": {"sent": 3}})
        self.gw.post("/api/approvals/%s/approve" % apr, {}, key=self.admin)
        st, b, _ = self.modern("tools/call", {"name": "send_mail", "arguments": {"x": 1},
                                              "requestState": apr})
        self.assertEqual(b["result"]["structuredContent"], {"sent": 3})
        self.assertEqual(len(self.fake.requests(tool="mail")), 1)


if __name__ == "__main__":
    unittest.main()
