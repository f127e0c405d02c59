#!/usr/bin/env bash
# The shape cases (shapes.cu) on the GPU: one run without pinfast, one under
# it with 64 KiB slots and every size staged (as tests/test_shapes.c on the
# fake), diffed line by line; then pinfast's report must show each shape
# staged (a linear copy: staged or through a registration of pinfast's).
# The same for the runtime's array copies (array_runtime.cu), when built.
# Then the cases with every asynchronous one behind work on its stream and
# an H2D's source written over as the call returns (SC_BUSY=1), plain and
# under pinfast at its defaults but for small slots: no difference, and the
# report must show 2D or 3D copies bounced.
# Then, with FAKE=<build>/tests/fake, the same cases on the fake driver
# against the plain GPU run: where they differ, the fake does not answer as
# the driver does (reported, not a failure here).
# Build here: nvcc -O2 -arch=sm_90 -o $B/shapes tests/gpu/checks/shapes.cu -lcuda
#             nvcc -O2 -arch=sm_90 -o $B/array_runtime tests/gpu/checks/array_runtime.cu
# Usage: LIB=/path/libpinfast.so B=dir [FAKE=dir] tests/gpu/checks/shapes.sh [cases] [seed]
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
LIB=${LIB:-$B/libpinfast.so}
cases=${1:-360} seed=${2:-7}
mkdir -p "$OUT"
fail=0
# pair <program> <api>...: the program plain and under pinfast, diffed line
# by line; pinfast's report must show each api staged (or registered)
pair() {
    local p=$1 api n
    shift
    timeout 280 "$B/$p" "$cases" "$seed" >"$OUT/$p-plain.log" 2>&1 || echo "$p plain: exit $?"
    LD_PRELOAD=$LIB PINFAST_MIN_SIZE=0 PINFAST_CHUNK=64K PINFAST_STAGING=1M PINFAST_STATS=json \
        PINFAST_STATS_FILE="$OUT/$p-report.json" timeout 280 "$B/$p" "$cases" "$seed" \
        >"$OUT/$p-pinfast.log" 2>&1 || echo "$p pinfast: exit $?"
    if diff "$OUT/$p-plain.log" "$OUT/$p-pinfast.log"; then
        echo "$p: $(grep -c . "$OUT/$p-plain.log") lines, no difference"
    else
        echo "$p: DIFFERENCES"
        fail=1
        return
    fi
    for api; do
        n=$(grep -oE "\"api\": *\"$api\"[^}]*\"path\": *\"(staged|registered)\"[^}]*\"calls\": *[0-9]*" \
            "$OUT/$p-report.json" | sed 's/.*"calls": *//' | awk '{ n += $1 } END { print n + 0 }')
        echo "$p: $api staged or through a registration ${n:-0}"
        [ "${n:-0}" -gt 0 ] || fail=1
    done
}
pair shapes cuMemcpy2D cuMemcpy2DUnaligned cuMemcpy2DAsync cuMemcpy3D cuMemcpy3DAsync cuMemcpyHtoA cuMemcpyAtoH \
    cuMemcpyHtoAAsync cuMemcpyAtoHAsync cuMemcpyHtoD cuMemcpyDtoH
[ -x "$B/array_runtime" ] && pair array_runtime cuMemcpy3D cuMemcpy3DAsync
SC_BUSY=1 timeout 280 "$B/shapes" "$cases" "$seed" >"$OUT/shapes-plain-busy.log" 2>&1 || echo "busy plain: exit $?"
SC_BUSY=1 LD_PRELOAD=$LIB PINFAST_CHUNK=64K PINFAST_STAGING=1M PINFAST_STATS=json \
    PINFAST_STATS_FILE="$OUT/shapes-busy-report.json" timeout 280 "$B/shapes" "$cases" "$seed" \
    >"$OUT/shapes-busy.log" 2>&1 || echo "busy pinfast: exit $?"
if diff "$OUT/shapes-plain-busy.log" "$OUT/shapes-busy.log"; then
    echo "shapes behind busy streams: $(grep -c . "$OUT/shapes-plain-busy.log") lines, no difference"
else
    echo "shapes behind busy streams: DIFFERENCES"
    fail=1
fi
n=$(grep -oE '"api": *"cuMemcpy(2|3)DAsync"[^}]*"path": *"bounced"[^}]*"calls": *[0-9]*' \
    "$OUT/shapes-busy-report.json" | sed 's/.*"calls": *//' | awk '{ n += $1 } END { print n + 0 }')
echo "shapes behind busy streams: 2D and 3D copies bounced ${n:-0}"
[ "${n:-0}" -gt 0 ] || fail=1
if [ -n "${FAKE:-}" ]; then
    LD_LIBRARY_PATH=$FAKE timeout 280 "$B/shapes" "$cases" "$seed" >"$OUT/shapes-fake.log" 2>&1 || echo "fake: exit $?"
    echo "shapes: the fake against the driver: $(diff "$OUT/shapes-plain.log" "$OUT/shapes-fake.log" | grep -c '^<') lines differ"
    diff "$OUT/shapes-plain.log" "$OUT/shapes-fake.log" | head -40
fi
exit $fail
