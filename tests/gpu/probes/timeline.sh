#!/usr/bin/env bash
# On the GPU machine: per-chunk timelines of staged copies (PINFAST_LOG=debug)
# for each size in $SIZES, both directions, from the sweep workload in $B.
# Every $EVERY-th copy's lines are kept, the rest only counted.  $LIB is
# the library (default $B/libpinfast.so).
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
SIZES=${SIZES:-1M 4M 16M}
EVERY=${EVERY:-10}
LIB=${LIB:-$B/libpinfast.so}
for n in $SIZES; do
  echo "## $n: sweep --min-size $n --max-size $n"
  PINFAST_LOG=debug PINFAST_STATS=off LD_PRELOAD="$LIB" \
    "$B/sweep" --min-size "$n" --max-size "$n" --budget 256M --min-reps 20 ${ENVARGS:-} \
    2>"$OUT/timeline-${LIB##*/}-$n.txt" >/dev/null || echo "FAIL $n"
  awk -v every="$EVERY" '/staged (H2D|D2H)/ { keep = (++k % every == 0) } keep' "$OUT/timeline-${LIB##*/}-$n.txt"
done
