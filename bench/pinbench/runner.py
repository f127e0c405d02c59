"""Running things: the build, the interleaved schedule, one workload run
with its environment, the progress line and its time estimate."""
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the default --out: ignored by git (.gitignore), so that a user's runs stay
# out of the tracked tree; docs/results holds the runs the project keeps
RESULTS = os.path.join(ROOT, "results")

# A child process asks the driver, so that the harness itself never holds
# CUDA state, and a hung driver costs GPU_CHECK_TIMEOUT at most.
_GPU_CHECK = """
import ctypes, sys
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    sys.exit("no CUDA driver (libcuda.so.1 cannot be loaded)")
rc = cuda.cuInit(0)
if rc:
    sys.exit("the CUDA driver does not start (cuInit error %d)" % rc)
n = ctypes.c_int(0)
rc = cuda.cuDeviceGetCount(ctypes.byref(n))
if rc or n.value < 1:
    sys.exit("no GPU (cuDeviceGetCount: error %d, %d devices)" % (rc, n.value))
"""
GPU_CHECK_TIMEOUT = 8


def gpu_problem():
    """None when the CUDA driver starts and sees a GPU, else why not (a few
    words). PINBENCH_GPU=yes skips the check (the harness's own tests run
    fake workloads), PINBENCH_GPU=no answers as on a machine without one."""
    forced = os.environ.get("PINBENCH_GPU")
    if forced == "yes":
        return None
    if forced == "no":
        return "no GPU (PINBENCH_GPU=no)"
    try:
        p = subprocess.run([sys.executable, "-c", _GPU_CHECK], capture_output=True, text=True,
                           timeout=GPU_CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        return "the CUDA driver did not answer within %d s" % GPU_CHECK_TIMEOUT
    if p.returncode == 0:
        return None
    lines = p.stderr.strip().splitlines()
    return lines[-1] if lines else "the driver check failed (exit %d)" % p.returncode


def out_problem(out):
    """None when results can be written under `out` (made if missing), else
    what is wrong, in words."""
    # the nearest part of the path that exists says what stops it
    there = os.path.abspath(out)
    while not os.path.lexists(there):
        there = os.path.dirname(there)
    if not os.path.isdir(there):
        if there == os.path.abspath(out):
            return "is a file, not a folder; name a folder (made if missing)"
        return "%s is a file, not a folder" % there
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".pinbench-"):
            pass
    except OSError as e:
        return "cannot make or write that folder (%s)" % (e.strerror or e)
    return None


def setup_deps():
    """Installs what the build needs if missing (tools/setup-deps, which
    prints its own line when it cannot). True when all is there."""
    return subprocess.run([os.path.join(ROOT, "tools", "setup-deps"), "cmake", "make", "gcc"],
                          stdout=sys.stderr).returncode == 0


def schedule(workloads, runs, warmup=0, done=None):
    """Interleaved order: for each workload, run 1 of every variant, then run
    2 of every variant, ... so that slow drifts of the machine (thermal,
    page cache, other tenants) hit all variants alike.  Round k starts at
    variant k (mod their number), so that no variant always follows the
    same one: what a process leaves the next (memory being freed, a GPU
    waking) falls on each in turn.  Each workload starts with `warmup`
    rounds of every variant, numbered below 0, whose results are not kept;
    done[name] rounds of a workload taken up (--resume) are not run again."""
    jobs = []
    for w in workloads:
        first = (done or {}).get(w.name, 0)
        vs = w.variants()
        for k in list(range(-warmup, 0)) + list(range(first, runs)):
            at = k % len(vs)
            jobs.extend((w, v, k) for v in vs[at:] + vs[:at])
    return jobs


def machine_start():
    """This start of the machine, the kernel's boot id (PINBENCH_BOOT_ID
    stands in for it in tests); None where it cannot be read."""
    v = os.environ.get("PINBENCH_BOOT_ID")
    if v:
        return v
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def estimate_left(jobs, observed, quick):
    """Seconds left for `jobs`: a workload's mean observed run time once it
    has one, its registry estimate before."""
    total = 0.0
    for w, _v, _k in jobs:
        seen = observed.get(w.name)
        total += sum(seen) / len(seen) if seen else (w.est_quick_s if quick else w.est_s)
    return total


def fmt_duration(s):
    s = int(round(s))
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


def build_env(base, variant, lib, stats_file=None):
    """The environment of one run. plain and pinned must not see pinfast even
    if the caller's shell preloads it; pinfast gets it first in LD_PRELOAD
    and is asked for its JSON exit report in stats_file (%p = pid)."""
    env = dict(base)
    keep = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split()
            if "pinfast" not in os.path.basename(p)]
    for k in list(env):
        if k.startswith("PINFAST_STATS"):
            del env[k]
    if variant == "pinfast":
        keep.insert(0, lib)
        env["PINFAST_STATS"] = "json"
        if stats_file:
            env["PINFAST_STATS_FILE"] = stats_file
    if keep:
        env["LD_PRELOAD"] = " ".join(keep)
    else:
        env.pop("LD_PRELOAD", None)
    return env


