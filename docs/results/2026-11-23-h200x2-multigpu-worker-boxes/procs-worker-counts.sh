#!/usr/bin/env bash
# Worker counts: a process per GPU at 1 MiB and 64 MiB, pinfast
# with its default pool (16 workers a process, 8 awake with two staging)
# against 8 and 24 workers, library 5139019; build-mgpu carried.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
B=build-mgpu PROG=cuda/multigpu VARIANTS="base base:PINFAST_THREADS=8 base:PINFAST_THREADS=24 pinned" ROUNDS=3 \
  ARGS="--procs --sizes 1M,64M --batch 64M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/procs.log"
mv "$OUT/variants.jsonl" "$OUT/procs.jsonl"
