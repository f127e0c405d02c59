"""The packages: where an installed `pinfast` finds the library, the .deb that
CPack makes and the wheel that pyproject.toml describes.  Run by ctest as
part of tools.pinfast (python3 -m unittest discover tools/tests).

- Layouts: no build needed; fake libraries in the installed layouts.
- Deb: `cpack -G DEB` of the configured build (the one whose library ctest
  names in $PINFAST_TEST_LIB, else build/) into a temporary folder, its file
  list and control fields, then the package unpacked and its pinfast run.
- Wheel: `pip wheel --no-deps --no-build-isolation` of the checkout (the
  library only: PINFAST_TESTS and PINFAST_WORKLOADS are OFF in pyproject.toml),
  given its manylinux tag by packaging/manylinux, installed into a fresh
  virtual environment, its pinfast run.
- Both: the glibc they name (the .deb's libc6, the wheel's manylinux_x_y) is
  the one tools/check-symbols finds the library needs.

A tool that is missing (cpack, dpkg-deb, scikit-build-core that pip cannot
install, offline) skips its test with the reason; a package that is wrong
fails.  PINFAST_SKIP_PACKAGES=1 skips the Deb and Wheel tests.
"""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
TOOL = os.path.join(SRC, "tools", "pinfast")
WHEEL_PKG = os.path.join(SRC, "packaging", "wheel", "pinfast")
SKIP_ALL = os.environ.get("PINFAST_SKIP_PACKAGES") == "1"
CHECK_SYMBOLS = os.path.join(SRC, "tools", "check-symbols")
MANYLINUX = os.path.join(SRC, "packaging", "manylinux")
# the files every package ships besides the library and the command
DOCS = ("README.md", "cli.md", "options.md", "report.md")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PINFAST_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
    env.update(extra)
    return env


def sh(*cmd, env=None, cwd=None, timeout=300):
    return subprocess.run(list(cmd), capture_output=True, text=True, env=env or clean_env(),
                          cwd=cwd, timeout=timeout)


def tail(p, lines=25):
    return "\n".join((p.stdout + p.stderr).splitlines()[-lines:])


def build_dir():
    """The configured build tree: the one ctest's library is in, else the checkout's build/."""
    lib = os.environ.get("PINFAST_TEST_LIB")
    d = os.path.dirname(lib) if lib else os.path.join(SRC, "build")
    return d if os.path.isfile(os.path.join(d, "CPackConfig.cmake")) else None


def glibc_needed(lib):
    """The glibc x.y a library needs, as packaging/ computes it."""
    p = sh(CHECK_SYMBOLS, "--glibc", lib)
    assert p.returncode == 0, tail(p)
    return p.stdout.strip()


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pinfast-pkg-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def preload_of(self, cmd, env=None):
        """LD_PRELOAD as a program started by `cmd run -- env` sees it."""
        p = sh(*cmd, "run", "--", "env", env=env)
        self.assertEqual(p.returncode, 0, tail(p))
        found = [line.split("=", 1)[1] for line in p.stdout.splitlines()
                 if line.startswith("LD_PRELOAD=")]
        self.assertEqual(len(found), 1, p.stdout)
        return found[0]

    def check_real_library(self, cmd, lib):
        """`options` loads the library into `true` and prints its table; `run -- true` exits 0."""
        self.assertTrue(is_elf(lib), f"{lib}: not an ELF file")
        p = sh(*cmd, "options")
        self.assertEqual(p.returncode, 0, tail(p))
        for name in ("PINFAST_STATS", "PINFAST_STATS_FILE", "PINFAST_CHUNK"):
            self.assertIn(name, p.stdout)
        p = sh(*cmd, "run", "--", "true")
        self.assertEqual(p.returncode, 0, tail(p))
        p = sh(*cmd, "run", "--", "sh", "-c", "exit 7")
        self.assertEqual(p.returncode, 7, tail(p))


