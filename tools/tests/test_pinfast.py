"""Tests of tools/pinfast: python3 -m unittest discover tools/tests (no CUDA needed)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "pinfast")
# a built library for the `options` test: $PINFAST_TEST_LIB (set by ctest), else the checkout's
BUILT_LIB = os.environ.get("PINFAST_TEST_LIB") or os.path.join(HERE, "..", "..", "build",
                                                                "libpinfast.so")


def row(api, direction, memory, path, calls, bytes_, seconds, errors=0, **extra):
    return dict(api=api, direction=direction, memory=memory, path=path, calls=calls,
                errors=errors, bytes=bytes_, seconds=seconds,
                gbps=bytes_ / seconds / 1e9 if seconds else 0, **extra)


def alloc(api, calls, bytes_, seconds):
    return dict(api=api, calls=calls, errors=0, bytes=bytes_, seconds=seconds)


A = {"schema": "pinfast-report/1", "pid": 100, "wall_seconds": 0.5,
     "transfers": [row("cuMemcpyHtoD", "H2D", "pageable", "staged", 3, 3 << 20, 0.25),
                   row("cuMemcpyDtoH", "D2H", "pageable", "passthrough", 2, 1 << 20, 0.5,
                       errors=1)],
     "allocations": [alloc("cuMemHostAlloc", 1, 4096, 0.125)],
     # keys a later version may add: must be ignored (advice is printed)
     "pinfast": {"threads": 8}, "histogram": [[4096, 3]],
     "advice": ["use cudaMallocHost for the big buffer", {"message": "raise PINFAST_CHUNK"}]}

B = {"schema": "pinfast-report/1", "pid": 200, "wall_seconds": 0.75,
     "transfers": [row("cuMemcpyHtoD", "H2D", "pageable", "staged", 5, 5 << 20, 0.125),
                   row("cuMemcpyHtoDAsync", "H2D", "pinned", "passthrough", 1, 1024, 0.0625,
                       future_field="x")]}  # no "allocations": treated as none


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PINFAST_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def tool(*args, env=None):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                          env=env or clean_env())


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pinfast-test-")
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, name, content):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def ok(self, *args, env=None):
        p = tool(*args, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout


class Report(Base):
    def test_text(self):
        out = self.ok("report", self.write("a.json", A))
        self.assertIn("cuMemcpyHtoD", out)
        self.assertIn("3.0 MiB", out)
        self.assertIn("4.0 KiB", out)                     # the allocation
        self.assertRegex(out, r"H2D +3 +0 +3\.0 MiB +0\.250000 +0\.01 +100\.0%")
        self.assertRegex(out, r"D2H +2 +1 +1\.0 MiB +0\.500000 +0\.00 +0\.0%")
        self.assertRegex(out, r"all +5 +1 +4\.0 MiB +0\.750000 +0\.01 +75\.0%")
        self.assertIn("- use cudaMallocHost for the big buffer", out)
        self.assertIn("- raise PINFAST_CHUNK", out)

    def test_markdown(self):
        out = self.ok("report", "--format", "markdown", self.write("a.json", A))
        self.assertIn("| cuMemcpyHtoD | H2D | pageable | staged | 3 | 0 | 3.0 MiB |", out)
        self.assertIn("## Advice", out)

    def test_merge_exact(self):
        a, b = self.write("pf-100.json", A), self.write("pf-200.json", B)
        m = json.loads(self.ok("report", "--format", "json", a, b))
        self.assertEqual(m["schema"], "pinfast-report/1.4")
        self.assertEqual(m["pids"], [100, 200])
        self.assertEqual(m["wall_seconds"], 0.75)
        rows = {(r["api"], r["memory"]): r for r in m["transfers"]}
        self.assertEqual(len(rows), 3)
        h2d = rows[("cuMemcpyHtoD", "pageable")]
        self.assertEqual((h2d["calls"], h2d["errors"], h2d["bytes"], h2d["seconds"]),
                         (8, 0, 8 << 20, 0.375))
        self.assertEqual(h2d["gbps"], round((8 << 20) / 0.375 / 1e9, 3))
        self.assertEqual(rows[("cuMemcpyDtoH", "pageable")]["errors"], 1)
        self.assertEqual(rows[("cuMemcpyHtoDAsync", "pinned")]["bytes"], 1024)
        self.assertEqual(m["allocations"], [alloc("cuMemHostAlloc", 1, 4096, 0.125)])
        # A's advice, each item saying whose it is (B gave none)
        self.assertEqual(m["advice"], [{"message": "use cudaMallocHost for the big buffer",
                                        "process": "pid 100"},
                                       {"message": "raise PINFAST_CHUNK", "process": "pid 100"}])

    def test_merge_text_totals(self):
        out = self.ok("report", self.write("a.json", A), self.write("b.json", B))
        # H2D: 9 calls, 8 MiB + 1 KiB, 0.4375 s; staged share 8 MiB / (8 MiB + 1 KiB)
        staged = 100 * (8 << 20) / ((8 << 20) + 1024)
        self.assertRegex(out, r"H2D +9 +0 +8\.0 MiB +0\.437500 +0\.02 +%.1f%%" % staged)
        self.assertIn("pids 100, 200", out)

    def test_concatenated_reports_and_round_trip(self):
        both = self.write("both.json", json.dumps(A) + "\n" + json.dumps(B) + "\n")
        merged = self.ok("report", "--format", "json", both)
        separate = self.ok("report", "--format", "json", self.write("a.json", A),
                           self.write("b.json", B))
        self.assertEqual(merged, separate)
        again = self.ok("report", "--format", "json", self.write("m.json", merged))
        self.assertEqual(again, merged)

    def test_call_sites_merged(self):
        def site(sym, off, calls, nbytes, est):
            return dict(library="app", symbol=sym, offset=off, address="0x%x" % (4096 + off),
                        calls=calls, bytes=nbytes, seconds=0.5, samples=calls, estimated=est)
        a = dict(A, callsites={"sampling": 256, "sites": [site("load", 16, 3, 3 << 20, False),
                                                          site("step", 8, 100, 4096, True)]})
        b = dict(B, callsites={"sampling": 256, "sites": [site("load", 16, 2, 2 << 20, False)]})
        m = json.loads(self.ok("report", "--format", "json", self.write("a.json", a),
                               self.write("b.json", b)))
        sites = {s["symbol"]: s for s in m["callsites"]["sites"]}
        self.assertEqual((sites["load"]["calls"], sites["load"]["bytes"], sites["load"]["seconds"]),
                         (5, 5 << 20, 1.0))
        self.assertFalse(sites["load"]["estimated"])
        self.assertTrue(sites["step"]["estimated"])
        out = self.ok("report", self.write("a2.json", a), self.write("b2.json", b))
        self.assertRegex(out, r"app load\+0x10 +5 +5\.0 MiB")
        self.assertRegex(out, r"app step\+0x8 +~100 +4\.0 KiB")

    def test_no_rate_for_async_pass_through(self):
        """The time of a call that only queued its copy is no transfer rate:
        a dash in text, null in JSON, whether the library said so (1.2: null)
        or not (1.1 gave a number), and no part of the totals' GB/s."""
        c = dict(B, schema="pinfast-report/1.2",
                 transfers=[dict(row("cuMemcpyDtoHAsync", "D2H", "pageable", "staged", 2, 2 << 20,
                                     0.5), gbps=None),      # PINFAST_ASYNC_D2H: returned early
                            row("cuMemcpyDtoH", "D2H", "pinned", "passthrough", 1, 1 << 20, 0.001)])
        files = [self.write("b.json", B), self.write("c.json", c)]
        m = json.loads(self.ok("report", "--format", "json", *files))
        rates = {r["api"]: r["gbps"] for r in m["transfers"]}
        self.assertEqual(rates, {"cuMemcpyHtoD": round((5 << 20) / 0.125 / 1e9, 3),
                                 "cuMemcpyHtoDAsync": None, "cuMemcpyDtoHAsync": None,
                                 "cuMemcpyDtoH": round((1 << 20) / 0.001 / 1e9, 3)})
        out = self.ok("report", *files)
        self.assertRegex(out, r"cuMemcpyHtoDAsync +H2D +pinned +passthrough +1 +0 +1\.0 KiB"
                              r" +0\.062500 +-\n")
        self.assertRegex(out, r"cuMemcpyDtoHAsync +D2H .* 0\.500000 +-\n")
        # H2D: only the staged row's 5 MiB in 0.125 s count: 0.04 GB/s, not 0.03
        self.assertRegex(out, r"H2D +6 +0 +5\.0 MiB +0\.187500 +0\.04 ")
        self.assertRegex(out, r"D2H +3 +0 +3\.0 MiB +0\.501000 +1\.05 ")
        d = json.loads(self.ok("diff", "--format", "json", *files))
        self.assertIsNone({r["api"]: r for r in d["transfers"]}["cuMemcpyHtoDAsync"]["a"]["gbps"])

    def test_rate_over_busy_time(self):
        """1.4: a row's GB/s is over the wall time its copies were under way
        (busy_seconds), not over the seconds its threads spent in the calls;
        merged rows and totals add the busy times, and rows of earlier
        reports count their seconds as theirs."""
        c = dict(A, schema="pinfast-report/1.4",
                 transfers=[dict(row("cuMemcpyHtoD", "H2D", "pageable", "staged", 8, 8 << 30, 8.0),
                                 busy_seconds=1.0, gbps=round((8 << 30) / 1e9, 3))])
        out = self.ok("report", self.write("c.json", c))
        self.assertRegex(out, r"cuMemcpyHtoD +H2D +pageable +staged +8 +0 +8\.0 GiB +8\.000000 +8\.59\n")
        self.assertRegex(out, r"H2D +8 +0 +8\.0 GiB +8\.000000 +8\.59 ")
        # with A's 3 MiB in 0.25 s (1.x before 1.4: its seconds are its busy time)
        m = json.loads(self.ok("report", "--format", "json", self.write("a.json", A),
                               self.write("c2.json", c)))
        h2d = [r for r in m["transfers"] if r["api"] == "cuMemcpyHtoD"][0]
        self.assertEqual((h2d["seconds"], h2d["busy_seconds"]), (8.25, 1.25))
        self.assertEqual(h2d["gbps"], round(((8 << 30) + (3 << 20)) / 1.25 / 1e9, 3))
        again = json.loads(self.ok("report", "--format", "json", self.write("m.json", json.dumps(m))))
        self.assertEqual(again["transfers"], m["transfers"])

    def test_per_rank_table(self):
        def rank_report(rank, host, pid, mib):
            return dict(A, pid=pid, rank=rank, host=host,
                        transfers=[row("cuMemcpyHtoD", "H2D", "pageable", "staged", 1, mib << 20, 0.01)])
        files = [self.write("r1.json", rank_report(1, "node-b", 300, 2)),
                 self.write("r0.json", rank_report(0, "node-a", 200, 1)),
                 self.write("rx.json", rank_report(None, "node-a", 100, 4))]
        out = self.ok("report", *files)
        lines = rank_rows(out)
        self.assertEqual([line[:3] for line in lines],
                         [["0", "node-a", "200"], ["1", "node-b", "300"], ["-", "node-a", "100"]])
        self.assertEqual(lines[1][5:7], ["2.0", "MiB"])  # rank 1's H2D
        self.assertEqual(lines[1][10], "100.0%")         # all staged
        self.assertEqual(lines[1][11:], ["-", "-", "-"])  # no staging section: threads etc. unknown
        merged = self.ok("report", "--format", "json", *files)
        m = json.loads(merged)
        self.assertEqual([p["rank"] for p in m["processes"]], [1, 0, None])
        # the same advice from three processes: three lines, each saying whose
        self.assertIn("- rank 1: raise PINFAST_CHUNK", out)
        self.assertIn("- rank 0: raise PINFAST_CHUNK", out)
        self.assertIn("- pid 100: raise PINFAST_CHUNK", out)
        again = self.ok("report", self.write("m.json", merged))
        self.assertEqual(again[again.index("Per rank"):], out[out.index("Per rank"):])
        # one process: no per-rank table
        self.assertNotIn("Per rank", self.ok("report", files[0]))

    def test_per_rank_node_use_and_sums(self):
        """The table by rank: each process's staging threads, pinned staging
        memory and registered peak; sums per host (several hosts) and over
        all; the ranks missing from the run, and a rank reported twice."""
        def rank_report(rank, host, pid, threads, pinned_mib):
            return dict(A, schema="pinfast-report/1.3", pid=pid, rank=rank, host=host,
                        transfers=[row("cuMemcpyHtoDAsync", "H2D", "pageable", "staged", 57,
                                       900 << 20, 0.181)],
                        staging={"copies": 57, "bytes": 900 << 20, "pinned_bytes": pinned_mib << 20,
                                 "contexts": 1, "threads": threads},
                        registrations={"peak_bytes": 64 << 20, "live": 0})
        files = [self.write("r0.json", rank_report(0, "node-a", 10, 12, 128)),
                 self.write("r1.json", rank_report(1, "node-a", 11, 12, 128)),
                 self.write("r3.json", rank_report(3, "node-b", 13, 6, 64)),
                 self.write("r3b.json", rank_report(3, "node-b", 14, 6, 64))]
        out = self.ok("report", *files)
        lines = rank_rows(out)
        self.assertEqual([line[:3] for line in lines],
                         [["0", "node-a", "10"], ["1", "node-a", "11"], ["3", "node-b", "13"],
                          ["3", "node-b", "14"]])
        self.assertEqual(lines[0][11:], ["12", "128.0", "MiB", "64.0", "MiB"])
        sums = rank_rows(out, sums=True)
        self.assertEqual(sums[0][:4] + sums[0][6:8] + sums[0][12:], ["host", "node-a", "2", "procs",
                         "1.8", "GiB", "24", "256.0", "MiB", "128.0", "MiB"])
        self.assertEqual(sums[1][:4] + sums[1][12:], ["host", "node-b", "2", "procs",
                                                      "12", "128.0", "MiB", "128.0", "MiB"])
        self.assertEqual(sums[2][:3] + sums[2][4:8] + sums[2][11:],
                         ["all", "4", "procs", "228", "3.5", "GiB", "0", "36", "384.0", "MiB",
                          "256.0", "MiB"])
        self.assertIn("\nno report from rank 2 (ranks up to 3 reported)\n", out)
        self.assertIn("\nrank 3: 2 reports (pids 13, 14): several runs merged?\n", out)
        # one host: no rows per host, the sums over all
        one = rank_rows(self.ok("report", *files[:2]), sums=True)
        self.assertEqual([line[:3] for line in one], [["all", "2", "procs"]])
        self.assertNotIn("no report from", self.ok("report", *files[:2]))
        # kept in the merged JSON, and read back the same
        merged = self.ok("report", "--format", "json", *files)
        procs = json.loads(merged)["processes"]
        self.assertEqual([(p["rank"], p["threads"], p["pinned_bytes"], p["registered_peak_bytes"])
                          for p in procs],
                         [(0, 12, 128 << 20, 64 << 20), (1, 12, 128 << 20, 64 << 20),
                          (3, 6, 64 << 20, 64 << 20), (3, 6, 64 << 20, 64 << 20)])
        again = self.ok("report", self.write("m.json", merged))
        self.assertEqual(again[again.index("Per rank"):again.index("Transfers")],
                         out[out.index("Per rank"):out.index("Transfers")])
        md = self.ok("report", "--format", "markdown", *files)
        self.assertIn("| all |  | 4 procs | 0.500 | 228 | 3.5 GiB | 0 B |", md)
        self.assertIn("| threads | pinned | reg. peak |", md)

    def test_minimal_report(self):
        out = self.ok("report", self.write("m.json", {"schema": "pinfast-report/1"}))
        self.assertIn("(none)", out)

    def test_not_a_report(self):
        cases = {"text.json": "pinfast: transfer report, pid 1\n",
                 "empty.json": "",
                 "other.json": {"x": 1},
                 "schema.json": {"schema": "something/1", "transfers": []},
                 "list.json": [A],
                 "rows.json": {"schema": "pinfast-report/1", "transfers": {"a": 1}},
                 "truncated.json": json.dumps(A)[:-10]}
        for name, content in cases.items():
            path = self.write(name, content)
            for args in (["report", path], ["diff", path, path]):
                p = tool(*args)
                self.assertEqual(p.returncode, 2, name)
                self.assertEqual(p.stderr, f"pinfast: error: {path}: not a pinfast report\n")
        p = tool("report", os.path.join(self.dir, "missing.json"))
        self.assertEqual(p.returncode, 2)
        self.assertTrue(p.stderr.startswith("pinfast: error: "))


