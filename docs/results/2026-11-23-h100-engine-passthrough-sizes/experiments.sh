#!/usr/bin/env bash
# What each passed-through-size experiment ran on the H100 machine, from
# the repository root with build-gpu (or build-bench and .deps) carried:
# bash experiments.sh N.  "base" is the library under test; the other libraries
# are base rebuilt with one change each (README).
set -u
export B=build-gpu OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u

case ${1:?experiment number} in
1) # library b1d93f8.  Large H2D: memcpy instead of streaming stores
   # (PINFAST_COPY_H2D=memcpy), and paced too (lm: the pacing for every
   # H2D from 32 MiB, not only streaming ones); 5 rounds.
   # Passed-through sizes: is a process with pinfast preloaded slower when
   # pinfast hands out no wrapper (PINFAST_DISABLE=1), or when the preloaded
   # library is empty (libpinfast-empty.so)?  15 rounds.
  NAME=large VARIANTS="base base:PINFAST_COPY_H2D=memcpy lm:PINFAST_COPY_H2D=memcpy lm pinned" ROUNDS=5 \
    ARGS="--min-size 16M --max-size 256M --budget 512M" bash tests/gpu/variants.sh
  NAME=small VARIANTS="base base:PINFAST_DISABLE=1 empty" ROUNDS=15 \
    ARGS="--min-size 4K --max-size 256K --budget 64M" bash tests/gpu/variants.sh ;;
2) # library b1d93f8.  1-16 MiB: the caller runs no task (h0) or none over
   # 32 KiB (h32) instead of up to 256 KiB, so that it issues each DMA as
   # soon as the chunk is in; or a copy's first chunk 128 KiB (f128);
   # 7 rounds.  Then 1 MiB timelines of base and h0.
  NAME=help VARIANTS="base h0 h32 f128 pinned" ROUNDS=7 \
    ARGS="--min-size 1M --max-size 16M --budget 256M" bash tests/gpu/variants.sh
  for lib in libpinfast.so libpinfast-h0.so; do
    LIB=$B/$lib SIZES=1M EVERY=20 bash tests/gpu/timeline.sh
  done > "$OUT/timeline.log" 2>&1
  grep -c staged "$OUT/timeline.log"; rm -f "$OUT"/timeline-*.txt ;;
3) # library b1d93f8.  H2D: the caller takes one chunk a pass (one), so that
   # a chunk copied in waits for one submit at most before its DMA; pauses 4
   # instead of 32 between passes that moved nothing (p4); both (onep4);
   # h32 again; 9 rounds, 1-64 MiB.  Then 1 MiB timelines of onep4.
  NAME=poll VARIANTS="base one p4 onep4 h32 pinned" ROUNDS=9 \
    ARGS="--min-size 1M --max-size 64M --budget 256M" bash tests/gpu/variants.sh
  LIB=$B/libpinfast-onep4.so SIZES=1M EVERY=20 bash tests/gpu/timeline.sh > "$OUT/timeline.log" 2>&1
  grep -c staged "$OUT/timeline.log"; rm -f "$OUT"/timeline-*.txt ;;
4) # library b1d93f8 against hh: h32 for H2D only (HELP_MAX_H2D); 9 rounds
  NAME=hh VARIANTS="base hh pinned" ROUNDS=9 \
    ARGS="--min-size 1M --max-size 64M --budget 256M" bash tests/gpu/variants.sh ;;
5) # library b1d93f8 + HELP_MAX_H2D (hh): the harness on the sweep alone,
   # one warm-up round, 15 runs
  bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 15 --warmup 1 \
    --workloads sweep 2>&1 | grep -v "^\[" | tail -60 ;;
6) # library hh.  Is a synchronous H2D's 64 MiB slower than an asynchronous
   # one (harness 151958: 41.5 against 44.5 GB/s) because its DMAs go to the
   # legacy default stream?  The sweep against sweep_ptds (cudaMemcpy on the
   # per-thread default stream); 7 rounds each
  for prog in sweep sweep_ptds; do
    NAME=$prog PROG=$prog VARIANTS="hh pinned" ROUNDS=7 \
      ARGS="--min-size 16M --max-size 64M --budget 512M" bash tests/gpu/variants.sh
  done ;;
7) # library hh (base here; b1 is b1d93f8): engine_check, 1 MiB timelines
   # of both, and a last A/B, 9 rounds
  bash tests/gpu/engine_checks.sh
  for lib in libpinfast-b1.so libpinfast.so; do
    LIB=$B/$lib SIZES=1M EVERY=20 bash tests/gpu/timeline.sh
  done > "$OUT/timeline.log" 2>&1
  grep -c staged "$OUT/timeline.log"; rm -f "$OUT"/timeline-*.txt
  NAME=last VARIANTS="b1 base pinned" ROUNDS=9 \
    ARGS="--min-size 1M --max-size 64M --budget 256M" bash tests/gpu/variants.sh ;;
8) # library 2f2a226 (hh kept): the GPU safety suites (docs/safety.md)
  bash tests/gpu/safety.sh 2>&1 | tail -40 ;;
esac
