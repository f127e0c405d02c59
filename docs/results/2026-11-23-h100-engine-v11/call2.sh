#!/usr/bin/env bash
# session 6 call 2: is the call-site walk what passthrough cells pay?
set -u
B=build-gpu
export B OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
echo "## passthrough 16K-256K: plain / pinfast / call sites off / disabled, 12 rounds"
VARIANTS="base base:PINFAST_CALLSITES=0 base:PINFAST_DISABLE=1" ROUNDS=12 ARGS="--min-size 16K --max-size 256K --budget 64M" bash tests/gpu/variants.sh 2>&1 | tee $OUT/pass.log
cp $OUT/variants.jsonl $OUT/pass.jsonl
echo "## staged 1M-16M: plain / pinfast / call sites off, 6 rounds"
VARIANTS="base base:PINFAST_CALLSITES=0" ROUNDS=6 ARGS="--min-size 1M --max-size 16M --budget 256M" bash tests/gpu/variants.sh 2>&1 | tee $OUT/staged.log
cp $OUT/variants.jsonl $OUT/staged.jsonl
rm $OUT/variants.jsonl
