#!/usr/bin/env bash
# The contract cases (contract.cu) on the GPU: one run without pinfast, one
# under it, diffed line by line; then CPU time while copies wait behind a
# kernel, both ways.  Build here: nvcc -O2 -arch=sm_90 -o $B/contract
# tests/gpu/checks/contract.cu -lcuda.  Exit 1 on any difference, except
# where pinfast is stricter than the driver: an xstream line where the plain
# driver hung (its pageable H2D on S2 waits for S1's blocked copy) and a tail
# the plain driver had not yet written; pinfast must show neither.
# Usage: LIB=/path/libpinfast.so B=dir tests/gpu/checks/contract.sh [rounds] [seed]
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
LIB=${LIB:-$B/libpinfast.so}
rounds=${1:-12} seed=${2:-11}
mkdir -p "$OUT"
timeout 280 "$B/contract" all "$rounds" "$seed" >"$OUT/contract-plain.log" 2>&1 || echo "plain: exit $?"
LD_PRELOAD=$LIB PINFAST_STATS=off timeout 280 "$B/contract" all "$rounds" "$seed" >"$OUT/contract-pinfast.log" 2>&1 ||
    echo "pinfast: exit $?"
# the allowed differences, taken out of both sides and checked on pinfast's
# alone: the plain driver's pageable sync H2D sometimes returns before its
# last DMA lands (docs/results/2026-11-24-h100-contract: 1 of 12 rounds), pinfast's never
allowed() { sed -E -e 's/^(xstream .*) hung [01] (wrong .*)$/\1 \2/' -e 's/^(tail .*) wrong [0-9]+$/\1/' "$1"; }
lines=$(grep -c . "$OUT/contract-plain.log")
if diff <(allowed "$OUT/contract-plain.log") <(allowed "$OUT/contract-pinfast.log"); then
    echo "contract: $lines lines, no difference ($(grep -c 'hung 1' "$OUT/contract-plain.log") plain hangs, $(grep -c 'hung 1' "$OUT/contract-pinfast.log") pinfast hangs)"
else
    echo "contract: DIFFERENCES"; exit 1
fi
grep -q '^xstream.*hung 1' "$OUT/contract-pinfast.log" && { echo "contract: pinfast hung"; exit 1; }
grep -q '^tail.*wrong [1-9]' "$OUT/contract-pinfast.log" && { echo "contract: pinfast's H2D returned early"; exit 1; }
echo "contract: plain tails read early: $(grep -c '^tail.*wrong [1-9]' "$OUT/contract-plain.log")"
timeout 60 "$B/contract" cpu >"$OUT/cpu-plain.log" 2>&1
LD_PRELOAD=$LIB PINFAST_STATS=off timeout 60 "$B/contract" cpu >"$OUT/cpu-pinfast.log" 2>&1
paste -d'|' "$OUT/cpu-plain.log" "$OUT/cpu-pinfast.log" | sed 's/|/   pinfast: /'