def rank_rows(out, sums=False):
    """The split lines of the text table by rank: the processes' rows, or
    with sums the rows after the rule (per host, all)."""
    lines = out[out.index("Per rank"):out.index("Transfers")].splitlines()[3:]
    rule = next(i for i, line in enumerate(lines) if line.startswith("--"))
    rows = lines[rule + 1:] if sums else lines[:rule]
    return [line.split() for line in rows if line.strip() and not line.startswith(("no report", "rank "))]


class Diff(Base):
    def test_json_exact(self):
        d = json.loads(self.ok("diff", "--format", "json", self.write("a.json", A),
                               self.write("b.json", B)))
        self.assertEqual(d["wall_seconds"], [0.5, 0.75])
        rows = {r["api"]: r for r in d["transfers"]}
        self.assertEqual(rows["cuMemcpyHtoD"]["speedup"], 2.0)         # 0.25 s / 0.125 s
        self.assertEqual(rows["cuMemcpyHtoD"]["a"]["calls"], 3)
        self.assertEqual(rows["cuMemcpyHtoD"]["b"]["bytes"], 5 << 20)
        self.assertEqual(rows["cuMemcpyHtoD"]["only"], None)
        self.assertEqual((rows["cuMemcpyDtoH"]["only"], rows["cuMemcpyDtoH"]["b"]), ("A", None))
        self.assertEqual(rows["cuMemcpyHtoDAsync"]["only"], "B")
        self.assertIsNone(rows["cuMemcpyHtoDAsync"]["speedup"])
        totals = {t["direction"]: t for t in d["totals"]}
        self.assertEqual(totals["H2D"]["speedup"], 1.3333)             # 0.25 / 0.1875
        self.assertEqual(totals["H2D"]["b"]["calls"], 6)
        self.assertEqual(totals["all"]["speedup"], 4.0)                # 0.75 / 0.1875
        self.assertEqual(totals["D2H"]["only"], "A")

    def test_text(self):
        out = self.ok("diff", self.write("a.json", A), self.write("b.json", B))
        self.assertRegex(out, r"cuMemcpyHtoD +H2D +pageable +staged +3 +5 +3\.0 MiB +5\.0 MiB"
                              r" +0\.250000 +0\.125000 +0\.01 +0\.04 +2\.00x")
        self.assertRegex(out, r"cuMemcpyDtoH .* - +only A")
        self.assertRegex(out, r"cuMemcpyHtoDAsync .* - +only B")
        self.assertRegex(out, r"total +all .* 4\.00x")

    def test_markdown(self):
        out = self.ok("diff", "--format", "markdown", self.write("a.json", A),
                      self.write("b.json", B))
        self.assertIn("| 2.00x |  |", out)


