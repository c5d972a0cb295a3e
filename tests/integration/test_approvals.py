"""Human approvals: a call that needs approval is not executed; the run is
suspended; approve runs the tool exactly once (also when approve is sent
twice at once) and the run continues in the background; deny and expiry
reach the model as "denied"; decisions are final; Mastra's
approve-tool-call works for caller-approvable calls."""

import json
import threading
import time
import unittest

from harness import GatewayTest, closed_port, config


def setup_config(fake, model, approver="admin", ttl=3600, tool_url=None):
    f = fake.url
    tools = {"send_email": {"type": "http", "description": "Send an email",
                            "url": tool_url or f + "/tools/send-email",
                            "input_schema": {"type": "object",
                                             "properties": {"to": {"type": "string"},
                                                            "body": {"type": "string"}},
                                             "required": ["to"]}}}
    agents = {"assistant": {"provider": "fake", "model": model, "tools": ["send_email", "memory_*"],
                            "memory": {"enabled": True}, "max_steps": 5}}
    policies = {"default": {"agents": ["*"], "tools": {"allow": ["send_*", "memory_*"]},
                            "client_tools": {"allow": ["*"]},
                            "approval": {"require": ["send_*"], "approver": approver,
                                         "ttl_seconds": ttl}}}
    return config(fake, agents=agents, tools=tools, policies=policies)


def email_call(to="bob@example.com"):
    return {"tool_calls": [{"id": "e1", "name": "send_email",
                            "arguments": {"to": to, "body": "hello"}}]}


