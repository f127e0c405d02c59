import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import context  # noqa: F401  (puts bench/ on sys.path)
from pinbench import runner, workloads

RUN = os.path.join(context.BENCH, "harness.py")
WRAPPER = os.path.join(context.BENCH, "run")


class TestSchedule(unittest.TestCase):
    def test_interleaved(self):
        sel = workloads.select("churn,small")
        order = [(w.name, v, k) for w, v, k in runner.schedule(sel, 2)]
        self.assertEqual(order[:5], [("churn", "plain", 0), ("churn", "pinfast", 0),
                                     ("churn", "pinfast", 1), ("churn", "plain", 1),
                                     ("small", "plain", 0)])
        self.assertEqual(order[5:10], [("small", "pinfast", 0), ("small", "pinned", 0),
                                       ("small", "pinfast", 1), ("small", "pinned", 1), ("small", "plain", 1)])

    def test_rounds_rotate(self):
        """Over as many rounds as variants, each variant runs once in each
        place of a round, and every round runs each variant once."""
        sel = workloads.select("small")
        vs = sel[0].variants()
        jobs = runner.schedule(sel, 2 * len(vs))
        rounds = [[v for _, v, k in jobs if k == r] for r in range(2 * len(vs))]
        for r in rounds:
            self.assertEqual(sorted(r), sorted(vs))
        for place in range(len(vs)):
            self.assertEqual(sorted(r[place] for r in rounds[:len(vs)]), sorted(vs))

    def test_warmup_rounds_first_per_workload(self):
        sel = workloads.select("churn,small")
        order = [(w.name, v, k) for w, v, k in runner.schedule(sel, 2, warmup=1)]
        self.assertEqual(len(order), 2 * 3 + 3 * 3)
        self.assertEqual(order[:3], [("churn", "pinfast", -1), ("churn", "plain", -1), ("churn", "plain", 0)])
        self.assertEqual(order[6:10], [("small", "pinned", -1), ("small", "plain", -1),
                                       ("small", "pinfast", -1), ("small", "plain", 0)])

    def test_file_digest(self):
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(b"abc")
        try:
            # sha256("abc") begins ba7816bf8f01cfea
            self.assertEqual(runner.file_digest(f.name), "ba7816bf8f01cfea")
        finally:
            os.unlink(f.name)
        self.assertEqual(runner.file_digest("/nonexistent/libpinfast.so"), "")

    def test_commit_says_dirty(self):
        """A tracked file changed since the commit: the results say so."""
        with tempfile.TemporaryDirectory() as d:
            git = ["git", "-C", d, "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run(git + ["init", "-q"], check=True)
            with open(os.path.join(d, "f"), "w") as f:
                f.write("a")
            subprocess.run(git + ["add", "f"], check=True)
            subprocess.run(git + ["commit", "-qm", "f"], check=True)
            head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
            self.assertEqual(runner.git_commit(d), head)
            with open(os.path.join(d, "new"), "w") as f:  # untracked: not the commit's code either way
                f.write("b")
            self.assertEqual(runner.git_commit(d), head)
            with open(os.path.join(d, "f"), "w") as f:
                f.write("changed")
            self.assertEqual(runner.git_commit(d), head + "-dirty")
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(runner.git_commit(d), "")

    def test_parse_cpus(self):
        self.assertEqual(runner.parse_cpus("4,5"), {4, 5})
        self.assertEqual(runner.parse_cpus("2-4,7"), {2, 3, 4, 7})
        for bad in ("", "x", "5-2", "-1", "1,,2"):
            with self.assertRaises(ValueError):
                runner.parse_cpus(bad)

    def test_select(self):
        self.assertEqual(len(workloads.select("all")), len(workloads.WORKLOADS))
        self.assertEqual([w.name for w in workloads.select("small,sweep")], ["sweep", "small"])
        with self.assertRaises(ValueError):
            workloads.select("sweep,nope")

    def test_quick_selects_its_set(self):
        """--quick alone runs the quick set, real programs first; --workloads
        (all included) overrides it; without --quick nothing is left out."""
        quick = [w.name for w in workloads.select(None, quick=True)]
        self.assertEqual(quick, ["state_dict", "infer_readback", "numba_copy", "loader", "image2d",
                                 "sweep", "small"])
        self.assertEqual(quick, [w.name for w in workloads.WORKLOADS if w.in_quick])
        self.assertEqual(len(workloads.select(None)), len(workloads.WORKLOADS))
        self.assertEqual(len(workloads.select("", quick=True)), len(quick))
        self.assertEqual(len(workloads.select("all", quick=True)), len(workloads.WORKLOADS))
        self.assertEqual([w.name for w in workloads.select("churn,offload", quick=True)],
                         ["offload", "churn"])

    def test_quick_estimate_fits(self):
        """The quick bench's runs, by the registry's estimates, leave room in
        the README's few minutes for a build (about a minute from scratch on
        the H100): adding to the quick set must come with a cost."""
        jobs = runner.schedule(workloads.select(None, quick=True), 3, 1)
        self.assertEqual(len(jobs), 84)
        self.assertLessEqual(runner.estimate_left(jobs, {}, quick=True), 6 * 60)

    def test_estimate_uses_observations(self):
        w = workloads.BY_NAME["churn"]
        jobs = [(w, "plain", 0), (w, "pinfast", 0)]
        self.assertEqual(runner.estimate_left(jobs, {}, quick=False), 2 * w.est_s)
        self.assertEqual(runner.estimate_left(jobs, {}, quick=True), 2 * w.est_quick_s)
        self.assertEqual(runner.estimate_left(jobs, {"churn": [1.0, 3.0]}, quick=False), 4.0)

    def test_fmt_duration(self):
        self.assertEqual(runner.fmt_duration(42.4), "42s")
        self.assertEqual(runner.fmt_duration(125), "2m05s")


def cpu_ticks(pid):
    """User and system clock ticks of a process so far, from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def running(pid):
    """The process exists and has not ended (a zombie has)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class TestBusy(unittest.TestCase):
    def test_busy_until_stopped(self):
        procs = runner.busy_start(2)
        try:
            deadline = time.time() + 10
            while time.time() < deadline and not all(cpu_ticks(p.pid) for p in procs):
                time.sleep(0.05)
            self.assertTrue(all(cpu_ticks(p.pid) > 0 for p in procs))
            self.assertTrue(all(p.poll() is None for p in procs))
        finally:
            runner.busy_stop(procs)
        self.assertTrue(all(p.returncode is not None for p in procs))

    def test_busy_ends_with_the_harness(self):
        """A harness killed outright leaves no busy process behind."""
        child = subprocess.run([sys.executable, "-c", textwrap.dedent("""
            import os, sys
            sys.path.insert(0, %r)
            from pinbench import runner
            print(runner.busy_start(1)[0].pid, flush=True)
            os._exit(0)
            """ % context.BENCH)], capture_output=True, text=True, timeout=30)
        pid = int(child.stdout)
        deadline = time.time() + 10
        while time.time() < deadline and running(pid):
            time.sleep(0.05)
        if running(pid):
            os.kill(pid, signal.SIGKILL)
            self.fail("the busy process outlived its harness")


class TestEnv(unittest.TestCase):
    base = {"PATH": "/bin", "LD_PRELOAD": "/old/libpinfast.so /x/libother.so", "PINFAST_STATS": "text"}

    def test_plain_sees_no_pinfast(self):
        env = runner.build_env(self.base, "plain", "/b/libpinfast.so")
        self.assertEqual(env["LD_PRELOAD"], "/x/libother.so")
        self.assertNotIn("PINFAST_STATS", env)

    def test_pinfast_preloaded_with_json_report(self):
        env = runner.build_env({"PATH": "/bin"}, "pinfast", "/b/libpinfast.so", "/t/pf-%p.json")
        self.assertEqual(env["LD_PRELOAD"], "/b/libpinfast.so")
        self.assertEqual(env["PINFAST_STATS"], "json")
        self.assertEqual(env["PINFAST_STATS_FILE"], "/t/pf-%p.json")

    def test_empty_preload_removed(self):
        env = runner.build_env({"LD_PRELOAD": "/a/libpinfast.so"}, "pinned", "/b/libpinfast.so")
        self.assertNotIn("LD_PRELOAD", env)

    def test_command_runs_the_target_program(self):
        w = workloads.BY_NAME["multigpu_procs"]
        cmd = runner.command(w, "/b", quick=True, pinned=True)
        self.assertEqual(cmd[0], "/b/cuda/multigpu")
        self.assertEqual(cmd[-2:], ["--procs", "--pinned"])
        self.assertEqual(runner.command(workloads.BY_NAME["multigpu"], "/b", False, False), ["/b/cuda/multigpu"])

    def test_parse_output_takes_the_workload_line(self):
        out = 'noise\n{"workload": "x", "measurements": []}\n{"other": 1}\n'
        self.assertEqual(runner.parse_output(out)["workload"], "x")
        self.assertIsNone(runner.parse_output("no json here\n{broken"))


# A stand-in for a CUDA workload: times depend on the variant it detects
# from its environment and arguments, and it writes a fake pinfast report.
FAKE = textwrap.dedent('''\
    #!%s
    import json, os, sys, time
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    pinfast = "PINFAST_STATS_FILE" in os.environ
    pinned = "--pinned" in sys.argv
    slow = os.path.basename(sys.argv[0]) == "small"   # pinfast slower here
    t = 0.1 if pinned else (1.3 if slow else 0.5) if pinfast else 1.0
    marks = os.environ.get("FAKE_MARKS")
    if marks:  # a variant's first run is 100x slower: a warm-up kept would show
        mark = os.path.join(marks, "pinned" if pinned else "pinfast" if pinfast else "plain")
        if not os.path.exists(mark):
            open(mark, "w").close()
            t *= 100
    if pinfast:
        with open(os.environ["PINFAST_STATS_FILE"].replace("%%p", str(os.getpid())), "w") as f:
            json.dump({"transfers": [], "allocations": []}, f)
    if os.path.basename(sys.argv[0]) == "compute":
        sys.exit("boom")
    print(json.dumps({"workload": "fake", "params": {"argv": sys.argv[1:]}, "measurements": [
        {"name": "h2d_sync", "direction": "H2D", "bytes": 1 << 20, "seconds": t, "min_s": t, "max_s": t, "reps": 3}]}))
''') % sys.executable


class TestEndToEnd(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        os.makedirs(os.path.join(d, "build", "cuda"))
        for name in ("sweep", "small", "compute"):
            p = os.path.join(d, "build", "cuda", name)
            with open(p, "w") as f:
                f.write(FAKE)
            os.chmod(p, os.stat(p).st_mode | stat.S_IEXEC)
        # Not a real library: the dynamic loader warns and ignores it.
        self.lib = os.path.join(d, "build", "libpinfast.so")
        open(self.lib, "w").close()
        self.out = os.path.join(d, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def bench(self, *args, env=None):
        """The harness on the fake workloads; PINBENCH_GPU=yes unless env says otherwise."""
        cmd = [sys.executable, RUN, "--no-build", "--build", os.path.join(self.tmp.name, "build"),
               "--lib", self.lib, "--out", self.out, "--machine", "testbox", "--runs", "2"] + list(args)
        env = dict(env or os.environ)
        env.setdefault("PINBENCH_GPU", "yes")
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)

    @staticmethod
    def progress(p):
        """The progress lines, one a run (the plan line counts warm-ups too)."""
        return "".join(line for line in p.stderr.splitlines(True) if line.startswith("["))

    def test_warmup_not_kept(self):
        marks = os.path.join(self.tmp.name, "marks")
        os.makedirs(marks)
        env = dict(os.environ, FAKE_MARKS=marks)
        p = self.bench("--workloads", "sweep", "--runs", "1", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.progress(p).count("warm-up"), 3)
        self.assertIn("2.00x", p.stdout)       # the 100x slower first runs were dropped
        self.assertIn("10.00x", p.stdout)
        raw = [f for f in os.listdir(self.out) if f.endswith("-raw.jsonl")]
        with open(os.path.join(self.out, raw[0])) as f:
            runs = [json.loads(line) for line in f]
        self.assertEqual(sorted(r["run"] for r in runs), [0, 0, 0])
        self.assertEqual(self.plain_seconds(), 1.0)
        md = [f for f in os.listdir(self.out) if f.endswith(".md")]
        with open(os.path.join(self.out, md[0])) as f:
            self.assertIn("1 runs per variant after 1 warm-up", f.read())

    def plain_seconds(self):
        jsonl = [f for f in os.listdir(self.out) if f.endswith("bench.jsonl")]
        with open(os.path.join(self.out, jsonl[0])) as f:
            recs = [json.loads(line) for line in f]
        return [r["seconds"] for r in recs if r["variant"] == "plain"][0]

    def test_no_warmup_keeps_every_run(self):
        marks = os.path.join(self.tmp.name, "marks")
        os.makedirs(marks)
        env = dict(os.environ, FAKE_MARKS=marks)
        p = self.bench("--workloads", "sweep", "--runs", "1", "--warmup", "0", "--no-fail", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("warm-up", self.progress(p))
        self.assertEqual(self.plain_seconds(), 100.0)  # its one run was its slow first

    def test_bad_warmup(self):
        p = self.bench("--workloads", "sweep", "--warmup", "-1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--warmup must be >= 0", p.stderr)

    def test_good_run(self):
        p = self.bench("--workloads", "sweep", "--quick")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("2.00x", p.stdout)       # pinfast vs plain
        self.assertIn("10.00x", p.stdout)      # pinned vs plain
        self.assertIn("about", p.stderr)       # progress line with an estimate
        files = os.listdir(self.out)
        jsonl = [f for f in files if f.endswith("-testbox-bench-quick.jsonl")]
        self.assertEqual(len(jsonl), 1, files)
        with open(os.path.join(self.out, jsonl[0])) as f:
            recs = [json.loads(line) for line in f]
        self.assertEqual(sorted(r["variant"] for r in recs), ["pinfast", "pinned", "plain"])
        self.assertTrue(all(r["runs"] == 2 and r["quick"] for r in recs))
        stats_dirs = [f for f in files if f.endswith("-pinfast-stats")]
        self.assertEqual(len(stats_dirs), 1)
        reports = []
        for root, _, names in os.walk(os.path.join(self.out, stats_dirs[0])):
            reports += [os.path.join(root, n) for n in names]
        self.assertEqual(len(reports), 2)      # one per pinfast run
        with open(reports[0]) as f:
            self.assertIn("transfers", json.load(f))

    def test_plan_line_before_anything(self):
        """The plan (workloads, runs, estimated time) comes first: --quick
        alone names the quick set, --workloads overrides it."""
        p = self.bench("--quick", "--lib", os.path.join(self.tmp.name, "none.so"))
        self.assertEqual(p.returncode, 2)      # no library: nothing run
        quick = workloads.select(None, quick=True)
        est = runner.fmt_duration(runner.estimate_left(runner.schedule(quick, 2, 1), {}, True))
        self.assertIn("bench: 7 workload(s), 63 runs (1 warm-up round(s) and 2 run(s) of each "
                      "variant), about %s by the registry's estimates, after the build: "
                      "state_dict,infer_readback,numba_copy,loader,image2d,sweep,small\n" % est,
                      p.stderr)
        p = self.bench("--quick", "--workloads", "sweep,small", "--lib",
                       os.path.join(self.tmp.name, "none.so"))
        self.assertIn("bench: 2 workload(s), 18 runs", p.stderr)
        self.assertIn("after the build: sweep,small\n", p.stderr)

    def test_stopped_writes_the_runs_done(self):
        """SIGTERM (quick.sh's time limit) in the middle, to the harness alone
        or, as timeout sends it, to its workload too: the runs done are
        written, the one cut short is not counted, and the exit says so."""
        for group in (False, True):
            with self.subTest(group=group):
                self.stop_after_four(group)

    def stop_after_four(self, group):
        shutil.rmtree(self.out, ignore_errors=True)
        cmd = [sys.executable, RUN, "--no-build", "--build", os.path.join(self.tmp.name, "build"),
               "--lib", self.lib, "--out", self.out, "--machine", "testbox", "--runs", "3",
               "--warmup", "0", "--workloads", "sweep,small"]
        env = dict(os.environ, PINBENCH_GPU="yes", FAKE_SLEEP="0.3")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=group)
        err = []
        for line in p.stderr:           # run 5 of 18 started: 4 done
            err.append(line)
            if line.startswith("[  5/18]"):
                time.sleep(0.1)         # the workload has started
                if group:
                    os.killpg(p.pid, signal.SIGTERM)
                else:
                    p.send_signal(signal.SIGTERM)
                break
        out, rest = p.communicate(timeout=60)
        err = "".join(err) + rest
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("bench: stopped by SIGTERM at run 5 of 18", err)
        self.assertIn("writing the 4 runs done", err)
        self.assertNotIn("FAILED", err)
        self.assertIn("2.00x", out)     # sweep: pinfast vs plain, from the runs of plain and pinfast done
        raw = [f for f in os.listdir(self.out) if f.endswith("-raw.jsonl")]
        with open(os.path.join(self.out, raw[0])) as f:
            runs = [json.loads(line) for line in f]
        self.assertEqual([(r["variant"], r["run"]) for r in runs],
                         [("plain", 0), ("pinfast", 0), ("pinned", 0), ("pinfast", 1)])
        md = [f for f in os.listdir(self.out) if f.endswith(".md")]
        with open(os.path.join(self.out, md[0])) as f:
            self.assertIn("**Stopped** by SIGTERM at run 5 of 18", f.read())

    def test_slower_fails_unless_no_fail(self):
        p = self.bench("--workloads", "small", "--runs", "5")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("SLOWER", p.stdout)
        self.assertIn("SLOWER", p.stderr)
        p = self.bench("--workloads", "small", "--runs", "5", "--no-fail")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_busy_runs_beside(self):
        p = self.bench("--workloads", "sweep", "--quick", "--busy", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("bench: 2 busy process(es) running beside every run\n", p.stderr)
        jsonl = [f for f in os.listdir(self.out) if f.endswith("bench-quick.jsonl")]
        with open(os.path.join(self.out, jsonl[0])) as f:
            self.assertEqual({json.loads(line)["busy"] for line in f}, {2})
        md = [f for f in os.listdir(self.out) if f.endswith(".md")]
        with open(os.path.join(self.out, md[0])) as f:
            self.assertIn("2 busy process(es) ran beside every run.", f.read())

    def test_bad_busy(self):
        p = self.bench("--workloads", "sweep", "--busy", "-1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--busy must be 0 to 4096 processes", p.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_quick_says_within_noise(self):
        # 30% slower in each of 3 runs: 1 chance in 20, not enough for SLOWER
        p = self.bench("--workloads", "small", "--quick", "--runs", "3")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("SLOWER", p.stdout)
        self.assertIn("within noise", p.stdout)
        self.assertIn("1 measurement(s) look slower with pinfast but are within noise at 3 runs",
                      p.stderr)

    def test_no_gpu(self):
        env = dict(os.environ, PINBENCH_GPU="no")
        t0 = time.time()
        p = self.bench("--workloads", "sweep", "--quick", env=env)
        self.assertLess(time.time() - t0, 10)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stdout, "")
        self.assertEqual(p.stderr, "bench: no usable GPU: no GPU (PINBENCH_GPU=no); nothing was run\n")
        self.assertFalse(os.path.exists(self.out))     # nothing written

    def test_no_gpu_through_the_wrapper_leaves_the_tree_clean(self):
        """bench/run itself, nothing carried: one line, exit 2, no file in the checkout."""
        before = self.files()
        env = dict(os.environ, PINBENCH_GPU="no")
        p = subprocess.run([WRAPPER, "--quick"], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len((p.stdout + p.stderr).splitlines()), 1, p.stdout + p.stderr)
        self.assertTrue(p.stderr.startswith("bench: no usable GPU"))
        self.assertEqual(self.files(), before)

    @staticmethod
    def files():
        """What the harness could write: files under bench/, and results/ at all."""
        out = {os.path.join(d, n) for d, _, names in os.walk(context.BENCH) for n in names}
        return out, os.path.exists(runner.RESULTS)

    def test_out_unwritable(self):
        blocker = os.path.join(self.tmp.name, "a-file")
        open(blocker, "w").close()
        for out, why in ((os.path.join(blocker, "out"), "%s is a file, not a folder" % blocker),
                         (blocker, "is a file, not a folder; name a folder (made if missing)")):
            p = self.bench("--workloads", "sweep", "--out", out)
            self.assertEqual(p.returncode, 2)
            self.assertEqual(p.stdout, "")
            self.assertEqual(p.stderr, "bench/run: --out %s: %s\n" % (out, why))

    def test_help_names_the_command(self):
        p = subprocess.run([WRAPPER, "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("usage: bench/run "), p.stdout)
        self.assertNotIn("harness.py", p.stdout)
        self.assertIn("without pinfast (plain), with it\npreloaded (pinfast)", p.stdout)

    def test_out_elsewhere(self):
        out = os.path.join(self.tmp.name, "new", "deeper")
        p = self.bench("--workloads", "sweep", "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(any(f.endswith("-testbox-bench.jsonl") for f in os.listdir(out)))
        self.assertFalse(any(f.startswith(".pinbench-") for f in os.listdir(out)))

    def test_default_out_is_ignored_by_git(self):
        top = os.path.dirname(context.BENCH)
        self.assertEqual(runner.RESULTS, os.path.join(top, "results"))
        with open(os.path.join(top, ".gitignore")) as f:
            self.assertIn("/results/", f.read().split())

    def raw_of(self, out):
        return [os.path.join(out, f) for f in os.listdir(out) if f.endswith("-raw.jsonl")][0]

    def test_resume_keeps_finished_workloads(self):
        """--resume of a run stopped in its second workload: the first is
        kept, the second, begun, is run again whole; the results and the
        raw runs hold both."""
        first = os.path.join(self.tmp.name, "first")
        cmd = [sys.executable, RUN, "--no-build", "--build", os.path.join(self.tmp.name, "build"),
               "--lib", self.lib, "--out", first, "--machine", "testbox", "--runs", "2",
               "--warmup", "0", "--workloads", "sweep,small", "--no-fail"]
        env = dict(os.environ, PINBENCH_GPU="yes", FAKE_SLEEP="0.2")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for line in p.stderr:           # small's second run started: its first done
            if line.startswith("[  8/12]"):
                time.sleep(0.1)
                p.send_signal(signal.SIGTERM)
                break
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        raw = self.raw_of(first)
        p = self.bench("--workloads", "sweep,small", "--warmup", "0", "--no-fail", "--resume", raw)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("bench: --resume: 6 run(s) of sweep kept, 6 run(s) to go", p.stderr)
        self.assertNotIn("sweep", self.progress(p))
        self.assertEqual(self.progress(p).count("small"), 6)
        self.assertIn("2.00x", p.stdout)    # sweep, from the earlier run
        md = [f for f in os.listdir(self.out) if f.endswith(".md")]
        with open(os.path.join(self.out, md[0])) as f:
            self.assertIn("Runs of sweep taken up from %s (--resume)" % os.path.basename(raw), f.read())
        with open(self.raw_of(self.out)) as f:
            runs = [json.loads(line) for line in f]
        self.assertEqual(sorted((r["workload"], r["variant"], r["run"]) for r in runs),
                         sorted((w, v, k) for w in ("sweep", "small") for v in ("plain", "pinfast", "pinned")
                                for k in (0, 1)))

    def stopped_in_small(self, first, at, boot_id):
        """A run of sweep and small, 3 runs each, stopped by SIGTERM as
        progress line `at` appears; its raw runs' file."""
        cmd = [sys.executable, RUN, "--no-build", "--build", os.path.join(self.tmp.name, "build"),
               "--lib", self.lib, "--out", first, "--machine", "testbox", "--runs", "3",
               "--warmup", "0", "--workloads", "sweep,small", "--no-fail"]
        env = dict(os.environ, PINBENCH_GPU="yes", FAKE_SLEEP="0.2", PINBENCH_BOOT_ID=boot_id)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for line in p.stderr:
            if line.startswith(at):
                time.sleep(0.1)
                p.send_signal(signal.SIGTERM)
                break
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        return self.raw_of(first)

    def test_resume_keeps_rounds_of_this_machine_start(self):
        """Stopped in small's third round: on the same machine start its two
        complete rounds are kept and only the third runs, after the warm-up;
        on another start small runs again whole."""
        raw = self.stopped_in_small(os.path.join(self.tmp.name, "first"), "[ 16/18]", "start-a")
        env = dict(os.environ, PINBENCH_BOOT_ID="start-a")
        p = self.bench("--workloads", "sweep,small", "--runs", "3", "--warmup", "1", "--no-fail",
                       "--resume", raw, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("bench: --resume: 9 run(s) of sweep kept, 6 of small's first 2 round(s) "
                      "(this machine start), 6 run(s) to go", p.stderr)
        self.assertEqual(self.progress(p).count("small"), 6)      # a warm-up round, then run 3
        self.assertEqual(self.progress(p).count("run 3/3"), 3)
        md = [f for f in os.listdir(self.out) if f.endswith(".md")]
        with open(os.path.join(self.out, md[0])) as f:
            self.assertIn("Runs of sweep; the first 2 round(s) of small (this machine start) taken up "
                          "from %s" % os.path.basename(raw), f.read())
        with open(self.raw_of(self.out)) as f:
            runs = [json.loads(line) for line in f]
        self.assertEqual(sorted((r["workload"], r["variant"], r["run"]) for r in runs),
                         sorted((w, v, k) for w in ("sweep", "small") for v in ("plain", "pinfast", "pinned")
                                for k in (0, 1, 2)))
        shutil.rmtree(self.out)
        p = self.bench("--workloads", "sweep,small", "--runs", "3", "--warmup", "0", "--no-fail",
                       "--resume", raw, env=dict(os.environ, PINBENCH_BOOT_ID="start-b"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("bench: --resume: 9 run(s) of sweep kept, 9 run(s) to go", p.stderr)

    def test_resume_refuses_another_library_or_size(self):
        first = os.path.join(self.tmp.name, "first")
        p = self.bench("--workloads", "sweep", "--out", first)
        self.assertEqual(p.returncode, 0, p.stderr)
        raw = self.raw_of(first)
        other = os.path.join(self.tmp.name, "other.so")
        with open(other, "w") as f:
            f.write("another build")
        p = self.bench("--workloads", "sweep", "--resume", raw, "--quick")
        self.assertEqual(p.returncode, 2)
        self.assertIn("it ran the full sizes; nothing was run", p.stderr)
        p = self.bench("--workloads", "sweep", "--resume", raw, "--busy", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("it ran beside 0 busy process(es), this run 1; nothing was run", p.stderr)
        p = self.bench("--workloads", "sweep", "--resume", raw[:-len("-raw.jsonl")] + ".md")
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a file of raw runs", p.stderr)
        self.assertFalse(os.path.exists(self.out))     # refused before anything
        p = self.bench("--workloads", "sweep", "--resume", raw, "--lib", other)
        self.assertEqual(p.returncode, 2)
        self.assertIn("is not this one", p.stderr)
        self.assertEqual(self.progress(p), "")

    def test_failed_workload_fails(self):
        p = self.bench("--workloads", "compute")
        self.assertEqual(p.returncode, 1)
        self.assertIn("FAILED compute", p.stderr)
        self.assertIn("boom", p.stderr)


if __name__ == "__main__":
    unittest.main()
