"""gatehouse policy test: the tool decisions recorded in the audit log,
replayed against a candidate config. A tightened rule is reported on
exactly the calls it would refuse, and the gate, once the candidate is in
force, refuses exactly those; a rule reading a redacted argument is
undecidable, and so is one on arguments stored truncated; --since filters;
the admin API gives the same report."""

import copy
import json
import unittest

from harness import GatewayTest, config

SINCE_ALL = "1d"

NO_PLAIN_HTTP = {"name": "no-plain-http", "tool": "fetch", "pointer": "/url",
                 "regex": "^http://", "effect": "deny"}
NO_PLAIN_HTTP_RULE = ('policy "default": arguments "no-plain-http" (fetch /url matches regex '
                      '"^http://")')

# (tool, arguments) in the order they are called
CALLS = [
    ("fetch", {"url": "https://example.org/a"}),
    ("fetch", {"url": "http://insecure.example/b"}),
    ("lookup", {"q": "gatehouse"}),
    ("deploy", {"env": "prod"}),
    ("fetch", {"url": "https://example.org/c", "token": "secret-1"}),
    ("fetch", {"url": "http://insecure.example/d"}),
]


class PolicyTestTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.m = self.model()
        f = self.fake.url
        tools = {name: {"type": "http", "description": name, "url": f + "/tools/" + name,
                        "input_schema": {"type": "object"}}
                 for name in ("fetch", "lookup", "deploy")}
        agents = {"assistant": {"provider": "fake", "model": self.m,
                                "tools": ["fetch", "lookup", "deploy"], "max_steps": 4}}
        self.policies = {"default": {"agents": ["*"],
                                     "tools": {"allow": ["*"], "deny": ["deploy"]}}}
        self.cfg = config(self.fake, agents=agents, tools=tools, policies=self.policies,
                          audit={"redact": ["token"], "max_args_bytes": 256})
        self.gw = self.gateway(self.cfg)
        self.cfg = self.gw.cfg      # as it runs: with the database the harness gave it
        self.key = self.gw.create_key("alice")
        self.admin = self.gw.create_key("root", admin=True)
        for name in ("fetch", "lookup", "deploy"):
            self.fake.tool_script(name, *[{"body": {"ok": True}}] * 4)

    def candidate(self, *rules):
        cfg = copy.deepcopy(self.cfg)
        cfg["policies"]["default"]["arguments"] = list(rules)
        return cfg

    def write(self, name, cfg):
        path = self.gw.dir + "/" + name
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
        return path

    def call(self, tool, args):
        self.fake.script(self.m, {"tool_calls": [{"id": "1", "name": tool, "arguments": args}]},
                         {"text": "done"})
        st, b, _ = self.gw.post("/api/agents/assistant/generate", {"messages": "go"},
                                key=self.key)
        self.assertEqual(st, 200, b)

    def decisions(self, after_seq=0):
        """The gate's decision rows after after_seq: [(seq, ts, tool, event)]."""
        return [(r["seq"], r["ts"], r["tool_name"], r["event"]) for r in self.gw.query(
            "SELECT seq, ts, tool_name, event FROM audit_events WHERE seq > ? AND event IN "
            "('allowed','denied','rate_limited','approval_requested') ORDER BY seq", after_seq)]

    def record(self):
        for tool, args in CALLS:
            self.call(tool, args)
        rows = self.decisions()
        self.assertEqual([r[3] for r in rows],
                         ["allowed", "allowed", "allowed", "denied", "allowed", "allowed"])
        return rows

    def policy_test(self, cand_path, *extra):
        rc, out, err = self.gw.cli("policy", "test", cand_path, "--config", self.gw.config_path,
                                   *extra)
        return rc, out, err

    def report(self, cand_path, since=SINCE_ALL):
        rc, out, err = self.policy_test(cand_path, "--since", since, "--json")
        self.assertIn(rc, (0, 1), err)
        return rc, json.loads(out)

    def test_reports_exactly_what_the_gate_then_refuses(self):
        recorded = self.record()
        cand = self.write("candidate.json", self.candidate(NO_PLAIN_HTTP))
        rc, rep = self.report(cand)
        self.assertEqual(rc, 1)
        changed_seqs = [c["seq"] for c in rep["changes"]]
        self.assertEqual(changed_seqs, [recorded[1][0], recorded[5][0]])
        for c in rep["changes"]:
            self.assertEqual((c["tool"], c["before"], c["after"], c["rule"]),
                             ("fetch", "allowed", "denied", NO_PLAIN_HTTP_RULE))
        self.assertEqual(rep["totals"], {"decisions": 6, "unchanged": 4, "changed": 2,
                                         "undecidable": 0, "keyGone": 0,
                                         "rateLimitedNotReplayed": 0})
        self.assertEqual(rep["transitions"], {"allowed -> denied": 2})
        self.assertEqual(rep["rules"], [{"rule": NO_PLAIN_HTTP_RULE, "changed": 2,
                                         "transitions": {"allowed -> denied": 2}}])
        # the table says the same
        rc, out, _ = self.policy_test(cand, "--since", SINCE_ALL)
        self.assertEqual(rc, 1)
        self.assertIn("CHANGED: 2 calls would change outcome", out)
        self.assertIn(NO_PLAIN_HTTP_RULE, out)
        self.assertIn("TOTAL: 6 decisions: 4 unchanged, 2 changed, 0 undecidable", out)

        # the candidate in force (a restart reads it): the same calls again
        self.gw.stop()
        with open(self.gw.config_path, "w") as f:
            json.dump(self.candidate(NO_PLAIN_HTTP), f)
        self.gw.start()
        for tool, args in CALLS:
            self.call(tool, args)
        replayed = self.decisions(recorded[-1][0])
        self.assertEqual(len(replayed), len(CALLS))
        changed = {c["seq"] for c in rep["changes"]}
        for (seq, _, tool, before), (_, _, tool2, after) in zip(recorded, replayed):
            self.assertEqual(tool, tool2)
            if seq in changed:
                self.assertEqual(after, "denied", (tool, seq))
            else:
                self.assertEqual(after, before, (tool, seq))
        # and under the candidate now in force, nothing would change
        rc, rep2 = self.report(cand, since="1d")
        self.assertEqual(rep2["totals"]["changed"], 2)   # the first round, recorded as allowed
        rc, rep3 = self.report(cand, since=str(replayed[0][1]))
        self.assertEqual(rc, 0)
        self.assertEqual(rep3["totals"]["changed"], 0)
        self.assertEqual(rep3["totals"]["decisions"], len(CALLS))

    def test_a_rule_on_a_redacted_argument_is_undecidable(self):
        recorded = self.record()
        rule = {"name": "no-secret", "tool": "fetch", "pointer": "/token", "glob": "secret-*",
                "effect": "deny"}
        cand = self.write("candidate.json", self.candidate(rule))
        rc, rep = self.report(cand)
        # never guessed: neither a change nor unchanged
        self.assertEqual(rc, 0)
        self.assertEqual(rep["totals"]["undecidable"], 1)
        self.assertEqual(rep["totals"]["changed"], 0)
        self.assertEqual([u["seq"] for u in rep["undecidable"]], [recorded[4][0]])
        why = rep["undecidable"][0]["why"]
        self.assertIn('arguments "no-secret" reads /token, which the audit log stores redacted',
                      why)
        self.assertEqual(rep["undecidableRules"], [{"rule": why, "calls": 1}])
        rc, out, _ = self.policy_test(cand, "--since", SINCE_ALL)
        self.assertIn("UNDECIDABLE: 1 call", out)
        # arguments stored truncated (over audit.max_args_bytes): a rule on them is
        # undecidable for that call only
        self.call("lookup", {"q": "x" * 300})
        long_seq = self.decisions(recorded[-1][0])[0][0]
        rule = {"name": "no-x", "tool": "lookup", "pointer": "/q", "regex": "^x", "effect": "deny"}
        rc, rep = self.report(self.write("candidate2.json", self.candidate(rule)))
        self.assertEqual(rc, 0)
        self.assertEqual(rep["totals"]["decisions"], 7)
        self.assertEqual([u["seq"] for u in rep["undecidable"]], [long_seq])
        self.assertIn('arguments "no-x" reads the arguments, which the audit log stores truncated',
                      rep["undecidable"][0]["why"])
        # the secret itself never reached the log the report reads
        self.assertNotIn("secret-1", json.dumps(self.gw.query("SELECT * FROM audit_events"),
                                                     default=str))

    def test_since_and_gone_agents(self):
        recorded = self.record()
        cand = self.write("candidate.json", self.candidate(NO_PLAIN_HTTP))
        # from just after the second call: only the last plain-http fetch changes
        since = recorded[1][1] + 1
        expect = [r for r in recorded if r[1] >= since]
        rc, rep = self.report(cand, since=str(since))
        self.assertEqual(rep["totals"]["decisions"], len(expect))
        self.assertEqual([c["seq"] for c in rep["changes"]], [recorded[5][0]])
        self.assertEqual(rc, 1)
        # after every call: nothing to replay, nothing changes
        rc, rep = self.report(cand, since=str(recorded[-1][1] + 1))
        self.assertEqual((rc, rep["totals"]["decisions"]), (0, 0))
        # an agent the candidate no longer has
        cfg = self.candidate()
        cfg["agents"] = {"other": dict(cfg["agents"]["assistant"])}
        rc, rep = self.report(self.write("noagent.json", cfg))
        self.assertEqual(rc, 1)
        self.assertEqual(rep["gone"]["agents"], [{"agent": "assistant", "calls": 6}])
        self.assertEqual(rep["transitions"], {"allowed -> denied": 5})
        # a key revoked since is not replayed
        kid = self.gw.query("SELECT id FROM api_keys WHERE name = 'alice'")[0]["id"]
        self.gw.cli("keys", "revoke", "--config", self.gw.config_path, "--id", kid, check=True)
        rc, rep = self.report(cand)
        self.assertEqual((rc, rep["totals"]["keyGone"], rep["totals"]["changed"]), (0, 6, 0))
        self.assertEqual(rep["gone"]["keys"], [{"key": kid, "calls": 6}])

    def test_exit_statuses(self):
        self.record()
        same = self.write("same.json", self.cfg)
        rc, out, err = self.policy_test(same, "--since", SINCE_ALL)
        self.assertEqual(rc, 0, err)
        self.assertIn("CHANGED: 0 calls", out)
        bad = self.write("bad.json", {"agents": {"x": {"provider": "nope"}}})
        rc, out, err = self.policy_test(bad)
        self.assertEqual(rc, 2)
        self.assertIn("the candidate is not a valid config", err)
        rc, out, err = self.policy_test(same, "--since", "yesterday")
        self.assertEqual(rc, 2)
        self.assertIn("--since", err)
        rc, out, err = self.gw.cli("policy", "test")
        self.assertEqual(rc, 2)
        rc, out, err = self.gw.cli("policy", "test", "/nonexistent.json")
        self.assertEqual(rc, 2)
        rc, out, err = self.gw.cli("policy", "test", "--help")
        self.assertEqual(rc, 0)
        self.assertIn("Exit codes: 0 no call would change, 1 some would, 2 error", out)

    def test_admin_api_gives_the_same_report(self):
        self.record()
        cand_cfg = self.candidate(NO_PLAIN_HTTP)
        cand = self.write("candidate.json", cand_cfg)
        _, cli = self.report(cand)
        text = json.dumps(cand_cfg)
        st, api, _ = self.gw.post("/api/admin/policy/test", {"config": text, "since": SINCE_ALL},
                                  key=self.admin)
        self.assertEqual(st, 200, api)
        self.assertEqual(api["source"], "body")
        for k in ("candidate", "source", "since"):  # since: "1d" before now, a moment apart
            api.pop(k)
            cli.pop(k, None)
        self.assertEqual(api, cli)
        # an empty body: the config on disk, as serve would reload it
        st, disk, _ = self.gw.post("/api/admin/policy/test?since=1d", raw=b"", key=self.admin)
        self.assertEqual(st, 200, disk)
        self.assertEqual((disk["source"], disk["totals"]["changed"]), ("file", 0))
        with open(self.gw.config_path, "w") as f:
            json.dump(cand_cfg, f)
        st, disk, _ = self.gw.post("/api/admin/policy/test?since=1d", raw=b"", key=self.admin)
        self.assertEqual(st, 200, disk)
        self.assertEqual(disk["candidate"], self.gw.config_path)
        self.assertEqual(disk["changes"], cli["changes"])
        # a candidate that does not validate: 400 with the config's message
        st, b, _ = self.gw.post("/api/admin/policy/test",
                                {"config": json.dumps({"agents": {"x": {"provider": "nope"}}})},
                                key=self.admin)
        self.assertEqual(st, 400, b)
        self.assertIn("the candidate config is not valid", b["error"]["message"])
        self.assertIn("$.agents.x", b["error"]["message"])
        st, b, _ = self.gw.post("/api/admin/policy/test", {"config": 5}, key=self.admin)
        self.assertEqual(st, 400, b)
        st, b, _ = self.gw.post("/api/admin/policy/test", {"since": "soon"}, key=self.admin)
        self.assertEqual(st, 400, b)
        # admins only
        st, b, _ = self.gw.post("/api/admin/policy/test", {}, key=self.key)
        self.assertEqual(st, 403, b)


if __name__ == "__main__":
    unittest.main()
