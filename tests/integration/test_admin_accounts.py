"""Admin accounts over their life: an operator resets a forgotten password
(`gatehouse admin passwd`) and re-enables a disabled account (`admin
enable`); a signed-in admin changes their own password
(POST /api/admin/password). Each change ends the sessions it should, is
refused when it should be, and is in the audit log."""

import json
import unittest

from harness import GatewayTest
from test_admin_api import PASSWORD, Client, admin_config

NEW = "a much better passphrase"


class AdminAccountsTest(GatewayTest):

    def admin_gateway(self, admin=None, users=("alice",)):
        gw = self.gateway(admin_config(self.fake, admin))
        for u in users:
            gw.cli("admin", "create", "--config", gw.config_path, "--user", u,
                   stdin=PASSWORD + "\n", check=True)
        return gw

    def admin_cli(self, gw, *args, stdin=None):
        return gw.cli("admin", args[0], "--config", gw.config_path, *args[1:], stdin=stdin)

    def rows(self, gw, event):
        key = gw.create_key("auditor-%s" % event, admin=True)
        st, body, _ = gw.get("/api/audit?limit=100&event=" + event, key=key)
        self.assertEqual(st, 200, body)
        for r in body["rows"]:
            r["detail"] = r["detail"] if isinstance(r["detail"], dict) else json.loads(r["detail"])
        return body["rows"]

    def test_passwd_resets_a_password_and_ends_the_sessions(self):
        gw = self.admin_gateway(users=("alice", "bob"))
        c, bob = Client(gw), Client(gw)
        self.assertEqual(c.login()[0], 200)
        self.assertEqual(bob.login(user="bob")[0], 200)
        rc, out, err = self.admin_cli(gw, "passwd", "--user", "alice", stdin=NEW + "\n")
        self.assertEqual(rc, 0, err)
        self.assertIn("changed the password of admin alice; 1 session ended", out)
        self.assertEqual(c.request("GET", "/api/admin/me")[0], 401)
        self.assertEqual(bob.request("GET", "/api/admin/me")[0], 200)   # only alice's
        self.assertEqual(Client(gw).login()[0], 401)
        self.assertEqual(Client(gw).login(password=NEW)[0], 200)
        rows = self.rows(gw, "admin_password_changed")
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["adminUser"], rows[0]["outcome"], rows[0]["detail"]["user"],
                          rows[0]["detail"]["via"]), ("cli", "ok", "alice", "cli"))
        self.assertNotIn(NEW, json.dumps(rows))
        # too short, unknown user: refused, nothing changed
        rc, out, err = self.admin_cli(gw, "passwd", "--user", "alice", stdin="short\n")
        self.assertEqual(rc, 2, err)
        self.assertIn("the password needs at least 10 characters (this one has 5)", err)
        rc, out, err = self.admin_cli(gw, "passwd", "--user", "nobody", stdin=NEW + "\n")
        self.assertEqual(rc, 1, err)
        self.assertIn('no admin "nobody"', err)
        self.assertEqual(len(self.rows(gw, "admin_password_changed")), 1)
        self.assertEqual(Client(gw).login(password=NEW)[0], 200)

    def test_enable_lets_a_disabled_admin_log_in_again(self):
        gw = self.admin_gateway()
        c = Client(gw)
        self.assertEqual(c.login()[0], 200)
        rc, out, err = self.admin_cli(gw, "disable", "--user", "alice")
        self.assertEqual(rc, 0, err)
        self.assertIn("disabled admin alice; 1 session ended", out)
        self.assertEqual(Client(gw).login()[0], 401)
        rc, out, err = self.admin_cli(gw, "disable", "--user", "alice")
        self.assertEqual(rc, 1, err)
        self.assertIn('admin "alice" is disabled already', err)
        rc, out, err = self.admin_cli(gw, "enable", "--user", "alice")
        self.assertEqual(rc, 0, err)
        self.assertIn("enabled admin alice", out)
        self.assertEqual(Client(gw).login()[0], 200)
        self.assertEqual(c.request("GET", "/api/admin/me")[0], 401)   # old sessions stay ended
        rc, out, err = self.admin_cli(gw, "enable", "--user", "alice")
        self.assertEqual(rc, 1, err)
        self.assertIn('admin "alice" is not disabled', err)
        rc, out, err = self.admin_cli(gw, "enable", "--user", "carol")
        self.assertEqual(rc, 1, err)
        self.assertIn('no admin "carol"', err)
        rc, out, err = self.admin_cli(gw, "list")
        self.assertRegex(out, r"alice\s.*\sactive")
        enabled = self.rows(gw, "admin_enabled")
        self.assertEqual([(r["detail"]["user"], r["detail"]["via"]) for r in enabled],
                         [("alice", "cli")])
        self.assertEqual(len(self.rows(gw, "admin_disabled")), 1)
        self.assertEqual(len(self.rows(gw, "admin_created")), 1)

    def test_a_signed_in_admin_changes_their_own_password(self):
        gw = self.admin_gateway(users=("alice", "bob"))
        me, other, bob = Client(gw), Client(gw, "127.0.0.2"), Client(gw)
        self.assertEqual(me.login()[0], 200)
        self.assertEqual(other.login()[0], 200)
        self.assertEqual(bob.login(user="bob")[0], 200)
        body = {"current": PASSWORD, "new": NEW}
        # like every change made with a session: the CSRF token is needed
        st, b, _ = me.request("POST", "/api/admin/password", body, csrf=False)
        self.assertEqual(st, 403, b)
        st, b, _ = me.request("POST", "/api/admin/password", {"current": "wrong password",
                                                              "new": NEW})
        self.assertEqual(st, 403, b)
        self.assertEqual(b["error"]["message"], "the current password is wrong")
        st, b, _ = me.request("POST", "/api/admin/password", {"current": PASSWORD,
                                                              "new": "too short"})
        self.assertEqual(st, 400, b)
        self.assertIn("10 to 1024 characters", b["error"]["message"])
        st, b, _ = me.request("POST", "/api/admin/password", body)
        self.assertEqual(st, 200, b)
        self.assertEqual((b["user"], b["sessionsEnded"]), ("alice", 1))
        # this session goes on; alice's other one ends; bob's stays
        self.assertEqual(me.request("GET", "/api/admin/me")[0], 200)
        self.assertEqual(other.request("GET", "/api/admin/me")[0], 401)
        self.assertEqual(bob.request("GET", "/api/admin/me")[0], 200)
        self.assertEqual(Client(gw).login()[0], 401)
        self.assertEqual(Client(gw).login(password=NEW)[0], 200)
        rows = self.rows(gw, "admin_password_changed")
        self.assertEqual([(r["outcome"], r["adminUser"], r["detail"]["via"], r["reason"])
                          for r in rows],
                         [("ok", "alice", "web", None),
                          ("denied", "alice", "web", "wrong current password")])
        self.assertEqual(rows[0]["detail"]["address"], "127.0.0.1")
        for secret in (NEW, PASSWORD, "wrong password"):
            self.assertNotIn(secret, json.dumps(rows))
        # an admin API key has no password to change
        key = gw.create_key("ops", admin=True)
        st, b, _ = gw.post("/api/admin/password", body, key=key)
        self.assertEqual(st, 403, b)
        self.assertIn("gatehouse admin passwd", b["error"]["message"])

    def test_wrong_current_passwords_are_limited_like_logins(self):
        gw = self.admin_gateway()          # login_attempts_per_minute: 3
        me = Client(gw)
        self.assertEqual(me.login()[0], 200)
        for _ in range(3):
            st, b, _ = me.request("POST", "/api/admin/password",
                                  {"current": "guess guess", "new": NEW})
            self.assertEqual(st, 403, b)
        st, b, h = me.request("POST", "/api/admin/password", {"current": PASSWORD, "new": NEW})
        self.assertEqual(st, 429, b)
        self.assertIn("retry-after", h)
        # the address is locked out of logins too; elsewhere, the password is unchanged
        self.assertEqual(Client(gw).login()[0], 429)
        self.assertEqual(Client(gw, "127.0.0.9").login(password=NEW)[0], 401)
        self.assertEqual(Client(gw, "127.0.0.9").login()[0], 200)


if __name__ == "__main__":
    unittest.main()
