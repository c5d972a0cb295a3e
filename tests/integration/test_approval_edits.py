"""Approve with edits: the approver changes a call's arguments; the edited
arguments are checked against the tool's schema and the policy (a deny
rule still wins), the approval binds to their digest, the tool runs once
with them, and the audit log keeps both digests and who edited."""

import hashlib
import json
import unittest

from harness import GatewayTest, config


def setup_config(fake, model, approver="admin"):
    tools = {"send_email": {"type": "http", "description": "Send an email",
                            "url": fake.url + "/tools/send-email",
                            "input_schema": {"type": "object",
                                             "properties": {"to": {"type": "string"},
                                                            "body": {"type": "string"}},
                                             "required": ["to"],
                                             "additionalProperties": False}}}
    agents = {"assistant": {"provider": "fake", "model": model, "tools": ["send_email"],
                            "memory": {"enabled": True}, "max_steps": 5}}
    policies = {"default": {"agents": ["*"], "tools": {"allow": ["send_*"]},
                            "client_tools": {"allow": ["*"]},
                            "approval": {"require": ["send_*"], "approver": approver},
                            "arguments": [{"name": "no-outside-mail", "tool": "send_email",
                                           "pointer": "/to", "glob": "*@evil.example",
                                           "effect": "deny"}]}}
    return config(fake, agents=agents, tools=tools, policies=policies)


