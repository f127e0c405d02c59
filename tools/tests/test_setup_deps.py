"""Tests of tools/setup-deps, the install step of tests/run, bench/run and
.ci/run: what it finds missing, the apt-get command it runs, and the one
line it prints when it cannot install.  Runs the script with a PATH of stub
commands, so nothing is installed and no package manager is asked."""

import os
import shutil
import stat
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "setup-deps")
ALL = ["cmake", "make", "gcc", "python3", "libcmocka-dev", "valgrind", "clang-format"]


class SetupDeps(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pinfast-deps-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.bin = os.path.join(self.dir, "bin")
        self.root = os.path.join(self.dir, "root")  # no headers under it
        os.makedirs(self.bin)
        self.log = os.path.join(self.dir, "calls")
        # apt-get and sudo are stubs that write down how they were called
        self.stub("env", 'shift; exec "$@"')  # env DEBIAN_FRONTEND=... apt-get ...
        self.stub("true", "exit 0")

    def stub(self, name, body='exit 0'):
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write("#!%s\n%s\n" % (shutil.which("bash"), body))
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)

    def recording(self, name):
        self.stub(name, 'echo "%s $*" >> %s' % (name, self.log))

    def run_deps(self, *args, root=True):
        env = {"PATH": self.bin}
        if root:
            env["SETUP_DEPS_ROOT"] = self.root
        return subprocess.run([shutil.which("bash"), SCRIPT, *args], capture_output=True,
                              text=True, env=env, timeout=30)

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().splitlines()

    def test_nothing_missing_is_silent(self):
        for name in ("cmake", "make", "gcc", "python3", "valgrind", "clang-format"):
            self.stub(name)
        os.makedirs(os.path.join(self.dir, "include"))
        open(os.path.join(self.dir, "include", "cmocka.h"), "w").close()  # beside bin/
        p = self.run_deps(*ALL)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""))

    def test_dry_run_names_what_is_missing(self):
        self.stub("gcc")
        p = self.run_deps("--dry-run", *ALL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout,
                         "pinfast: would install: cmake make python3 libcmocka-dev valgrind clang-format\n")

    def test_installs_with_apt_get(self):
        self.recording("apt-get")
        self.stub("sudo", 'echo "sudo $*" >> %s; [ "$1" = -n ] && shift; exec "$@"' % self.log)
        p = self.run_deps("cmake", "libcmocka-dev")
        self.assertEqual(p.returncode, 0, p.stderr)
        calls = [c.replace("sudo -n true", "").strip() for c in self.calls()]
        apt = [c for c in calls if c.startswith("apt-get")]
        self.assertEqual(apt, ["apt-get update -qq", "apt-get install -y -qq "
                               "--no-install-recommends cmake libcmocka-dev"])
        self.assertEqual(p.stderr.splitlines()[0], "pinfast: installing cmake libcmocka-dev")

    def test_cannot_install_prints_one_line(self):
        # no apt-get on PATH (as on a machine without it, or without root and sudo)
        p = self.run_deps("cmake", "valgrind")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "")
        self.assertEqual(p.stderr, "pinfast: missing cmake valgrind; install with: "
                                   "sudo apt-get install -y cmake valgrind\n")

    @unittest.skipIf(os.geteuid() == 0, "root installs without sudo")
    def test_no_passwordless_sudo(self):
        self.recording("apt-get")
        self.stub("sudo", "exit 1")  # sudo -n true fails: a password is needed
        p = self.run_deps("make")
        self.assertEqual((p.returncode, self.calls()), (1, []))
        self.assertIn("install with: sudo apt-get install -y make", p.stderr)

    def test_aarch64_packages(self):
        """The cross compiler is found by its command, the C library by its
        headers under /usr/aarch64-linux-gnu."""
        cross = ["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"]
        p = self.run_deps("--dry-run", *cross)
        self.assertEqual(p.stdout, "pinfast: would install: %s\n" % " ".join(cross))
        self.stub("aarch64-linux-gnu-gcc")
        inc = os.path.join(self.root, "usr", "aarch64-linux-gnu", "include")
        os.makedirs(inc)
        open(os.path.join(inc, "stdio.h"), "w").close()
        p = self.run_deps("--dry-run", *cross)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""))

    def test_unknown_package(self):
        p = self.run_deps("uthash-dev")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown package uthash-dev", p.stderr)

    def test_callers_use_it(self):
        """tests/run names every package the suites need; bench/run the build's."""
        top = os.path.join(HERE, "..", "..")
        with open(os.path.join(top, "tests", "run")) as f:
            text = f.read()
        self.assertIn("tools/setup-deps $pkgs", text)
        for name in ALL + ["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"]:
            self.assertIn(name, text)
        self.assertNotIn("uthash", text)
        with open(os.path.join(top, ".ci", "run")) as f:
            self.assertIn("tests/run", f.read())


if __name__ == "__main__":
    unittest.main()
