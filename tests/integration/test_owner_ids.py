"""Ids a client chooses (thread ids, A2A context ids, runId) belong to its
owner: another owner using the same id gets exactly what an id nobody used
gets, never a 404 or 409 that says it exists, and never the other owner's
thread or run. Databases from before thread ids were per owner keep their
threads and messages."""

import json
import os
import re
import sqlite3
import unittest

from harness import GH_SRC, Gateway, GatewayTest, config, sqlite_only

DERIVED = re.compile(r"^run_[0-9a-f]{24}$")


def agents(model):
    return {"assistant": {"provider": "fake", "model": model, "tools": ["memory_*"],
                          "memory": {"enabled": True}, "max_steps": 4}}


def scrub(body):
    """An error body without what differs between any two requests."""
    e = dict(body["error"])
    e.pop("requestId", None)
    e["message"] = re.sub(r"run \S+", "run X", e["message"])
    return e


class OwnerIdsTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.m = self.model()
        self.gw = self.gateway(config(self.fake, agents=agents(self.m)))
        self.alice = self.gw.create_key("alice")
        self.bob = self.gw.create_key("bob")
        self.fake.script(self.m, {"text": "ok", "repeat": True})

    def gen(self, key, **body):
        body.setdefault("messages", "hi")
        return self.gw.post("/api/agents/assistant/generate", body, key=key)

    def test_run_ids_are_named_per_owner(self):
        st, a, _ = self.gen(self.alice, runId="r1")
        self.assertEqual(st, 200, a)
        self.assertRegex(a["runId"], DERIVED)
        # the owner finds it by the run's id and by the name it gave
        for ref in (a["runId"], "r1"):
            st, r, _ = self.gw.get("/api/runs/" + ref, key=self.alice)
            self.assertEqual(st, 200, r)
            self.assertEqual(r["id"], a["runId"])
        # naming a run twice is the owner's own conflict
        st, b, _ = self.gen(self.alice, runId="r1")
        self.assertEqual(st, 409, b)
        self.assertIn("already exists", b["error"]["message"])
        # another owner: the same name is a run of its own, exactly as a
        # name nobody used
        st, b1, _ = self.gen(self.bob, runId="r1")
        st2, b2, _ = self.gen(self.bob, runId="r-nobody-used")
        self.assertEqual((st, st2), (200, 200), (b1, b2))
        self.assertNotEqual(b1["runId"], a["runId"])
        self.assertEqual(set(b1), set(b2))
        st, r, _ = self.gw.get("/api/runs/r1", key=self.bob)
        self.assertEqual(r["id"], b1["runId"])
        # alice's run is as invisible to bob as a run that never was
        st, x, _ = self.gw.get("/api/runs/" + a["runId"], key=self.bob)
        st2, y, _ = self.gw.get("/api/runs/run_000000000000000000000000", key=self.bob)
        self.assertEqual((st, st2), (404, 404))
        self.assertEqual(scrub(x), scrub(y))
        # and bob passing alice's run id as a name takes nothing over
        st, c, _ = self.gen(self.bob, runId=a["runId"])
        self.assertEqual(st, 200, c)
        self.assertNotEqual(c["runId"], a["runId"])
        rows = self.gw.query("SELECT owner FROM runs WHERE id = ?", a["runId"])
        self.assertEqual(rows, [{"owner": "alice"}])

    def test_admins_name_the_owner_when_thread_ids_meet(self):
        admin = self.gw.create_key("root", admin=True)
        for key in (self.alice, self.bob):
            st, b, _ = self.gen(key, memory={"thread": "t-shared", "resource": "r"})
            self.assertEqual(st, 200, b)
        st, b, _ = self.gw.get("/api/admin/threads/t-shared", key=admin)
        self.assertEqual(st, 409, b)
        self.assertIn("name the owner", b["error"]["message"])
        for owner in ("alice", "bob"):
            st, t, _ = self.gw.get("/api/admin/threads/t-shared?owner=" + owner, key=admin)
            self.assertEqual(st, 200, t)
            self.assertEqual(t["owner"], owner)
            self.assertEqual(len(t["runs"]), 1)
            st, ms, _ = self.gw.get("/api/admin/threads/t-shared/messages?owner=" + owner,
                                    key=admin)
            self.assertEqual(ms["total"], 2)
            # the audit log tells the two apart by owner
            st, rows, _ = self.gw.get("/api/audit?thread=t-shared&owner=" + owner, key=admin)
            self.assertEqual(st, 200, rows)
            self.assertTrue(all(x["owner"] == owner for x in rows["rows"]))


    def test_openai_pinned_thread_of_another_owner(self):
        st, b, _ = self.gen(self.alice, messages="alice's secret is 42",
                            memory={"thread": "pinned", "resource": "r"})
        self.assertEqual(st, 200, b)
        for pin in ("pinned", "pinned-by-nobody"):
            st, b, h = self.gw.post("/v1/chat/completions", {
                "model": "assistant", "messages": [{"role": "user", "content": "what is it?"}]},
                key=self.bob, headers={"X-Gatehouse-Thread": pin})
            self.assertEqual(st, 200, b)
            self.assertEqual(h["x-gatehouse-thread"], pin)
            sent = json.dumps(self.fake.requests(model=self.m)[-1]["body"]["messages"])
            self.assertNotIn("42", sent)
        rows = self.gw.query("SELECT owner FROM threads WHERE id = 'pinned' ORDER BY owner")
        self.assertEqual([r["owner"] for r in rows], ["alice", "bob"])