class ApprovalsTest(GatewayTest):

    def start(self, **kw):
        self.m = self.model()
        gw = self.gateway(setup_config(self.fake, self.m, **kw))
        return gw, gw.create_key("alice"), gw.create_key("root", admin=True)

    def suspend(self, gw, key):
        self.fake.script(self.m, email_call(), {"text": "Email sent."})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "email bob"}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["finishReason"], "suspended")
        self.assertEqual(b["status"], "suspended")
        self.assertEqual(len(b["approvals"]), 1)
        return b

    def test_suspend_approve_runs_once_and_continues(self):
        gw, key, admin = self.start()
        b = self.suspend(gw, key)
        apr = b["approvals"][0]
        self.assertEqual(apr["toolName"], "send_email")
        self.assertEqual(apr["args"], {"to": "bob@example.com", "body": "hello"})
        self.assertEqual(apr["status"], "pending")
        # nothing ran yet
        self.assertEqual(self.fake.requests(tool="send-email"), [])
        st, lst, _ = gw.get("/api/approvals?status=pending", key=admin)
        self.assertEqual([a["id"] for a in lst["approvals"]], [apr["id"]])
        st, one, _ = gw.get("/api/approvals/" + apr["id"], key=admin)
        self.assertEqual(one["runId"], b["runId"])
        # one time format on the JSON API: ISO-8601, the same in both answers
        self.assertRegex(apr["expiresAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(apr["expiresAt"], one["expiresAt"])
        detail = json.loads(gw.query("SELECT detail FROM audit_events WHERE event = "
                                     "'approval_requested'")[0]["detail"])
        self.assertEqual(detail["expires_at"], one["expiresAt"])
        self.assertEqual(len(one["argsSha256"]), 64)
        st, r, _ = gw.get("/api/runs/" + b["runId"], key=key)
        self.assertEqual(r["status"], "suspended")
        self.assertEqual(r["approvals"][0]["id"], apr["id"])
        # a plain key cannot approve an admin-approved call
        st, e, _ = gw.post("/api/approvals/%s/approve" % apr["id"], {}, key=key)
        self.assertEqual(st, 403, e)
        # two admins approve at the same moment: one wins, the tool runs once
        results = []

        def approve():
            results.append(gw.request("POST", "/api/approvals/%s/approve" % apr["id"],
                                      {"reason": "looks fine"}, key=admin)[:2])
        from harness import HTTP
        threads = []
        for _ in range(2):
            h = HTTP(gw.port)

            def go(h=h):
                st, body, _ = h.request("POST", "/api/approvals/%s/approve" % apr["id"],
                                        {"reason": "ok"},
                                        {"Authorization": "Bearer " + admin})
                results.append((st, body))
                h.close()
            threads.append(threading.Thread(target=go))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(s for s, _ in results)
        self.assertEqual(codes, [200, 409], results)
        loser = [b for s, b in results if s == 409][0]
        self.assertIn("already approved by key:", loser["error"]["message"])
        r = self.wait_run(gw, key, b["runId"], "completed")
        self.assertEqual(r["output"]["text"], "Email sent.")
        self.assertEqual(len(self.fake.requests(tool="send-email")), 1)
        ev = [x["event"] for x in gw.query("SELECT event FROM audit_events WHERE "
                                           "tool_name = 'send_email' ORDER BY seq")]
        self.assertEqual(ev, ["approval_requested", "approved", "executed"])
        # the model saw the tool's result
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "tool")
        st, a, _ = gw.get("/api/approvals/" + apr["id"], key=admin)
        self.assertEqual(a["status"], "approved")
        self.assertIsNotNone(a["executedAt"])
        # how the call ended is what its audit row says
        x = a["execution"]
        self.assertEqual(x["status"], "succeeded", a)
        self.assertIsNone(x["error"])
        self.assertEqual(x["startedAt"], a["executedAt"])
        self.assertRegex(x["finishedAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        row = gw.query("SELECT event, outcome FROM audit_events WHERE seq = ?", x["auditSeq"])
        self.assertEqual(row, [{"event": "executed", "outcome": "ok"}])
        # deciding again: 409, naming who decided
        st, e, _ = gw.post("/api/approvals/%s/deny" % apr["id"], {"reason": "late"}, key=admin)
        self.assertEqual(st, 409, e)

    def test_a_failed_execution_is_reported_as_failed(self):
        # the tool's HTTP target refuses the connection
        gw, key, admin = self.start(tool_url="http://127.0.0.1:%d/tools/send-email" % closed_port())
        b = self.suspend(gw, key)
        apr = b["approvals"][0]["id"]
        st, a, _ = gw.post("/api/approvals/%s/approve" % apr, {}, key=admin)
        self.assertEqual(st, 200, a)
        self.assertIn(a["execution"]["status"], ("pending", "running", "failed"), a)
        r = self.wait_run(gw, key, b["runId"], "completed")
        self.assertEqual(r["output"]["text"], "Email sent.")  # what the model said
        st, a, _ = gw.get("/api/approvals/" + apr, key=admin)
        self.assertEqual(st, 200, a)
        x = a["execution"]
        self.assertEqual(x["status"], "failed", a)
        self.assertEqual(x["error"], "tool send_email failed: connection refused")
        rows = gw.query("SELECT seq, event, outcome, error FROM audit_events "
                        "WHERE tool_name = 'send_email' AND event IN ('executed', 'failed')")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual((rows[0]["event"], rows[0]["outcome"]), ("failed", "error"))
        self.assertEqual(rows[0]["seq"], x["auditSeq"])
        # the audit row names the tool's address; the model, the client and
        # the approval's owner hear what failed, not where the tool lives
        self.assertIn("tool send_email failed: upstream http://127.0.0.1:", rows[0]["error"])
        self.assertIn("connection refused", rows[0]["error"])
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "tool")
        self.assertIn("tool send_email failed: connection refused", last["content"])
        self.assertNotIn("127.0.0.1", last["content"])
        # the owner reads the same through the approvals list
        st, lst, _ = gw.get("/api/approvals?status=approved", key=key)
        self.assertEqual(lst["approvals"][0]["execution"]["status"], "failed")
        # a status approvals never have is refused, naming those they have
        st, err, _ = gw.get("/api/approvals?status=completed", key=key)
        self.assertEqual(st, 400)
        self.assertIn("status: expected pending, approved, denied or expired", str(err))
        # an undecided or denied approval has no execution
        b2 = self.suspend(gw, key)
        st, a2, _ = gw.get("/api/approvals/" + b2["approvals"][0]["id"], key=admin)
        self.assertIsNone(a2["execution"])

    def test_deny_reaches_the_model_and_the_run_goes_on(self):
        gw, key, admin = self.start()
        b = self.suspend(gw, key)
        apr = b["approvals"][0]["id"]
        st, a, _ = gw.post("/api/approvals/%s/deny" % apr, {"reason": "not today"}, key=admin)
        self.assertEqual(st, 200, a)
        self.assertEqual(a["status"], "denied")
        self.wait_run(gw, key, b["runId"], "completed")
        self.assertEqual(self.fake.requests(tool="send-email"), [])
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        err = json.loads(last["content"])["error"]
        self.assertIn("denied by key:", err)
        self.assertIn("not today", err)
        ev = [x["event"] for x in gw.query("SELECT event FROM audit_events WHERE "
                                           "tool_name = 'send_email' ORDER BY seq")]
        self.assertEqual(ev, ["approval_requested", "denied"])

    def test_expiry_is_a_denial(self):
        gw, key, admin = self.start(ttl=10)
        b = self.suspend(gw, key)
        apr = b["approvals"][0]["id"]
        r = self.wait_run(gw, key, b["runId"], "completed", timeout=20)
        self.assertEqual(self.fake.requests(tool="send-email"), [])
        last = self.fake.requests(model=self.m)[-1]["body"]["messages"][-1]
        self.assertIn("expired", json.loads(last["content"])["error"])
        st, a, _ = gw.get("/api/approvals/" + apr, key=admin)
        self.assertEqual(a["status"], "expired")
        st, e, _ = gw.post("/api/approvals/%s/approve" % apr, {}, key=admin)
        self.assertEqual(st, 409)
        self.assertIn("expired", e["error"]["message"])
        self.assertIn("expired", [x["event"] for x in gw.query(
            "SELECT event FROM audit_events WHERE tool_name = 'send_email'")])

    def test_caller_approves_with_mastra_approve_tool_call(self):
        gw, key, admin = self.start(approver="caller")
        b = self.suspend(gw, key)
        call_id = b["approvals"][0]["toolCallId"]
        st, events, raw = gw.stream("/api/agents/assistant/approve-tool-call",
                                    {"runId": b["runId"], "toolCallId": call_id}, key=key)
        self.assertEqual(st, 200, raw)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        types = [c["type"] for c in chunks]
        self.assertIn("tool-result", types)
        self.assertEqual(chunks[-1]["type"], "finish")
        text = "".join(c["payload"]["text"] for c in chunks if c["type"] == "text-delta")
        self.assertEqual(text, "Email sent.")
        self.assertEqual(len(self.fake.requests(tool="send-email")), 1)
        # a second approve of the same call is a conflict
        st, body, _ = gw.post("/api/agents/assistant/approve-tool-call",
                              {"runId": b["runId"], "toolCallId": call_id}, key=key)
        self.assertEqual(st, 409, body)
        # and another owner cannot see it at all
        other = gw.create_key("mallory")
        st, body, _ = gw.post("/api/agents/assistant/approve-tool-call",
                              {"runId": b["runId"], "toolCallId": call_id}, key=other)
        self.assertEqual(st, 404, body)

    def test_decline_tool_call_generate(self):
        gw, key, admin = self.start(approver="caller")
        b = self.suspend(gw, key)
        call_id = b["approvals"][0]["toolCallId"]
        st, body, _ = gw.post("/api/agents/assistant/decline-tool-call-generate",
                              {"runId": b["runId"], "toolCallId": call_id}, key=key)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["text"], "Email sent.")  # the scripted reply after the error
        self.assertEqual(self.fake.requests(tool="send-email"), [])

    def test_admin_approved_call_waits_for_the_admin(self):
        gw, key, admin = self.start()
        b = self.suspend(gw, key)
        apr = b["approvals"][0]

        def approve_later():
            time.sleep(0.6)
            from harness import HTTP
            h = HTTP(gw.port)
            h.request("POST", "/api/approvals/%s/approve" % apr["id"], {},
                      {"Authorization": "Bearer " + admin})
            h.close()
        t = threading.Thread(target=approve_later)
        t.start()
        st, body, _ = gw.post("/api/agents/assistant/approve-tool-call-generate",
                              {"runId": b["runId"], "toolCallId": apr["toolCallId"]}, key=key)
        t.join()
        self.assertEqual(st, 200, body)
        self.assertEqual(body["approval"]["status"], "approved")
        self.assertEqual(body["status"], "completed")
        self.assertEqual(body["text"], "Email sent.")

    def test_run_events_stream(self):
        gw, key, admin = self.start()
        b = self.suspend(gw, key)
        got = {}

        def watch():
            import http.client
            c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=20)
            c.request("GET", "/api/runs/%s/events" % b["runId"],
                      headers={"Authorization": "Bearer " + key})
            r = c.getresponse()
            got["text"] = r.read().decode()
            c.close()
        t = threading.Thread(target=watch)
        t.start()
        time.sleep(0.4)
        gw.post("/api/approvals/%s/approve" % b["approvals"][0]["id"], {}, key=admin)
        t.join(20)
        text = got.get("text", "")
        self.assertIn("event: snapshot", text)
        self.assertIn('"type":"tool-result"', text)
        self.assertIn('"type":"finish"', text)
        self.assertTrue(text.rstrip().endswith("data: [DONE]"))

    def test_approval_survives_a_restart(self):
        gw, key, admin = self.start()
        b = self.suspend(gw, key)
        apr = b["approvals"][0]["id"]
        gw.restart()
        st, a, _ = gw.post("/api/approvals/%s/approve" % apr, {}, key=admin)
        self.assertEqual(st, 200, a)
        self.wait_run(gw, key, b["runId"], "completed")
        self.assertEqual(len(self.fake.requests(tool="send-email")), 1)


if __name__ == "__main__":
    unittest.main()
