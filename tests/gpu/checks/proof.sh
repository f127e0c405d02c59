#!/usr/bin/env bash
# On the GPU machine: pinfast under every way a program reaches the driver
# (static and shared cudart, per-thread default streams, PyTorch, CuPy), each
# with its exit report; the engine check; the pinned-pool check.
set -u
B=${B:-build-gpu}
LIB=$PWD/$B/libpinfast.so
exec > >(tee "$OUT/proof.log") 2>&1
echo "# $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
run() { # name command...: plain, then pinfast with a JSON report kept
  local name=$1; shift
  echo "== $name plain"; "$@" | tail -c 300; echo " rc=${PIPESTATUS[0]}"
  echo "== $name pinfast"
  LD_PRELOAD=$LIB PINFAST_STATS=json PINFAST_STATS_FILE=$OUT/rep/$name-%p.json "$@" | tail -c 300
  echo " rc=${PIPESTATUS[0]}"; cat $OUT/rep/$name-*.json
}
mkdir -p $OUT/rep
run engine_check $B/engine_check check
run pool_check $B/pool_check
run sweep_static $B/sweep --max-size 64M
run sweep_shared $B/sweep_shared --max-size 64M
run sweep_ptds $B/sweep_ptds --max-size 64M
run frameworks python3 tests/gpu/checks/frameworks.py
echo "== compute-sanitizer memcheck, pool_check under pinfast"
compute-sanitizer --tool memcheck --target-processes all env LD_PRELOAD=$LIB PINFAST_STATS=off $B/pool_check 2>&1 | tail -2
