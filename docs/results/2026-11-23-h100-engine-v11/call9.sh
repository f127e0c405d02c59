#!/usr/bin/env bash
# session 6 call 9: settings that might speed 1-4 MiB D2H (staging reuse distance, chunk size, streaming stores)
set -u
B=build-gpu
export B OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
VARIANTS="base base:PINFAST_STAGING=512M base:PINFAST_CHUNK=1M base:PINFAST_COPY_D2H=stream pinned" ROUNDS=5 ARGS="--min-size 1M --max-size 16M --budget 256M" bash tests/gpu/variants.sh 2>&1 | tee $OUT/sweep.log
mv $OUT/variants.jsonl $OUT/sweep.jsonl
PROG=pipeline VARIANTS="base base:PINFAST_STAGING=512M base:PINFAST_CHUNK=1M" ROUNDS=3 ARGS="--reps 3" bash tests/gpu/variants.sh 2>&1 | tee $OUT/pipeline.log
mv $OUT/variants.jsonl $OUT/pipeline.jsonl