class Layouts(Base):
    """bin/pinfast finds the library where each kind of install puts it."""

    def layout(self, libdir):
        prefix = os.path.join(self.dir, "prefix")
        os.makedirs(os.path.join(prefix, "bin"))
        shutil.copy(TOOL, os.path.join(prefix, "bin", "pinfast"))
        lib = os.path.join(prefix, libdir, "libpinfast.so")
        os.makedirs(os.path.dirname(lib))
        open(lib, "w").close()
        return [sys.executable, os.path.join(prefix, "bin", "pinfast")], lib

    def test_lib64(self):  # GNUInstallDirs on 64-bit Fedora, RHEL, SUSE
        cmd, lib = self.layout("lib64")
        self.assertEqual(self.preload_of(cmd), lib)

    def test_multiarch(self):  # GNUInstallDirs with prefix /usr on Debian and Ubuntu
        arch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
        cmd, lib = self.layout(os.path.join("lib", arch))
        self.assertEqual(self.preload_of(cmd), lib)

    def test_lib_first(self):
        cmd, lib = self.layout("lib")
        os.makedirs(os.path.join(self.dir, "prefix", "lib64"))
        open(os.path.join(self.dir, "prefix", "lib64", "libpinfast.so"), "w").close()
        self.assertEqual(self.preload_of(cmd), lib)

    def test_not_found_names_the_places(self):
        cmd, lib = self.layout("elsewhere")
        p = sh(*cmd, "run", "--", "true")
        self.assertEqual(p.returncode, 2)
        self.assertIn("libpinfast.so not found", p.stderr)
        self.assertIn(os.path.join("prefix", "lib64", "libpinfast.so"), p.stderr)

    def test_wheel_package(self):
        """The wheel's layout: site-packages/pinfast/{__init__.py,bin/pinfast,lib/libpinfast.so}."""
        site = os.path.join(self.dir, "site")
        pkg = os.path.join(site, "pinfast")
        shutil.copytree(WHEEL_PKG, pkg, ignore=shutil.ignore_patterns("__pycache__"))
        os.makedirs(os.path.join(pkg, "bin"))
        os.makedirs(os.path.join(pkg, "lib"))
        shutil.copy(TOOL, os.path.join(pkg, "bin", "pinfast"))
        lib = os.path.join(pkg, "lib", "libpinfast.so")
        open(lib, "w").close()
        env = clean_env(PYTHONPATH=site)
        cmd = [sys.executable, "-m", "pinfast"]
        self.assertEqual(self.preload_of(cmd, env=env), lib)
        # the console script's function, as its wrapper calls it
        p = sh(sys.executable, "-c", "import sys, pinfast; sys.exit(pinfast.main())", "run",
               "--", "sh", "-c", "exit 7", env=env)
        self.assertEqual(p.returncode, 7, tail(p))
        p = sh(*cmd, "--help", env=env)
        self.assertEqual(p.returncode, 0, tail(p))
        self.assertTrue(p.stdout.startswith("usage: pinfast "), p.stdout)
        p = sh(sys.executable, "-c", "import pinfast; print(pinfast.library())", env=env)
        self.assertEqual(p.stdout.strip(), lib)


@unittest.skipIf(SKIP_ALL, "PINFAST_SKIP_PACKAGES=1")
class Deb(Base):
    def test_deb(self):
        build = build_dir()
        if not build:
            self.skipTest("no configured build with CPackConfig.cmake (cmake -S . -B build)")
        for tool in ("cpack", "dpkg-deb"):
            if not shutil.which(tool):
                self.skipTest(f"{tool} not found")
        out = os.path.join(self.dir, "out")
        p = sh("cpack", "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"),
               "-B", out, cwd=build)
        self.assertEqual(p.returncode, 0, tail(p))
        debs = glob.glob(os.path.join(out, "pinfast_*.deb"))
        self.assertEqual(len(debs), 1, os.listdir(out))
        deb = debs[0]

        p = sh("dpkg-deb", "-f", deb, "Package", "Version", "Depends")
        self.assertEqual(p.returncode, 0, tail(p))
        self.assertIn("Package: pinfast", p.stdout)
        # libc6 from the newest glibc symbol version the library references, nothing more
        glibc = glibc_needed(os.path.join(build, "libpinfast.so"))
        self.assertIn(f"\nDepends: python3 (>= 3.9), libc6 (>= {glibc})\n", "\n" + p.stdout)

        p = sh("dpkg-deb", "-c", deb)
        self.assertEqual(p.returncode, 0, tail(p))
        paths = [line.split()[-1].lstrip(".") for line in p.stdout.splitlines()]
        self.assertIn("/usr/bin/pinfast", paths)
        libs = [x for x in paths if x.endswith("/libpinfast.so")]
        self.assertEqual(len(libs), 1, paths)
        self.assertRegex(libs[0], r"^/usr/lib(64)?/([^/]*-linux-[^/]*/)?libpinfast\.so$")
        for doc in DOCS:
            self.assertIn(f"/usr/share/doc/pinfast/{doc}", paths)
        self.assertEqual([x for x in paths if "results/" in x], [])  # no docs/results tree

        root = os.path.join(self.dir, "root")
        p = sh("dpkg-deb", "-x", deb, root)
        self.assertEqual(p.returncode, 0, tail(p))
        cmd = [sys.executable, os.path.join(root, "usr", "bin", "pinfast")]
        lib = root + libs[0]
        self.assertEqual(self.preload_of(cmd), lib)
        self.check_real_library(cmd, lib)


