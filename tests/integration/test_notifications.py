"""Approval notifications: signed webhooks for request, decision and expiry
(verified here with the documented recipe, written independently with
Python's hmac), the Slack-compatible form, a receiver that is down at first
retried and the outcome recorded, pending deliveries resumed after a
restart, e-mail over SMTP to a local test SMTP server, targets changed by a
live reload (a retry goes to the new URL with the new secret; a removed
target's retry ends failed; the first target added to a gateway started
without any), and the retention of finished deliveries."""

import hashlib
import hmac
import http.server
import json
import os
import socketserver
import threading
import time

from harness import GatewayTest, closed_port, config, held_socket

SECRET = "whsec-test-0123456789abcdef"
SECRET_B = "whsec-other-fedcba9876543210"
MAX_SKEW_S = 300


def verify(secret, headers, body):
    """The receiver's check, as the README documents it: HMAC-SHA256 keyed
    by the secret over "<timestamp>.<body>", hex, after "v1="; reject a
    timestamp more than 5 minutes away."""
    ts = headers.get("x-gatehouse-timestamp", "")
    sig = headers.get("x-gatehouse-signature", "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > MAX_SKEW_S:
        return False
    mac = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(sig, "v1=" + mac)


class Receiver:
    """A webhook receiver on loopback: keeps every request; answers with
    the statuses in `answers` first, then 200."""

    def __init__(self, port=0, answers=(), delay=0.0, sock=None):
        self.got = []
        self.answers = list(answers)
        self.delay = delay
        self.lock = threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with outer.lock:
                    outer.got.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                      body))
                    st = outer.answers.pop(0) if outer.answers else 200
                time.sleep(outer.delay)
                try:
                    self.send_response(st)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # gatehouse gave up on this request (its timeout, or stopping)

            def log_message(self, *a):
                pass

        if sock is None:
            self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
        else:
            # serve on a port held (bound, refusing) until now: no other
            # server can have taken it in between
            self.srv = http.server.ThreadingHTTPServer(sock.getsockname(), H,
                                                       bind_and_activate=False)
            self.srv.socket.close()
            self.srv.socket = sock
            self.srv.server_activate()
        self.port = self.srv.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def requests(self, path=None):
        with self.lock:
            return [g for g in self.got if path is None or g[0] == path]

    def wait(self, pred, what, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = [g for g in self.requests() if pred(g)]
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError("no %s arrived; got %r" % (what, self.requests()))

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class SMTPHandler(socketserver.StreamRequestHandler):
    """Just enough SMTP (RFC 5321) for one client: EHLO, MAIL, RCPT, DATA,
    QUIT. Keeps the envelope and the message."""

    def reply(self, line):
        self.wfile.write((line + "\r\n").encode())

    def handle(self):
        srv = self.server
        env = {"from": None, "rcpt": [], "data": None}
        self.reply("220 test ESMTP")
        for _ in range(100):
            line = self.rfile.readline(4096)
            if not line:
                return
            cmd = line.decode("utf-8", "replace").rstrip("\r\n")
            verb = cmd.split(" ", 1)[0].upper()
            if verb in ("EHLO", "HELO"):
                self.reply("250-test")
                self.reply("250 8BITMIME")
            elif verb == "MAIL":
                env["from"] = cmd[len("MAIL FROM:"):].split(" ")[0]
                self.reply("250 ok")
            elif verb == "RCPT":
                env["rcpt"].append(cmd[len("RCPT TO:"):].split(" ")[0])
                self.reply("250 ok")
            elif verb == "DATA":
                self.reply("354 go ahead")
                data = b""
                while not data.endswith(b"\r\n.\r\n") and len(data) < 1 << 20:
                    chunk = self.rfile.readline(65536)
                    if not chunk:
                        return
                    data += chunk
                env["data"] = data[:-3]
                with srv.lock:
                    srv.mails.append(dict(env))
                self.reply("250 queued")
            elif verb == "QUIT":
                self.reply("221 bye")
                return
            else:
                self.reply("250 ok" if verb in ("RSET", "NOOP") else "502 not here")


class SMTPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), SMTPHandler)
        self.mails = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()


