"""Admin UI accounts, sessions and the admin API: login and its rate limits,
the session cookie, CSRF and Origin checks, session expiry, logout,
disabled admins, the security headers of /admin pages, the keys, policies,
overview, threads and live-approvals endpoints, and that admin API keys
keep working for automation."""

import hashlib
import http.client
import json
import os
import re
import time
import unittest

from harness import GH_SRC, GatewayTest, config

PASSWORD = "correct horse battery staple"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


def admin_config(fake, admin=None, **extra):
    tools = {
        "send_email": {"type": "http", "description": "Send an email.",
                       "url": fake.url + "/tools/send_email",
                       "headers": {"Authorization": "Bearer mailer-secret-do-not-show"},
                       "input_schema": {"type": "object"}},
        "get_weather": {"type": "http", "description": "Weather for a city.",
                        "url": fake.url + "/tools/get_weather",
                        "input_schema": {"type": "object"}},
    }
    agents = {
        "assistant": {"provider": "fake", "model": "m-admin-api", "instructions": "Be brief.",
                      "tools": ["send_email", "get_weather", "memory_*"],
                      "memory": {"enabled": True, "last_messages": 20}, "max_steps": 6},
    }
    policies = {
        "default": {"agents": ["*"], "tools": {"allow": ["*"], "deny": ["memory_delete"]},
                    "client_tools": {"allow": ["*"]},
                    "approval": {"require": ["send_*"], "approver": "admin", "ttl_seconds": 600},
                    "rate_limits": {"tool_calls_per_minute": {"get_weather": 2}}},
        "readonly": {"agents": ["*"], "tools": {"allow": ["memory_search"]}},
    }
    a = {"login_attempts_per_minute": 3}
    a.update(admin or {})
    return config(fake, agents=agents, tools=tools, policies=policies, admin=a, **extra)


def cookie_of(headers):
    m = re.search(r"gh_session=([^;]*)", headers.get("set-cookie", ""))
    return m.group(1) if m else None


class Client:
    """A browser-like client of one gateway: keeps the session cookie and
    the CSRF token; can connect from another loopback address."""

    def __init__(self, gw, source="127.0.0.1"):
        self.gw, self.source = gw, source
        self.cookie = None
        self.csrf = None

    def request(self, method, path, body=None, headers=None, csrf=True, cookie=True):
        c = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=60,
                                       source_address=(self.source, 0))
        h = {"Host": "127.0.0.1:%d" % self.gw.port}
        if body is not None:
            h["Content-Type"] = "application/json"
        if cookie and self.cookie:
            h["Cookie"] = "gh_session=" + self.cookie
        if csrf and self.csrf and method not in ("GET", "HEAD"):
            h["X-CSRF-Token"] = self.csrf
        h.update(headers or {})
        c.request(method, path, body=None if body is None else json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        rh = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = text
        return r.status, data, rh

    def login(self, user="alice", password=PASSWORD):
        st, body, h = self.request("POST", "/api/admin/login", {"user": user, "password": password},
                                   cookie=False)
        if st == 200:
            self.cookie = cookie_of(h)
            self.csrf = body["csrfToken"]
        return st, body, h


class AdminTestBase(GatewayTest):

    def admin_gateway(self, admin=None, users=("alice",), **extra):
        gw = self.gateway(admin_config(self.fake, admin, **extra))
        for u in users:
            gw.cli("admin", "create", "--config", gw.config_path, "--user", u,
                   stdin=PASSWORD + "\n", check=True)
        return gw

    def audit(self, gw, auth, **q):
        qs = "&".join("%s=%s" % kv for kv in q.items())
        st, body, _ = gw.get("/api/audit?limit=1000&" + qs, key=auth)
        self.assertEqual(st, 200, body)
        return body["rows"]

    def ask(self, gw, key, calls, after="Done.", thread="t-admin"):
        """Makes the model emit tool calls [(name, args)], then answer."""
        replies = [{"text": after}]
        if calls:
            replies.insert(0, {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]})
        self.fake.script("m-admin-api", *replies)
        st, body, _ = gw.post("/api/agents/assistant/generate",
                              {"messages": [{"role": "user", "content": "go"}],
                               "memory": {"thread": thread, "resource": "r1"}}, key=key)
        self.assertEqual(st, 200, body)
        return body


