#!/usr/bin/env bash
# session 6 call 4: tasks handed (taken back after 10 us) to idle workers' boxes ("base") against the queue alone ("old")
set -u
B=build-gpu
export B OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
L=$PWD/$B/libpinfast.so
{
echo "== engine_check, boxes"; LD_PRELOAD=$L PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
echo "== engine_check, boxes, PINFAST_MIN_SIZE=0"; LD_PRELOAD=$L PINFAST_MIN_SIZE=0 PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
echo "== engine_check, boxes, 3 threads, 64K chunks, PINFAST_MIN_SIZE=0"; LD_PRELOAD=$L PINFAST_THREADS=3 PINFAST_CHUNK=64K PINFAST_MIN_SIZE=0 PINFAST_STATS=off $B/engine_check check 2>&1 | tail -2
} 2>&1 | tee $OUT/check.log
SIZES="1M 4M" EVERY=25 bash tests/gpu/timeline.sh > $OUT/timeline.log 2>&1
rm -f $OUT/timeline-*.txt
VARIANTS="old base pinned" ROUNDS=5 ARGS="--min-size 1M --max-size 256M --budget 512M" bash tests/gpu/variants.sh 2>&1 | tee $OUT/sweep.log
mv $OUT/variants.jsonl $OUT/sweep.jsonl
PROG=pipeline VARIANTS="old base" ROUNDS=4 ARGS="--reps 3" bash tests/gpu/variants.sh 2>&1 | tee $OUT/pipeline.log
mv $OUT/variants.jsonl $OUT/pipeline.jsonl
PROG=readback VARIANTS="old base" ROUNDS=3 ARGS="--reps 3" bash tests/gpu/variants.sh 2>&1 | tee $OUT/readback.log
rm $OUT/variants.jsonl