class Run(Base):
    def run_env(self, *args, env=None):
        """The environment that `env` sees when started by pinfast run."""
        p = tool("run", *args, "--", "env", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)

    def fake_lib(self, path="fake/libpinfast.so"):
        return self.write(path.replace("/", "_"), "")  # not an ELF: ld.so ignores it

    def test_environment(self):
        lib = self.fake_lib()
        env = self.run_env("--lib", lib, "--stats", "text", "--stats-file", "pf-%p.json",
                           "--disable", "--log", "debug", "-e", "PINFAST_THREADS=4",
                           "-e", "PINFAST_CHUNK=4M", "-e", "OTHER=a=b",
                           env=clean_env(LD_PRELOAD="/x/first.so /x/second.so"))
        self.assertEqual(env["LD_PRELOAD"], f"{lib}:/x/first.so:/x/second.so")
        self.assertEqual(env["PINFAST_STATS"], "text")
        self.assertEqual(env["PINFAST_STATS_FILE"], "pf-%p.json")
        self.assertEqual(env["PINFAST_DISABLE"], "1")
        self.assertEqual(env["PINFAST_LOG"], "debug")
        self.assertEqual(env["PINFAST_THREADS"], "4")
        self.assertEqual(env["PINFAST_CHUNK"], "4M")
        self.assertEqual(env["OTHER"], "a=b")

    def test_defaults(self):
        lib = self.fake_lib()
        env = self.run_env("--lib", lib)
        self.assertEqual(env["LD_PRELOAD"], lib)
        self.assertEqual([k for k in env if k.startswith("PINFAST_")], [])
        # a stats file alone means a JSON report
        env = self.run_env("--lib", lib, "--stats-file", "r.json")
        self.assertEqual(env["PINFAST_STATS"], "json")

    def test_pinfast_lib_variable(self):
        lib = self.fake_lib()
        env = self.run_env(env=clean_env(PINFAST_LIB=lib))
        self.assertEqual(env["LD_PRELOAD"], lib)

    def test_installed_layout(self):
        prefix = os.path.join(self.dir, "prefix")
        os.makedirs(os.path.join(prefix, "bin"))
        os.makedirs(os.path.join(prefix, "lib"))
        shutil.copy(TOOL, os.path.join(prefix, "bin", "pinfast"))
        lib = os.path.join(prefix, "lib", "libpinfast.so")
        p = subprocess.run([sys.executable, os.path.join(prefix, "bin", "pinfast"), "run",
                            "--", "env"], capture_output=True, text=True, env=clean_env())
        self.assertEqual(p.returncode, 2)
        self.assertIn("pinfast: error: libpinfast.so not found", p.stderr)
        open(lib, "w").close()
        p = subprocess.run([sys.executable, os.path.join(prefix, "bin", "pinfast"), "run",
                            "--", "env"], capture_output=True, text=True, env=clean_env())
        self.assertIn(f"LD_PRELOAD={lib}\n", p.stdout)

    def test_exit_status_is_the_programs(self):
        p = tool("run", "--lib", self.fake_lib(), "--", "sh", "-c", "exit 7")
        self.assertEqual(p.returncode, 7)

    def test_errors(self):
        p = tool("run", "--lib", os.path.join(self.dir, "none.so"), "--", "true")
        self.assertEqual((p.returncode, p.stderr.startswith("pinfast: error: --lib")), (2, True))
        p = tool("run", "--", "true", env=clean_env(PINFAST_LIB="/no/such/lib.so"))
        self.assertEqual(p.returncode, 2)
        p = tool("run", "--lib", self.fake_lib())
        self.assertEqual(p.returncode, 2)
        p = tool("run", "--lib", self.fake_lib(), "-e", "NOEQUALS", "--", "true")
        self.assertEqual(p.returncode, 2)
        p = tool("run", "--lib", self.fake_lib(), "--", "no-such-program-pinfast")
        self.assertEqual(p.returncode, 127)


