#!/usr/bin/env bash
# The batch cases (batch_check.c, tests/batch_cases.h) on the GPU: one run
# without pinfast, one under it with 64 KiB slots and every size staged (as
# tests/test_batch.c on the fake), one with PINFAST_MIN_SIZE=128K (small H2D
# bounced), each diffed line by line against the plain run; then pinfast's
# report must show both batch families staged.  Then the cases behind work
# on their stream, the sources of 3D ops read in the call written over as
# it returns (BC_BUSY=1; the cases' host buffer registered first), plain
# and under pinfast from 128 KiB: no difference, and the report must show
# 3D ops bounced.  Then, with
# FAKE=<build>/tests/fake, the same cases on the fake driver against the
# plain GPU run: where they differ, the fake does not answer as the driver
# does (reported, not a failure here).  The probe tests/gpu/probes/batch_errors.c
# prints the driver's answer to each rule the fake models.
# Build here: cmake --build build (build/tests/gpu_batch_check, gpu_batch_errors)
# Usage: LIB=/path/libpinfast.so B=dir [FAKE=dir] tests/gpu/checks/batch.sh [cases] [seed]
set -u
B=${B:-build/tests}
OUT=${OUT:-/tmp/out}
LIB=${LIB:-build/libpinfast.so}
cases=${1:-300} seed=${2:-7}
mkdir -p "$OUT"
timeout 280 "$B/gpu_batch_check" "$cases" "$seed" >"$OUT/batch-plain.log" 2>&1 || echo "plain: exit $?"
fail=0
for min in 0 128K; do
    LD_PRELOAD=$LIB PINFAST_MIN_SIZE=$min PINFAST_CHUNK=64K PINFAST_STAGING=1M PINFAST_STATS=json \
        PINFAST_STATS_FILE="$OUT/batch-report-$min.json" timeout 280 "$B/gpu_batch_check" "$cases" "$seed" \
        >"$OUT/batch-pinfast-$min.log" 2>&1 || echo "pinfast $min: exit $?"
    if diff "$OUT/batch-plain.log" "$OUT/batch-pinfast-$min.log"; then
        echo "batch (PINFAST_MIN_SIZE=$min): $(grep -c . "$OUT/batch-plain.log") lines, no difference"
    else
        echo "batch (PINFAST_MIN_SIZE=$min): DIFFERENCES"; fail=1
    fi
    for api in cuMemcpyBatchAsync cuMemcpy3DBatchAsync; do
        for path in staged bounced; do
            n=$(grep -o "\"api\": *\"$api\"[^}]*\"path\": *\"$path\"[^}]*\"calls\": *[0-9]*" \
                "$OUT/batch-report-$min.json" | sed 's/.*"calls": *//' | awk '{ n += $1 } END { print n + 0 }')
            echo "batch (PINFAST_MIN_SIZE=$min): $api $path ${n:-0}"
            [ "$path" = staged ] && [ "$min" = 0 ] && [ "${n:-0}" -eq 0 ] && fail=1
        done
    done
done
BC_BUSY=1 timeout 280 "$B/gpu_batch_check" "$cases" "$seed" >"$OUT/batch-plain-busy.log" 2>&1 || echo "busy plain: exit $?"
BC_BUSY=1 LD_PRELOAD=$LIB PINFAST_MIN_SIZE=128K PINFAST_CHUNK=64K PINFAST_STAGING=1M \
    PINFAST_STATS=json PINFAST_STATS_FILE="$OUT/batch-report-busy.json" timeout 280 "$B/gpu_batch_check" "$cases" \
    "$seed" >"$OUT/batch-pinfast-busy.log" 2>&1 || echo "busy pinfast: exit $?"
if diff "$OUT/batch-plain-busy.log" "$OUT/batch-pinfast-busy.log"; then
    echo "batch behind busy streams: $(grep -c . "$OUT/batch-plain-busy.log") lines, no difference"
else
    echo "batch behind busy streams: DIFFERENCES"; fail=1
fi
n=$(grep -o '"api": *"cuMemcpy3DBatchAsync"[^}]*"path": *"bounced"[^}]*"calls": *[0-9]*' \
    "$OUT/batch-report-busy.json" | sed 's/.*"calls": *//' | awk '{ n += $1 } END { print n + 0 }')
echo "batch behind busy streams: cuMemcpy3DBatchAsync bounced ${n:-0}"
[ "${n:-0}" -gt 0 ] || fail=1
if [ -n "${FAKE:-}" ]; then
    LD_LIBRARY_PATH=$FAKE timeout 280 "$B/gpu_batch_check" "$cases" "$seed" >"$OUT/batch-fake.log" 2>&1 ||
        echo "fake: exit $?"
    echo "batch: the fake against the driver: $(diff "$OUT/batch-plain.log" "$OUT/batch-fake.log" | grep -c '^<') lines differ"
    diff "$OUT/batch-plain.log" "$OUT/batch-fake.log" | head -40
fi
exit $fail