class LoginTest(AdminTestBase):

    def test_login_sets_a_hashed_random_session_cookie(self):
        gw = self.admin_gateway()
        c = Client(gw)
        st, body, h = c.login()
        self.assertEqual(st, 200, body)
        self.assertEqual(body["user"], "alice")
        sc = h["set-cookie"]
        token = cookie_of(h)
        self.assertRegex(token, r"^[A-Za-z0-9_-]{43}$")          # 256 bits, base64url
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"):
            self.assertIn(attr, sc)
        self.assertNotIn("Secure", sc)                            # plain HTTP here
        self.assertRegex(body["csrfToken"], r"^[A-Za-z0-9_-]{43}$")
        self.assertNotEqual(body["csrfToken"], token)
        rows = gw.query('SELECT token_hash, "user", csrf FROM admin_sessions')
        self.assertEqual(len(rows), 1)
        self.assertEqual(bytes(rows[0]["token_hash"]),
                         hashlib.blake2b(token.encode(), digest_size=32).digest())
        self.assertEqual(rows[0]["csrf"], body["csrfToken"])
        self.assertNotIn(token.encode(), gw.dump())
        st, me, _ = c.request("GET", "/api/admin/me")
        self.assertEqual(st, 200, me)
        self.assertEqual((me["user"], me["via"], me["csrfToken"]),
                         ("alice", "session", body["csrfToken"]))
        # a second login is a second session with another token
        c2 = Client(gw)
        self.assertEqual(c2.login()[0], 200)
        self.assertNotEqual(c2.cookie, c.cookie)

    def test_wrong_password_and_unknown_user_get_the_same_answer(self):
        gw = self.admin_gateway(admin={"login_attempts_per_minute": 10})
        st1, b1, _ = Client(gw).login(password="not the password")
        st2, b2, _ = Client(gw).login(user="mallory", password="not the password")
        self.assertEqual((st1, st2), (401, 401))
        self.assertEqual((b1["error"]["code"], b1["error"]["message"]),
                         (b2["error"]["code"], b2["error"]["message"]))
        self.assertNotIn("mallory", b2["error"]["message"])
        self.assertEqual(gw.query("SELECT count(*) AS n FROM admin_sessions")[0]["n"], 0)
        # the unknown user takes about as long as a real password check
        t0 = time.time()
        Client(gw).login(password="wrong again!")
        t_wrong = time.time() - t0
        t0 = time.time()
        Client(gw).login(user="nobody-here", password="wrong again!")
        t_unknown = time.time() - t0
        self.assertGreater(t_unknown, t_wrong * 0.3)
        # missing fields are a plain 400
        st, b, _ = Client(gw).request("POST", "/api/admin/login", {"user": "alice"})
        self.assertEqual(st, 400, b)

    def test_failed_logins_from_one_address_do_not_lock_the_user_out_elsewhere(self):
        gw = self.admin_gateway(users=("alice", "bob"),
                                admin={"login_failures_per_user_per_hour": 5})
        for _ in range(3):
            self.assertEqual(Client(gw, "127.0.0.2").login(password="guess guess")[0], 401)
        # that address is locked out, even with alice's password ...
        st, body, h = Client(gw, "127.0.0.2").login()
        self.assertEqual(st, 429, body)
        self.assertIn("from this address", body["error"]["message"])
        # ... but alice still logs in from another one
        self.assertEqual(Client(gw, "127.0.0.3").login()[0], 200)
        # failures from several addresses reach the per-user limit (5): then
        # alice is locked out from everywhere, even with her password
        self.assertEqual(Client(gw, "127.0.0.3").login(password="guess guess")[0], 401)
        self.assertEqual(Client(gw, "127.0.0.4").login(password="guess guess")[0], 401)
        st, body, h = Client(gw, "127.0.0.5").login()
        self.assertEqual(st, 429, body)
        self.assertGreaterEqual(int(h["retry-after"]), 1)
        self.assertIn("too many failed logins for this user from several addresses; retry "
                      "after", body["error"]["message"])
        # bob, from that same address, is not
        self.assertEqual(Client(gw, "127.0.0.5").login(user="bob")[0], 200)

    def test_failed_logins_are_limited_per_address(self):
        gw = self.admin_gateway()
        for u in ("u1", "u2", "u3"):
            self.assertEqual(Client(gw, "127.0.0.4").login(user=u, password="guess guess")[0], 401)
        st, body, h = Client(gw, "127.0.0.4").login()
        self.assertEqual(st, 429, body)
        self.assertIn("retry-after", h)
        self.assertEqual(Client(gw, "127.0.0.5").login()[0], 200)

    def test_logins_failures_and_logouts_are_audited(self):
        gw = self.admin_gateway(admin={"login_attempts_per_minute": 10})
        key = gw.create_key("ops", admin=True)
        Client(gw).login(password="wrong password!")
        Client(gw).login(user="mallory", password="wrong password!")
        c = Client(gw)
        c.login()
        self.assertEqual(c.request("POST", "/api/admin/logout", {})[0], 200)
        ok = self.audit(gw, key, event="admin_login")
        self.assertEqual(len(ok), 1)
        self.assertEqual((ok[0]["adminUser"], ok[0]["outcome"]), ("alice", "ok"))
        self.assertEqual(ok[0]["detail"]["address"], "127.0.0.1")
        failed = self.audit(gw, key, event="admin_login_failed")
        self.assertEqual(sorted(r["detail"]["user"] for r in failed), ["alice", "mallory"])
        self.assertTrue(all(r["detail"]["address"] == "127.0.0.1" for r in failed))
        self.assertEqual(sorted(r["reason"] for r in failed), ["unknown user", "wrong password"])
        out = self.audit(gw, key, event="admin_logout")
        self.assertEqual([r["adminUser"] for r in out], ["alice"])
        # nothing of the password reached the log
        self.assertNotIn("wrong password!", json.dumps(self.audit(gw, key)))
        self.assertNotIn(PASSWORD, gw.logs())


