#!/usr/bin/env bash
# The registration cache on the GPU (register_check.c, register_frameworks.py):
# the invalidation cases without and with pinfast (every line "ok"), the
# fork probe, then repeated copies of one buffer: plain, staged
# (PINFAST_REGISTER=0) and registered (the default).  Build here:
#   cc -O2 -I/usr/local/cuda/include -o $B/register_check tests/gpu/checks/register_check.c -lcuda
# Usage: LIB=/path/libpinfast.so B=dir tests/gpu/checks/register.sh [MiB] [reps]
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
LIB=${LIB:-$B/libpinfast.so}
mib=${1:-64} reps=${2:-10}
mkdir -p "$OUT"
rc=0
echo "ulimit -l: $(ulimit -l); kernel $(uname -r)"
timeout 300 "$B/register_check" check "$mib" >"$OUT/register-plain.log" 2>&1 || { echo "plain: exit $?"; rc=1; }
LD_PRELOAD=$LIB PINFAST_STATS=json PINFAST_STATS_FILE="$OUT/register-report.json" \
    timeout 300 "$B/register_check" check "$mib" >"$OUT/register-pinfast.log" 2>&1 || { echo "pinfast: exit $?"; rc=1; }
paste -d'|' "$OUT/register-plain.log" "$OUT/register-pinfast.log" | sed 's/|/   pinfast: /'
grep -o '"registrations":{[^}]*}' "$OUT/register-report.json"
timeout 120 "$B/register_check" fork "$mib" 2>&1 | sed 's/^/fork, plain: /'
LD_PRELOAD=$LIB PINFAST_STATS=off timeout 120 "$B/register_check" fork "$mib" 2>&1 | sed 's/^/fork, pinfast: /'
timeout 300 "$B/register_check" bench "$reps" 2>&1 | sed 's/^/plain: /'
LD_PRELOAD=$LIB PINFAST_STATS=off PINFAST_REGISTER=0 timeout 300 "$B/register_check" bench "$reps" 2>&1 | sed 's/^/staged: /'
LD_PRELOAD=$LIB PINFAST_STATS_FILE="$OUT/register-bench.txt" timeout 300 "$B/register_check" bench "$reps" 2>&1 |
    sed 's/^/registered: /'
grep registrations "$OUT/register-bench.txt"
exit $rc
