#!/usr/bin/env bash
# Half the awake share for copies under 16 MiB
# while other processes stage ("base") against library 5139019 ("old"); a
# process per GPU, then one process for both; build-mgpu carried.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
for mode in procs threads; do
  flag=; [ $mode = procs ] && flag=--procs
  B=build-mgpu PROG=cuda/multigpu VARIANTS="old base" ROUNDS=3 \
    ARGS="$flag --sizes 1M,64M --batch 64M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
  mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
done