def setup_config(fake, model, targets, ttl=3600, **notify):
    tools = {"send_email": {"type": "http", "description": "Send an email",
                            "url": fake.url + "/tools/send-email",
                            "input_schema": {"type": "object",
                                             "properties": {"to": {"type": "string"},
                                                            "body": {"type": "string"},
                                                            "password": {"type": "string"}},
                                             "required": ["to"]}}}
    agents = {"assistant": {"provider": "fake", "model": model, "tools": ["send_email"],
                            "max_steps": 5}}
    policies = {"default": {"agents": ["*"], "tools": {"allow": ["send_*"]},
                            "approval": {"require": ["send_*"], "approver": "admin",
                                         "ttl_seconds": ttl}}}
    n = {"targets": targets, "retry_base_ms": 50, "retry_max_ms": 200, "max_attempts": 20}
    n.update(notify)
    return config(fake, agents=agents, tools=tools, policies=policies,
                  server={"public_url": "https://gate.example.com/"}, notifications=n)


class NotificationsTest(GatewayTest):

    def start(self, targets, env=None, **kw):
        """targets None: a config without a notifications section."""
        self.m = self.model()
        env = dict(env or {})
        env.setdefault("NOTIFY_SECRET", SECRET)
        env.setdefault("NOTIFY_SECRET_B", SECRET_B)
        cfg = setup_config(self.fake, self.m, targets or {}, **kw)
        if targets is None:
            del cfg["notifications"]
        gw = self.gateway(cfg, env=env)
        return gw, gw.create_key("alice"), gw.create_key("root", admin=True)

    def reload(self, gw, admin, fn):
        """Edits the config file with fn and reloads it through the API;
        notification targets apply without a restart."""
        fn(gw.cfg)
        with open(gw.config_path + ".tmp", "w") as f:
            json.dump(gw.cfg, f, indent=2)
        os.replace(gw.config_path + ".tmp", gw.config_path)
        st, b, _ = gw.post("/api/admin/reload", {}, key=admin)
        self.assertEqual(st, 200, b)
        self.assertIn("notifications", b["changed"])
        self.assertEqual(b["restart_required"], [])
        return b

    def wait_attempted(self, gw, admin, approval, timeout=20):
        """The approval's first delivery once it was tried and is pending."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.deliveries(gw, admin, approval)
            d = r["deliveries"][0] if r["deliveries"] else None
            if d and d["attempts"] >= 1:
                self.assertEqual(d["state"], "pending", d)
                return d
            time.sleep(0.02)
        self.fail("no delivery of %s was tried" % approval)

    def suspend(self, gw, key, to="bob@example.com", then="Email sent."):
        replies = [{"tool_calls": [{"id": "e1", "name": "send_email",
                                    "arguments": {"to": to, "body": "hello",
                                                  "password": "hunter2-secret"}}]}]
        if then:
            replies.append({"text": then})
        self.fake.script(self.m, *replies)
        st, b, _ = gw.post("/api/agents/assistant/generate", {"messages": "email bob"}, key=key)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["status"], "suspended", b)
        return b["approvals"][0]["id"]

    def deliveries(self, gw, admin, approval):
        st, r, _ = gw.get("/api/admin/notifications?approval=" + approval, key=admin)
        self.assertEqual(st, 200, r)
        return r

    def wait_state(self, gw, admin, approval, state, count=1, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.deliveries(gw, admin, approval)
            rows = [d for d in r["deliveries"] if d["state"] == state]
            if len(rows) >= count:
                return rows
            time.sleep(0.05)
        self.fail("no %d %s deliveries for %s: %r" % (count, state, approval, r))

    def assert_no_secrets(self, gw, *secrets):
        logs = gw.logs()
        dump = json.dumps(gw.query("SELECT * FROM notification_deliveries"), default=repr)
        audit = json.dumps(gw.query("SELECT * FROM audit_events"), default=repr)
        for s in secrets:
            self.assertNotIn(s, logs)
            self.assertNotIn(s, dump)
            self.assertNotIn(s, audit)

    def test_signed_webhooks_for_request_and_decision_and_slack_form(self):
        rx = Receiver()
        self.addCleanup(rx.stop)
        gw, key, admin = self.start({
            "hook": {"kind": "webhook", "url": rx.url + "/hook", "secret": "${NOTIFY_SECRET}"},
            "chat": {"kind": "webhook", "url": rx.url + "/slack/T000/B000/xyz",
                     "format": "slack", "events": ["approval-requested"]},
        })
        apr = self.suspend(gw, key)
        got = rx.wait(lambda g: g[0] == "/hook", "approval-requested webhook")
        path, hdrs, body = got[0]
        self.assertTrue(verify(SECRET, hdrs, body), hdrs)
        # a tampered body or another secret does not verify
        self.assertFalse(verify(SECRET, hdrs, body + b" "))
        self.assertFalse(verify("another-secret-0123456789", hdrs, body))
        self.assertEqual(hdrs["x-gatehouse-event"], "approval-requested")
        p = json.loads(body)
        self.assertEqual(p["event"], "approval-requested")
        self.assertEqual(p["type"], "gatehouse.approval")
        self.assertEqual(p["approval_id"], apr)
        self.assertEqual(p["status"], "pending")
        self.assertEqual(p["tool"], "send_email")
        self.assertEqual(p["agent"], "assistant")
        self.assertEqual(p["key_name"], "alice")
        self.assertTrue(p["rule"])
        self.assertEqual(p["link"], "https://gate.example.com/admin/#/approvals/" + apr)
        self.assertIn("bob@example.com", p["args_summary"])
        # the audit log's redaction applies
        self.assertNotIn("hunter2", p["args_summary"])
        self.assertIn("password", p["args_summary"])
        self.assertIsNone(p["decided_by"])
        self.assertTrue(p["expires_at"].endswith("Z"))
        # the Slack form of the same event
        sl = rx.wait(lambda g: g[0].startswith("/slack/"), "Slack webhook")
        s = json.loads(sl[0][2])
        self.assertIn("Approval requested", s["text"])
        self.assertIn("send_email", s["text"])
        self.assertEqual(s["blocks"][0]["type"], "section")
        btn = [b for b in s["blocks"] if b["type"] == "actions"][0]["elements"][0]
        self.assertEqual(btn["url"], p["link"])
        self.assertNotIn("x-gatehouse-signature", sl[0][1])  # no secret configured

        st, d, _ = gw.post("/api/approvals/%s/approve" % apr, {"reason": "fine"}, key=admin)
        self.assertEqual(st, 200, d)
        got = rx.wait(lambda g: g[0] == "/hook" and b"approval-decided" in g[2],
                      "approval-decided webhook")
        path, hdrs, body = got[0]
        self.assertTrue(verify(SECRET, hdrs, body))
        p = json.loads(body)
        self.assertEqual(p["status"], "approved")
        self.assertEqual(p["decided_by"], d["decidedBy"])
        self.assertTrue(p["decided_by"].startswith("key:"))
        self.assertEqual(p["reason"], "fine")
        # the Slack target did not ask for decisions
        time.sleep(0.3)
        self.assertEqual(len(rx.requests("/slack/T000/B000/xyz")), 1)

        rows = self.wait_state(gw, admin, apr, "delivered", 3)
        r = self.deliveries(gw, admin, apr)
        self.assertEqual({t["name"] for t in r["targets"]}, {"hook", "chat"})
        self.assertNotIn("url", json.dumps(r["targets"]))
        self.assertEqual(sorted((x["target"], x["event"]) for x in rows),
                         [("chat", "approval-requested"), ("hook", "approval-decided"),
                          ("hook", "approval-requested")])
        for x in rows:
            self.assertEqual(x["attempts"], 1)
            self.assertEqual(x["lastCode"], 200)
        self.assertEqual(r["stats"]["delivered"], 3)
        st, text, _ = gw.get("/metrics", key=admin)
        self.assertEqual(st, 200, text)
        self.assertIn('gatehouse_notifications_total{outcome="delivered"} 3\n', text)
        self.assertIn('gatehouse_notifications_total{outcome="failed"} 0\n', text)
        gw.stop()
        self.assert_no_secrets(gw, SECRET, "/slack/T000/B000/xyz", "hunter2")

    def test_expiry_is_notified(self):
        rx = Receiver()
        self.addCleanup(rx.stop)
        gw, key, admin = self.start({"hook": {"kind": "webhook", "url": rx.url + "/hook",
                                              "secret": "${NOTIFY_SECRET}",
                                              "events": ["approval-expired"]}}, ttl=10)
        apr = self.suspend(gw, key)
        got = rx.wait(lambda g: True, "approval-expired webhook", timeout=40)
        path, hdrs, body = got[0]
        self.assertTrue(verify(SECRET, hdrs, body))
        p = json.loads(body)
        self.assertEqual(p["event"], "approval-expired")
        self.assertEqual(p["approval_id"], apr)
        self.assertEqual(p["status"], "expired")
        self.assertEqual(hdrs["x-gatehouse-event"], "approval-expired")
        # only the event asked for
        self.assertEqual(len(rx.requests()), 1)
        self.wait_state(gw, admin, apr, "delivered")

    def test_receiver_down_is_retried_and_recorded(self):
        held = held_socket()
        port = held.getsockname()[1]
        gw, key, admin = self.start({"hook": {"kind": "webhook",
                                              "url": "http://127.0.0.1:%d/hook" % port,
                                              "secret": "${NOTIFY_SECRET}",
                                              "events": ["approval-requested"]}},
                                    retry_base_ms=300, retry_max_ms=600)
        apr = self.suspend(gw, key)
        # the first attempt fails and is recorded as such, still pending
        deadline = time.time() + 20
        while time.time() < deadline:
            r = self.deliveries(gw, admin, apr)
            d = r["deliveries"][0] if r["deliveries"] else None
            if d and d["attempts"] >= 1:
                break
            time.sleep(0.02)
        self.assertEqual(d["state"], "pending", d)
        self.assertTrue(d["lastError"], d)
        self.assertIsNotNone(d["nextAttemptAt"])
        # the receiver comes up, answering 503 once: retried until it takes it
        rx = Receiver(sock=held, answers=[503])
        self.addCleanup(rx.stop)
        rows = self.wait_state(gw, admin, apr, "delivered")
        self.assertGreaterEqual(rows[0]["attempts"], 3)
        self.assertEqual(rows[0]["lastCode"], 200)
        self.assertIsNone(rows[0]["lastError"])
        self.assertIsNone(rows[0]["nextAttemptAt"])
        self.assertEqual(len(rx.requests()), 2)
        for _, hdrs, body in rx.requests():
            self.assertTrue(verify(SECRET, hdrs, body))
        db = gw.query("SELECT state, attempts FROM notification_deliveries")
        self.assertEqual(db[0]["state"], "delivered")

    def test_refusal_is_final_and_pending_resume_after_restart(self):
        rx = Receiver(answers=[410])
        self.addCleanup(rx.stop)
        held = held_socket()
        port = held.getsockname()[1]
        gw, key, admin = self.start({
            "gone": {"kind": "webhook", "url": rx.url + "/gone", "secret": "${NOTIFY_SECRET}",
                     "events": ["approval-requested"]},
            "later": {"kind": "webhook", "url": "http://127.0.0.1:%d/later" % port,
                      "secret": "${NOTIFY_SECRET}", "events": ["approval-requested"]},
        }, retry_base_ms=60000, retry_max_ms=60000)
        apr = self.suspend(gw, key)
        failed = self.wait_state(gw, admin, apr, "failed")
        self.assertEqual(failed[0]["target"], "gone")
        self.assertEqual(failed[0]["attempts"], 1)
        self.assertEqual(failed[0]["lastCode"], 410)
        deadline = time.time() + 20
        while time.time() < deadline:
            later = [d for d in self.deliveries(gw, admin, apr)["deliveries"]
                     if d["target"] == "later"]
            if later and later[0]["attempts"] == 1:
                break
            time.sleep(0.02)
        self.assertEqual(later[0]["state"], "pending")
        # down while gatehouse restarts; the next start resumes the delivery
        gw.stop()
        rx2 = Receiver(sock=held)
        self.addCleanup(rx2.stop)
        gw.start()
        got = rx2.wait(lambda g: True, "resumed delivery")
        self.assertTrue(verify(SECRET, got[0][1], got[0][2]))
        self.assertEqual(json.loads(got[0][2])["approval_id"], apr)
        rows = self.wait_state(gw, admin, apr, "delivered")
        self.assertEqual(rows[0]["target"], "later")
        self.assertEqual(rows[0]["attempts"], 2)
        self.assertEqual(len(rx.requests()), 1)  # a refusal is not retried

    def test_full_queue_drops_logged_and_recorded(self):
        # a receiver that takes its time holds the one slot of the queue
        rx = Receiver(delay=3.0)
        self.addCleanup(rx.stop)
        gw, key, admin = self.start({"hook": {"kind": "webhook", "url": rx.url + "/hook",
                                              "secret": "${NOTIFY_SECRET}",
                                              "events": ["approval-requested"]}},
                                    queue_max=1)
        first = self.suspend(gw, key, then=None)
        t0 = time.time()
        second = self.suspend(gw, key, to="carol@example.com", then=None)
        # queuing never waited for the slow receiver
        self.assertLess(time.time() - t0, 2.5)
        dropped = self.wait_state(gw, admin, second, "failed")
        self.assertEqual(dropped[0]["lastError"], "dropped: the notification queue was full")
        self.assertEqual(dropped[0]["attempts"], 0)
        self.wait_state(gw, admin, first, "delivered")
        r = self.deliveries(gw, admin, first)
        self.assertEqual(r["stats"]["dropped"], 1)
        self.assertIn("dropped: the queue is full", gw.logs())
        self.assertEqual(len(rx.requests()), 1)

    def test_smtp_delivery(self):
        smtp = SMTPServer()
        self.addCleanup(smtp.server_close)
        self.addCleanup(smtp.shutdown)
        port = smtp.server_address[1]
        gw, key, admin = self.start({"mail": {
            "kind": "smtp", "url": "smtp://127.0.0.1:%d" % port, "starttls": False,
            "from": "gatehouse@example.com", "to": ["rev1@example.com", "rev2@example.com"],
            "events": ["approval-requested"]}})
        apr = self.suspend(gw, key)
        deadline = time.time() + 20
        while time.time() < deadline and not smtp.mails:
            time.sleep(0.05)
        self.assertTrue(smtp.mails, "no mail arrived")
        m = smtp.mails[0]
        self.assertEqual(m["from"], "<gatehouse@example.com>")
        self.assertEqual(m["rcpt"], ["<rev1@example.com>", "<rev2@example.com>"])
        raw = m["data"].decode()
        head, _, body = raw.partition("\r\n\r\n")
        hdrs = {}
        for line in head.split("\r\n"):
            if line.startswith(" "):
                continue
            k, _, v = line.partition(": ")
            hdrs[k.lower()] = v
        for h in ("date", "message-id", "subject", "from", "to", "mime-version"):
            self.assertIn(h, hdrs, head)
        self.assertEqual(hdrs["from"], "<gatehouse@example.com>")
        self.assertRegex(hdrs["message-id"], r"^<ntf_[^@>]+@example\.com>$")
        self.assertIn("Approval requested", hdrs["subject"])
        self.assertIn("send_email", hdrs["subject"])
        self.assertEqual(hdrs["x-gatehouse-approval"], apr)
        self.assertIn("rev2@example.com", head)
        self.assertIn("Agent:      assistant", body)
        self.assertIn("alice", body)
        self.assertIn("https://gate.example.com/admin/#/approvals/" + apr, body)
        self.assertIn("bob@example.com", body)
        self.assertNotIn("hunter2", raw)
        rows = self.wait_state(gw, admin, apr, "delivered")
        self.assertEqual(rows[0]["kind"], "smtp")
        self.assertEqual(rows[0]["lastCode"], 250)

    def test_reload_moves_a_target_to_another_receiver_and_secret(self):
        # A refuses to take anything for now (a retryable 503)
        rx_a = Receiver(answers=[503] * 1000)
        rx_b = Receiver()
        self.addCleanup(rx_a.stop)
        self.addCleanup(rx_b.stop)
        gw, key, admin = self.start({"hook": {"kind": "webhook", "url": rx_a.url + "/a",
                                              "secret": "${NOTIFY_SECRET}"}},
                                    retry_base_ms=300, retry_max_ms=600)
        apr = self.suspend(gw, key)
        self.wait_attempted(gw, admin, apr)
        first = rx_a.wait(lambda g: True, "approval-requested at A")
        self.assertTrue(verify(SECRET, first[0][1], first[0][2]))
        event_id = json.loads(first[0][2])["id"]
        # the target "hook" now points at B, with B's secret
        self.reload(gw, admin, lambda cfg: cfg["notifications"]["targets"]["hook"].update(
            url=rx_b.url + "/b", secret="${NOTIFY_SECRET_B}"))
        # the delivery queued before the reload is retried at B, signed with B's secret
        got = rx_b.wait(lambda g: True, "the retried approval-requested at B")
        seen_at_a = len(rx_a.requests())
        path, hdrs, body = got[0]
        self.assertEqual(path, "/b")
        self.assertTrue(verify(SECRET_B, hdrs, body), hdrs)
        self.assertFalse(verify(SECRET, hdrs, body))
        self.assertEqual(json.loads(body)["id"], event_id)
        rows = self.wait_state(gw, admin, apr, "delivered")
        self.assertGreaterEqual(rows[0]["attempts"], 2)
        # the next event goes to B only
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr, {}, key=admin)
        self.assertEqual(st, 200, d)
        got = rx_b.wait(lambda g: b"approval-decided" in g[2], "approval-decided at B")
        path, hdrs, body = got[0]
        self.assertTrue(verify(SECRET_B, hdrs, body), hdrs)
        self.assertEqual(json.loads(body)["event"], "approval-decided")
        self.wait_state(gw, admin, apr, "delivered", 2)
        self.assertEqual(len(rx_a.requests()), seen_at_a)
        self.assertFalse([g for g in rx_a.requests() if b"approval-decided" in g[2]])
        self.assertEqual(len(rx_b.requests()), 2)
        gw.stop()
        self.assert_no_secrets(gw, SECRET, SECRET_B, rx_b.url + "/b")

    def test_reload_removing_the_target_ends_its_retries(self):
        rx = Receiver(answers=[503] * 1000)
        self.addCleanup(rx.stop)
        gw, key, admin = self.start({"hook": {"kind": "webhook", "url": rx.url + "/hook",
                                              "secret": "${NOTIFY_SECRET}"}},
                                    retry_base_ms=200, retry_max_ms=300)
        apr = self.suspend(gw, key)
        self.wait_attempted(gw, admin, apr)
        # the only target goes, the whole section with it
        self.reload(gw, admin, lambda cfg: cfg.pop("notifications"))
        rows = self.wait_state(gw, admin, apr, "failed")
        self.assertEqual(rows[0]["lastError"], "target removed by reload")
        self.assertIsNone(rows[0]["nextAttemptAt"])
        self.assertGreaterEqual(rows[0]["attempts"], 1)
        seen = len(rx.requests())
        self.assertGreaterEqual(seen, 1)
        # retries were due every 100-300 ms: none comes any more, nor the decision
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr, {}, key=admin)
        self.assertEqual(st, 200, d)
        time.sleep(1.0)
        self.assertEqual(len(rx.requests()), seen)
        r = self.deliveries(gw, admin, apr)
        self.assertEqual(len(r["deliveries"]), 1, r)
        self.assertEqual(r["targets"], [])
        self.assertFalse(r["enabled"])
        self.assertIn("target removed by reload", gw.logs())

    def test_reload_dropping_an_event_ends_its_retries_and_keeps_the_target(self):
        rx = Receiver(answers=[503] * 1000)
        self.addCleanup(rx.stop)
        gw, key, admin = self.start({"hook": {"kind": "webhook", "url": rx.url + "/hook",
                                              "secret": "${NOTIFY_SECRET}"}},
                                    retry_base_ms=200, retry_max_ms=300)
        apr = self.suspend(gw, key)
        self.wait_attempted(gw, admin, apr)
        # the target now takes decisions only, and its receiver is back
        self.reload(gw, admin, lambda cfg: cfg["notifications"]["targets"]["hook"].update(
            events=["approval-decided"]))
        rows = self.wait_state(gw, admin, apr, "failed")
        self.assertEqual(rows[0]["event"], "approval-requested")
        self.assertEqual(rows[0]["lastError"], "the target no longer takes this event")
        with rx.lock:
            rx.answers = []
        st, d, _ = gw.post("/api/approvals/%s/approve" % apr, {}, key=admin)
        self.assertEqual(st, 200, d)
        rows = self.wait_state(gw, admin, apr, "delivered")
        self.assertEqual(rows[0]["event"], "approval-decided")
        self.assertEqual(rows[0]["attempts"], 1)
        got = rx.wait(lambda g: b"approval-decided" in g[2], "approval-decided")
        self.assertTrue(verify(SECRET, got[0][1], got[0][2]))

    def test_first_target_added_by_reload(self):
        rx = Receiver()
        self.addCleanup(rx.stop)
        gw, key, admin = self.start(None)
        st, r, _ = gw.get("/api/admin/notifications", key=admin)
        self.assertEqual(st, 200, r)
        self.assertFalse(r["enabled"])
        self.assertEqual(r["targets"], [])
        self.reload(gw, admin, lambda cfg: cfg.update(notifications={"targets": {"hook": {
            "kind": "webhook", "url": rx.url + "/hook", "secret": "${NOTIFY_SECRET}",
            "events": ["approval-requested"]}}}))
        apr = self.suspend(gw, key)
        got = rx.wait(lambda g: True, "approval-requested")
        path, hdrs, body = got[0]
        self.assertTrue(verify(SECRET, hdrs, body))
        self.assertEqual(json.loads(body)["approval_id"], apr)
        rows = self.wait_state(gw, admin, apr, "delivered")
        self.assertEqual(rows[0]["target"], "hook")
        r = self.deliveries(gw, admin, apr)
        self.assertTrue(r["enabled"])
        self.assertEqual([t["name"] for t in r["targets"]], ["hook"])

    def test_retention_prunes_finished_deliveries_only(self):
        rx = Receiver()
        self.addCleanup(rx.stop)
        port = closed_port()
        gw, key, admin = self.start({
            "hook": {"kind": "webhook", "url": rx.url + "/hook", "secret": "${NOTIFY_SECRET}",
                     "events": ["approval-requested"]},
            # down, and retried only in a minute: pending all along
            "later": {"kind": "webhook", "url": "http://127.0.0.1:%d/later" % port,
                      "secret": "${NOTIFY_SECRET}", "events": ["approval-requested"]},
        }, retry_base_ms=60000, retry_max_ms=60000, retention_seconds=1)
        apr = self.suspend(gw, key)
        self.wait_state(gw, admin, apr, "delivered")
        deadline = time.time() + 20
        rows = None
        while time.time() < deadline:
            rows = gw.query("SELECT target, state, attempts FROM notification_deliveries")
            if [x["target"] for x in rows] == ["later"]:
                break
            time.sleep(0.1)
        self.assertEqual([(x["target"], x["state"]) for x in rows], [("later", "pending")],
                         rows)
        self.assertEqual(rows[0]["attempts"], 1)
        self.assertIn("notifications: retention pruned 1 deliveries", gw.logs())

    def test_bad_config_is_refused_naming_the_path(self):
        import os
        import shutil
        import subprocess
        import tempfile
        from harness import GH_BIN
        cfg = setup_config(self.fake, "m", {"hook": {"kind": "webhook", "url": "ftp://x/",
                                                     "secret": "0123456789abcdef"}})
        d = tempfile.mkdtemp(prefix="gh-test-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        path = os.path.join(d, "gatehouse.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        p = subprocess.run([GH_BIN, "serve", "--config", path], cwd=d, capture_output=True,
                           text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("$.notifications.targets.hook.url: expected an http:// or https:// URL",
                      p.stderr)
