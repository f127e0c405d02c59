#!/usr/bin/env bash
# A node of GPUs: every GPU copying at once, a process per GPU
# and a thread per GPU, from new buffers and from the same buffer each copy,
# 1 MiB, 256 MiB and 1 GiB each way (the bench's node and node_procs
# workloads), then DDP training on every GPU with torchrun (ddp_train);
# plain, pinfast and pinned (pin_memory=True for DDP) interleaved, RUNS
# rounds (3) of each, through the bench harness. Prints a summary against
# the issue's floors:
#   copies, 256 MiB and 1 GiB: pinfast's summed GB/s >= 0.90 x pinned's
#     (new buffers), >= 0.95 x (repeated); 1 MiB: >= 0.80 x;
#   DDP: pinfast's median samples/s >= pin_memory=True's; every run ends;
#     the losses of every pinfast run bitwise plain's (a hash of all ranks'
#     per-step losses over the 50 steps).
# It builds nothing: it is given a build folder holding libpinfast.so and
# cuda/node, made beforehand on any machine with nvcc:
#   cmake -S . -B build-node -DPINFAST_TESTS=OFF && cmake --build build-node -j --target pinfast node
# and run from the checkout's root on the GPU machine, build-node carried:
#   B=build-node tests/gpu/checks/node.sh
# Settings (environment): B (build-node); OUT (/tmp/out): results under
# $OUT/node/ (harness output per GPU count, the DDP runs, pinfast's reports,
# node-summary.txt and .jsonl); GPUS: the GPU counts to run the copy matrix
# on (default: every GPU of nvidia-smi -L; "4 2" for both of the issue's);
# RUNS (3); NODE=0 or DDP=0 leaves that part out; LIMIT_NODE (250) and
# LIMIT_DDP (200): seconds each harness run of a part may take, then it is
# stopped by SIGTERM and writes what it did. Sized for 8 minutes on 4 H100s
# at most (not yet timed there: a copy run was guessed at 6-12 s, a DDP run
# at 12-20 s; the limits bound it whatever they take, and the harness's
# progress lines in $OUT/node/*.harness.log say what they took).
# Exit status: 0 every floor met; 1 a run failed, or pinfast's losses are
# not plain's; 3 a floor missed (and nothing failed).
set -u
B=${B:-build-node}
OUT=${OUT:-/tmp/out}
RUNS=${RUNS:-3}
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
B=$(readlink -m "$B")
LIB=$B/libpinfast.so
R=$OUT/node
mkdir -p "$R"
exec > >(tee "$R/node.log") 2>&1
for f in "$LIB" "$B/cuda/node"; do
  [ -e "$f" ] || { echo "node.sh: no $f: build it first (see the top of $0)"; exit 2; }
done
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$ngpus" -ge 1 ] || { echo "node.sh: no GPU (nvidia-smi -L)"; exit 2; }
GPUS=${GPUS:-$ngpus}
export PYTHONUNBUFFERED=1

echo "# $(date -u '+%F %T') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr -s ' ')," \
  "$(nproc) CPUs, $(lscpu | awk -F: '/^NUMA node\(s\)/{gsub(/ /,"",$2); print $2}') NUMA node(s);" \
  "library $(sha256sum "$LIB" | cut -c1-16), checkout $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi topo -m 2>/dev/null | head -n $((ngpus + 2))
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null ||
  echo "(no torch for $(command -v python3): the DDP part will be skipped)"

harness() {  # limit, out folder, then the harness's arguments
  local limit=$1 out=$2; shift 2
  echo "== bench/run $* (at ${SECONDS}s, at most ${limit}s)"
  timeout -s TERM "$limit" bench/run --no-build --build "$B" --lib "$LIB" --out "$out" --runs "$RUNS" \
    --warmup "${WARMUP:-0}" --no-fail "$@" > "$out.harness.log" 2>&1
  local rc=$?
  grep -E "^bench: |^\[ *[0-9]+/" "$out.harness.log" | tail -n 4
  grep -E "^bench: stopped by" "$out.harness.log"
  echo "-- rc=$rc (at ${SECONDS}s)$([ $rc = 124 ] && echo ": stopped at the limit, the later runs are missing")"
}