class SessionTest(AdminTestBase):

    def test_state_changes_need_the_csrf_token(self):
        gw = self.admin_gateway()
        c = Client(gw)
        c.login()
        # reads need no token
        self.assertEqual(c.request("GET", "/api/keys", csrf=False)[0], 200)
        st, body, _ = c.request("POST", "/api/keys", {"name": "sneaky"}, csrf=False)
        self.assertEqual(st, 403, body)
        self.assertIn("X-CSRF-Token", body["error"]["message"])
        st, body, _ = c.request("POST", "/api/keys", {"name": "sneaky"}, csrf=False,
                                headers={"X-CSRF-Token": "x" * 43})
        self.assertEqual(st, 403, body)
        st, body, _ = c.request("POST", "/api/approvals/apr_nope/approve", {}, csrf=False)
        self.assertEqual(st, 403, body)
        self.assertEqual(gw.query("SELECT count(*) AS n FROM api_keys")[0]["n"], 0)
        # with the token the same requests go through
        st, body, _ = c.request("POST", "/api/keys", {"name": "fine"})
        self.assertEqual(st, 201, body)
        st, body, _ = c.request("POST", "/api/approvals/apr_nope/approve", {})
        self.assertEqual(st, 404, body)

    def test_cross_origin_state_changes_are_refused(self):
        gw = self.admin_gateway()
        c = Client(gw)
        c.login()
        st, body, _ = c.request("POST", "/api/keys", {"name": "x"},
                                headers={"Origin": "http://evil.example"})
        self.assertEqual(st, 403, body)
        self.assertIn("Origin", body["error"]["message"])
        st, body, _ = c.request("POST", "/api/keys", {"name": "x"}, headers={"Origin": "null"})
        self.assertEqual(st, 403, body)
        st, body, _ = c.request("POST", "/api/keys", {"name": "x"},
                                headers={"Origin": "http://127.0.0.1:%d" % gw.port})
        self.assertEqual(st, 201, body)
        # a cross-site login is refused too
        st, body, _ = Client(gw).request("POST", "/api/admin/login",
                                         {"user": "alice", "password": PASSWORD},
                                         headers={"Origin": "https://evil.example"})
        self.assertEqual(st, 403, body)

    def test_logout_ends_the_session(self):
        gw = self.admin_gateway()
        c = Client(gw)
        c.login()
        st, body, h = c.request("POST", "/api/admin/logout", {})
        self.assertEqual(st, 200, body)
        self.assertIn("gh_session=;", h["set-cookie"])
        self.assertIn("Max-Age=0", h["set-cookie"])
        st, body, _ = c.request("GET", "/api/admin/me")
        self.assertEqual(st, 401, body)
        self.assertEqual(gw.query("SELECT count(*) AS n FROM admin_sessions")[0]["n"], 0)

    def test_a_disabled_admin_loses_every_session(self):
        gw = self.admin_gateway()
        c1, c2 = Client(gw), Client(gw)
        c1.login()
        c2.login()
        gw.cli("admin", "disable", "--config", gw.config_path, "--user", "alice", check=True)
        self.assertEqual(c1.request("GET", "/api/admin/me")[0], 401)
        self.assertEqual(c2.request("GET", "/api/keys")[0], 401)
        self.assertEqual(Client(gw).login()[0], 401)

    def test_an_idle_session_expires(self):
        gw = self.admin_gateway(admin={"session_idle_s": 2})
        c = Client(gw)
        self.assertEqual(c.login()[0], 200)
        self.assertEqual(c.request("GET", "/api/admin/me")[0], 200)
        time.sleep(3.2)
        st, body, _ = c.request("GET", "/api/admin/me")
        self.assertEqual(st, 401, body)
        self.assertIn("log in again", body["error"]["message"])

    def test_a_session_ends_at_its_absolute_expiry_even_in_use(self):
        gw = self.admin_gateway(admin={"session_max_s": 4})
        c = Client(gw)
        # the session ends between sent + 4 s and answered + 4 s: in use
        # until well before the first, asked again after the second
        sent = time.time()
        st, body, h = c.login()
        answered = time.time()
        self.assertEqual(st, 200, body)
        self.assertIn("Max-Age=4", h["set-cookie"])
        while time.time() < sent + 2.5:      # in use all along
            self.assertEqual(c.request("GET", "/api/admin/me")[0], 200)
            time.sleep(0.5)
        time.sleep(max(0.0, answered + 4.3 - time.time()))
        self.assertEqual(c.request("GET", "/api/admin/me")[0], 401)

    def test_no_cookie_and_a_bad_cookie_are_401(self):
        gw = self.admin_gateway()
        c = Client(gw)
        st, body, _ = c.request("GET", "/api/admin/me")
        self.assertEqual(st, 401, body)
        self.assertIn("missing API key", body["error"]["message"])
        c.cookie = "A" * 43
        st, body, _ = c.request("GET", "/api/admin/me")
        self.assertEqual(st, 401, body)


