"""The Debian package: a Release build of gatehouse configured for /usr,
packed by `cpack -G DEB`, then checked the way an administrator meets it:
its file list, its dependencies, its maintainer scripts, its systemd unit
(`systemd-analyze verify` against the unpacked package) and the packaged
binary serving the packaged config.

Nothing is installed on this machine: the package is only unpacked
(dpkg-deb -x) into a temporary directory.

The Release build lives in $GH_BUILD/deb-build (reused between runs, so
only what changed is rebuilt), or in a temporary directory without
GH_BUILD."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import GH_SRC, HTTP, sqlite_only

BUILD_TIMEOUT = 900
STATE = "/var/lib/gatehouse"
CONFIG = "/etc/gatehouse/gatehouse.json"
UNIT = "/lib/systemd/system/gatehouse.service"


def run(cmd, timeout=120, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode,
                                                       p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


@sqlite_only("the package's config and service run on its SQLite file in /var/lib/gatehouse")
class PackageTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        for tool in ("cmake", "cpack", "dpkg-deb", "dpkg-shlibdeps", "dpkg-query",
                     "systemd-analyze", "ldd", "readelf"):
            if not shutil.which(tool):
                raise AssertionError("%s is not installed (tests/install-deps.sh --test)" % tool)
        cls.tmp = tempfile.mkdtemp(prefix="gh-deb-")
        try:
            cls.build_package()
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def build_package(cls):
        gh_build = os.environ.get("GH_BUILD")
        build = os.path.join(gh_build, "deb-build") if gh_build else os.path.join(cls.tmp, "build")
        src = os.path.abspath(GH_SRC)
        run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_INSTALL_PREFIX=/usr", "-DGH_SANITIZE=", "-DGH_FUZZ=OFF", "-DGH_WERROR=ON",
             # cpack builds only what it installs, not the tests
             "-DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON"], timeout=BUILD_TIMEOUT)
        run(["cmake", "--build", build, "-j2", "--target", "gatehouse"], timeout=BUILD_TIMEOUT)
        out = os.path.join(cls.tmp, "out")
        run(["cpack", "-G", "DEB", "-B", out, "--config", os.path.join(build, "CPackConfig.cmake")],
            timeout=BUILD_TIMEOUT)
        debs = [f for f in os.listdir(out) if f.endswith(".deb")]
        assert len(debs) == 1, debs
        cls.deb = os.path.join(out, debs[0])
        cls.root = os.path.join(cls.tmp, "root")
        run(["dpkg-deb", "-x", cls.deb, cls.root])
        cls.control = os.path.join(cls.tmp, "control")
        run(["dpkg-deb", "-e", cls.deb, cls.control])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def field(self, name):
        return run(["dpkg-deb", "--field", self.deb, name]).strip()

    def read(self, path):
        with open(path) as f:
            return f.read()

    # ---- what the package holds ----

    def test_layout(self):
        out = run(["dpkg-deb", "--contents", self.deb])
        files = {}
        for line in out.splitlines():
            parts = line.split()
            files[parts[5].lstrip(".")] = parts[0]
        self.assertEqual(files.get("/usr/bin/gatehouse"), "-rwxr-xr-x")
        self.assertEqual(files.get(UNIT), "-rw-r--r--")
        self.assertEqual(files.get(CONFIG), "-rw-r--r--")
        self.assertIn("/usr/share/doc/gatehouse/README.md", files)
        self.assertIn("/usr/share/doc/gatehouse/examples/gatehouse.example.json", files)
        # nothing under /usr/local, and the state directory is made on the
        # machine (postinst, StateDirectory=), never shipped with contents
        for path in files:
            self.assertFalse(path.startswith("/usr/local"), path)
            self.assertFalse(path.startswith(STATE + "/"), path)
        # migrations and the admin UI are inside the binary: no file of theirs ships
        self.assertFalse([p for p in files if p.endswith(".sql") or "/web-admin" in p])
        self.assertEqual(self.field("Package"), "gatehouse")
        proj = re.search(r"project\(gatehouse VERSION (\S+)", self.read(os.path.join(GH_SRC,
                                                                             "CMakeLists.txt")))
        self.assertEqual(self.field("Version"), proj.group(1))

    def test_depends_are_debian_packages_covering_every_library(self):
        deps = {}
        for item in self.field("Depends").split(","):
            m = re.fullmatch(r"\s*([a-z0-9][a-z0-9.+-]+)(?:\s*\(([<>=]+)\s*([^)\s]+)\))?\s*",
                             item)
            self.assertIsNotNone(m, "not a Debian dependency: %r" % item)
            deps[m.group(1)] = m.group(3)
        # each is a package this Debian machine knows by that name
        for name in deps:
            run(["dpkg-query", "-W", name])
        self.assertIn("adduser", deps)
        # every shared library the packaged binary links comes from a package it depends on
        binary = os.path.join(self.root, "usr/bin/gatehouse")
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                            run(["readelf", "-d", binary]))
        where = dict(re.findall(r"^\s*(\S+) => (/\S+)", run(["ldd", binary]), re.M))
        self.assertTrue(needed)
        owners = set()
        for soname in needed:
            lib = where.get(soname)
            self.assertIsNotNone(lib, "ldd does not resolve " + soname)
            out = self._owned(lib)
            self.assertIsNotNone(out, "no package holds " + lib)
            owners.add(out.split(":")[0].strip())
        for pkg in owners:
            self.assertIn(pkg, deps, "the binary loads a library of %s, not a dependency" % pkg)
        for pkg in ("libsqlite3-0", "libcivetweb1", "libcurl4", "libcjson1", "libsodium23",
                    "libc6"):
            self.assertIn(pkg, owners)

    @staticmethod
    def _owned(lib):
        """dpkg -S by the path ldd prints, or by its resolved path (merged /usr)."""
        for path in (lib, os.path.realpath(lib)):
            for cand in (path, path.replace("/usr/lib/", "/lib/", 1),
                         path.replace("/lib/", "/usr/lib/", 1)):
                p = subprocess.run(["dpkg-query", "-S", cand], capture_output=True, text=True)
                if p.returncode == 0:
                    return p.stdout
        return None

    def test_maintainer_scripts_and_conffiles(self):
        conffiles = self.read(os.path.join(self.control, "conffiles")).split()
        self.assertEqual(conffiles, [CONFIG])
        for script in ("postinst", "prerm", "postrm"):
            path = os.path.join(self.control, script)
            self.assertTrue(os.access(path, os.X_OK), script)
            run(["sh", "-n", path])
        postinst = self.read(os.path.join(self.control, "postinst"))
        self.assertRegex(postinst, r"adduser [^\n]*--system")
        self.assertIn(STATE, postinst)
        # state goes on purge only
        postrm = self.read(os.path.join(self.control, "postrm"))
        m = re.search(r'if \[ "\$1" = "purge" \]; then\n(.*?)\nfi', postrm, re.S)
        self.assertIsNotNone(m)
        self.assertIn("rm -rf " + STATE, m.group(1))
        self.assertEqual(postrm.count("rm -rf"), 1)

    # ---- the unit ----

    def test_unit_verifies_and_is_hardened(self):
        # systemd-analyze verify against the unpacked package: ExecStart's
        # binary must exist there; the units it orders itself after come
        # from this machine's systemd.
        vroot = os.path.join(self.tmp, "verify-root")
        shutil.copytree(self.root, vroot, symlinks=True)
        units = os.path.join(vroot, "lib/systemd/system")
        for name in os.listdir("/lib/systemd/system"):
            dst = os.path.join(units, name)
            if not os.path.lexists(dst):
                src = os.path.join("/lib/systemd/system", name)
                if os.path.isdir(src) and not os.path.islink(src):
                    shutil.copytree(src, dst, symlinks=True)
                else:
                    shutil.copy2(src, dst, follow_symlinks=False)
        p = subprocess.run(["systemd-analyze", "verify", "--root=" + vroot, UNIT],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # verify exits 0 on keys it ignores: any word about the unit is a defect
        self.assertNotIn("gatehouse.service", p.stdout + p.stderr)

        unit = self.read(os.path.join(self.root, UNIT.lstrip("/")))
        settings = {}
        for line in unit.splitlines():
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                settings[k] = v
        self.assertEqual(settings["ExecStart"], "/usr/bin/gatehouse serve --config " + CONFIG)
        for k, v in (("User", "gatehouse"), ("StateDirectory", "gatehouse"),
                     ("WorkingDirectory", STATE), ("NoNewPrivileges", "yes"),
                     ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                     ("PrivateTmp", "yes"), ("PrivateDevices", "yes"),
                     ("CapabilityBoundingSet", ""),
                     ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6")):
            self.assertEqual(settings.get(k), v, k)
        # systemctl reload runs gatehouse reload, which waits for the outcome
        self.assertEqual(settings["ExecReload"],
                         "/usr/bin/gatehouse reload --config " + CONFIG)

    # ---- the packaged binary serves the packaged config ----

    def test_packaged_binary_serves_the_packaged_config(self):
        binary = os.path.join(self.root, "usr/bin/gatehouse")
        text = self.read(os.path.join(self.root, CONFIG.lstrip("/")))
        state = os.path.join(self.tmp, "state")
        os.mkdir(state, 0o750)
        # the installed config names the database under the state directory
        db_line = '"path": "%s/gatehouse.db"' % STATE
        self.assertEqual(text.count(db_line), 1, "database.path is not under " + STATE)
        self.assertEqual(text.count('"listen": "127.0.0.1:8080"'), 1)
        text = text.replace(db_line, '"path": "%s/gatehouse.db"' % state)
        text = text.replace('"listen": "127.0.0.1:8080"', '"listen": "127.0.0.1:0"')
        cfg = os.path.join(self.tmp, "gatehouse.json")
        with open(cfg, "w") as f:
            f.write(text)
        # an empty working directory: nothing may land in it
        cwd = os.path.join(self.tmp, "cwd")
        os.mkdir(cwd)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}

        out_path = os.path.join(self.tmp, "serve.out")
        err_path = os.path.join(self.tmp, "serve.err")
        with open(out_path, "w+") as out, open(err_path, "w+") as err:
            proc = subprocess.Popen([binary, "serve", "--config", cfg], cwd=cwd, env=env,
                                    stdout=out, stderr=err)
            try:
                port = None
                deadline = time.time() + 30
                while time.time() < deadline and port is None:
                    if proc.poll() is not None:
                        err.seek(0)
                        self.fail("gatehouse exited %s:\n%s" % (proc.returncode, err.read()))
                    out.seek(0)
                    m = re.search(r"listening on https?://[^:]+:(\d+)", out.read())
                    if m:
                        port = int(m.group(1))
                    time.sleep(0.05)
                self.assertIsNotNone(port, "gatehouse did not start")
                http = HTTP(port)
                st, body, _ = http.request("GET", "/healthz")
                self.assertEqual(st, 200, body)

                key = run([binary, "keys", "create", "--config", cfg, "--name", "ops"],
                          cwd=cwd, env=env).strip().splitlines()[-1]
                auth = {"Authorization": "Bearer " + key}
                st, body, _ = http.request(
                    "POST", "/api/agents/assistant/generate",
                    {"messages": "remember that the package works", "memory": {"resource": "ops"}},
                    headers=auth)
                self.assertEqual(st, 200, body)
                self.assertEqual(body["text"], "Noted: the package works")
                st, body, _ = http.request("GET", "/admin/")
                self.assertEqual(st, 200)
                self.assertIn("<html", body.lower())
                http.close()
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            err.seek(0)
            self.assertEqual(proc.returncode, 0, err.read())

        out = run([binary, "audit", "verify", "--config", cfg], cwd=cwd, env=env)
        self.assertIn("intact", out)
        self.assertEqual(os.listdir(cwd), [])
        made = set(os.listdir(state))
        for name in ("gatehouse.db", "gatehouse.db-hashkey", "gatehouse.db-audit.key",
                     "gatehouse.db-witness"):
            self.assertIn(name, made)

    # ---- the maintainer scripts, in a private mount namespace ----

    def test_maintainer_scripts_in_a_private_namespace(self):
        """postinst, prerm and postrm run for real, but over copies of /etc
        and /var/lib bind-mounted in a mount namespace of their own: the
        user they create and the state they make never reach this machine.
        Then `keys create` runs as that user on the installed config, the
        way the README tells an administrator to."""
        if os.getuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
            self.skipTest("needs root, unshare and setpriv")
        if subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                          capture_output=True).returncode != 0:
            self.skipTest("mount namespaces are not available here")
        host_had_user = subprocess.run(["getent", "passwd", "gatehouse"],
                                       capture_output=True).returncode == 0
        sim = os.path.join(self.tmp, "sim")
        os.mkdir(sim)
        etc, varlib = os.path.join(sim, "etc"), os.path.join(sim, "varlib")
        run(["cp", "-a", "/etc", etc])
        shutil.copytree(os.path.join(self.root, "etc/gatehouse"), os.path.join(etc, "gatehouse"))
        os.mkdir(varlib)
        marker = "gh-package-test-%d" % os.getpid()
        for d in (etc, varlib):
            open(os.path.join(d, marker), "w").close()
        ctl = self.control
        binary = os.path.join(self.root, "usr/bin/gatehouse")
        script = """set -eu
