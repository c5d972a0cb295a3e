"""Kill -9 under load, twenty times: no acknowledged audit row is lost, and
`gatehouse audit verify` passes after every restart."""

import random
import signal
import threading
import time
import unittest

from harness import Gateway, HTTP, config

ROUNDS = 20
CLIENTS = 6


class KillTest(unittest.TestCase):

    def test_kill_9_twenty_times(self):
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
        try:
            key = gw.create_key("load")
            for rnd in range(ROUNDS):
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
                time.sleep(0.3 + rng.random() * 0.7)
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
                c = gw.db()
                have = {}
                for row in c.execute("SELECT run_id, event FROM audit_events "
                                     "WHERE tool_name = 'memory_save'"):
                    have.setdefault(row["run_id"], set()).add(row["event"])
                c.close()
                lost = [r for r in runs if have.get(r) != {"allowed", "executed"}]
                self.assertEqual(lost, [], "round %d lost audit rows of acknowledged runs" % rnd)
                rc, out, err = gw.cli("audit", "verify", "--config", gw.config_path)
                self.assertEqual(rc, 0, "round %d: %s%s" % (rnd, out, err))
                gw.start()
            n = len(acked)
            self.assertGreater(n, ROUNDS * 5, "too little load to mean anything")
            print("\n%d rounds, %d acknowledged runs, every audit row kept, verify ok" %
                  (ROUNDS, n))
        finally:
            gw.cleanup()


if __name__ == "__main__":
    unittest.main()
