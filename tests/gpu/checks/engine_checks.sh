#!/usr/bin/env bash
# On the GPU machine: engine_check under pinfast ($B/libpinfast.so) with
# three settings, the last lines of each to stdout and $OUT/check.log.
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
for s in "" PINFAST_MIN_SIZE=0 "PINFAST_THREADS=3 PINFAST_CHUNK=64K PINFAST_MIN_SIZE=0"; do
  echo "== engine_check ${s:-default}"
  env $s LD_PRELOAD="$PWD/$B/libpinfast.so" PINFAST_STATS=off "$B/engine_check" check 2>&1 | tail -2
done | tee "$OUT/check.log"