mount --bind '{etc}' /etc
mount --bind '{varlib}' /var/lib
# only ever on the copies
test -f /etc/{marker} && test -f /var/lib/{marker}
sh '{ctl}/postinst' configure
echo "user: $(getent passwd gatehouse)"
echo "state: $(stat -c '%U:%G %a' /var/lib/gatehouse)"
cd /
setpriv --reuid=gatehouse --regid=gatehouse --init-groups -- '{binary}' keys create \
    --config {config} --name ops >/dev/null
echo "files: $(stat -c '%n=%U' /var/lib/gatehouse/gatehouse.db /var/lib/gatehouse/gatehouse.db-hashkey | tr '\\n' ' ')"
sh '{ctl}/postinst' configure 0.0.1
sh '{ctl}/prerm' remove
sh '{ctl}/postrm' remove
echo "after remove: $(ls /var/lib/gatehouse | tr '\\n' ' ')"
sh '{ctl}/postrm' purge
echo "after purge: $(ls -d /var/lib/gatehouse 2>/dev/null || echo gone)"
""".format(etc=etc, varlib=varlib, marker=marker, ctl=ctl, binary=binary, config=CONFIG)
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           capture_output=True, text=True, timeout=120,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = dict(l.split(": ", 1) for l in p.stdout.splitlines() if ": " in l)
        self.assertRegex(lines["user"], r"^gatehouse:x:\d+:\d+:[^:]*:%s:/usr/sbin/nologin$" % STATE)
        self.assertEqual(lines["state"], "gatehouse:gatehouse 750")
        self.assertEqual(lines["files"].split(), ["/var/lib/gatehouse/gatehouse.db=gatehouse",
                                                  "/var/lib/gatehouse/gatehouse.db-hashkey=gatehouse"])
        self.assertIn("gatehouse.db", lines["after remove"])
        self.assertEqual(lines["after purge"], "gone")
        # and the machine itself got nothing
        self.assertFalse(os.path.exists(os.path.join(STATE, "gatehouse.db")))
        if not host_had_user:
            self.assertNotEqual(subprocess.run(["getent", "passwd", "gatehouse"],
                                               capture_output=True).returncode, 0)


if __name__ == "__main__":
    unittest.main()
