#!/usr/bin/env bash
# The shape cases (shapes.cu) on the GPU: one run without pinfast, one under
# it with 64 KiB slots and every size staged (as tests/test_shapes.c on the
# fake), diffed line by line; then pinfast's report must show each shape
# staged.  Then, with FAKE=<build>/tests/fake, the same cases on the fake
# driver against the plain GPU run: where they differ, the fake does not
# answer as the driver does (reported, not a failure here).
# Build here: nvcc -O2 -arch=sm_90 -o $B/shapes tests/gpu/checks/shapes.cu -lcuda
# Usage: LIB=/path/libpinfast.so B=dir [FAKE=dir] tests/gpu/checks/shapes.sh [cases] [seed]
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
LIB=${LIB:-$B/libpinfast.so}
cases=${1:-360} seed=${2:-7}
mkdir -p "$OUT"
timeout 280 "$B/shapes" "$cases" "$seed" >"$OUT/shapes-plain.log" 2>&1 || echo "plain: exit $?"
LD_PRELOAD=$LIB PINFAST_MIN_SIZE=0 PINFAST_CHUNK=64K PINFAST_STAGING=1M PINFAST_STATS=json \
    PINFAST_STATS_FILE="$OUT/shapes-report.json" timeout 280 "$B/shapes" "$cases" "$seed" \
    >"$OUT/shapes-pinfast.log" 2>&1 || echo "pinfast: exit $?"
if diff "$OUT/shapes-plain.log" "$OUT/shapes-pinfast.log"; then
    echo "shapes: $(grep -c . "$OUT/shapes-plain.log") lines, no difference"
else
    echo "shapes: DIFFERENCES"; exit 1
fi
fail=0
for api in cuMemcpy2D cuMemcpy2DUnaligned cuMemcpy2DAsync cuMemcpy3D cuMemcpy3DAsync cuMemcpyHtoA cuMemcpyAtoH cuMemcpyHtoAAsync \
    cuMemcpyAtoHAsync cuMemcpyHtoD cuMemcpyDtoH; do
    n=$(grep -o "\"api\": *\"$api\"[^}]*\"path\": *\"staged\"[^}]*\"calls\": *[0-9]*" "$OUT/shapes-report.json" |
        sed 's/.*"calls": *//' | awk '{ n += $1 } END { print n + 0 }')
    echo "shapes: $api staged ${n:-0}"
    [ "${n:-0}" -gt 0 ] || fail=1
done
if [ -n "${FAKE:-}" ]; then
    LD_LIBRARY_PATH=$FAKE timeout 280 "$B/shapes" "$cases" "$seed" >"$OUT/shapes-fake.log" 2>&1 || echo "fake: exit $?"
    echo "shapes: the fake against the driver: $(diff "$OUT/shapes-plain.log" "$OUT/shapes-fake.log" | grep -c '^<') lines differ"
    diff "$OUT/shapes-plain.log" "$OUT/shapes-fake.log" | head -40
fi
exit $fail
