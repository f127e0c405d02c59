#!/usr/bin/env bash
# session 6 call 5: why the inference loop runs slower under pinfast
set -u
B=build-gpu
export B OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
L=$PWD/$B/libpinfast.so
{
for r in 1 2 3; do
  echo "== round $r plain"; $B/probe_prepare
  echo "== round $r pinfast"; LD_PRELOAD=$L PINFAST_STATS=off $B/probe_prepare
  echo "== round $r pinfast, 4 threads"; LD_PRELOAD=$L PINFAST_THREADS=4 PINFAST_STATS=off $B/probe_prepare
done
} 2>&1 | tee $OUT/prepare.log
PROG=inference VARIANTS="base base:PINFAST_MIN_SIZE=1G base:PINFAST_THREADS=4 pinned" ROUNDS=5 ARGS="--batches 6 --reps 2" bash tests/gpu/variants.sh 2>&1 | tee $OUT/inference.log
mv $OUT/variants.jsonl $OUT/inference.jsonl
