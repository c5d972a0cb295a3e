"""tests/install-deps.sh as a user without root and without sudo: with
everything installed it has nothing to do and succeeds; with a package
missing it names the package and says that installing needs root.

The script runs as an unprivileged user (setpriv to nobody when the test
runs as root) with a PATH holding only the commands it needs, so no sudo
is within reach whatever the machine has installed."""

import os
import shutil
import subprocess
import tempfile
import unittest

from harness import GH_SRC, sqlite_only

NOBODY = 65534


@sqlite_only("tests/install-deps.sh has nothing to do with the database: run once")
class InstallDepsTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gh-deps-")
        os.chmod(self.dir, 0o755)
        self.bin = os.path.join(self.dir, "bin")
        os.mkdir(self.bin)
        os.chmod(self.bin, 0o755)
        for tool in ("sh", "id", "dpkg-query", "grep", "dirname"):
            real = shutil.which(tool)
            self.assertIsNotNone(real, tool)
            os.symlink(real, os.path.join(self.bin, tool))
        self.script = os.path.join(self.dir, "install-deps.sh")
        shutil.copy(os.path.join(GH_SRC, "tests", "install-deps.sh"), self.script)
        os.chmod(self.script, 0o755)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_unprivileged(self):
        cmd = ["sh", self.script]
        if os.getuid() == 0:
            setpriv = shutil.which("setpriv")
            if not setpriv:
                self.skipTest("setpriv is not installed")
            cmd = [setpriv, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                   "--"] + cmd
        env = {"PATH": self.bin, "HOME": self.dir, "LC_ALL": "C"}
        p = subprocess.run(cmd, cwd=self.dir, env=env, capture_output=True, text=True,
                           timeout=60)
        return p.returncode, p.stdout, p.stderr

    def test_everything_installed_needs_no_root(self):
        rc, out, err = self.run_unprivileged()
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("installing", out + err)
        self.assertNotIn("root", out + err)

    def test_a_missing_package_is_named_and_root_asked_for(self):
        # dpkg-query that reports cmake as not installed and asks the real
        # one about every other package
        real = os.path.realpath(shutil.which("dpkg-query"))
        stub = os.path.join(self.bin, "dpkg-query")
        os.unlink(stub)
        with open(stub, "w") as f:
            f.write('#!/bin/sh\nfor a in "$@"; do [ "$a" = cmake ] && '
                    '{ printf "unknown ok not-installed"; exit 0; }; done\n'
                    'exec %s "$@"\n' % real)
        os.chmod(stub, 0o755)
        rc, out, err = self.run_unprivileged()
        self.assertEqual(rc, 1, out + err)
        self.assertIn("missing: cmake", err)
        self.assertIn("needs root", err)
        self.assertNotIn("installing", out)


if __name__ == "__main__":
    unittest.main()
