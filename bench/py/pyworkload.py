"""Shared bits of the Python workloads: the same one-line JSON report as the
CUDA workloads (cuda/common.cuh), timing, and a clean skip when a module is
missing (the harness records the skip instead of a failure)."""
import argparse
import json
import statistics
import sys
import time


def skip(workload, reason):
    """Prints a skip record and exits 0: a missing torch/cupy is not a failure."""
    print(json.dumps({"workload": workload, "skipped": reason}))
    sys.exit(0)


def mismatch(msg):
    print("MISMATCH: " + msg, file=sys.stderr)
    sys.exit(2)


def parse_size(text):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if mul > 1 else text) * mul)


def time_reps(warmup, reps, op, sync):
    """Runs op() warmup times, then reps times under the host clock, each
    followed by sync() inside the clock. Returns the list of seconds."""
    for _ in range(warmup):
        op()
        sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        op()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def copy_args():
    """The command line of the copy workloads: --bytes (1G), --reps (3), --pinned."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", default="1G", type=parse_size)
    ap.add_argument("--reps", default=3, type=int)
    ap.add_argument("--pinned", action="store_true")
    return ap.parse_args()


class Report:
    def __init__(self, workload, pinned, params):
        self.doc = {"workload": workload, "mode": "pinned" if pinned else "pageable",
                    "params": params, "measurements": [], "verified": True}

    def add(self, name, direction, nbytes, seconds, items=None, unit=None, **extra):
        s = sorted(seconds)
        med = statistics.median(s)
        m = {"name": name, "direction": direction, "bytes": nbytes, "seconds": med,
             "min_s": s[0], "max_s": s[-1], "reps": len(s),
             "samples_s": [round(x, 6) for x in seconds]}
        if nbytes and med > 0:
            m["gbps"] = nbytes / med / 1e9
        if unit and med > 0:
            m.update(unit=unit, items=items, rate=items / med)
        m.update(extra)
        self.doc["measurements"].append(m)

    def time_copy(self, name, direction, nbytes, reps, op, sync):
        """Times op() with time_reps (one warm-up), adds the measurement and
        returns what the last op() returned, for the caller to check. Only
        that one result is kept alive, not one per rep, and it is dropped
        before the next op() runs, as a loop's step drops the last one."""
        last = {}

        def run():
            last.pop("result", None)
            last["result"] = op()
        self.add(name, direction, nbytes, time_reps(1, reps, run, sync))
        return last["result"]

    def print(self):
        print(json.dumps(self.doc), flush=True)
