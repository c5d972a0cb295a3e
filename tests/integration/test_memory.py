"""Threads and memory: owner and resource isolation, keys of one owner
sharing threads, the memory tools, working memory in the system prompt, and
the Mastra-compatible memory REST."""

import json
import unittest

from harness import GatewayTest, config


def agents(model):
    return {"assistant": {"provider": "fake", "model": model, "instructions": "Base.",
                          "tools": ["memory_*", "working_memory_update"],
                          "memory": {"enabled": True, "last_messages": 4}, "max_steps": 4}}


def save(content):
    return {"tool_calls": [{"id": "s", "name": "memory_save", "arguments": {"content": content}}]}


def search(query):
    return {"tool_calls": [{"id": "q", "name": "memory_search", "arguments": {"query": query}}]}


class MemoryTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.m = self.model()
        self.gw = self.gateway(config(self.fake, agents=agents(self.m)))

    def gen(self, key, msg, **mem):
        st, b, _ = self.gw.post("/api/agents/assistant/generate",
                                {"messages": msg, "memory": mem}, key=key)
        self.assertEqual(st, 200, b)
        return b

    def last_tool_result(self):
        msgs = self.fake.requests(model=self.m)[-1]["body"]["messages"]
        return json.loads(msgs[-1]["content"])

    def test_memories_belong_to_owner_and_resource(self):
        alice = self.gw.create_key("alice")
        alice2 = self.gw.create_key("alice-laptop", owner="alice")
        bob = self.gw.create_key("bob")
        self.fake.script(self.m, save("alice likes green tea"), {"text": "ok"})
        self.gen(alice, "remember", resource="home")
        # another resource of the same owner sees nothing
        self.fake.script(self.m, search("green tea"), {"text": "ok"})
        self.gen(alice, "find", resource="work")
        self.assertEqual(self.last_tool_result()["memories"], [])
        # another key of the same owner, same resource: shared
        self.fake.script(self.m, search("green tea"), {"text": "ok"})
        self.gen(alice2, "find", resource="home")
        found = self.last_tool_result()["memories"]
        self.assertEqual([x["content"] for x in found], ["alice likes green tea"])
        # another owner, same resource name: nothing
        self.fake.script(self.m, search("green tea"), {"text": "ok"})
        self.gen(bob, "find", resource="home")
        self.assertEqual(self.last_tool_result()["memories"], [])
        # bob cannot delete alice's memory either
        mid = found[0]["id"]
        self.fake.script(self.m, {"tool_calls": [{"id": "d", "name": "memory_delete",
                                                  "arguments": {"id": mid}}]}, {"text": "ok"})
        self.gen(bob, "delete", resource="home")
        self.assertIn("no memory", self.last_tool_result()["error"])
        self.assertEqual(self.gw.query("SELECT count(*) AS n FROM memories")[0]["n"], 1)

    def test_search_is_ranked_limited_and_fts_syntax_is_inert(self):
        k = self.gw.create_key("alice")
        for fact in ["the cat is grey", "the dog is brown", "a grey sky", "sunny today",
                     "lunch at noon", "meeting on monday", "buy milk"]:
            self.fake.script(self.m, save(fact), {"text": "ok"})
            self.gen(k, "save", resource="r")
        self.fake.script(self.m, {"tool_calls": [{"id": "q", "name": "memory_search",
                                                  "arguments": {"query": "grey cat", "limit": 2}}]},
                         {"text": "ok"})
        self.gen(k, "find", resource="r")
        found = self.last_tool_result()["memories"]
        self.assertEqual(len(found), 2)
        self.assertEqual(found[0]["content"], "the cat is grey")
        self.assertGreaterEqual(found[0]["score"], found[1]["score"])
        # FTS operators in the query are just words, never an error
        self.fake.script(self.m, search('cat" OR content:* NEAR("x" AND'), {"text": "ok"})
        self.gen(k, "find", resource="r")
        self.assertIsInstance(self.last_tool_result()["memories"], list)

    def test_working_memory_goes_into_the_system_prompt(self):
        k = self.gw.create_key("alice")
        self.fake.script(self.m, {"tool_calls": [{"id": "w", "name": "working_memory_update",
                                                  "arguments": {"content": "Name: Alice"}}]},
                         {"text": "ok"}, {"text": "hi Alice"})
        self.gen(k, "I am Alice", resource="r")
        # the run reads the prompt once, and again after its own update:
        # the step after the tool already sees it
        steps = [r["body"]["messages"][0]["content"] for r in self.fake.requests(model=self.m)]
        self.assertEqual(len(steps), 2)
        self.assertNotIn("Name: Alice", steps[0])
        self.assertIn("Name: Alice", steps[1])
        self.gen(k, "who am I?", resource="r")
        system = self.fake.requests(model=self.m)[-1]["body"]["messages"][0]["content"]
        self.assertTrue(system.startswith("Base."))
        self.assertIn("Name: Alice", system)

    def test_history_window_never_splits_a_tool_exchange(self):
        k = self.gw.create_key("alice")
        self.fake.script(self.m, save("a"), {"text": "one"})
        b = self.gen(k, "first", resource="r", thread="t1")
        self.fake.script(self.m, {"text": "two"}, {"text": "three"})
        self.gen(k, "second", resource="r", thread="t1")
        self.gen(k, "third", resource="r", thread="t1")
        # last_messages is 4: the window starts inside the first exchange;
        # the upstream must never see a dangling tool result
        msgs = self.fake.requests(model=self.m)[-1]["body"]["messages"]
        roles = [x["role"] for x in msgs]
        self.assertEqual(roles[0], "system")
        self.assertNotEqual(roles[1], "tool")
        for i, x in enumerate(msgs):
            if x["role"] == "tool":
                self.assertIn("tool_calls", msgs[i - 1])

    def test_threads_rest(self):
        alice = self.gw.create_key("alice")
        bob = self.gw.create_key("bob")
        st, t, _ = self.gw.post("/api/memory/threads?agentId=assistant",
                                {"resourceId": "r1", "title": "Plans", "metadata": {"k": 1}},
                                key=alice)
        self.assertEqual(st, 200, t)
        tid = t["id"]
        self.assertEqual(t["title"], "Plans")
        self.assertEqual(t["metadata"], {"k": 1})
        st, lst, _ = self.gw.get("/api/memory/threads?resourceId=r1&agentId=assistant", key=alice)
        self.assertEqual([x["id"] for x in lst["threads"]], [tid])
        self.assertEqual(lst["total"], 1)
        # another owner: 404, never 403, and not listed
        st, b, _ = self.gw.get("/api/memory/threads/" + tid, key=bob)
        self.assertEqual(st, 404, b)
        st, b, _ = self.gw.get("/api/memory/threads/%s/messages" % tid, key=bob)
        self.assertEqual(st, 404, b)
        st, lst, _ = self.gw.get("/api/memory/threads?resourceId=r1", key=bob)
        self.assertEqual(lst["threads"], [])
        st, b, _ = self.gw.request("DELETE", "/api/memory/threads/" + tid, key=bob)
        self.assertEqual(st, 404, b)
        # messages, paged
        self.fake.script(self.m, {"text": "a1"}, {"text": "a2"})
        self.gen(alice, "q1", resource="r1", thread=tid)
        self.gen(alice, "q2", resource="r1", thread=tid)
        st, p0, _ = self.gw.get("/api/memory/threads/%s/messages?page=0&perPage=3" % tid,
                                key=alice)
        self.assertEqual(st, 200, p0)
        self.assertEqual([x["content"] for x in p0["messages"]], ["q1", "a1", "q2"])
        self.assertTrue(p0["hasMore"])
        self.assertEqual(p0["total"], 4)
        st, p1, _ = self.gw.get("/api/memory/threads/%s/messages?page=1&perPage=3" % tid,
                                key=alice)
        self.assertEqual([x["content"] for x in p1["messages"]], ["a2"])
        # update and delete
        st, t2, _ = self.gw.request("PATCH", "/api/memory/threads/" + tid, {"title": "Renamed"},
                                    key=alice)
        self.assertEqual(t2["title"], "Renamed")
        st, b, _ = self.gw.request("DELETE", "/api/memory/threads/" + tid, key=alice)
        self.assertEqual(st, 200, b)
        self.assertEqual(self.gw.query("SELECT count(*) AS n FROM messages")[0]["n"], 0)
        st, b, _ = self.gw.get("/api/memory/threads/" + tid, key=alice)
        self.assertEqual(st, 404)

    def test_thread_ids_are_per_owner(self):
        # bob naming alice's thread gets a thread of his own, exactly as for
        # an id nobody used: no 404 that tells him it exists, no way in
        alice = self.gw.create_key("alice")
        bob = self.gw.create_key("bob")
        self.fake.script(self.m, {"text": "x"}, {"text": "y"}, {"text": "z"}, {"text": "w"})
        self.gen(alice, "my secret is 42", resource="r", thread="secret-thread")
        answers = []
        for thread in ("secret-thread", "unused-thread"):
            st, body, _ = self.gw.post("/api/agents/assistant/generate",
                                       {"messages": "peek", "memory": {"thread": thread,
                                                                       "resource": "r"}},
                                       key=bob)
            self.assertEqual(st, 200, body)
            self.assertEqual(body["threadId"], thread)
            answers.append(body)
            sent = self.fake.requests(model=self.m)[-1]["body"]["messages"]
            self.assertNotIn("42", json.dumps(sent))
        self.assertEqual(set(answers[0]), set(answers[1]))
        # two threads named secret-thread, one per owner, each with its own messages
        rows = self.gw.query("SELECT owner, (SELECT count(*) FROM messages m WHERE "
                             "m.owner = t.owner AND m.thread_id = t.id) AS n FROM threads t "
                             "WHERE id = 'secret-thread' ORDER BY owner")
        self.assertEqual(rows, [{"owner": "alice", "n": 2}, {"owner": "bob", "n": 2}])
        # the memory API: each owner sees their own; creating one with a
        # name another owner uses works, and one's own name again is a 409
        for key, first in ((alice, "my secret is 42"), (bob, "peek")):
            st, p, _ = self.gw.get("/api/memory/threads/secret-thread/messages", key=key)
            self.assertEqual(st, 200, p)
            self.assertEqual(p["messages"][0]["content"], first)
        carol = self.gw.create_key("carol")
        for tid in ("secret-thread", "brand-new"):
            st, t, _ = self.gw.post("/api/memory/threads?agentId=assistant",
                                    {"resourceId": "r", "threadId": tid}, key=carol)
            self.assertEqual(st, 200, t)
            self.assertEqual(t["id"], tid)
            st, b, _ = self.gw.post("/api/memory/threads?agentId=assistant",
                                    {"resourceId": "r", "threadId": tid}, key=carol)
            self.assertEqual(st, 409, b)
        # alice's thread goes on as it was
        self.gen(alice, "and?", resource="r", thread="secret-thread")
        sent = json.dumps(self.fake.requests(model=self.m)[-1]["body"]["messages"])
        self.assertIn("my secret is 42", sent)
        self.assertNotIn("peek", sent)


if __name__ == "__main__":
    unittest.main()
