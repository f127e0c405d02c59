#!/usr/bin/env bash
# The H200 pair's wake-up experiments: `experiments.sh N` is what the Nth
# experiment ran on nvidia-h200-x2, build-mgpu and .deps carried
# (B=build-mgpu).  They ran the same steps written out; they are folded
# into the helpers below.  The "library" line printed the device copy's
# stale git HEAD: the library run is the one carried, named in each case's
# comment.
set -u
export B=build-mgpu PROG=cuda/multigpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
git log -1 --format='library %h %s' 2>/dev/null

# modes rounds variants args: the multigpu workload under tests/gpu/variants.sh,
# once per mode (threads: one process for both GPUs; procs: a process per
# GPU), logs as $OUT/<mode>.*
ab() {
  local modes=$1 rounds=$2 variants=$3 args=$4 mode flag
  for mode in $modes; do
    flag=; [ "$mode" = procs ] && flag=--procs
    NAME=$mode ROUNDS=$rounds VARIANTS=$variants ARGS="$flag $args" bash tests/gpu/variants.sh
  done
}

# lib: a process per GPU at 1 MiB with the debug log, in $OUT/debug.err.gz
debug() {
  PINFAST_LOG=debug PINFAST_STATS=off LD_PRELOAD=$PWD/$B/$1 $B/cuda/multigpu --procs --sizes 1M \
    --batch 8M --reps 2 > "$OUT/debug.out" 2> "$OUT/debug.err"
  gzip "$OUT/debug.err"
}

case $1 in
1) # library 560912e: engine_check on both GPUs at once, then how many
   # threads should write slots for H2D with two GPUs: LEAN_CHUNKS x
   # LEAN_TASKS writers per copy, 3x2 (base), 2x2 (w4), 3x1 (w3), 2x1 (w2);
   # "stream": 1 GiB with streaming stores and the lean rule too.
  for g in 0 1; do
    CUDA_VISIBLE_DEVICES=$g LD_PRELOAD=$PWD/$B/libpinfast.so PINFAST_STATS=off timeout 240 \
      $B/engine_check check > "$OUT/engine_check-gpu$g.out" 2>&1 &
  done
  wait; tail -n 2 "$OUT"/engine_check-gpu*.out
  ab "threads procs" 3 "base w4 w3 w2 base:PINFAST_COPY_H2D=stream w3:PINFAST_COPY_H2D=stream pinned" \
    "--sizes 64M,1G --batch 1G --reps 3" ;;
2) # library 560912e: H2D 64 MiB / 1 GiB with more writers (w8: 4x2; nolean:
   # 8 tasks a chunk, no cap) and 4 MiB slots; then a process per GPU at
   # 1 MiB: half the awake share for copies under 16 MiB while another
   # process stages (half), a process counted as staging for 20 ms instead
   # of 1 s (recent), both (halfrecent), 5 rounds (logs small.*).
  ab "threads procs" 3 "base w8 nolean base:PINFAST_CHUNK=4M" "--sizes 64M,1G --batch 1G --reps 3"
  NAME=small ROUNDS=5 VARIANTS="base half recent halfrecent" \
    ARGS="--procs --sizes 1M --batch 64M --reps 3" bash tests/gpu/variants.sh ;;
3) # 1 MiB, library 560912e (base) against the boxes' libraries (e8d129f,
   # 5139019) on one machine start, 5 rounds; then one debug run.
  ab "procs threads" 5 "base e8d129f 5139019 half" "--sizes 1M --batch 64M --reps 3"
  debug libpinfast.so ;;
4) # A worker holding a task no longer waits for the sleepers' mutex to wake
   # another (try), against 560912e (base), half the awake share for small
   # copies (half), both (halftry); a process per GPU, 1 and 64 MiB, 5
   # rounds; then the debug run with try.
  ab procs 5 "base try half halftry" "--sizes 1M,64M --batch 64M --reps 3"
  debug libpinfast-try.so ;;
5) # try2 (library 9d97201): try, and the caller's wake-up at a copy's start
   # not waited for; against try and 560912e (base); 5 rounds; then the
   # debug run with try2.
  ab "procs threads" 5 "base try try2" "--sizes 1M,64M --batch 64M --reps 3"
  debug libpinfast-try2.so ;;
6) # library 9d97201: H2D through the cache (memcpy) or with streaming stores
   # from 16 MiB to 256 MiB with two GPUs, and 4 MiB slots; 3 rounds.
  ab "threads procs" 3 "base base:PINFAST_COPY_H2D=memcpy base:PINFAST_CHUNK=4M" \
    "--sizes 16M,64M,256M --batch 256M --reps 3" ;;
7) # library 9d97201 (base) against it with half the awake share for copies
   # under 16 MiB while another process stages (half); 5 rounds.
  ab "procs threads" 5 "base half" "--sizes 1M,64M --batch 64M --reps 3" ;;
8) # library 9d97201: tests/gpu/multigpu.sh, the checks and the harness
  bash tests/gpu/multigpu.sh >/dev/null 2>&1; echo "multigpu.sh rc=$?"
  grep -E "^(==|--)|mismatch|engine_check" "$OUT/multigpu.log" | tail -40 ;;
9) # tests/gpu/probe_h2dload (built into build-mgpu): each GPU's DMA from
   # pinned memory under the host-memory load staging puts beside it, with
   # 6 and 12 writers per GPU
  for k in 6 12; do $B/probe_h2dload $k; done 2>&1 | tee "$OUT/h2dload.log" ;;
10) # library 38890d0: large H2D paced (twelve writers, five chunks ahead)
   # against 9d97201 (old); 64 and 256 MiB, 3 rounds
  ab "threads procs" 3 "old base" "--sizes 64M,256M --batch 256M --reps 3" ;;
esac