@sqlite_only("upgrades a SQLite file made by the migrations before 0007 (PostgreSQL's schema "
             "starts after them)")
class UpgradeTest(unittest.TestCase):
    """A database made before thread ids were per owner."""

    def test_threads_and_messages_survive(self):
        d = __import__("tempfile").mkdtemp(prefix="gh-upgrade-")
        db = os.path.join(d, "gatehouse.db")
        c = sqlite3.connect(db)
        mig = os.path.join(GH_SRC, "migrations", "sqlite")
        c.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                  "name TEXT NOT NULL, applied_at INTEGER NOT NULL)")
        for name in sorted(os.listdir(mig)):
            v = int(name[:4])
            if v > 6:
                break
            with open(os.path.join(mig, name)) as f:
                c.executescript(f.read())
            c.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (v, name))
        c.execute("INSERT INTO threads VALUES ('t1', 'alice', 'r', 'assistant', 'Old', NULL, 1, 2)")
        c.execute("INSERT INTO threads VALUES ('t2', 'bob', 'r', 'assistant', NULL, NULL, 1, 2)")
        for i, (tid, text) in enumerate([("t1", "first"), ("t1", "second"), ("t2", "other")]):
            c.execute("INSERT INTO messages VALUES (?, ?, ?, 'user', ?, NULL, 3)",
                      ("msg_%d" % i, tid, i + 1, json.dumps(text)))
        c.commit()
        c.close()
        gw = Gateway(config(None), dirname=d)
        try:
            alice = gw.create_key("alice")
            st, p, _ = gw.get("/api/memory/threads/t1/messages", key=alice)
            self.assertEqual(st, 200, p)
            self.assertEqual([m["content"] for m in p["messages"]], ["first", "second"])
            st, t, _ = gw.get("/api/memory/threads/t1", key=alice)
            self.assertEqual(t["title"], "Old")
            st, p, _ = gw.get("/api/memory/threads/t2/messages", key=alice)
            self.assertEqual(st, 404, p)
            rows = gw.query("SELECT owner, thread_id FROM messages ORDER BY id")
            self.assertEqual([(r["owner"], r["thread_id"]) for r in rows],
                             [("alice", "t1"), ("alice", "t1"), ("bob", "t2")])
            self.assertGreaterEqual(gw.query("SELECT max(version) AS v FROM schema_migrations")[0]["v"],
                             7)
            # deleting a thread still takes its messages with it
            st, b, _ = gw.request("DELETE", "/api/memory/threads/t1", key=alice)
            self.assertEqual(st, 200, b)
            self.assertEqual(gw.query("SELECT count(*) AS n FROM messages")[0]["n"], 1)
        finally:
            gw.cleanup()


if __name__ == "__main__":
    unittest.main()