class Options(Base):
    def test_library_without_table(self):
        p = tool("options", "--lib", self.write("lib.so", ""))
        self.assertEqual(p.returncode, 2)
        self.assertIn("printed no option table", p.stderr)

    @unittest.skipUnless(os.path.isfile(BUILT_LIB), "build/libpinfast.so not built")
    def test_built_library(self):
        out = self.ok("options", "--lib", BUILT_LIB)
        for name in ("PINFAST_STATS", "PINFAST_STATS_FILE", "PINFAST_CHUNK"):
            self.assertIn(name, out)


class NoDriver(unittest.TestCase):
    """A process that loads no CUDA driver: one line at PINFAST_LOG=info, none by default."""

    @unittest.skipUnless(os.path.isfile(BUILT_LIB), "build/libpinfast.so not built")
    def test_says_so_once(self):
        env = dict(os.environ, LD_PRELOAD=BUILT_LIB, PINFAST_LOG="info")
        p = subprocess.run(["true"], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(p.stderr.count("pinfast: no CUDA driver"), 1, p.stderr)
        env.pop("PINFAST_LOG")
        p = subprocess.run(["true"], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(p.stderr, "")


class Help(Base):
    def test_help(self):
        for cmd in ([], ["run"], ["report"], ["diff"], ["options"]):
            self.assertIn("usage", self.ok(*cmd, "--help"))


if __name__ == "__main__":
    unittest.main()