class UIFilesTest(AdminTestBase):

    def check_headers(self, h):
        self.assertEqual(h.get("content-security-policy"), CSP)
        self.assertEqual(h.get("x-content-type-options"), "nosniff")
        self.assertEqual(h.get("referrer-policy"), "no-referrer")
        self.assertEqual(h.get("x-frame-options"), "DENY")

    def test_admin_pages_carry_the_security_headers(self):
        gw = self.admin_gateway()
        st, _, h = gw.get("/admin")
        self.assertEqual(st, 302)
        self.assertEqual(h["location"], "/admin/")
        self.check_headers(h)
        st, page, h = gw.get("/admin/")
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("text/html"))
        self.check_headers(h)
        self.assertIn('<script type="module" src="/admin/js/app.js">', page)
        for path, ctype in (("/admin/js/app.js", "text/javascript"), ("/admin/app.css", "text/css"),
                            ("/admin/favicon.svg", "image/svg+xml")):
            st, _, h = gw.get(path)
            self.assertEqual(st, 200, path)
            self.assertTrue(h["content-type"].startswith(ctype), h["content-type"])
            self.check_headers(h)
        st, _, h = gw.get("/admin/js/nope.js")
        self.assertEqual(st, 404)
        self.check_headers(h)
        st, _, h = gw.get("/admin/../migrations/sqlite/0001_core.sql")
        self.assertEqual(st, 404)
        # the API itself is not framed as a page
        st, _, h = gw.get("/healthz")
        self.assertNotIn("content-security-policy", h)

    def test_the_ui_files_run_no_inline_code_and_parse_no_html(self):
        root = os.path.join(GH_SRC, "web-admin")
        for dirpath, _, files in os.walk(root):
            for name in files:
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                rel = os.path.relpath(path, root)
                for bad in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                            "eval(", "new Function", "DOMParser", "createContextualFragment"):
                    self.assertNotIn(bad, text, "%s uses %s" % (rel, bad))
                self.assertIsNone(re.search(r"(src|href)=[\"']?(https?:)?//", text),
                                  "%s loads something from elsewhere" % rel)
                if name.endswith(".html"):
                    self.assertIsNone(re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), rel)
                    self.assertIsNone(re.search(r"\sstyle=|<style|\son[a-z]+=", text), rel)


