"""What a new user meets first: `gatehouse serve` refusing a bad start
before it writes anything (and cleaning up after a start that fails
later), errors that name the file, option and address at fault, and the
command line's option checks, key names and help."""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import unittest

from harness import (GH_BIN, ON_PG, PG_URL, SANITIZER_MARKS, Gateway, GatewayTest, config,
                     psql, sqlite_only, with_db)


def run(args, cwd, stdin=None, env=None, prefix=()):
    p = subprocess.run(list(prefix) + [GH_BIN] + list(args), cwd=cwd, input=stdin,
                       capture_output=True, text=True, timeout=120, env=env)
    for m in SANITIZER_MARKS:
        if m in p.stderr:
            raise AssertionError("gatehouse sanitizer report:\n" + p.stderr[-4000:])
    return p.returncode, p.stdout, p.stderr


class StartupTest(unittest.TestCase):
    """serve in a directory of its own; the test looks at what is left."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gh-start-")
        self.env = dict(os.environ)
        self.pg_name = None
        if ON_PG:
            # a database of its own, named as Gateway names one
            self.pg_name = "gh_start_" + os.urandom(6).hex()
            psql(PG_URL, "CREATE DATABASE " + self.pg_name)
            self.env["GH_TEST_DB_URL"] = with_db(PG_URL, self.pg_name)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.pg_name:
            psql(PG_URL, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.pg_name)

    def write_config(self, **sections):
        cfg = config(None, **sections)
        if ON_PG and "path" not in sections.get("database", {}):
            cfg["database"] = {"url": "${GH_TEST_DB_URL}"}
        path = os.path.join(self.dir, "gatehouse.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path

    def serve(self, *extra):
        return run(["serve", "--config", "gatehouse.json"] + list(extra), self.dir, env=self.env)

    def files(self):
        return sorted(os.listdir(self.dir))

    def test_a_listen_address_without_a_port_is_refused_before_any_file_is_made(self):
        self.write_config(server={"listen": "127.0.0.1"})
        rc, out, err = self.serve()
        self.assertEqual(rc, 1, err)
        self.assertIn('$.server.listen: expected HOST:PORT (e.g. 127.0.0.1:8080): "127.0.0.1" '
                      'has no port', err)
        self.assertEqual(self.files(), ["gatehouse.json"])
        # --listen is checked the same way (a usage error)
        self.write_config()
        for bad, why in (("127.0.0.1", "has no port"), ("::1:8080", "in brackets"),
                         ("127.0.0.1:99999", "0..65535")):
            rc, out, err = self.serve("--listen", bad)
            self.assertEqual(rc, 2, err)
            self.assertIn("--listen: ", err)
            self.assertIn(why, err)
            self.assertEqual(self.files(), ["gatehouse.json"])

    def test_a_port_in_use_is_named_with_the_system_error_and_leaves_no_files(self):
        self.write_config()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        try:
            rc, out, err = self.serve("--listen", "127.0.0.1:%d" % port)
        finally:
            s.close()
        self.assertEqual(rc, 1, err)
        self.assertIn("cannot listen on 127.0.0.1:%d: %s" % (port, os.strerror(98)), err)
        self.assertNotIn("or not a HOST:PORT", err)
        self.assertEqual(self.files(), ["gatehouse.json"])
        self.assertFalse([f for f in self.files() if f.endswith(("-audit.key", "-hashkey",
                                                                 "-writer.lock"))])

    @unittest.skipUnless(ON_PG, "PostgreSQL: GH_TEST_BACKEND=pg")
    def test_a_database_that_is_not_there_is_named_and_leaves_no_files(self):
        self.write_config()
        hashkey = os.path.join(self.dir, "gatehouse-hashkey")
        fd = os.open(hashkey, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"k" * 32)
        os.close(fd)
        self.env["GH_TEST_DB_URL"] = with_db(PG_URL, "gh_nosuch")
        rc, out, err = self.serve()
        self.assertEqual(rc, 1, err)
        self.assertIn('database "gh_nosuch" does not exist', err)
        self.assertIn("gatehouse:***@", err)            # the password is not shown
        self.assertNotIn(PG_URL.split("@")[0].split(":")[-1], err)
        # the audit key this start made is gone; the key that was there stays
        self.assertEqual(self.files(), ["gatehouse-hashkey", "gatehouse.json"])
        with open(hashkey, "rb") as f:
            self.assertEqual(f.read(), b"k" * 32)

    @sqlite_only("a file that is not a SQLite database")
    def test_a_failed_start_removes_what_it_created_and_keeps_what_was_there(self):
        self.write_config()
        db = os.path.join(self.dir, "gatehouse.db")
        with open(db, "w") as f:
            f.write("my notes, not a database\n" * 100)
        hashkey = db + "-hashkey"
        fd = os.open(hashkey, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"k" * 32)
        os.close(fd)
        rc, out, err = self.serve()
        self.assertEqual(rc, 1, err)
        self.assertIn("database gatehouse.db: file is not a database", err)
        # the files this start made are gone; the ones it found stay as they were
        self.assertEqual(self.files(), ["gatehouse.db", "gatehouse.db-hashkey", "gatehouse.json"])
        with open(db) as f:
            self.assertTrue(f.read().startswith("my notes"))
        with open(hashkey, "rb") as f:
            self.assertEqual(f.read(), b"k" * 32)

    @sqlite_only("one server per SQLite database")
    def test_a_second_server_on_the_same_database_is_refused(self):
        # a second server would close the first one's calls in flight as
        # interrupted and take over its running runs
        gw = Gateway(config(None), dirname=self.dir)
        try:
            key = gw.create_key("alice")
            before = self.files()
            rc, out, err = self.serve("--listen", "127.0.0.1:0")
            self.assertEqual(rc, 1, err)
            self.assertIn("the database gatehouse.db is in use by another gatehouse server "
                          "(pid %d); one server serves a SQLite database" % gw.proc.pid, err)
            self.assertEqual(self.files(), before)
            self.assertEqual(gw.get("/api/agents", key=key)[0], 200)
            # the CLI still writes beside the server
            rc, out, err = run(["keys", "create", "--name", "bob", "--config", "gatehouse.json"],
                               self.dir)
            self.assertEqual(rc, 0, err)
        finally:
            gw.stop()
        # once that server is gone, another one starts on the database
        gw = Gateway(config(None), dirname=self.dir)
        gw.stop()

    @sqlite_only("database.path's directory")
    def test_a_missing_database_directory_is_named_by_its_option(self):
        self.write_config(database={"path": "nosuch/gatehouse.db"})
        rc, out, err = self.serve()
        self.assertEqual(rc, 1, err)
        self.assertIn('database.path "nosuch/gatehouse.db": directory "nosuch" does not exist',
                      err)
        self.assertNotIn("hashkey", err)
        self.assertEqual(self.files(), ["gatehouse.json"])
        # a command that writes says the same; --db is named when it is used
        rc, out, err = run(["keys", "create", "--config", "gatehouse.json", "--name", "a"],
                           self.dir)
        self.assertEqual(rc, 1, err)
        self.assertIn('database.path "nosuch/gatehouse.db": directory "nosuch" does not exist',
                      err)
        rc, out, err = run(["migrate", "--config", "gatehouse.json", "--db",
                            "gatehouse.json/x.db"], self.dir)
        self.assertEqual(rc, 1, err)
        self.assertIn('--db "gatehouse.json/x.db": "gatehouse.json" is not a directory', err)
        self.assertEqual(self.files(), ["gatehouse.json"])

    @sqlite_only("database.path's directory")
    def test_an_unwritable_database_directory_is_named_by_its_option(self):
        if os.getuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root to run gatehouse as another user")
        os.chmod(self.dir, 0o755)
        self.write_config(database={"path": "ro/gatehouse.db"})
        os.chmod(os.path.join(self.dir, "gatehouse.json"), 0o644)
        os.mkdir(os.path.join(self.dir, "ro"), 0o755)      # root's: nobody cannot write
        prefix = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
        rc, out, err = run(["serve", "--config", "gatehouse.json"], self.dir, prefix=prefix)
        if rc in (126, 127) or "Permission denied" in err and "gatehouse:" not in err:
            self.skipTest("the build is not reachable by an unprivileged user")
        self.assertEqual(rc, 1, err)
        self.assertIn('database.path "ro/gatehouse.db": directory "ro" is not writable: '
                      'Permission denied', err)
        self.assertEqual(os.listdir(os.path.join(self.dir, "ro")), [])


class CliTest(GatewayTest):
    """The key and audit commands beside a running server."""

    needs_fake = False

    def setUp(self):
        super().setUp()
        self.gw = self.gateway(config(None))

    def cli(self, *args, **kw):
        return self.gw.cli(*args, **kw)

    def audit(self, *args):
        return self.cli("audit", args[0], "--config", self.gw.config_path, *args[1:])

    def test_bad_option_values_name_the_option_and_what_it_takes(self):
        cases = [
            (("query", "--limit", "many"), '--limit: expected a whole number in 1..10000, got "many"'),
            (("query", "--limit", "0"), "--limit: expected a whole number in 1..10000"),
            (("tail", "-n", "-3"), '-n: expected a whole number in 1..100000, got "-3"'),
            (("query", "--before", "x"), '--before: expected a whole number from 1 up, got "x"'),
            (("query", "--format", "xml"), '--format: audit query writes table, ndjson or csv, '
                                           'not "xml"'),
            (("export", "--format", "table"), '--format: audit export writes ndjson or csv, '
                                              'not "table"'),
            (("tail", "--format", "csv"), '--format: audit tail writes table or ndjson'),
            (("query", "--from", "yesterday"), "--from: expected ISO-8601 UTC or Unix ms"),
        ]
        for args, msg in cases:
            rc, out, err = self.audit(*args)
            self.assertEqual(rc, 2, (args, err))
            self.assertIn(msg, err, args)
            self.assertNotIn("bad option value", err)
        # the formats that are right still work
        self.assertEqual(self.audit("export", "--format", "csv")[0], 0)
        self.assertEqual(self.audit("query", "--format", "ndjson")[0], 0)

    def test_revoking_an_unknown_key_names_the_id(self):
        rc, out, err = self.cli("keys", "revoke", "--config", self.gw.config_path,
                                "--id", "key_0000doesnotexist")
        self.assertEqual(rc, 1, err)
        self.assertIn('no key with id "key_0000doesnotexist"', err)

    def test_audit_key_takes_a_name_and_refuses_one_two_keys_share(self):
        self.gw.create_key("alice")
        self.gw.create_key("bob")
        alice = self.gw.query("SELECT id FROM api_keys WHERE name = 'alice'")[0]["id"]
        rc, out, err = self.audit("query", "--key", "alice", "--format", "ndjson")
        self.assertEqual(rc, 0, err)
        rows = [json.loads(line) for line in out.splitlines()]
        self.assertEqual([(r["event"], r["keyId"]) for r in rows], [("key_created", alice)])
        # the id works as before
        rc, out2, err = self.audit("query", "--key", alice, "--format", "ndjson")
        self.assertEqual((rc, out2), (0, out))
        # a key nobody has is an error, not "0 rows"
        rc, out, err = self.audit("query", "--key", "carol")
        self.assertEqual(rc, 2, err)
        self.assertIn('--key: no key has the id or name "carol"', err)
        self.assertNotIn("0 rows", out)
        # a second "alice": keys create warns, naming the first one's id ...
        rc, out, err = self.cli("keys", "create", "--config", self.gw.config_path,
                                "--name", "alice")
        self.assertEqual(rc, 0, err)
        self.assertIn('warning: a key is named "alice" already: %s' % alice, err)
        alice2 = re.search(r"created key (key_\w+)", out).group(1)
        # ... and the name no longer says which key: refused, naming both
        rc, out, err = self.audit("query", "--key", "alice")
        self.assertEqual(rc, 2, err)
        self.assertIn('--key: 2 keys are named "alice": ', err)
        self.assertIn(alice, err)
        self.assertIn(alice2, err)
        # no warning for a name nobody has
        rc, out, err = self.cli("keys", "create", "--config", self.gw.config_path,
                                "--name", "dave")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("warning", err)

    def test_an_unknown_event_is_refused_and_one_row_is_one_row(self):
        self.gw.create_key("alice")
        rc, out, err = self.audit("query", "--event", "nosuch")
        self.assertEqual(rc, 2, err)
        self.assertIn('--event: no event is called "nosuch"; events: allowed denied', err)
        self.assertIn("admin_password_changed", err)
        rc, out, err = self.audit("query", "--event", "key_created")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"\n1 row\n$")
        rc, out, err = self.audit("query", "--event", "key_revoked")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"\n0 rows\n$")

    def test_help_lists_every_command(self):
        rc, out, err = self.cli("--help")
        self.assertEqual(rc, 0, err)
        self.assertIn("tail|query|export|verify|reindex|pubkey", out)
        self.assertIn("create|list|passwd|enable|disable", out)
        rc, out, err = self.cli("audit", "--help")
        self.assertIn("gatehouse audit reindex", out)
        self.assertIn("--key KEY_ID|NAME", out)
        rc, out, err = self.cli("admin", "--help")
        self.assertIn("gatehouse admin passwd", out)
        self.assertIn("gatehouse admin enable", out)
        self.assertIn("at least 10 characters", out)


class MallocTuneTest(GatewayTest):
    """serve starts itself once more with glibc's per-thread cache of freed
    chunks raised (GLIBC_TUNABLES, read only as a program starts), in the
    same process: what the second start was given shows in its
    /proc/<pid>/environ. An operator's own tunables stay, and with them
    a tcache count of theirs; GH_MALLOC=system keeps glibc's defaults."""

    needs_fake = False

    def started_with(self, env):
        """The environment block the running server was started with (raw:
        glibc's loader cuts GLIBC_TUNABLES at each ':' as it reads it)."""
        gw = self.gateway(config(None))
        gw.stop()
        gw.env = {k: v for k, v in gw.env.items()
                  if k not in ("GLIBC_TUNABLES", "GH_MALLOC", "GH_MALLOC_TUNED")}
        gw.env.update(env)
        gw.start()
        with open("/proc/%d/environ" % gw.proc.pid, "rb") as f:
            seen = b"\0" + f.read()
        # the server so started serves
        self.assertEqual(gw.get("/healthz")[0], 200)
        return seen

    def test_serve_starts_again_with_the_cache_raised(self):
        seen = self.started_with({})
        self.assertIn(b"\0GLIBC_TUNABLES=glibc.malloc.tcache_count=256\0", seen)
        self.assertIn(b"\0GH_MALLOC_TUNED=-\0", seen)

    def test_the_operators_tunables_stay_and_the_cache_is_added(self):
        seen = self.started_with({"GLIBC_TUNABLES": "glibc.malloc.perturb=0"})
        self.assertRegex(seen, rb"\0GLIBC_TUNABLES=glibc\.malloc\.perturb=0[:\0]"
                               rb"glibc\.malloc\.tcache_count=256\0")
        self.assertIn(b"\0GH_MALLOC_TUNED==glibc.malloc.perturb=0\0", seen)

    def test_a_cache_size_of_the_operators_own_is_kept_without_a_second_start(self):
        seen = self.started_with({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"})
        self.assertIn(b"\0GLIBC_TUNABLES=glibc.malloc.tcache_count=7\0", seen)
        self.assertNotIn(b"\0GH_MALLOC_TUNED=", seen)

    def test_a_stray_mark_is_dropped_and_the_operators_tunables_kept(self):
        # GH_MALLOC_TUNED holding what serve never writes there is not a
        # second start: serve starts again as it would without it
        seen = self.started_with({"GH_MALLOC_TUNED": "x",
                                  "GLIBC_TUNABLES": "glibc.malloc.perturb=0"})
        self.assertRegex(seen, rb"\0GLIBC_TUNABLES=glibc\.malloc\.perturb=0[:\0]"
                               rb"glibc\.malloc\.tcache_count=256\0")
        self.assertIn(b"\0GH_MALLOC_TUNED==glibc.malloc.perturb=0\0", seen)

    def test_an_unknown_gh_malloc_is_named_and_ignored(self):
        seen = self.started_with({"GH_MALLOC": "sytem"})
        self.assertIn(b"\0GLIBC_TUNABLES=glibc.malloc.tcache_count=256\0", seen)
        logs = self._gateways[-1].logs()
        self.assertIn('GH_MALLOC=sytem is not a setting ("system" keeps glibc\'s malloc '
                      'defaults): ignored', logs)
        self.assertEqual(logs.count("GH_MALLOC=sytem"), 1)

    def test_gh_malloc_system_keeps_glibcs_defaults(self):
        seen = self.started_with({"GH_MALLOC": "system"})
        self.assertNotIn(b"\0GLIBC_TUNABLES=", seen)
        self.assertNotIn(b"\0GH_MALLOC_TUNED=", seen)

if __name__ == "__main__":
    unittest.main()
