#!/usr/bin/env bash
# Two GPUs at once, on the 2-GPU machine: the topology, the
# multigpu workload's checks plain and under pinfast (odd sizes, threads and
# processes, peer copies; engine_check on both GPUs at once beside a peer
# ring), then the bench harness on multigpu and multigpu_procs, plain/pinfast/
# pinned interleaved, 3 runs each. About 5 minutes; log in $OUT/multigpu.log,
# harness results and pinfast reports under $OUT/r/.
#   tests/gpu/checks/multigpu.sh build   here: builds libpinfast.so, multigpu and
#                                 engine_check into $B (default build-mgpu)
#   B=build-mgpu tests/gpu/checks/multigpu.sh   there, with $B carried
# RUNS=n (3) sets the harness runs, CHECK=0 skips the checks.
set -u
B=${B:-build-mgpu}
if [ "${1:-}" = build ]; then
  set -e
  cmake -S . -B "$B" -DPINFAST_TESTS=OFF -DPINFAST_WORKLOADS=ON
  cmake --build "$B" -j2 --target pinfast multigpu
  gcc -O2 -Wall -Wextra -I/usr/local/cuda/include tests/gpu/checks/engine_check.c \
    -L/usr/local/cuda/lib64/stubs -lcuda -o "$B/engine_check"
  ls -l "$B/libpinfast.so" "$B/cuda/multigpu" "$B/engine_check"
  exit 0
fi
OUT=${OUT:-/tmp/out}
LIB=$PWD/$B/libpinfast.so
MG=$B/cuda/multigpu
mkdir -p "$OUT/r"
exec > >(tee "$OUT/multigpu.log") 2>&1
fails=0
# name, then a command: its status and the tail of its output
step() {
  local name=$1; shift
  echo "== $name (at ${SECONDS}s)"
  timeout "${STEP_LIMIT:-240}" "$@" > "$OUT/step.out" 2>&1
  local rc=$?
  tail -c 1500 "$OUT/step.out"; echo
  echo "-- $name: rc=$rc"
  [ $rc = 0 ] || fails=$((fails + 1))
}

echo "# $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr -s ' ') $(nproc) CPUs"
echo "== topology"
nvidia-smi topo -m
lscpu | grep -iE "numa|model name|socket"
if command -v numactl >/dev/null; then numactl -H; else echo "(no numactl)"; fi
nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader | while IFS=', ' read -r i bus; do
  dev=/sys/bus/pci/devices/$(echo "${bus#????}" | tr 'A-F' 'a-f')
  echo "GPU $i $bus: NUMA node $(cat "$dev/numa_node" 2>/dev/null || echo ?), CPUs $(cat "$dev/local_cpulist" 2>/dev/null || echo ?)"
done
nvidia-smi --query-gpu=index,pcie.link.gen.current,pcie.link.width.current --format=csv

if [ "${CHECK:-1}" = 1 ]; then
  ODD=1,4097,1048577,67108867   # odd sizes: tails, partial chunks
  step "check threads plain" $MG --sizes $ODD --batch 8M --reps 2
  step "check threads pinfast" env LD_PRELOAD=$LIB PINFAST_STATS=text $MG --sizes $ODD --batch 8M --reps 2
  step "check procs pinfast" env LD_PRELOAD=$LIB PINFAST_STATS=text $MG --procs --sizes $ODD --batch 8M --reps 2
  step "check threads pinfast, 1 thread, 64K chunks, everything staged" \
    env LD_PRELOAD=$LIB PINFAST_THREADS=1 PINFAST_CHUNK=64K PINFAST_MIN_SIZE=0 PINFAST_STATS=text \
    $MG --sizes 4097,1048577,67108867 --batch 8M --reps 2
  # the ordering and equivalence checks on each GPU at once, with the peer
  # ring of the threads variant running beside them
  echo "== engine_check on every GPU at once under pinfast, beside peer copies (at ${SECONDS}s)"
  pids=()
  for g in $(nvidia-smi --query-gpu=index --format=csv,noheader); do
    CUDA_VISIBLE_DEVICES=$g LD_PRELOAD=$LIB PINFAST_STATS=off timeout 240 $B/engine_check check \
      > "$OUT/engine_check-gpu$g.out" 2>&1 & pids+=($!)
  done
  LD_PRELOAD=$LIB PINFAST_STATS=off timeout 240 $MG --sizes 64M,256M --reps 20 > "$OUT/peer-beside.out" 2>&1 & pids+=($!)
  for p in "${pids[@]}"; do wait "$p" || { echo "-- pid $p failed"; fails=$((fails + 1)); }; done
  tail -n 3 "$OUT"/engine_check-gpu*.out; tail -c 300 "$OUT/peer-beside.out"; echo
fi

echo "== bench: multigpu, multigpu_procs; plain/pinfast/pinned interleaved, ${RUNS:-3} runs (at ${SECONDS}s)"
# no --quick: the workloads run their full sizes (1M,64M,1G)
export PYTHONUNBUFFERED=1
bench/run --no-build --build "$B" --lib "$LIB" --out "$OUT/r" --runs "${RUNS:-3}" --timeout 120 \
  --workloads multigpu,multigpu_procs --no-fail
rc=$?
echo "-- bench: rc=$rc"
[ $rc = 0 ] || fails=$((fails + 1))
echo "== done in ${SECONDS}s: $fails step(s) failed"
[ $fails = 0 ]