def parse_output(stdout):
    """The workload's JSON line: the last stdout line that is a JSON object
    with a "workload" key (a library may print other lines)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "workload" in doc:
            return doc
    return None


def command(w, build_dir, quick, pinned):
    if w.kind == "cuda":
        cmd = [os.path.join(build_dir, "cuda", w.target or w.name)]
    else:
        cmd = [sys.executable, os.path.join(ROOT, "bench", "py", w.name + ".py")]
    cmd += w.args(quick)
    if pinned:
        cmd.append("--pinned")
    return cmd


def parse_cpus(spec):
    """'4,5' or '2-5' -> a set of CPU numbers; ValueError on anything else."""
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        lo, hi = int(lo), int(hi or lo)
        if lo < 0 or hi < lo:
            raise ValueError("bad CPU range %r" % part)
        cpus.update(range(lo, hi + 1))
    return cpus


# A busy process: spins while its parent is the harness (its pid the
# argument), so that none outlives a harness killed outright, even before
# the process got going.
BUSY_LOOP = "import os, sys\nharness = int(sys.argv[1])\nwhile os.getppid() == harness:\n    pass\n"


def busy_start(n, cpus=None):
    """Starts n processes that each keep a CPU busy (on `cpus` only where
    given), for runs on a machine whose CPUs are all taken; busy_stop ends
    them."""
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(os.getpid())], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
            for _ in range(n)]


def busy_stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def run_measured(cmd, env, timeout, cwd, preexec_fn):
    """Runs cmd as subprocess.run would; returns (rc, stdout, stderr,
    (CPU seconds, peak RSS in MiB)), the process's and its waited-for
    children's, from wait4 (None, None when it could not start). rc is
    "timeout" or "oserror" where it did not end by itself."""
    try:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=preexec_fn)
    except OSError as e:
        return "oserror", "", str(e), (None, None)
    texts = {}
    readers = [threading.Thread(target=lambda n=n, f=f: texts.__setitem__(n, f.read()))
               for n, f in (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    killed = threading.Event()
    timer = threading.Timer(timeout, lambda: (killed.set(), p.kill()))
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    except BaseException:  # the harness stopped (a signal): the workload with it, as subprocess.run does
        timer.cancel()
        p.kill()
        p.wait()
        for t in readers:
            t.join()
        raise
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    p.stdout.close()
    p.stderr.close()
    out, err = texts.get("out", ""), texts.get("err", "")
    rc = "timeout" if killed.is_set() else p.returncode
    if killed.is_set():
        err = "killed after %ss" % timeout
    return rc, out, err, (ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0)


def run_one(w, variant, k, build_dir, lib, quick, stats_dir, timeout, cpus=None):
    """Runs one workload once; returns the raw run dict (see results.py).
    cpus: run it on these CPUs only (every variant alike)."""
    stats_files_dir = None
    stats_file = None
    if variant == "pinfast":
        stats_files_dir = os.path.join(stats_dir, "%s-run%d" % (w.name, k + 1))
        os.makedirs(stats_files_dir, exist_ok=True)
        stats_file = os.path.join(stats_files_dir, "pf-%p.json")
    env = build_env(os.environ, variant, lib, stats_file)
    cmd = command(w, build_dir, quick, variant == "pinned")
    t0 = time.time()
    rc, out, err, usage = run_measured(cmd, env, timeout,
                                       os.path.join(ROOT, "bench", "py") if w.kind == "py" else None,
                                       (lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    wall = time.time() - t0
    doc = parse_output(out)
    if rc == 0 and doc is None:
        err = (err or "") + "\nno JSON line on stdout"
    files = sorted(os.listdir(stats_files_dir)) if stats_files_dir else []
    return {"workload": w.name, "variant": variant, "run": k, "rc": rc if doc or rc != 0 else "nojson",
            "output": doc, "error": err if rc != 0 or doc is None else "", "stderr_tail": (err or "")[-2000:],
            "wall_s": wall, "cmd": cmd, "cpu_s": usage[0], "maxrss_mb": usage[1],
            "stats_files": [os.path.join(stats_files_dir, f) for f in files]}


def machine_name():
    """A file-name-safe machine label: the GPU model from nvidia-smi, else
    the host name."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        name = p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired, IndexError):
        name = ""
    name = name or socket.gethostname()
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def git_commit(root=ROOT):
    """The checkout's commit, short, with "-dirty" when a tracked file
    differs from it (the code measured is not the commit's); "" outside git."""
    try:
        p = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        if p.returncode != 0:
            return ""
        d = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip() + ("-dirty" if d.returncode == 0 and d.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return ""


def file_digest(path):
    """The first 16 hex digits of the file's SHA-256; "" when unreadable."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return ""


def build(build_dir, workloads, need_lib, log):
    """Configures the build tree if needed and builds the library and the
    selected CUDA workloads (only those targets, so a broken unrelated
    target elsewhere in the tree does not stop a benchmark). Returns True on
    success."""
    if not shutil.which("cmake"):
        log("cmake not found")
        return False
    # configured every time: cheap once done, and a configure that failed
    # earlier leaves a cache without build files
    log("configuring %s" % build_dir)
    if subprocess.run(["cmake", "-S", ROOT, "-B", build_dir], stdout=sys.stderr).returncode != 0:
        return False
    targets = list(dict.fromkeys(w.target or w.name for w in workloads if w.kind == "cuda"))
    if need_lib:
        targets.insert(0, "pinfast")
    if not targets:
        return True
    log("building %s" % " ".join(targets))
    cmd = ["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2), "--target"] + targets
    return subprocess.run(cmd, stdout=sys.stderr).returncode == 0