class AdminAPITest(AdminTestBase):

    def test_admin_keys_keep_working_for_automation(self):
        gw = self.admin_gateway()
        key = gw.create_key("robot", admin=True)
        st, me, _ = gw.get("/api/admin/me", key=key)
        self.assertEqual(st, 200, me)
        self.assertEqual((me["via"], me["user"]), ("key", None))
        # no CSRF token needed: a key is not sent by browsers on their own
        st, body, _ = gw.post("/api/approvals/apr_nope/approve", {}, key=key)
        self.assertEqual(st, 404, body)
        st, body, _ = gw.post("/api/keys", {"name": "made-by-robot"}, key=key)
        self.assertEqual(st, 201, body)
        user = gw.create_key("user")
        for path in ("/api/keys", "/api/admin/overview", "/api/policies", "/api/admin/threads"):
            st, body, _ = gw.get(path, key=user)
            self.assertEqual(st, 403, (path, body))

    def test_keys_are_created_listed_and_revoked(self):
        gw = self.admin_gateway()
        admin = gw.create_key("ops", admin=True)
        c = Client(gw)
        c.login()
        st, body, _ = c.request("POST", "/api/keys", {"name": "mobile", "owner": "acme",
                                                      "policy": "readonly"})
        self.assertEqual(st, 201, body)
        secret, k = body["secret"], body["key"]
        self.assertTrue(secret.startswith("gh_"))
        self.assertEqual((k["name"], k["owner"], k["policy"], k["role"], k["prefix"]),
                         ("mobile", "acme", "readonly", "user", secret[:11]))
        self.assertEqual(gw.get("/api/agents", key=secret)[0], 200)
        st, lst, _ = c.request("GET", "/api/keys")
        self.assertEqual(st, 200)
        row = [x for x in lst["keys"] if x["id"] == k["id"]][0]
        self.assertIsNotNone(row["lastUsedAt"])
        self.assertNotIn(secret, json.dumps(lst))
        created = self.audit(gw, admin, event="key_created", key=k["id"])
        self.assertEqual(len(created), 1)
        self.assertEqual(created[0]["adminUser"], "alice")
        self.assertEqual(created[0]["detail"]["via"], "web")
        # bad requests
        self.assertEqual(c.request("POST", "/api/keys", {"name": "x", "policy": "nope"})[0], 400)
        self.assertEqual(c.request("POST", "/api/keys", {})[0], 400)
        self.assertEqual(c.request("POST", "/api/keys", {"name": "x", "admin": "yes"})[0], 400)
        # revoke
        st, body, _ = c.request("POST", "/api/keys/%s/revoke" % k["id"], {})
        self.assertEqual(st, 200, body)
        self.assertIsNotNone(body["revokedAt"])
        self.assertEqual(gw.get("/api/agents", key=secret)[0], 401)
        self.assertEqual(c.request("POST", "/api/keys/%s/revoke" % k["id"], {})[0], 409)
        self.assertEqual(c.request("POST", "/api/keys/key_nope/revoke", {})[0], 404)
        revoked = self.audit(gw, admin, event="key_revoked", key=k["id"])
        self.assertEqual([r["adminUser"] for r in revoked], ["alice"])

    def test_policies_show_the_effective_config_without_secrets(self):
        gw = self.admin_gateway()
        key = gw.create_key("ops", admin=True)
        st, body, _ = gw.get("/api/policies", key=key)
        self.assertEqual(st, 200, body)
        names = {p["name"]: p for p in body["policies"]}
        self.assertEqual(set(names), {"default", "readonly"})
        d = names["default"]
        self.assertRegex(d["version"], r"^[0-9a-f]{16}$")
        self.assertEqual(d["tools"]["deny"], ["memory_delete"])
        self.assertEqual(d["approval"], {"require": ["send_*"], "approver": "admin",
                                         "ttlSeconds": 600})
        self.assertEqual(d["rateLimits"]["toolCallsPerMinute"], {"get_weather": 2})
        self.assertEqual({t["name"] for t in body["tools"]}, {"send_email", "get_weather"})
        self.assertEqual([a["id"] for a in body["agents"]], ["assistant"])
        self.assertNotIn("mailer-secret-do-not-show", json.dumps(body))

    def test_overview_counts_the_last_24_hours(self):
        gw = self.admin_gateway()
        admin = gw.create_key("ops", admin=True)
        user = gw.create_key("app")
        Client(gw).login(password="wrong password!")
        res = self.ask(gw, user, [("get_weather", {"city": "Paris"}),
                                  ("get_weather", {"city": "Rome"}),
                                  ("get_weather", {"city": "Oslo"}),     # over 2/min
                                  ("memory_delete", {"id": 1}),          # denied by policy
                                  ("send_email", {"to": "a@b.c"})])      # needs approval
        self.assertEqual(res["finishReason"], "suspended", res)
        st, o, _ = gw.get("/api/admin/overview", key=admin)
        self.assertEqual(st, 200, o)
        self.assertEqual(o["pendingApprovals"], 1)
        self.assertIsNotNone(o["oldestPendingAt"])
        last = o["last24h"]
        self.assertEqual(last["toolCalls"], 5)
        self.assertEqual(last["executed"], 2)
        self.assertEqual(last["denials"], 1)
        self.assertEqual(last["rateLimited"], 1)
        self.assertEqual(last["approvalsRequested"], 1)
        self.assertEqual(last["failedLogins"], 1)
        self.assertEqual(len(o["toolCallsPerHour"]), 24)
        self.assertEqual(sum(o["toolCallsPerHour"]), 5)
        self.assertEqual(o["toolCallsPerHour"][-1], 5)     # all in the current hour
        # deciding it moves the numbers
        apr = res["approvals"][0]["id"]
        self.assertEqual(gw.post("/api/approvals/%s/deny" % apr, {"reason": "no"}, key=admin)[0],
                         200)
        st, o, _ = gw.get("/api/admin/overview", key=admin)
        self.assertEqual(o["pendingApprovals"], 0)
        self.assertEqual(o["last24h"]["denials"], 2)

    def test_threads_of_every_owner_with_their_messages(self):
        gw = self.admin_gateway()
        admin = gw.create_key("ops", admin=True)
        k1 = gw.create_key("a", owner="acme")
        k2 = gw.create_key("b", owner="globex")
        self.ask(gw, k1, [], after="hello acme", thread="t-acme")
        for i in range(3):
            self.ask(gw, k2, [], after="hello globex %d" % i, thread="t-globex")
        st, body, _ = gw.get("/api/admin/threads", key=admin)
        self.assertEqual(st, 200, body)
        self.assertEqual({(t["id"], t["owner"]) for t in body["threads"]},
                         {("t-acme", "acme"), ("t-globex", "globex")})
        st, body, _ = gw.get("/api/admin/threads?owner=globex", key=admin)
        self.assertEqual([t["id"] for t in body["threads"]], ["t-globex"])
        self.assertEqual(body["threads"][0]["messageCount"], 6)
        st, body, _ = gw.get("/api/admin/threads?agentId=nobody", key=admin)
        self.assertEqual(body["total"], 0)
        st, t, _ = gw.get("/api/admin/threads/t-globex", key=admin)
        self.assertEqual(st, 200, t)
        self.assertEqual(len(t["runs"]), 3)
        st, m, _ = gw.get("/api/admin/threads/t-globex/messages?last=2", key=admin)
        self.assertEqual(st, 200, m)
        self.assertEqual([x["role"] for x in m["messages"]], ["user", "assistant"])
        self.assertEqual(m["messages"][1]["content"], "hello globex 2")
        self.assertEqual((m["total"], m["hasMore"]), (6, True))
        st, m, _ = gw.get("/api/admin/threads/t-globex/messages?page=1&perPage=4", key=admin)
        self.assertEqual(len(m["messages"]), 2)
        self.assertEqual(gw.get("/api/admin/threads/nope", key=admin)[0], 404)
        self.assertEqual(gw.get("/api/admin/threads/t-acme/messages?last=0", key=admin)[0], 400)
        # an owner's key still sees only its own threads through the memory API
        st, body, _ = gw.get("/api/memory/threads?resourceId=r1&agentId=assistant", key=k1)
        self.assertNotIn("t-globex", json.dumps(body))