def canon_sha(v):
    return hashlib.sha256(json.dumps(v, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


class ApprovalEditsTest(GatewayTest):

    def start(self, **kw):
        self.m = self.model()
        gw = self.gateway(setup_config(self.fake, self.m, **kw))
        return gw, gw.create_key("alice"), gw.create_key("root", admin=True)

    def suspend(self, gw, key):
        self.fake.script(self.m, {"tool_calls": [{"id": "e1", "name": "send_email",
                                                  "arguments": {"to": "bob@example.com",
                                                                "body": "hello"}}]},
                         {"text": "Email sent."})
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "email bob"}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["status"], "suspended")
        return b, b["approvals"][0]

    def audit(self, gw):
        return gw.query("SELECT event, args, detail FROM audit_events "
                        "WHERE tool_name = 'send_email' ORDER BY seq")

    def test_edited_arguments_run_once_and_both_digests_are_kept(self):
        gw, key, admin = self.start()
        b, apr = self.suspend(gw, key)
        # the approver sees the schema to edit against
        st, one, _ = gw.get("/api/approvals/" + apr["id"], key=admin)
        self.assertEqual(st, 200, one)
        self.assertEqual(one["inputSchema"]["required"], ["to"])
        self.assertIsNone(one["editedArgs"])
        edited = {"to": "carol@example.com", "body": "hello, edited"}
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr["id"],
                           {"args": edited, "reason": "right recipient"}, key=admin)
        self.assertEqual(st, 200, d)
        self.assertEqual(d["status"], "approved")
        self.assertEqual(d["args"], {"to": "bob@example.com", "body": "hello"})
        self.assertEqual(d["editedArgs"], edited)
        self.assertEqual(d["editedArgsSha256"], canon_sha(edited))
        self.assertEqual(d["argsSha256"], canon_sha({"to": "bob@example.com", "body": "hello"}))
        r = self.wait_run(gw, key, b["runId"], "completed")
        self.assertEqual(r["output"]["text"], "Email sent.")
        calls = self.fake.requests(tool="send-email")
        self.assertEqual(len(calls), 1, calls)
        self.assertEqual(calls[0]["body"], edited)
        rows = self.audit(gw)
        self.assertEqual([x["event"] for x in rows],
                         ["approval_requested", "approved", "executed"])
        self.assertEqual(json.loads(rows[0]["args"])["to"], "bob@example.com")
        for row in rows[1:]:
            self.assertEqual(json.loads(row["args"]), edited)
            det = json.loads(row["detail"])["args_edited"]
            self.assertEqual(det["original_sha256"], d["argsSha256"])
            self.assertEqual(det["edited_sha256"], canon_sha(edited))
            self.assertTrue(det["edited_by"].startswith("key:"), det)
        # the approval reports what ran
        st, one, _ = gw.get("/api/approvals/" + apr["id"], key=admin)
        self.assertEqual(one["execution"]["status"], "succeeded")
        self.assertNotIn("inputSchema", one)
        # the model saw the edited call's result
        msgs = self.fake.requests(model=self.m)
        self.assertEqual(len(msgs), 2)
        gw.cli("audit", "verify", "--config", gw.config_path, check=True)

    def test_deny_rule_still_wins_over_an_edit(self):
        gw, key, admin = self.start()
        b, apr = self.suspend(gw, key)
        st, e, _ = gw.post("/api/approvals/%s/approve" % apr["id"],
                           {"args": {"to": "mallory@evil.example", "body": "x"}}, key=admin)
        self.assertEqual(st, 403, e)
        self.assertIn("no-outside-mail", e["error"]["message"])
        # nothing was decided: the approval still waits, nothing ran
        st, one, _ = gw.get("/api/approvals/" + apr["id"], key=admin)
        self.assertEqual(one["status"], "pending")
        self.assertEqual(self.fake.requests(tool="send-email"), [])
        self.assertEqual([x["event"] for x in self.audit(gw)], ["approval_requested"])
        # approving as asked still works
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr["id"], {}, key=admin)
        self.assertEqual(st, 200, d)
        self.wait_run(gw, key, b["runId"], "completed")
        calls = self.fake.requests(tool="send-email")
        self.assertEqual([c["body"] for c in calls], [{"to": "bob@example.com", "body": "hello"}])

    def test_edits_invalid_for_the_schema_are_refused(self):
        gw, key, admin = self.start()
        b, apr = self.suspend(gw, key)
        for bad, word in (({"body": "no recipient"}, "to"),
                          ({"to": "bob@example.com", "cc": "x"}, "cc"),
                          ({"to": 42}, "to"),
                          ("not an object", "object")):
            st, e, _ = gw.post("/api/approvals/%s/approve" % apr["id"], {"args": bad}, key=admin)
            self.assertEqual(st, 400, (bad, e))
            self.assertIn(word, e["error"]["message"])
        # a decline carries no arguments
        st, e, _ = gw.post("/api/approvals/%s/deny" % apr["id"],
                           {"args": {"to": "x@example.com"}}, key=admin)
        self.assertEqual(st, 400, e)
        st, one, _ = gw.get("/api/approvals/" + apr["id"], key=admin)
        self.assertEqual(one["status"], "pending")
        self.assertEqual(self.fake.requests(tool="send-email"), [])

    def test_unchanged_edit_is_approval_as_asked(self):
        gw, key, admin = self.start()
        b, apr = self.suspend(gw, key)
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr["id"],
                           {"args": {"body": "hello", "to": "bob@example.com"}}, key=admin)
        self.assertEqual(st, 200, d)
        self.assertIsNone(d["editedArgs"])
        self.wait_run(gw, key, b["runId"], "completed")
        det = json.loads(self.audit(gw)[1]["detail"])
        self.assertNotIn("args_edited", det)

    def test_caller_edits_its_own_approval_but_not_an_admins(self):
        gw, key, admin = self.start(approver="caller")
        b, apr = self.suspend(gw, key)
        edited = {"to": "dave@example.com"}
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr["id"], {"args": edited}, key=key)
        self.assertEqual(st, 200, d)
        self.wait_run(gw, key, b["runId"], "completed")
        calls = self.fake.requests(tool="send-email")
        self.assertEqual([c["body"] for c in calls], [edited])
        det = json.loads(self.audit(gw)[1]["detail"])["args_edited"]
        self.assertEqual(det["edited_by"], d["decidedBy"])

    def test_client_tool_is_released_with_the_edited_arguments(self):
        gw, key, admin = self.start()
        self.fake.script(self.m, {"tool_calls": [{"id": "s1", "name": "send_sms",
                                                  "arguments": {"to": "+100", "text": "hi"}}]})
        schema = {"type": "object", "properties": {"to": {"type": "string"},
                                                   "text": {"type": "string"}},
                  "required": ["to", "text"]}
        st, b, _ = gw.post("/api/agents/assistant/generate", {
            "messages": "text them",
            "clientTools": {"send_sms": {"description": "Send a text",
                                         "inputSchema": schema}}}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["status"], "suspended")
        apr = b["approvals"][0]
        # the client tool's own schema is the one edits are checked against
        st, one, _ = gw.get("/api/approvals/" + apr["id"], key=admin)
        self.assertEqual(one["inputSchema"]["required"], ["to", "text"])
        st, e, _ = gw.post("/api/approvals/%s/approve" % apr["id"],
                           {"args": {"to": "+200"}}, key=admin)
        self.assertEqual(st, 400, e)
        self.assertIn("text", e["error"]["message"])
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr["id"],
                           {"args": {"to": "+200", "text": "hi"}}, key=admin)
        self.assertEqual(st, 200, d)
        r = self.wait_run(gw, key, b["runId"], "waiting")
        self.assertEqual([(p["toolName"], p["args"]) for p in r["pending"]],
                         [("send_sms", {"to": "+200", "text": "hi"})])


if __name__ == "__main__":
    unittest.main()
