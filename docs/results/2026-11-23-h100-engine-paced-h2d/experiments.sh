#!/usr/bin/env bash
# What each paced-H2D experiment ran on the H100 machine, from the
# repository root with build-gpu (or build-bench and .deps) carried:
# bash experiments.sh N.  "old" is library 560912e (the boxes' last), "base"
# the library under test.
# (Cases 1 and 3 ran an ab() helper, now tests/gpu/variants.sh's NAME.)
set -u
export B=build-gpu OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u

# engine_check under pinfast with three settings (the same commands are
# now tests/gpu/engine_checks.sh)
check() { bash tests/gpu/engine_checks.sh; }

case ${1:?experiment number} in
1) # library 9d97201: no waiting for the sleepers' mutex with a task in hand
   # or at a copy's start; against 560912e; memcpy-mode H2D beside it
  check
  NAME=sweep VARIANTS="old base base:PINFAST_COPY_H2D=memcpy pinned" ROUNDS=5 \
    ARGS="--min-size 1M --max-size 64M --budget 256M" bash tests/gpu/variants.sh
  NAME=pipeline PROG=pipeline VARIANTS="old base" ROUNDS=4 ARGS="--reps 3" bash tests/gpu/variants.sh ;;
2) # library 9d97201: tests/gpu/probe_h2dload (6 and 12 writers), then the
   # harness on sweep, pipeline and readback, 5 runs
  for k in 6 12; do $B/probe_h2dload $k; done 2>&1 | tee "$OUT/h2dload.log"
  bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 5 \
    --workloads sweep,pipeline,readback 2>&1 | grep -v "^\[" | tail -80 ;;
3) # pacing H2D from 32 MiB: LEAN_CHUNKS x LEAN_TASKS writers, and at most
   # LEAN_AHEAD chunks filling or in DMA (p<writers>a<ahead>; base: 3x2, no
   # limit); libraries from 9d97201 with -D flags, 5 rounds
  NAME=pace VARIANTS="base p6a4 p8a5 p9a4 p12a5" ROUNDS=5 \
    ARGS="--min-size 16M --max-size 256M --budget 512M" bash tests/gpu/variants.sh ;;
4) # the paced H2D (library 38890d0): engine_check, then the harness on
   # sweep, pipeline and readback, 5 runs
  check
  bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 5 \
    --workloads sweep,pipeline,readback 2>&1 | grep -v "^\[" | tail -80 ;;
5) # library ae88225 (the paced H2D): the harness on the sweep alone, 5 runs
  bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 5 \
    --workloads sweep 2>&1 | grep -v "^\[" | tail -60 ;;
esac
