#!/usr/bin/env bash
# What each worker-box experiment ran on the GPU machine, from the
# repository root with build-gpu (or build-bench and .deps) carried:
# bash experiments.sh N.  Case 3 ran the boxes without taking back; cases 3
# and 4 differ only in the sweep's sizes.  Cases 6-8 ran library e8d129f;
# case 10 library 5139019 ("base", chunks in hand on the heap) against
# e8d129f ("old"); case 11 the inference workload that times its CPU
# preparation apart.
set -u
N=${1:?experiment number}
B=build-gpu
export B OUT
L=$PWD/$B/libpinfast.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u

# name variants rounds args [program]: tests/gpu/variants.sh, logs as name.*
ab() {
  PROG=${5:-sweep} VARIANTS=$2 ROUNDS=$3 ARGS=$4 bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$1.log"
  mv "$OUT/variants.jsonl" "$OUT/$1.jsonl"
}

boxes() { # $1: the sweep's sizes and budget
  {
    echo "== engine_check, boxes"; LD_PRELOAD=$L PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
    echo "== engine_check, boxes, PINFAST_MIN_SIZE=0"
    LD_PRELOAD=$L PINFAST_MIN_SIZE=0 PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
    echo "== engine_check, boxes, 3 threads, 64K chunks, PINFAST_MIN_SIZE=0"
    LD_PRELOAD=$L PINFAST_THREADS=3 PINFAST_CHUNK=64K PINFAST_MIN_SIZE=0 PINFAST_STATS=off \
      $B/engine_check check 2>&1 | tail -2
  } 2>&1 | tee "$OUT/check.log"
  SIZES="1M 4M" EVERY=25 bash tests/gpu/timeline.sh >"$OUT/timeline.log" 2>&1
  rm -f "$OUT"/timeline-*.txt
  ab sweep "old base pinned" 5 "$1"
  ab pipeline "old base" 4 "--reps 3" pipeline
  ab readback "old base" 3 "--reps 3" readback
  rm -f "$OUT/readback.jsonl"
}

harness() { bash tests/gpu/bench.sh --build build-bench --no-build --no-fail "$@" 2>&1 | grep -v "^\[" | tail -80; }

case $N in
1) ab pass "base base:PINFAST_DISABLE=1" 12 "--min-size 4K --max-size 256K --budget 64M"
   ab big "base pinned" 6 "--min-size 16M --max-size 256M --budget 1G" ;;
2) ab pass "base base:PINFAST_CALLSITES=0 base:PINFAST_DISABLE=1" 12 "--min-size 16K --max-size 256K --budget 64M"
   ab staged "base base:PINFAST_CALLSITES=0" 6 "--min-size 1M --max-size 16M --budget 256M" ;;
3) boxes "--min-size 1M --max-size 64M --budget 256M" ;;
4) boxes "--min-size 1M --max-size 256M --budget 512M" ;;
5) for r in 1 2 3; do
     echo "== round $r plain"; $B/probe_prepare
     echo "== round $r pinfast"; LD_PRELOAD=$L PINFAST_STATS=off $B/probe_prepare
     echo "== round $r pinfast, 4 threads"; LD_PRELOAD=$L PINFAST_THREADS=4 PINFAST_STATS=off $B/probe_prepare
   done 2>&1 | tee "$OUT/prepare.log"
   ab inference "base base:PINFAST_MIN_SIZE=1G base:PINFAST_THREADS=4 pinned" 5 "--batches 6 --reps 2" inference ;;
6) harness --runs 5 --workloads sweep,pipeline,readback ;;
7) harness --workloads inference,compute,small,churn,bidir,torch_copy,torch_train ;;
8) B=build-gpu OUT=$OUT bash tests/gpu/safety.sh >/dev/null 2>&1; echo "safety rc=$?"
   tail -40 "$OUT/safety.log"; tar czf "$OUT/safety.tgz" -C "$OUT" safety; rm -rf "$OUT/safety"
   harness --runs 7 --cpus 2-5 --workloads small,small_shared ;;
9) ab sweep "base base:PINFAST_STAGING=512M base:PINFAST_CHUNK=1M base:PINFAST_COPY_D2H=stream pinned" 5 "--min-size 1M --max-size 16M --budget 256M"
   ab pipeline "base base:PINFAST_STAGING=512M base:PINFAST_CHUNK=1M" 3 "--reps 3" pipeline ;;
10) { echo "== engine_check"; LD_PRELOAD=$L PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
      echo "== engine_check, PINFAST_MIN_SIZE=0"; LD_PRELOAD=$L PINFAST_MIN_SIZE=0 PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
    } 2>&1 | tee "$OUT/check.log"
    ab sweep "old base" 3 "--min-size 1M --max-size 64M --budget 256M"
    harness --runs 5 --workloads sweep,pipeline ;;
11) harness --workloads inference ;;
*) echo "experiments.sh: no experiment $N (1-11)" >&2; exit 2 ;;
esac
