"""Integration-test harness: starts the real gatehouse binary on loopback
against the scripted fake upstream (tests/fake/fake_upstream.c) and talks
to both over real HTTP. Python 3 standard library only.

Environment (set by CTest): GH_BIN, GH_FAKE, GH_SRC; for the runs on
PostgreSQL (label pg) also GH_TEST_BACKEND=pg and GH_TEST_PG_URL (a server
tests/pg/with_pg.sh names), and then every Gateway gets a database of its
own on that server (database.url) instead of a SQLite file.

    fake = Fake()                       # started on a free port
    gw = Gateway(config(fake))          # temp dir, temp database
    gw.query("SELECT ... WHERE id = ?", x)   # either backend
    key = gw.create_key("alice")
    st, body, hdrs = gw.post("/api/agents/a/generate", {...}, key=key)
    gw.stop()                           # fails the test on sanitizer reports
"""

import atexit
import copy
import http.client
import json
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import unittest
import urllib.parse

GH_BIN = os.environ.get("GH_BIN", os.path.join(os.path.dirname(__file__), "../../build/gatehouse"))
GH_FAKE = os.environ.get("GH_FAKE",
                         os.path.join(os.path.dirname(__file__), "../../build/tests/fake_upstream"))
GH_SRC = os.environ.get("GH_SRC", os.path.join(os.path.dirname(__file__), "../.."))

# The backend every Gateway runs on: "sqlite" (a file in its directory) or
# "pg" (a fresh database on the server GH_TEST_PG_URL names).
BACKEND = os.environ.get("GH_TEST_BACKEND", "sqlite")
PG_URL = os.environ.get("GH_TEST_PG_URL")
ON_PG = BACKEND == "pg"
if BACKEND not in ("sqlite", "pg"):
    raise RuntimeError("GH_TEST_BACKEND is sqlite or pg, not %r" % BACKEND)
if ON_PG and not PG_URL:
    raise RuntimeError("GH_TEST_BACKEND=pg needs GH_TEST_PG_URL (tests/pg/with_pg.sh)")

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer")


