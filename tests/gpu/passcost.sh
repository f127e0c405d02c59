#!/usr/bin/env bash
# What pinfast adds to a small copy it passes through, on the GPU: passcost
# (driver API, 4-byte async copies) plain and under pinfast settings,
# interleaved, ROUNDS rounds; medians of each setting's best-of-5.  CPUS=4,5
# runs every one on those CPUs (runs on the H100 VM fall into a fast and a
# slow mode, 1.3 against 2.0 us a call, which pinning avoids).
#   B=build-gpu tests/gpu/passcost.sh    ($B/libpinfast.so; and $B/libpinfast-prev.so if there)
set -u
B=${B:-build-gpu}
CUDA=${CUDA_HOME:-/usr/local/cuda}
cc -O2 -Wall -Wextra -I"$CUDA/include" tests/gpu/passcost.c -L"$CUDA/lib64/stubs" -lcuda -o /tmp/passcost || exit 2
LIB=$(cd "$B" && pwd)/libpinfast.so
SETTINGS=("plain|-u LD_PRELOAD" "disabled|LD_PRELOAD=$LIB PINFAST_DISABLE=1"
          "stats-off|LD_PRELOAD=$LIB PINFAST_STATS=off PINFAST_CALLSITES=0"
          "no-callsites|LD_PRELOAD=$LIB PINFAST_CALLSITES=0" "default|LD_PRELOAD=$LIB")
# another build to compare with: $B/libpinfast-prev.so, at its defaults
[ -f "$B/libpinfast-prev.so" ] && SETTINGS+=("prev-default|LD_PRELOAD=$(cd "$B" && pwd)/libpinfast-prev.so")
log=/tmp/passcost.jsonl
: > "$log"
for round in $(seq 1 "${ROUNDS:-7}"); do
  for s in "${SETTINGS[@]}"; do
    out=$(env ${s#*|} ${CPUS:+taskset -c "$CPUS"} /tmp/passcost "${N:-200000}" 2>/dev/null | tail -1) || { echo "FAIL ${s%%|*}"; exit 1; }
    echo "{\"setting\":\"${s%%|*}\",\"round\":$round,\"out\":$out}" >> "$log"
  done
done
python3 - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
names = list(dict.fromkeys(r["setting"] for r in rows))
print("%-14s %12s %12s   (ns per call, median of rounds; each round the best of 5)" % ("setting", "h2d_async", "d2h_async"))
base = {}
for n in names:
    h = statistics.median(r["out"]["h2d_async_ns"] for r in rows if r["setting"] == n)
    d = statistics.median(r["out"]["d2h_async_ns"] for r in rows if r["setting"] == n)
    base.setdefault("h", h); base.setdefault("d", d)
    print("%-14s %8.1f %+5.0f %8.1f %+5.0f" % (n, h, h - base["h"], d, d - base["d"]))
PY
