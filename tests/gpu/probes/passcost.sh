#!/usr/bin/env bash
# What pinfast adds to a small copy it passes through, on the GPU:
# tests/gpu/probes/passcost.c compares, inside each process, async copies of
# each size in SIZES (default 4 bytes) made through the program's symbol (pinfast's wrapper when preloaded) with
# copies made straight into libcuda, in alternating batches.  Each setting
# runs ROUNDS processes (default 3); the table gives the median of their
# results.  Without pinfast ("plain") the two paths are the same function:
# its row is the method's noise.
#   B=build-gpu [SIZES="4 65536"] tests/gpu/probes/passcost.sh    ($B/libpinfast.so; and $B/libpinfast-prev.so if there)
set -u
B=${B:-build-gpu}
CUDA=${CUDA_HOME:-/usr/local/cuda}
cc -O2 -Wall -Wextra -I"$CUDA/include" tests/gpu/probes/passcost.c -L"$CUDA/lib64/stubs" -lcuda -o /tmp/passcost || exit 2
LIB=$(cd "$B" && pwd)/libpinfast.so
SETTINGS=("plain|-u LD_PRELOAD" "disabled|LD_PRELOAD=$LIB PINFAST_DISABLE=1"
          "no-callsites|LD_PRELOAD=$LIB PINFAST_CALLSITES=0" "default|LD_PRELOAD=$LIB")
# another build to compare with: $B/libpinfast-prev.so, at its defaults
[ -f "$B/libpinfast-prev.so" ] && SETTINGS+=("prev-default|LD_PRELOAD=$(cd "$B" && pwd)/libpinfast-prev.so")
log=${LOG:-/tmp/passcost.jsonl}
: > "$log"
for size in ${SIZES:-4}; do
  for round in $(seq 1 "${ROUNDS:-3}"); do
    for s in "${SETTINGS[@]}"; do
      out=$(env ${s#*|} PINFAST_STATS=off /tmp/passcost "$size" | tail -1) || { echo "FAIL ${s%%|*} $size"; exit 1; }
      echo "{\"setting\":\"${s%%|*}\",\"round\":$round,\"out\":$out}" >> "$log"
    done
  done
done
python3 - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
names = list(dict.fromkeys(r["setting"] for r in rows))
print("ns per async copy: through the symbol, straight into libcuda, and the difference")
print("(median over processes of each process's median over 41 alternating batches)")
print("%-14s %9s %30s %30s" % ("setting", "bytes", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync"))
for size in dict.fromkeys(r["out"]["bytes"] for r in rows):
    for n in names:
        mine = [r["out"] for r in rows if r["setting"] == n and r["out"]["bytes"] == size]
        cells = []
        for d in ("h2d_async", "d2h_async"):
            m = lambda k: statistics.median(o[d][k] for o in mine)
            cells.append("%7.0f %7.0f %+6.1f (%4.1f%%)" % (m("symbol_ns"), m("driver_ns"), m("added_ns"),
                                                       100 * m("added_ns") / m("driver_ns")))
        print("%-14s %9d %30s %30s" % (n, size, cells[0], cells[1]))
PY
