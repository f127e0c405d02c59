#!/usr/bin/env bash
# On the GPU machine: A/B of engine variants with one of the harness's
# workloads ($PROG, default sweep: $B/$PROG, run with $ARGS).
# $B holds the workload and libpinfast*.so; each VARIANTS word is
# name[:ENV=value,...], its library $B/libpinfast-name.so (or libpinfast.so
# for "base"), run with the settings given.  Rounds interleave plain and every
# variant; the table gives each one's median GB/s (or rate, for workloads
# that count batches or frames) over the rounds.
# Example: VARIANTS="base base:PINFAST_CHUNK=4M spin" tests/gpu/probes/variants.sh
# ("pinned" runs the workload with --pinned, without pinfast.)
# NAME=x writes $OUT/x.jsonl and $OUT/x.log (default: variants.jsonl, no log).
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-3}
PROG=${PROG:-sweep}
ARGS=${ARGS:---min-size 1M --max-size 64M --budget 256M}
log=$OUT/${NAME:-variants}.jsonl
: >"$log"
[ -n "${NAME:-}" ] && exec > >(tee "$OUT/$NAME.log") 2>&1
echo "# $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(nproc) CPUs"
echo "# $PROG $ARGS, $ROUNDS rounds, variants: plain ${VARIANTS:-base}"
for round in $(seq 1 "$ROUNDS"); do
  for v in plain ${VARIANTS:-base}; do
    name=${v%%:*} envs=()
    [[ $v == *:* ]] && IFS=, read -ra envs <<<"${v#*:}"
    lib=$B/libpinfast-$name.so
    [ "$name" = base ] && lib=$B/libpinfast.so
    pre=(env "${envs[@]}" PINFAST_STATS=off LD_PRELOAD="$lib")
    extra=
    [ "$name" = plain ] && pre=(env)
    [ "$name" = pinned ] && pre=(env) extra=--pinned # the workload's own pinned buffers
    line=$("${pre[@]}" "$B/$PROG" $ARGS $extra) || { echo "FAIL: $v round $round"; continue; }
    printf '{"variant":"%s","round":%d,"out":%s}\n' "$v" "$round" "$line" >>"$log"
  done
  echo "round $round done"
done
python3 - "$log" <<'PY'
import json, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    for m in r["out"]["measurements"]:
        name = m["name"] + ("/" + m["direction"] if m.get("direction") not in (None, "both") else "")
        rows.setdefault((name, m["bytes"]), {}).setdefault(r["variant"], []).append(m.get("rate") or m["gbps"])
variants = list(dict.fromkeys(v for cells in rows.values() for v in cells))
print("%-14s %10s " % ("kind", "bytes") + " ".join("%16.16s" % v for v in variants))
for (name, n), cells in sorted(rows.items()):
    med = {v: statistics.median(g) for v, g in cells.items()}
    base = med.get("plain")
    print("%-14s %10d " % (name, n) + " ".join(
        "%9.2f %5.2fx" % (med[v], med[v] / base) if v in med and base else "%16s" % "-"
        for v in variants))
PY
