"""Kill -9 under load, up to fifty times (bounded in time): no acknowledged
audit row is lost, `gatehouse audit verify` passes after every kill, every
effect a tool had has its `executed` row (a saved memory is never there
without it), and after every restart no call is left without an end
(`executed`, `failed` or, for calls cut off by the kill, `interrupted`)."""

import json
import random
import signal
import threading
import time
import unittest

from harness import Gateway, HTTP, config

ROUNDS = 50
MIN_ROUNDS = 15
BUDGET_S = 240
CLIENTS = 6
ENDS = {"executed", "failed", "interrupted"}


class KillTest(unittest.TestCase):

    def check_accounts(self, gw, rnd):
        """Every memory has its executed row; every allowed row its end."""
        memories = [r["content"] for r in gw.query("SELECT content FROM memories")]
        executed = set()
        calls = {}
        for row in gw.query("SELECT event, run_id, tool_call_id, args FROM audit_events "
                            "WHERE tool_name = 'memory_save' ORDER BY seq"):
            key = (row["run_id"], row["tool_call_id"])
            calls.setdefault(key, []).append(row["event"])
            if row["event"] == "executed":
                executed.add(json.loads(row["args"])["content"])
        open_calls = gw.query("SELECT count(*) AS n FROM audit_open_calls")[0]["n"]
        no_row = [m for m in memories if m not in executed]
        self.assertEqual(no_row, [], "round %d: effects without an executed row" % rnd)
        endless = [k for k, evs in calls.items() if "allowed" in evs and not ENDS & set(evs)]
        self.assertEqual(endless, [], "round %d: allowed calls without an end" % rnd)
        self.assertEqual(open_calls, 0, "round %d: calls still open after the start" % rnd)
        return sum(1 for evs in calls.values() if "interrupted" in evs)

    def test_kill_9_under_load(self):
        cfg = config(None, agents={"assistant": {
            "provider": "offline", "model": "mock", "tools": ["memory_save"],
            "memory": {"enabled": True}, "max_steps": 3}})
        cfg["providers"]["offline"] = {"type": "mock", "rules": [
            {"tool": "memory_save", "args": {"content": "{{message}}"}, "then": "saved"}]}
        cfg["audit"].update({"checkpoint_rows": 25, "checkpoint_seconds": 1})
        gw = Gateway(cfg)
        rng = random.Random(1234)
        acked = []          # (round, run_id) of every 200 a client received
        lock = threading.Lock()
        deadline = time.time() + BUDGET_S
        rounds = interrupted = 0
        try:
            key = gw.create_key("load")
            for rnd in range(ROUNDS):
                if rnd >= MIN_ROUNDS and time.time() > deadline:
                    break
                stop = threading.Event()

                def client(i, rnd=rnd):
                    h = HTTP(gw.port)
                    n = 0
                    while not stop.is_set() and n < 400:
                        n += 1
                        try:
                            st, b, _ = h.request(
                                "POST", "/api/agents/assistant/generate",
                                {"messages": "r%d c%d n%d" % (rnd, i, n)},
                                {"Authorization": "Bearer " + key})
                        except (OSError, Exception):
                            break  # the server died mid-request: not acknowledged
                        if st == 200 and b.get("text") == "saved":
                            with lock:
                                acked.append((rnd, b["runId"]))
                    h.close()
                threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
                for t in threads:
                    t.start()
                time.sleep(0.2 + rng.random() * 0.5)
                gw.proc.send_signal(signal.SIGKILL)
                gw.proc.wait()
                stop.set()
                for t in threads:
                    t.join(30)
                gw.proc = None
                gw.out.close()
                gw.err.close()
                # every acknowledged run has both of its audit rows
                runs = {r for _, r in acked}
                have = {}
                for row in gw.query("SELECT run_id, event FROM audit_events "
                                    "WHERE tool_name = 'memory_save'"):
                    have.setdefault(row["run_id"], set()).add(row["event"])
                lost = [r for r in runs if have.get(r) != {"allowed", "executed"}]
                self.assertEqual(lost, [], "round %d lost audit rows of acknowledged runs" % rnd)
                rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path)
                self.assertEqual(rc, 0, "round %d: %s%s" % (rnd, out, err))
                # the start closes the calls the kill cut off
                gw.start()
                interrupted = self.check_accounts(gw, rnd)
                rounds += 1
            n = len(acked)
            self.assertGreater(n, rounds * 5, "too little load to mean anything")
            print("\n%d rounds, %d acknowledged runs, every audit row kept, verify ok, "
                  "%d calls cut off and closed as interrupted" % (rounds, n, interrupted))
        finally:
            gw.cleanup()


if __name__ == "__main__":
    unittest.main()
