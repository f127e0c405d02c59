#!/usr/bin/env bash
# On the GPU machine: correctness of the engine (plain and under pinfast,
# then under compute-sanitizer), bandwidth interleaved, and a settings sweep.
# Expects $B (carried) with libpinfast.so and engine_check.
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
LIB=$PWD/$B/libpinfast.so
exec > >(tee "$OUT/engine.log") 2>&1
echo "# $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(nproc) CPUs"
if [ "${CHECK:-1}" = 1 ]; then
  echo "== check plain"; $B/engine_check check
  echo "== check pinfast"; LD_PRELOAD=$LIB PINFAST_STATS=text $B/engine_check check
  echo "== check pinfast, 1 thread, 64K chunks"
  LD_PRELOAD=$LIB PINFAST_THREADS=1 PINFAST_CHUNK=64K PINFAST_MIN_SIZE=0 PINFAST_STATS=off $B/engine_check check
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  echo "== compute-sanitizer memcheck under pinfast"
  compute-sanitizer --tool memcheck --target-processes all env LD_PRELOAD=$LIB PINFAST_STATS=off $B/engine_check check 2>&1 | tail -3
fi
for round in $(seq 1 ${ROUNDS:-2}); do
  echo "== bench plain round $round"; $B/engine_check bench 4096 $((1<<30)) ${REPS:-7}
  echo "== bench pinfast round $round"; LD_PRELOAD=$LIB PINFAST_STATS=off $B/engine_check bench 4096 $((1<<30)) ${REPS:-7}
done
if [ "${DMA:-0}" = 1 ]; then
  echo "== copy engine on chunks"; $B/engine_check dma
fi
if [ "${TRACE:-0}" = 1 ]; then
  echo "== debug trace of 512K, 1M and 64M copies"
  LD_PRELOAD=$LIB PINFAST_LOG=debug PINFAST_STATS=off $B/engine_check bench $((512<<10)) $((1<<20)) 5 2>&1 | grep -E "staged|GB/s" | tail -24
  LD_PRELOAD=$LIB PINFAST_LOG=debug PINFAST_STATS=off $B/engine_check bench $((64<<20)) $((64<<20)) 3 2>&1 | grep -E "staged|GB/s" | tail -12
fi
# SWEEP="threads:chunk:staging ..." runs the large sizes under each setting
for cfg in ${SWEEP:-}; do
  IFS=: read -r t c s ch cd <<<"$cfg"
  echo "== sweep threads=$t chunk=$c staging=$s copy_h2d=${ch:-default} copy_d2h=${cd:-default}"
  LD_PRELOAD=$LIB PINFAST_THREADS=$t PINFAST_CHUNK=$c PINFAST_STAGING=$s PINFAST_STATS=off \
    PINFAST_COPY_H2D=${ch:-stream} PINFAST_COPY_D2H=${cd:-memcpy} \
    $B/engine_check bench $((1<<20)) $((1<<30)) 5 | grep -E "^(H2D|D2H) +(1048576|67108864|1073741824) "
done
