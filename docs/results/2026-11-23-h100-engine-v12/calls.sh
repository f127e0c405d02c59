#!/usr/bin/env bash
# What each call of engine v12 (session 7) ran on the H100 machine, from the
# repository root with build-gpu (or build-bench and .deps) carried:
# bash calls.sh N.  "old" is library 560912e (session 6's last), "base" the
# library under test.
set -u
N=${1:?call number}
B=build-gpu
export B OUT
L=$PWD/$B/libpinfast.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u

# name variants rounds args [program]: tests/gpu/variants.sh, logs as name.*
ab() {
  PROG=${5:-sweep} VARIANTS=$2 ROUNDS=$3 ARGS=$4 bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$1.log"
  mv "$OUT/variants.jsonl" "$OUT/$1.jsonl"
}

check() {
  {
    echo "== engine_check"; LD_PRELOAD=$L PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
    echo "== engine_check, PINFAST_MIN_SIZE=0"
    LD_PRELOAD=$L PINFAST_MIN_SIZE=0 PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
    echo "== engine_check, 3 threads, 64K chunks, PINFAST_MIN_SIZE=0"
    LD_PRELOAD=$L PINFAST_THREADS=3 PINFAST_CHUNK=64K PINFAST_MIN_SIZE=0 PINFAST_STATS=off \
      $B/engine_check check 2>&1 | tail -2
  } 2>&1 | tee "$OUT/check.log"
}

case $N in
1) # library 9d97201: no waiting for the sleepers' mutex with a task in hand
   # or at a copy's start; against 560912e; memcpy-mode H2D beside it
  check
  ab sweep "old base base:PINFAST_COPY_H2D=memcpy pinned" 5 "--min-size 1M --max-size 64M --budget 256M"
  ab pipeline "old base" 4 "--reps 3" pipeline ;;
2) # library 9d97201: tests/gpu/probe_h2dload (6 and 12 writers), then the
   # harness on sweep, pipeline and readback, 5 runs
  for k in 6 12; do $B/probe_h2dload $k; done 2>&1 | tee "$OUT/h2dload.log"
  bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 5 \
    --workloads sweep,pipeline,readback 2>&1 | grep -v "^\[" | tail -80 ;;
3) # pacing H2D from 32 MiB: LEAN_CHUNKS x LEAN_TASKS writers, and at most
   # LEAN_AHEAD chunks filling or in DMA (p<writers>a<ahead>; base: 3x2, no
   # limit); libraries from 9d97201 with -D flags, 5 rounds
  ab pace "base p6a4 p8a5 p9a4 p12a5" 5 "--min-size 16M --max-size 256M --budget 512M" ;;
4) # the paced H2D (library 38890d0): engine_check, then the harness on
   # sweep, pipeline and readback, 5 runs
  check
  bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 5 \
    --workloads sweep,pipeline,readback 2>&1 | grep -v "^\[" | tail -80 ;;
esac
