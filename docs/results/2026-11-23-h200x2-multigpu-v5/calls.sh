#!/usr/bin/env bash
# h200x2-multigpu-v5 (session 7): `calls.sh N` is what call N ran on
# nvidia-h200-x2, build-mgpu and .deps carried (B=build-mgpu).
set -u
export B=build-mgpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
git log -1 --format='library %h %s' 2>/dev/null
case $1 in
1) # engine_check on both GPUs at once (HEAD), then how many threads should
   # write slots for H2D with two GPUs: LEAN_CHUNKS x LEAN_TASKS writers per
   # copy, 3x2 (base), 2x2 (w4), 3x1 (w3), 2x1 (w2); "stream": 1 GiB with
   # streaming stores and the lean rule too.
  for g in 0 1; do
    CUDA_VISIBLE_DEVICES=$g LD_PRELOAD=$PWD/$B/libpinfast.so PINFAST_STATS=off timeout 240 \
      $B/engine_check check > "$OUT/engine_check-gpu$g.out" 2>&1 &
  done
  wait; tail -n 2 "$OUT"/engine_check-gpu*.out
  for mode in threads procs; do
    flag=; [ $mode = procs ] && flag=--procs
    PROG=cuda/multigpu ROUNDS=3 VARIANTS="base w4 w3 w2 base:PINFAST_COPY_H2D=stream w3:PINFAST_COPY_H2D=stream pinned" \
      ARGS="$flag --sizes 64M,1G --batch 1G --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
    mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
  done ;;
2) # H2D 64 MiB / 1 GiB with more writers (w8: 4x2; nolean: 8 tasks a chunk,
   # no cap) and 4 MiB slots; then a process per GPU at 1 MiB: half the
   # awake share for copies under 16 MiB while another process stages
   # (half), a process counted as staging for 20 ms instead of 1 s (recent),
   # both (halfrecent). 5 rounds.
  for mode in threads procs; do
    flag=; [ $mode = procs ] && flag=--procs
    PROG=cuda/multigpu ROUNDS=3 VARIANTS="base w8 nolean base:PINFAST_CHUNK=4M" \
      ARGS="$flag --sizes 64M,1G --batch 1G --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
    mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
  done
  PROG=cuda/multigpu ROUNDS=5 VARIANTS="base half recent halfrecent" \
    ARGS="--procs --sizes 1M --batch 64M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/small.log"
  mv "$OUT/variants.jsonl" "$OUT/small.jsonl" ;;
3) # 1 MiB with a process per GPU, HEAD against session 6's libraries
   # (e8d129f, 5139019) on one machine start, 5 rounds; then one debug run.
  for mode in procs threads; do
    flag=; [ $mode = procs ] && flag=--procs
    PROG=cuda/multigpu ROUNDS=5 VARIANTS="base e8d129f 5139019 half" \
      ARGS="$flag --sizes 1M --batch 64M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
    mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
  done
  PINFAST_LOG=debug PINFAST_STATS=off LD_PRELOAD=$PWD/$B/libpinfast.so $B/cuda/multigpu --procs --sizes 1M \
    --batch 8M --reps 2 > "$OUT/debug.out" 2> "$OUT/debug.err"
  gzip "$OUT/debug.err" ;;
4) # A worker holding a task no longer waits for the sleepers' mutex to wake
   # another (try), against HEAD (base), half the awake share for small
   # copies (half), both (halftry); a process per GPU, 1 and 64 MiB, 5
   # rounds; then the debug run with try.
  PROG=cuda/multigpu ROUNDS=5 VARIANTS="base try half halftry" \
    ARGS="--procs --sizes 1M,64M --batch 64M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/procs.log"
  mv "$OUT/variants.jsonl" "$OUT/procs.jsonl"
  PINFAST_LOG=debug PINFAST_STATS=off LD_PRELOAD=$PWD/$B/libpinfast-try.so $B/cuda/multigpu --procs --sizes 1M \
    --batch 8M --reps 2 > "$OUT/debug.out" 2> "$OUT/debug.err"
  gzip "$OUT/debug.err" ;;
5) # try2: try, and the caller's wake-up at a copy's start not waited for;
   # against try and HEAD (base); a process per GPU, then one process for
   # both, 1 and 64 MiB, 5 rounds; then the debug run with try2.
  for mode in procs threads; do
    flag=; [ $mode = procs ] && flag=--procs
    PROG=cuda/multigpu ROUNDS=5 VARIANTS="base try try2" \
      ARGS="$flag --sizes 1M,64M --batch 64M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
    mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
  done
  PINFAST_LOG=debug PINFAST_STATS=off LD_PRELOAD=$PWD/$B/libpinfast-try2.so $B/cuda/multigpu --procs --sizes 1M \
    --batch 8M --reps 2 > "$OUT/debug.out" 2> "$OUT/debug.err"
  gzip "$OUT/debug.err" ;;
6) # library 9d97201: H2D through the cache (memcpy) or with streaming stores
   # from 16 MiB to 256 MiB with two GPUs, and 4 MiB slots; 3 rounds.
  for mode in threads procs; do
    flag=; [ $mode = procs ] && flag=--procs
    PROG=cuda/multigpu ROUNDS=3 VARIANTS="base base:PINFAST_COPY_H2D=memcpy base:PINFAST_CHUNK=4M" \
      ARGS="$flag --sizes 16M,64M,256M --batch 256M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
    mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
  done ;;
7) # library 9d97201 (base) against it with half the awake share for copies
   # under 16 MiB while another process stages (half); a process per GPU,
   # then one process for both, 1 and 64 MiB, 5 rounds.
  for mode in procs threads; do
    flag=; [ $mode = procs ] && flag=--procs
    PROG=cuda/multigpu ROUNDS=5 VARIANTS="base half" \
      ARGS="$flag --sizes 1M,64M --batch 64M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
    mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
  done ;;
8) # library 9d97201: tests/gpu/multigpu.sh, the checks and the harness
  bash tests/gpu/multigpu.sh >/dev/null 2>&1; echo "multigpu.sh rc=$?"
  grep -E "^(==|--)|mismatch|engine_check" "$OUT/multigpu.log" | tail -40 ;;
9) # tests/gpu/probe_h2dload (built into build-mgpu): each GPU's DMA from
   # pinned memory under the host-memory load staging puts beside it, with
   # 6 and 12 writers per GPU
  for k in 6 12; do $B/probe_h2dload $k; done 2>&1 | tee "$OUT/h2dload.log" ;;
10) # library 38890d0: large H2D paced (twelve writers, five chunks ahead) against
   # 9d97201 (old); one process for both GPUs, then a process per GPU;
   # 64 and 256 MiB, 3 rounds
  for mode in threads procs; do
    flag=; [ $mode = procs ] && flag=--procs
    PROG=cuda/multigpu ROUNDS=3 VARIANTS="old base" \
      ARGS="$flag --sizes 64M,256M --batch 256M --reps 3" bash tests/gpu/variants.sh 2>&1 | tee "$OUT/$mode.log"
    mv "$OUT/variants.jsonl" "$OUT/$mode.jsonl"
  done ;;
esac