@unittest.skipIf(SKIP_ALL, "PINFAST_SKIP_PACKAGES=1")
class Wheel(Base):
    def pythonpath_with_skbuild(self):
        """'' when scikit-build-core imports as it is, else a folder pip installed it into."""
        if sh(sys.executable, "-c", "import scikit_build_core").returncode == 0:
            return ""
        if sh(sys.executable, "-m", "pip", "--version").returncode != 0:
            self.skipTest(f"scikit-build-core not installed and no pip for {sys.executable}")
        target = os.path.join(self.dir, "skbuild")
        p = sh(sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
               "--retries", "0", "--timeout", "15", "--target", target, "scikit-build-core>=0.10",
               timeout=180)
        if p.returncode != 0:
            self.skipTest("scikit-build-core not installed and pip could not install it "
                          "(offline?): " + tail(p, 1))
        return target

    def test_wheel(self):
        if not shutil.which("cmake"):
            self.skipTest("cmake not found")
        pythonpath = self.pythonpath_with_skbuild()
        dist = os.path.join(self.dir, "dist")
        env = clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1")
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        p = sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
               "-w", dist, SRC, env=env)
        self.assertEqual(p.returncode, 0, tail(p, 60))
        wheels = glob.glob(os.path.join(dist, "pinfast-*.whl"))
        self.assertEqual(len(wheels), 1, os.listdir(dist))
        self.assertRegex(os.path.basename(wheels[0]), r"^pinfast-[0-9.]+-py3-none-linux_\w+\.whl$")
        # the manylinux tag the library's symbols justify, the recipe's second step
        p = sh(MANYLINUX, wheels[0])
        self.assertEqual(p.returncode, 0, tail(p))
        wheel = p.stdout.strip()
        self.assertEqual(glob.glob(os.path.join(dist, "pinfast-*.whl")), [wheel])
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            lib = os.path.join(self.dir, "libpinfast.so")
            with open(lib, "wb") as f:
                f.write(z.read("pinfast/lib/libpinfast.so"))
            tag = "py3-none-manylinux_%s_%s" % (glibc_needed(lib).replace(".", "_"),
                                                sysconfig.get_platform().split("-")[-1])
            self.assertTrue(wheel.endswith(f"-{tag}.whl"), wheel)
            wheel_file = [n for n in names if n.endswith(".dist-info/WHEEL")]
            self.assertIn(f"\nTag: {tag}\n", z.read(wheel_file[0]).decode())
            entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
            self.assertEqual(len(entry), 1, names)
            self.assertIn("pinfast = pinfast:main", z.read(entry[0]).decode())
        for name in ("pinfast/__init__.py", "pinfast/__main__.py", "pinfast/bin/pinfast",
                     "pinfast/lib/libpinfast.so"):
            self.assertIn(name, names)
        for doc in DOCS:
            self.assertIn(f"pinfast/share/doc/pinfast/{doc}", names)
        self.assertEqual([n for n in names if "results/" in n or n.startswith(("bin/", "lib/"))],
                         [])

        # a fresh virtual environment; the wheel installed offline, as on the GPU machine
        venv = os.path.join(self.dir, "venv")
        p = sh(sys.executable, "-m", "venv", "--without-pip", venv)
        if p.returncode != 0:
            self.skipTest("python3 -m venv failed: " + tail(p, 1))
        py = os.path.join(venv, "bin", "python")
        p = sh(sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index",
               wheel, env=clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"))
        if p.returncode != 0 and "no such option: --python" in p.stderr:  # pip < 22.3
            shutil.rmtree(venv)
            p = sh(sys.executable, "-m", "venv", venv)
            self.assertEqual(p.returncode, 0, tail(p))
            p = sh(py, "-m", "pip", "install", "--no-deps", "--no-index", wheel)
        self.assertEqual(p.returncode, 0, tail(p))

        cmd = [os.path.join(venv, "bin", "pinfast")]
        self.assertTrue(os.access(cmd[0], os.X_OK), cmd[0])
        lib = self.preload_of(cmd)
        site = sh(py, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))").stdout.strip()
        self.assertEqual(lib, os.path.join(site, "pinfast", "lib", "libpinfast.so"))
        self.check_real_library(cmd, lib)
        self.assertEqual(self.preload_of([py, "-m", "pinfast"]), lib)


if __name__ == "__main__":
    unittest.main()