def _wait_port_file(path, proc, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("process exited early with %s" % proc.returncode)
        try:
            with open(path) as f:
                s = f.read().strip()
            if s:
                return int(s)
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise RuntimeError("no port file after %.0f s" % timeout)


# ---- PostgreSQL: databases on the test server, and SQL through psql ----

def psql(url, sql=None, stdin=None):
    """Runs sql (or the script stdin) on url with psql; stops at the first
    error. Returns psql's unaligned, tuples-only output."""
    cmd = ["psql", url, "-v", "ON_ERROR_STOP=1", "-X", "-q", "-At"]
    if sql is not None:
        cmd += ["-c", sql]
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("psql: %s\n%s" % (sql or stdin, p.stderr))
    return p.stdout


def with_db(url, name):
    """url with its database replaced by name."""
    u = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


def sql_literal(v):
    """v as a PostgreSQL literal (bytes as bytea)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "'\\x%s'::bytea" % bytes(v).hex()
    if isinstance(v, str):
        if "\0" in v:
            raise ValueError("a NUL in an SQL string")
        return "'" + v.replace("'", "''") + "'"
    raise TypeError("no SQL literal for %r" % type(v))


def bind(sql, args):
    """sql with each ? placeholder (outside quotes) replaced by the literal
    of the next of args."""
    out, it, quote = [], iter(args), None
    n = 0
    for ch in sql:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            try:
                ch = sql_literal(next(it))
            except StopIteration:
                raise ValueError("more ? than arguments in: " + sql)
            n += 1
        out.append(ch)
    if n != len(args):
        raise ValueError("%d arguments for %d ? in: %s" % (len(args), n, sql))
    return "".join(out)


def pg_rows(url, sql, args=()):
    """The rows of a query as dicts of Python values, as sqlite3 gives
    them: integers, strings, None, and bytes for bytea columns."""
    q = bind(sql, args).strip().rstrip(";")
    mark = "--rows-" + secrets.token_hex(4)
    out = psql(url, stdin="%s\n\\gdesc\n\\echo %s\n"
               "SELECT coalesce(json_agg(t), '[]') FROM (%s) t;\n" % (q, mark, q))
    desc, _, data = out.partition(mark + "\n")
    binary = {line.split("|", 1)[0] for line in desc.splitlines()
              if line.split("|", 1)[-1] == "bytea"}
    rows = json.loads(data)
    for r in rows:
        for k in binary & r.keys():
            if r[k] is not None:
                r[k] = bytes.fromhex(r[k][2:])
    return rows


class HTTP:
    """A small keep-alive JSON client for one host:port."""

    def __init__(self, port, host="127.0.0.1"):
        self.host, self.port = host, port
        self.conn = None

    def _conn(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        return self.conn

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, headers=None, raw=None):
        """Returns (status, parsed JSON or text, headers dict lower-cased)."""
        hdrs = dict(headers or {})
        data = None
        if raw is not None:
            data = raw if isinstance(raw, bytes) else raw.encode()
        elif body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        for attempt in range(2):
            c = self._conn()
            try:
                c.request(method, path, body=data, headers=hdrs)
                r = c.getresponse()
                payload = r.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # a kept-alive connection the server closed: retry once fresh
                self.close()
                if attempt:
                    raise
        rh = {k.lower(): v for k, v in r.getheaders()}
        if rh.get("connection", "").lower() == "close":
            self.close()
        text = payload.decode("utf-8", "replace")
        ctype = rh.get("content-type", "")
        if "json" in ctype and text:
            try:
                return r.status, json.loads(text), rh
            except ValueError:
                pass
        return r.status, text, rh


class Fake:
    """The scripted fake LLM upstream (OpenAI and Anthropic wire formats)."""

    def __init__(self, threads=64):
        self.dir = tempfile.mkdtemp(prefix="gh-fake-")
        pf = os.path.join(self.dir, "port")
        self.log = open(os.path.join(self.dir, "fake.log"), "w+")
        self.proc = subprocess.Popen([GH_FAKE, "--listen", "127.0.0.1:0", "--port-file", pf,
                                      "--threads", str(threads)],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        self.port = _wait_port_file(pf, self.proc)
        self.http = HTTP(self.port)
        self.url = "http://127.0.0.1:%d" % self.port

    def script(self, model, *replies):
        st, body, _ = self.http.request("POST", "/_script", {"model": model, "replies": list(replies)})
        assert st == 200, body

    def tool_script(self, tool, *replies):
        st, body, _ = self.http.request("POST", "/_script", {"tool": tool, "replies": list(replies)})
        assert st == 200, body

    def requests(self, model=None, tool=None):
        q = ""
        if model:
            q = "?model=" + model
        elif tool:
            q = "?tool=" + tool
        st, body, _ = self.http.request("GET", "/_requests" + q)
        assert st == 200, body
        return body

    def reset(self):
        self.http.request("POST", "/_reset", {})

    def stop(self):
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.seek(0)
        errs = self.log.read()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        for m in SANITIZER_MARKS:
            if m in errs:
                raise AssertionError("fake upstream sanitizer report:\n" + errs[-4000:])


def config(fake=None, agents=None, tools=None, policies=None, **sections):
    """A gatehouse config for tests: provider "fake" (OpenAI wire) and
    "fake_anthropic" point at the fake upstream; "offline" is the mock."""
    cfg = {
        "server": {"listen": "127.0.0.1:0", "max_body_bytes": 262144, "threads": 24,
                   "max_streams": 8, "heartbeat_ms": 1000, "approval_wait_ms": 3000},
        "database": {"path": "gatehouse.db"},
        "providers": {
            "offline": {"type": "mock", "default": "mock says: {{message}}"},
        },
        "agents": agents or {
            "assistant": {"provider": "fake" if fake else "offline", "model": "m",
                          "instructions": "Be brief.",
                          "tools": ["memory_*", "working_memory_update"],
                          "memory": {"enabled": True, "last_messages": 20}, "max_steps": 6},
        },
        "tools": tools or {},
        "policies": policies or {
            "default": {"agents": ["*"],
                        "tools": {"allow": ["*"]},
                        "client_tools": {"allow": ["*"]}},
        },
        "audit": {"checkpoint_rows": 50, "checkpoint_seconds": 2},
    }
    if fake:
        cfg["providers"]["fake"] = {"type": "openai", "base_url": fake.url + "/v1",
                                    "api_key": "sk-test-provider-secret", "timeout_ms": 5000,
                                    "max_retries": 2, "retry_base_ms": 20}
        cfg["providers"]["fake_anthropic"] = {"type": "anthropic", "base_url": fake.url,
                                              "api_key": "sk-ant-test-secret",
                                              "timeout_ms": 5000, "max_retries": 1,
                                              "retry_base_ms": 20}
    for k, v in sections.items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k].update(v)
        else:
            cfg[k] = v
    return cfg


class Gateway:
    """A gatehouse serve process with its own directory and database.

    On PostgreSQL (GH_TEST_BACKEND=pg) the database is a new one on the
    test server, dropped by cleanup(); the config names it as
    "${GH_TEST_DB_URL}" (the password stays out of the file) and keeps the
    other database options the test set. A config that already names a
    database.url is left as it is (unless it is "${GH_TEST_DB_URL}" and env
    does not set that: a config copied from another Gateway). Local files
    (key files, pid file) are named from self.base: the SQLite file, or
    <dir>/gatehouse."""

    def __init__(self, cfg, env=None, dirname=None, nofile=None):
        self.dir = dirname or tempfile.mkdtemp(prefix="gh-test-")
        # (soft, hard) limit on descriptors the server starts with
        self.nofile = nofile
        self.cfg = copy.deepcopy(cfg)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.pg_name = self.db_url = None
        dbc = self.cfg.setdefault("database", {})
        # a config read back from another Gateway's file names its
        # database the way this one will: it gets a new one too
        own = dbc.get("url") == "${GH_TEST_DB_URL}" and "GH_TEST_DB_URL" not in (env or {})
        if ON_PG and ("url" not in dbc or own):
            self.pg_name = "gh_t_" + secrets.token_hex(6)
            psql(PG_URL, "CREATE DATABASE " + self.pg_name)
            self.db_url = with_db(PG_URL, self.pg_name)
            dbc.pop("path", None)
            dbc["url"] = "${GH_TEST_DB_URL}"
            self.env["GH_TEST_DB_URL"] = self.db_url
        elif "url" in dbc:
            u = dbc["url"]
            m = re.fullmatch(r"\$\{(\w+)\}", u)
            self.db_url = self.env.get(m.group(1)) if m else u
        self.config_path = os.path.join(self.dir, "gatehouse.json")
        with open(self.config_path, "w") as f:
            json.dump(self.cfg, f, indent=2)
        if self.db_url:
            self.db_path = None
            self.base = os.path.join(self.dir, "gatehouse")
        else:
            self.db_path = os.path.join(self.dir, dbc.get("path", "gatehouse.db"))
            self.base = self.db_path
        self.proc = None
        try:
            self.start()
        except BaseException:
            # nobody holds a Gateway that did not start: clean up here
            # (the error carries what the server said)
            self.drop_database()
            if not dirname:
                shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def drop_database(self):
        """Drops the database this Gateway made (PostgreSQL)."""
        if self.pg_name:
            psql(PG_URL, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.pg_name)
            self.pg_name = None

    def start(self):
        self.out = open(os.path.join(self.dir, "serve.out"), "w+")
        self.err = open(os.path.join(self.dir, "serve.err"), "a+")
        nofile = self.nofile
        limits = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile)) if nofile else None
        self.proc = subprocess.Popen([GH_BIN, "serve", "--config", self.config_path],
                                     cwd=self.dir, stdout=self.out, stderr=self.err, env=self.env,
                                     preexec_fn=limits)
        deadline = time.time() + 30
        self.port = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.err.seek(0)
                raise RuntimeError("gatehouse exited %s:\n%s" % (self.proc.returncode,
                                                                   self.err.read()[-3000:]))
            self.out.seek(0)
            m = re.search(r"listening on https?://[^:]+:(\d+)", self.out.read())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.02)
        if not self.port:
            raise RuntimeError("gatehouse did not start")
        self.http = HTTP(self.port)

    def stop(self, sig=signal.SIGTERM, check=True):
        """Stops the server; with check, asserts a clean exit and no
        sanitizer report. Returns the exit code."""
        if self.proc is None:
            return 0
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        self.out.close()
        self.err.seek(0)
        errs = self.err.read()
        self.err.close()
        if check:
            for m in SANITIZER_MARKS:
                if m in errs:
                    raise AssertionError("gatehouse sanitizer report:\n" + errs[-6000:])
            if sig == signal.SIGTERM and rc != 0:
                raise AssertionError("gatehouse exited %s:\n%s" % (rc, errs[-3000:]))
        return rc

    def restart(self):
        self.stop()
        self.start()

    def cleanup(self):
        try:
            if self.proc is not None:
                self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.drop_database()

    def logs(self):
        with open(os.path.join(self.dir, "serve.err")) as f:
            return f.read()

    # ---- CLI ----

    def cli(self, *args, stdin=None, check=False):
        p = subprocess.run([GH_BIN] + list(args), cwd=self.dir, input=stdin,
                           capture_output=True, text=True, env=self.env, timeout=120)
        for m in SANITIZER_MARKS:
            if m in p.stderr:
                raise AssertionError("gatehouse CLI sanitizer report:\n" + p.stderr[-4000:])
        if check and p.returncode != 0:
            raise AssertionError("gatehouse %s failed (%d):\n%s%s" % (" ".join(args), p.returncode,
                                                                    p.stdout, p.stderr))
        return p.returncode, p.stdout, p.stderr

    def create_key(self, name, owner=None, policy=None, admin=False):
        args = ["keys", "create", "--config", self.config_path, "--name", name]
        if owner:
            args += ["--owner", owner]
        if policy:
            args += ["--policy", policy]
        if admin:
            args.append("--admin")
        _, out, _ = self.cli(*args, check=True)
        return out.strip().splitlines()[-1]

    # ---- HTTP ----

    def request(self, method, path, body=None, key=None, headers=None, raw=None):
        h = dict(headers or {})
        if key:
            h["Authorization"] = "Bearer " + key
        return self.http.request(method, path, body=body, headers=h, raw=raw)

    def get(self, path, key=None, headers=None):
        return self.request("GET", path, key=key, headers=headers)

    def post(self, path, body=None, key=None, headers=None, raw=None):
        return self.request("POST", path, body=body, key=key, headers=headers, raw=raw)

    def stream(self, path, body, key=None, headers=None, timeout=60):
        """POSTs and reads an SSE response whole: (status, [data strings], raw text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if key:
            h["Authorization"] = "Bearer " + key
        c.request("POST", path, body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        events = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
        return r.status, events, text

    # ---- database ----

    def db(self):
        """A read-only sqlite3 connection (SQLite only; never writes, never
        checkpoints). Tests that run on both backends use query()."""
        if self.db_path is None:
            raise AssertionError("gw.db() is SQLite's: use gw.query() on PostgreSQL")
        c = sqlite3.connect("file:%s?mode=ro" % self.db_path, uri=True, timeout=10)
        c.row_factory = sqlite3.Row
        return c

    def query(self, sql, *args):
        """The rows of a read-only query as dicts, on either backend: ?
        placeholders; bytea and BLOB columns come back as bytes. Keep to
        SQL both backends speak."""
        if self.db_url:
            return pg_rows(self.db_url, sql, args)
        c = self.db()
        try:
            return [dict(r) for r in c.execute(sql, args)]
        finally:
            c.close()

    def dump(self):
        """Everything the database holds, as bytes: the SQLite file, or
        pg_dump's plain dump of the PostgreSQL database."""
        if self.db_path:
            with open(self.db_path, "rb") as f:
                return f.read()
        p = subprocess.run(["pg_dump", "--no-owner", "-d", self.db_url], capture_output=True,
                           timeout=120)
        if p.returncode != 0:
            raise AssertionError("pg_dump: " + p.stderr.decode(errors="replace"))
        return p.stdout

    def write(self, *statements):
        """Runs statements (SQL, or (SQL, args) with ? placeholders) in one
        transaction, as someone with access to the database would: to
        tamper with it, with the server stopped (on SQLite no second
        connection may write while it runs)."""
        stmts = [(s, ()) if isinstance(s, str) else (s[0], tuple(s[1])) for s in statements]
        if self.db_url:
            psql(self.db_url, stdin="BEGIN;\n%s;\nCOMMIT;\n" % ";\n".join(
                bind(sql, args) for sql, args in stmts))
            return
        c = sqlite3.connect(self.db_path)
        try:
            for sql, args in stmts:
                c.execute(sql, args)
            c.commit()
        finally:
            c.close()


class GatewayTest(unittest.TestCase):
    """Base class: one fake upstream per test class (none for a class that
    sets needs_fake = False), gateways per test."""

    fake = None
    needs_fake = True

    @classmethod
    def setUpClass(cls):
        if cls.needs_fake:
            cls.fake = Fake()

    @classmethod
    def tearDownClass(cls):
        if cls.fake:
            cls.fake.stop()

    def setUp(self):
        self._gateways = []
        # each test class has its own fake; start every test from a clean log
        if self.fake:
            self.fake.reset()

    def tearDown(self):
        for g in self._gateways:
            g.cleanup()

    def gateway(self, cfg=None, **kw):
        g = Gateway(cfg if cfg is not None else config(self.fake), **kw)
        self._gateways.append(g)
        return g

    def model(self):
        """A model name unique to the calling test, so scripted replies of
        different tests never mix."""
        return "m-" + self.id().split(".")[-1]

    def wait_run(self, gw, key, run_id, status, timeout=30):
        """Polls GET /api/runs/:id on gw until the run has status."""
        deadline = time.time() + timeout
        r = None
        while time.time() < deadline:
            st, r, _ = gw.get("/api/runs/" + run_id, key=key)
            self.assertEqual(st, 200, r)
            if r["status"] == status:
                return r
            time.sleep(0.05)
        self.fail("run %s never reached %s (last: %s)" % (run_id, status, r and r["status"]))


def sqlite_only(why):
    """Skips a test (or class) on PostgreSQL: why names the SQLite-specific
    thing it checks."""
    return unittest.skipIf(ON_PG, "SQLite only: " + why)


_held = []
atexit.register(lambda: [s.close() for s in _held])


def held_socket():
    """A socket bound to a loopback port that does not listen: connections
    to the port are refused, and while it is held no other server (another
    test running alongside) can bind the port, as it could a port picked
    and released. A test serving on the port later listens on this socket."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _held.append(s)
    return s


def closed_port():
    """A loopback port that refuses connections for the rest of the run."""
    return held_socket().getsockname()[1]