if [ "${NODE:-1}" = 1 ]; then
  for g in $GPUS; do
    [ "$g" -le "$ngpus" ] || { echo "== $g GPUs: only $ngpus here, skipped"; continue; }
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((g - 1))) harness "${LIMIT_NODE:-250}" "$R/copies-${g}gpu" \
      --workloads node,node_procs --timeout 150
  done
fi
if [ "${DDP:-1}" = 1 ]; then
  harness "${LIMIT_DDP:-200}" "$R/ddp" --workloads ddp_train --timeout 200
  # the last pinfast round's per-rank reports, merged: each rank's staging threads
  last=$(ls -d "$R"/ddp/*-pinfast-stats/ddp_train-run* 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$last" ]; then
    echo "== pinfast report of $last"
    tools/pinfast report "$last"/pf-*.json 2>&1 | sed -n '/^Per rank/,/^Transfers/p'
  fi
fi

echo "== summary (at ${SECONDS}s)"
python3 - "$R" <<'PY'
import glob, json, os, statistics, sys
R = sys.argv[1]
lines, rows, bad_runs, below, mismatch = [], [], 0, 0, 0


def size(n):
    return "%d GiB" % (n >> 30) if n >= 1 << 30 else "%d MiB" % (n >> 20)


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def say(text=""):
    lines.append(text)
    print(text)


# copies: <kind>_sum (the GPUs' rates added up) and <kind>_all (all bytes over
# the first start to the last end), medians over the runs
for folder in sorted(glob.glob(os.path.join(R, "copies-*gpu"))):
    for raw in sorted(glob.glob(os.path.join(folder, "*-raw.jsonl"))):
        bad_runs += sum(1 for r in load(raw) if r.get("rc") != 0)
    recs = [r for p in sorted(glob.glob(os.path.join(folder, "*-bench.jsonl"))) for r in load(p)]
    cell = {(r["workload"], r["name"], r["direction"], r["bytes"], r["variant"]): r for r in recs}
    gpus = {r["params"].get("gpus") for r in recs if r.get("params")}
    say("## %s: %s GPU(s) (summed GB/s, medians of %s runs)" % (os.path.basename(folder),
        ",".join(map(str, sorted(g for g in gpus if g))), ",".join(sorted({str(r["runs"]) for r in recs})) or "0"))
    say("| workers | buffers | dir | size/GPU | plain | pinfast | pinned | pinfast/pinned | floor | all: pinfast/pinned | mark |")
    say("|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({k[:4] for k in cell if k[1].endswith("_sum")},
                  key=lambda k: (k[0], k[1], k[2] != "H2D", k[3]))
    for wl, name, d, nbytes in keys:
        g = {v: cell.get((wl, name, d, nbytes, v)) for v in ("plain", "pinfast", "pinned")}
        a = {v: cell.get((wl, name.replace("_sum", "_all"), d, nbytes, v)) for v in ("pinfast", "pinned")}
        n = g["pinfast"]["params"].get("gpus", 1) if g["pinfast"] else 1
        per = nbytes // max(n, 1)
        kind = name[:-4]
        floor = 0.80 if per < (256 << 20) else 0.90 if kind == "new" else 0.95
        ratio = g["pinfast"]["gbps"] / g["pinned"]["gbps"] if g["pinfast"] and g["pinned"] else None
        aratio = a["pinfast"]["gbps"] / a["pinned"]["gbps"] if a["pinfast"] and a["pinned"] else None
        mark = "" if ratio is None else "ok" if ratio >= floor else "**BELOW**"
        below += mark == "**BELOW**"
        fmt = lambda r: "%.1f" % r["gbps"] if r else "-"
        say("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %s |" % (
            "procs" if wl.endswith("procs") else "threads", kind, d, size(per), fmt(g["plain"]),
            fmt(g["pinfast"]), fmt(g["pinned"]), "%.2f" % ratio if ratio else "-", floor,
            "%.2f" % aratio if aratio else "-", mark))
        rows.append({"part": "copies", "folder": os.path.basename(folder), "workload": wl, "kind": kind,
                     "direction": d, "bytes_per_gpu": per, "gpus": n,
                     **{v + "_gbps": g[v] and g[v]["gbps"] for v in g},
                     "ratio": ratio, "all_ratio": aratio, "floor": floor, "below": mark == "**BELOW**"})
    say()

# DDP: samples/s of every run, losses' hashes
raw = sorted(glob.glob(os.path.join(R, "ddp", "*-raw.jsonl")))
if raw:
    runs = [r for p in raw for r in load(p)]
    per = {}
    for r in runs:
        out = r.get("output") or {}
        if out.get("skipped"):
            say("## DDP: skipped: %s" % out["skipped"])
            break
        if r.get("rc") != 0:
            bad_runs += 1
            say("DDP %s run %s FAILED: rc=%s %s" % (r["variant"], r["run"], r["rc"], (r.get("error") or "")[-300:]))
            continue
        m = out["measurements"][0]
        per.setdefault(r["variant"], []).append((m["rate"], m["loss_hash"], out["params"]))
    if per:
        p0 = next(iter(per.values()))[0][2]
        say("## DDP: %d ranks, %s, batch %d per rank, %d steps (%d timed), %d loader workers per rank"
            % (p0["ranks"], p0["model"], p0["batch"], p0["steps"], p0["timed_steps"], p0["workers"]))
        say("| variant | runs | samples/s, each run | median | vs pinned | loss hashes |")
        say("|---|---|---|---|---|---|")
        med = {v: statistics.median(x[0] for x in xs) for v, xs in per.items()}
        for v in ("plain", "pinfast", "pinned"):
            if v in per:
                say("| %s | %d | %s | %.0f | %s | %s |" % (
                    v, len(per[v]), ", ".join("%.0f" % x[0] for x in per[v]), med[v],
                    "%.3f" % (med[v] / med["pinned"]) if "pinned" in med else "-",
                    ", ".join(sorted({x[1] for x in per[v]}))))
        plain = {x[1] for x in per.get("plain", [])}
        pf = {x[1] for x in per.get("pinfast", [])}
        same = len(plain) == 1 and pf == plain
        mismatch += not same
        ratio = med["pinfast"] / med["pinned"] if "pinfast" in med and "pinned" in med else None
        below += ratio is not None and ratio < 1.0
        say()
        say("DDP losses: plain %s, pinfast %s: %s" % (",".join(sorted(plain)), ",".join(sorted(pf)),
            "bitwise the same" if same else "**NOT the same**" if len(plain) == 1 else
            "**plain's own runs differ**: not deterministic"))
        say("DDP floor: pinfast median / pin_memory=True median = %s (>= 1.00): %s"
            % ("%.3f" % ratio if ratio else "-", "ok" if ratio and ratio >= 1.0 else "**BELOW**"))
        rows.append({"part": "ddp", "median_samples_per_s": med, "ratio": ratio, "losses_bitwise": same,
                     "hashes": {v: sorted({x[1] for x in xs}) for v, xs in per.items()},
                     "runs": {v: [x[0] for x in xs] for v, xs in per.items()}})
say()
say("failed runs: %d, floors missed: %d, loss mismatches: %d" % (bad_runs, below, mismatch))
with open(os.path.join(R, "node-summary.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
with open(os.path.join(R, "node-summary.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r, sort_keys=True) + "\n")
sys.exit(1 if bad_runs or mismatch else 3 if below else 0)
PY
rc=$?
echo "== done in ${SECONDS}s, rc=$rc; results in $R"
exit $rc
