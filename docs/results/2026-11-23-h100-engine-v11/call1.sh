#!/usr/bin/env bash
# session 6 call 1: passthrough cells, many processes; 64 MiB H2D lean
set -u
B=build-gpu
export B OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
echo "## passthrough 4K-256K, plain / pinfast / pinfast disabled, 12 rounds"
VARIANTS="base base:PINFAST_DISABLE=1" ROUNDS=12 ARGS="--min-size 4K --max-size 256K --budget 64M" bash tests/gpu/variants.sh 2>&1 | tee $OUT/pass.log
cp $OUT/variants.jsonl $OUT/pass.jsonl
echo "## 64M-256M, plain / pinfast / pinned, 6 rounds"
VARIANTS="base pinned" ROUNDS=6 ARGS="--min-size 16M --max-size 256M --budget 1G" bash tests/gpu/variants.sh 2>&1 | tee $OUT/big.log
cp $OUT/variants.jsonl $OUT/big.jsonl
rm $OUT/variants.jsonl