class LiveApprovalsTest(AdminTestBase):

    def read_events(self, resp, want, timeout=15):
        """Reads SSE events until one of type want; returns [(type, data)]."""
        events, etype, data = [], None, []
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = resp.fp.readline().decode()
            if not line:
                break
            line = line.rstrip("\r\n")
            if line.startswith("event: "):
                etype = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                events.append((etype, json.loads("\n".join(data))))
                if etype == want:
                    return events
                etype, data = None, []
        self.fail("no %s event; got %r" % (want, events))

    def open_stream(self, gw, headers):
        c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=20)
        c.request("GET", "/api/approvals/events", headers=headers)
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.getheader("content-type").startswith("text/event-stream"))
        return c, r

    def test_approvals_stream_live_to_a_session(self):
        gw = self.admin_gateway()
        user = gw.create_key("app", owner="acme")
        c = Client(gw)
        c.login()
        conn, resp = self.open_stream(gw, {"Cookie": "gh_session=" + c.cookie})
        ev = self.read_events(resp, "snapshot")
        self.assertEqual(ev[-1][1]["approvals"], [])
        res = self.ask(gw, user, [("send_email", {"to": "x@y.z", "body": "<script>1</script>"})])
        ev = self.read_events(resp, "approval-requested")
        a = ev[-1][1]
        self.assertEqual((a["id"], a["status"], a["toolName"], a["owner"]),
                         (res["approvals"][0]["id"], "pending", "send_email", "acme"))
        self.assertEqual(a["args"]["body"], "<script>1</script>")
        st, body, _ = c.request("POST", "/api/approvals/%s/approve" % a["id"], {"reason": "ok"})
        self.assertEqual(st, 200, body)
        self.assertEqual(body["decidedBy"], "admin:alice")
        ev = self.read_events(resp, "approval-decided")
        self.assertEqual((ev[-1][1]["id"], ev[-1][1]["status"]), (a["id"], "approved"))
        conn.close()
        # the tool ran once and the run completed
        deadline = time.time() + 10
        while time.time() < deadline:
            st, run, _ = c.request("GET", "/api/runs/" + a["runId"])
            if run["status"] == "completed":
                break
            time.sleep(0.2)
        self.assertEqual(run["status"], "completed", run)
        self.assertEqual(len(self.fake.requests(tool="send_email")), 1)

    def test_second_decision_names_who_decided_first(self):
        gw = self.admin_gateway(users=("alice", "bob"))
        user = gw.create_key("app")
        res = self.ask(gw, user, [("send_email", {"to": "x@y.z"})])
        apr = res["approvals"][0]["id"]
        alice, bob = Client(gw), Client(gw)
        alice.login()
        bob.login(user="bob")
        self.assertEqual(alice.request("POST", "/api/approvals/%s/deny" % apr, {})[0], 200)
        st, body, _ = bob.request("POST", "/api/approvals/%s/approve" % apr, {})
        self.assertEqual(st, 409, body)
        self.assertIn("admin:alice", body["error"]["message"])

    def test_stream_ends_when_the_session_ends_and_works_with_admin_keys(self):
        gw = self.admin_gateway()
        key = gw.create_key("robot", admin=True)
        conn, resp = self.open_stream(gw, {"Authorization": "Bearer " + key})
        self.read_events(resp, "snapshot")
        conn.close()
        c = Client(gw)
        c.login()
        conn, resp = self.open_stream(gw, {"Cookie": "gh_session=" + c.cookie})
        self.read_events(resp, "snapshot")
        gw.cli("admin", "disable", "--config", gw.config_path, "--user", "alice", check=True)
        self.read_events(resp, "session-ended", timeout=15)
        conn.close()


if __name__ == "__main__":
    unittest.main()
