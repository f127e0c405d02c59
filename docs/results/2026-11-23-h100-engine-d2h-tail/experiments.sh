#!/usr/bin/env bash
# What each D2H-tail experiment ran on the H100 machine, from the
# repository root with build-gpu (or build-bench and .deps) carried:
# bash experiments.sh N.  "base" is the library under test; the other libraries
# are base rebuilt with one change each (README).
set -u
export B=build-gpu OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u

# engine_check under pinfast with three settings
check() { bash tests/gpu/engine_checks.sh; }

case ${1:?experiment number} in
1) # library 914abca: a D2H's tail chunks halved down to TAIL_SPLIT
   # (t<KiB>), tasks down to MIN_TASK (m<KiB>); 5 rounds
  check
  NAME=tail VARIANTS="base t256 t128 t128m16 m16 pinned" ROUNDS=5 \
    ARGS="--min-size 1M --max-size 64M --budget 256M" bash tests/gpu/variants.sh ;;
2) # library 914abca: the GPU safety suites (docs/safety.md)
  bash tests/gpu/safety.sh 2>&1 | tail -40 ;;
3) # library 914abca: a copy's first chunk 512 KiB (c512), or a D2H's only
   # (d512), against 256 KiB: fewer DMAs for 1 MiB; 5 rounds, then readback
  NAME=first VARIANTS="base d512 c512 pinned" ROUNDS=5 \
    ARGS="--min-size 1M --max-size 64M --budget 256M" bash tests/gpu/variants.sh
  NAME=readback PROG=readback VARIANTS="base d512" ROUNDS=3 ARGS="--reps 3" bash tests/gpu/variants.sh ;;
4) # library 914abca: the harness on the sweep alone, 5 runs
  bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 5 \
    --workloads sweep 2>&1 | grep -v "^\[" | tail -60 ;;
esac
