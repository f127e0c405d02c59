#!/usr/bin/env python3
"""Runs the bundled workloads three ways: without pinfast (plain), with it
preloaded (pinfast) and with pinned memory allocated by hand (pinned). The
variants are interleaved and each is run several times. The results are
written as JSON lines, a markdown table and plots (docs/bench.md).

Exit status: 0 when all went well; 1 when a run failed or its results did
not match; 3 when pinfast was slower than plain beyond noise somewhere
(unless --no-fail); 2 on bad usage, no usable GPU, a results folder that
cannot be written or a build failure."""
import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pinbench import plots, resume, results, runner, scaling, stats, workloads  # noqa: E402


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class Stopped(Exception):
    """SIGTERM or SIGINT during the runs (a time limit, ^C): the runs done
    are still summarised and written."""


def _stop(signum, _frame):
    raise Stopped(signum)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=None,
                    help="comma list or all (default all; with --quick the quick set: %s): %s"
                         % (",".join(w.name for w in workloads.select(None, quick=True)),
                            ",".join(workloads.BY_NAME)))
    ap.add_argument("--runs", type=int, default=None,
                    help="runs per variant (default 5; 3 with --quick, which then shows a "
                         "slowdown as 'within noise', never as SLOWER)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="rounds of every variant run first and not kept, per workload (default 1)")
    ap.add_argument("--quick", action="store_true",
                    help="a few minutes: the quick set of workloads (unless --workloads), "
                         "smaller sizes and repetitions, 3 runs")
    ap.add_argument("--out", default=runner.RESULTS, metavar="DIR",
                    help="results folder, made if missing (default results/ in the checkout, "
                         "ignored by git)")
    ap.add_argument("--machine", default=None, help="label (default: GPU name or host name)")
    ap.add_argument("--build", default=os.path.join(runner.ROOT, "build"), help="build directory")
    ap.add_argument("--lib", default=None, help="libpinfast.so (default <build>/libpinfast.so)")
    ap.add_argument("--no-build", action="store_true", help="do not run cmake")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 even if pinfast is SLOWER")
    ap.add_argument("--noise-floor", type=float, default=stats.DEFAULT_NOISE_FLOOR,
                    help="smallest relative difference counted as slower (default 0.05)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run before it is killed")
    ap.add_argument("--resume", default=None, metavar="RAW",
                    help="an earlier run's <stem>-raw.jsonl, of the same library and sizes: the "
                         "workloads it ran to the end are kept, the others run now (the one it "
                         "stopped in keeps its complete rounds on the same machine start)")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--cpus", default=None,
                    help="run every variant on these CPUs only (e.g. 4,5 or 2-5): on a VM whose "
                         "runs land in fast and slow modes by CPU, so that microsecond "
                         "workloads compare like with like")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="keep N processes busy on the CPUs (on --cpus' where given) while every "
                         "variant runs: pinfast against plain on a machine whose CPUs are taken")
    a = ap.parse_args(argv)

    if a.list:
        # est: the registry's rough seconds per run, full and quick
        for w in workloads.WORKLOADS:
            print("%-16s %-4s %-5s variants=%s est=%gs,%gs quick=%s"
                  % (w.name, w.kind, "quick" if w.in_quick else "-", ",".join(w.variants()),
                     w.est_s, w.est_quick_s, " ".join(w.quick_args)))
        return 0
    try:
        selected = workloads.select(a.workloads, a.quick)
    except ValueError as e:
        log(str(e))
        return 2
    if a.runs is None:
        a.runs = 3 if a.quick else 5
    if a.runs < 1:
        log("--runs must be >= 1")
        return 2
    if a.warmup < 0:
        log("--warmup must be >= 0")
        return 2
    if not 0 <= a.busy <= 4096:
        log("--busy must be 0 to 4096 processes")
        return 2
    cpus = None
    if a.cpus:
        try:
            cpus = runner.parse_cpus(a.cpus)
        except ValueError as e:
            log("--cpus %s: %s" % (a.cpus, e))
            return 2
        if not cpus <= os.sched_getaffinity(0):
            log("--cpus %s: not all of them are available here (%s)"
                % (a.cpus, ",".join(map(str, sorted(os.sched_getaffinity(0))))))
            return 2
    earlier = None
    if a.resume:
        earlier, why = resume.read(a.resume, a.quick, a.busy)
        if why:
            log("--resume %s: %s; nothing was run" % (a.resume, why))
            return 2
    # before anything is built or written: nothing to run on, nowhere to write
    why = runner.gpu_problem()
    if why:
        log("no usable GPU: %s; nothing was run" % why)
        return 2
    why = runner.out_problem(a.out)
    if why:
        print("bench/run: --out %s: %s" % (a.out, why), file=sys.stderr, flush=True)
        return 2
    build_dir = os.path.abspath(a.build)
    lib = os.path.abspath(a.lib or os.path.join(build_dir, "libpinfast.so"))
    jobs = runner.schedule(selected, a.runs, a.warmup)
    planned_s = runner.estimate_left(jobs, {}, a.quick)
    # the whole plan before the build, so that one knows what one waits for
    log("%d workload(s), %d runs (%d warm-up round(s) and %d run(s) of each variant), "
        "about %s by the registry's estimates, after the build: %s"
        % (len(selected), len(jobs), a.warmup, a.runs, runner.fmt_duration(planned_s),
           ",".join(w.name for w in selected)))
    t_build = time.time()
    if not a.no_build and not runner.setup_deps():
        return 2
    if not a.no_build and not runner.build(build_dir, selected, need_lib=a.lib is None, log=log):
        log("build failed")
        return 2
    if not os.path.exists(lib):
        log("no pinfast library at %s" % lib)
        return 2
    if not a.no_build:
        log("built in %s" % runner.fmt_duration(time.time() - t_build))
    kept, kept_names, kept_rounds = [], [], {}
    boot_id = runner.machine_start()
    if earlier:  # the library is known only now, when the harness builds it
        kept, kept_names, kept_rounds, why = resume.keep(earlier, selected, a.runs, runner.file_digest(lib),
                                                         boot_id)
        if why:
            log("--resume %s: %s; nothing was run" % (a.resume, why))
            return 2
        jobs = runner.schedule([w for w in selected if w.name not in kept_names], a.runs, a.warmup, kept_rounds)
        def runs_of(names):
            return sum(1 for r in kept if r["workload"] in names)
        rounds = "".join(", %d of %s's first %d round(s) (this machine start)" % (runs_of({w}), w, n)
                         for w, n in kept_rounds.items())
        log("--resume: %d run(s) of %s kept%s, %d run(s) to go"
            % (runs_of(kept_names), ",".join(kept_names) or "no workload", rounds, len(jobs)))

    machine = a.machine or runner.machine_name()
    started = datetime.datetime.now()
    date = started.strftime("%Y-%m-%d %H:%M:%S")
    stem = "%s-%s-bench%s" % (started.strftime("%Y-%m-%d-%H%M%S"), machine, "-quick" if a.quick else "")
    prefix = os.path.join(a.out, stem)
    tmp = tempfile.mkdtemp(prefix="pinbench-")
    warm_tmp = tempfile.mkdtemp(prefix="pinbench-warmup-")

    raw, observed, skipped = list(kept), {}, set()
    t_start = time.time()
    # A time limit's SIGTERM (tests/gpu/checks/quick.sh) or a ^C ends the
    # runs, not the harness: the workload's child is killed by subprocess.run
    # and not kept, and what was done is written as usual.
    stopped, i = None, 0
    handlers = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    busy = runner.busy_start(a.busy, cpus)
    if busy:
        log("%d busy process(es) running beside every run" % len(busy))
    try:
        for i, (w, variant, k) in enumerate(jobs):
            if w.name in skipped:
                continue
            left = runner.estimate_left([j for j in jobs[i:] if j[0].name not in skipped], observed, a.quick)
            which = "run %d/%d" % (k + 1, a.runs) if k >= 0 else "warm-up"
            print("[%3d/%d] %-14s %-8s %s  elapsed %s, about %s left"
                  % (i + 1, len(jobs), w.name, variant, which,
                     runner.fmt_duration(time.time() - t_start), runner.fmt_duration(left)),
                  file=sys.stderr, flush=True)
            r = runner.run_one(w, variant, k, build_dir, lib, a.quick, tmp if k >= 0 else warm_tmp,
                               a.timeout, cpus)
            if k >= 0:
                raw.append(r)
            observed.setdefault(w.name, []).append(r["wall_s"])
            out = r["output"]
            if isinstance(out, dict) and out.get("skipped"):
                log("%s skipped: %s" % (w.name, out["skipped"]))
                skipped.add(w.name)
            elif not results.run_ok(r):
                log("%s %s %s FAILED (rc=%s): %s" % (w.name, variant, which, r["rc"],
                                                      (r["error"] or "").strip()[-500:]))
    except Stopped as e:
        stopped = (signal.Signals(e.args[0]).name, i)
        # a run the signal reached too (timeout signals the process group) is not a failure
        w, variant, k = jobs[i]
        if raw and (raw[-1]["workload"], raw[-1]["variant"], raw[-1]["run"]) == (w.name, variant, k) \
                and not results.run_ok(raw[-1]):
            raw.pop()
    finally:
        runner.busy_stop(busy)
    for sig in (signal.SIGTERM, signal.SIGINT):  # a second one must not cut the writing short
        signal.signal(sig, signal.SIG_IGN)
    ran_s = time.time() - t_start
    if stopped:
        log("stopped by %s at run %d of %d, after %s: writing the %d runs done"
            % (stopped[0], stopped[1] + 1, len(jobs), runner.fmt_duration(ran_s), len(raw) - len(kept)))

    # Keep pinfast's own exit reports next to the results.
    stats_out = prefix + "-pinfast-stats"
    if any(r["stats_files"] for r in raw[len(kept):]):
        shutil.copytree(tmp, stats_out, dirs_exist_ok=True)
        for r in raw[len(kept):]:  # the kept runs' reports stay where the earlier run put them
            r["stats_files"] = [os.path.join(stats_out, os.path.relpath(p, tmp)) for p in r["stats_files"]]
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(warm_tmp, ignore_errors=True)

    # the checkout's commit says what built the library only when this run
    # built it; the library's own digest identifies it either way
    extra = {"commit": runner.git_commit(), "lib_sha256": runner.file_digest(lib), "quick": a.quick,
             "warmup": a.warmup, "boot_id": boot_id, "busy": a.busy}
    records, problems, skip_why = results.aggregate(raw, machine, date, a.noise_floor, extra)
    results.write_jsonl(prefix + ".jsonl", records)
    with open(prefix + "-raw.jsonl", "w") as f:
        for r in raw:
            f.write(json.dumps(r, default=str) + "\n")
    table = results.markdown_table(records, problems, skip_why)
    scaled = scaling.rows(records)
    if scaled:
        table += "\n" + scaling.markdown_table(scaled)
    with open(prefix + ".md", "w") as f:
        f.write("# pinfast bench, %s, %s%s\n\n" % (machine, date, " (quick)" if a.quick else ""))
        f.write("Speed-up = plain median time / variant median time; %d runs per variant after %d "
                "warm-up round(s) not kept; SLOWER = pinfast slower than plain beyond noise, "
                "within noise = slower by too few runs to tell (docs/bench.md).%s\n\n"
                % (a.runs, a.warmup, " %d busy process(es) ran beside every run." % a.busy if a.busy else ""))
        if kept_names or kept_rounds:
            f.write(resume.describe(a.resume, kept_names, kept_rounds))
        if stopped:
            f.write("**Stopped** by %s at run %d of %d: the later workloads have fewer runs or "
                    "none.\n\n" % (stopped[0], stopped[1] + 1, len(jobs)))
        f.write(table)

    if plots.have_matplotlib():
        made = []
        for w in ("sweep", "sweep_shared", "sweep_ptds"):
            made += plots.bandwidth(records, prefix, w)
        made += plots.speedup(records, prefix + "-speedup.png")
        log("plots: %s" % ", ".join(os.path.basename(p) for p in made))
    else:
        log("matplotlib not found: no plots")

    print(table)
    log("results: %s.{jsonl,md}, raw runs %s-raw.jsonl%s"
        % (prefix, prefix, ", pinfast reports " + stats_out if os.path.isdir(stats_out) else ""))
    # what the registry's est_s / est_quick_s should say (bench/pinbench/workloads.py)
    log("%d runs in %s (estimated %s for all %d); seconds a run, warm-ups included: %s"
        % (sum(map(len, observed.values())), runner.fmt_duration(ran_s), runner.fmt_duration(planned_s),
           len(jobs), ", ".join("%s %.1f" % (n, sum(t) / len(t)) for n, t in observed.items())))
    for sig, h in handlers.items():  # all written
        signal.signal(sig, h)
    slow = results.slower_records(records)
    unsure = results.within_noise_records(records)
    if unsure:
        log("%d measurement(s) look slower with pinfast but are within noise at %d runs (marked "
            "in the table); SLOWER needs p <= %g, which takes 5 runs or more: --runs 5"
            % (len(unsure), a.runs, stats.ALPHA))
    for r in slow:
        log("SLOWER: %s %s %s %s: pinfast %.4g s vs plain, speed-up %.2fx (noise %.0f%%)"
            % (r["workload"], r["name"], r["direction"] or "", results.fmt_size(r["bytes"]),
               r["seconds"], r["ratio_to_plain"], 100 * r["noise"]))
    for s in scaling.below(scaled):
        log("BELOW: %s %s %s per GPU on %d GPUs: pinfast all at once %.2fx GPU 0 alone (floor %.2fx)"
            % (s["workload"], s["direction"], results.fmt_size(s["bytes"]), s["gpus"], s["ratio"],
               s["floor"]))
    for p in problems:
        log(p)
    if stopped:
        return 128 + signal.Signals[stopped[0]].value  # as the shell reports a signal
    if problems:
        return 1
    if slow and not a.no_fail:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
