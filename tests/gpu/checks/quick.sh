#!/usr/bin/env bash
# The quick bench as a newcomer meets it, timed from the build to the last
# result: on the GPU machine, from the repository root, nothing
# carried,
#   tests/gpu/checks/quick.sh [more bench/run options]
# It builds into a fresh $B (build-quick; removed first, as a fresh clone has
# no build tree) and runs `bench/run --quick`: results in $OUT/quick/, the log
# in $OUT/quick.log, the time in $OUT/quick-time.txt (/usr/bin/time -v where
# the machine has it; always the wall time and the harness's own build and
# run times). Nothing to install: the build needs cmake, make, gcc and the
# CUDA toolkit, which the machine has (uthash is no longer used, 822fe5e).
# At LIMIT seconds from its start (555) the bench gets a SIGTERM, and a
# SIGKILL 10 s later: the harness writes the runs done when told to stop, so
# partial results come back inside the device's 10 minutes (9.5 at most).
# Exit: bench/run's status; 124 when the limit stopped it.
set -u
OUT=${OUT:-/tmp/out}
B=${B:-build-quick}
mkdir -p "$OUT/quick"
exec > >(tee "$OUT/quick.log") 2>&1
tee_pid=$!
echo "# $(date -u '+%F %T') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)," \
  "$(nproc) CPUs, $( (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1)"
rm -rf "$B"
limit=$(( ${LIMIT:-555} - SECONDS ))
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -v -o "$OUT/quick-time.txt")
export PYTHONUNBUFFERED=1
t0=$(date +%s.%N)
${timer[@]+"${timer[@]}"} timeout -k 10 "$limit" bench/run --quick --build "$B" --out "$OUT/quick" "$@"
rc=$?
t1=$(date +%s.%N)
[ ${#timer[@]} = 0 ] && echo "(no /usr/bin/time on this machine)" > "$OUT/quick-time.txt"
{
  echo "quick.sh: bench/run --quick $* exit $rc$([ $rc = 124 ] && echo " (stopped at the ${limit} s limit)")"
  echo "wall: $(python3 -c "print('%.1f s' % ($t1 - $t0))")"
  grep -h -e "^bench: built in" -e "^bench: [0-9]* runs in" -e "runs (.* of each variant)" "$OUT/quick.log"
} | tee -a "$OUT/quick-time.txt"
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null  # the log complete before $OUT is taken
exit $rc
