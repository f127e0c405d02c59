#!/usr/bin/env bash
# pinfast's heap beside the program's allocators: what malloc and free cost
# (bench/alloc_bench) and what Python object churn costs
# (tests/gpu/probes/py_churn.py), plain and under pinfast, interleaved
# rounds; then jemalloc and tcmalloc preloaded before pinfast (its heap
# steps aside: nothing registered, copies staged) running `repeat`, whose
# every copy is checked.  JSON lines, one per case and round, to stdout.
# Usage: B=build LIB=$B/libpinfast.so [ALLOCS=dir of libjemalloc.so.2 and
#        libtcmalloc_minimal.so.4] [ROUNDS=3] OUT=dir tests/gpu/checks/heap.sh
set -u
B=${B:-build}
LIB=${LIB:-$B/libpinfast.so}
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
rc=0
tag() { sed "s/^{/{\"variant\":\"$1\",\"round\":$2,\"probe\":\"$3\",/"; }
for r in $(seq 1 "$ROUNDS"); do
    "$B/bench/alloc_bench" | tag plain "$r" alloc_bench
    LD_PRELOAD=$LIB PINFAST_STATS=off "$B/bench/alloc_bench" | tag pinfast "$r" alloc_bench
    python3 "$here/../probes/py_churn.py" | tag plain "$r" py_churn
    LD_PRELOAD=$LIB PINFAST_STATS=off python3 "$here/../probes/py_churn.py" | tag pinfast "$r" py_churn
done
for a in ${ALLOCS:+$ALLOCS/libjemalloc.so.2 $ALLOCS/libtcmalloc_minimal.so.4}; do
    name=$(basename "$a" | sed 's/\.so.*//')
    LD_PRELOAD="$a $LIB" PINFAST_STATS=json PINFAST_STATS_FILE="$OUT/$name-repeat.json" \
        timeout 120 "$B/cuda/repeat" --bytes 256M --copies 6 >"$OUT/$name-repeat.log" 2>&1
    e=$?
    LD_PRELOAD="$a $LIB" PINFAST_STATS=off timeout 120 "$B/bench/alloc_bench" | tag "$name+pinfast" 1 alloc_bench
    echo "{\"probe\":\"preloaded_first\",\"allocator\":\"$name\",\"repeat_exit\":$e,\"registrations\":$(grep -o '"registrations":{[^}]*}' "$OUT/$name-repeat.json" | sed 's/^"registrations"://' || echo null)}"
    [ $e = 0 ] || rc=1
done
exit $rc
