#!/usr/bin/env bash
# On the GPU machine: the report's call sites and NVTX ranges on the real
# driver, and what the call sites cost.  From the repository root:
#   OUT=/some/dir tests/gpu/checks/callsites.sh
# Builds the library (B=build-gpu) and tests/gpu/checks/callsite_check.cu with static
# and shared cudart, then:
#   1. every copy walked (PINFAST_CALLSITES=1): the JSON report names
#      copy_from_a/b/c of the program (static cudart: from .symtab) with
#      their exact calls and bytes, and nothing inside cudart;
#   2. the default sampling: copy_from_b's 10000 small copies estimated
#      within 4 standard deviations (sqrt(10000 x 255));
#   3. cost: 200000 synchronous 4-byte copies without pinfast, and under
#      pinfast with call sites off, default and every copy walked (3 rounds,
#      interleaved; medians);
#   4. with nsys on the PATH: the NVTX ranges "pinfast stage H2D 64.0 MiB".
# Prints PASS/FAIL lines and a count of failures at the end.
set -u
B=${B:-build-gpu}
OUT=${OUT:-/tmp/callsites}
mkdir -p "$OUT"
exec > >(tee "$OUT/callsites.log") 2>&1
echo "# $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

[ -f "$B/libpinfast.so" ] || { cmake -S . -B "$B" -DPINFAST_TESTS=OFF >/dev/null && cmake --build "$B" -j >/dev/null; }
LIB=$PWD/$B/libpinfast.so
NVCC=${NVCC:-nvcc}
"$NVCC" -O2 -o "$OUT/check_static" tests/gpu/checks/callsite_check.cu || exit 1
"$NVCC" -O2 -cudart shared -o "$OUT/check_shared" tests/gpu/checks/callsite_check.cu || exit 1

# check.py REPORT SAMPLING: the sites of copy_from_a/b/c
cat > "$OUT/check.py" <<'EOF'
import json, math, sys
r = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
assert r["schema"].startswith("pinfast-report/1."), r["schema"]
cs = r["callsites"]
sites = {s["symbol"]: s for s in cs["sites"]}
bad = 0
def say(ok, what):
    global bad
    bad += not ok
    print(("PASS " if ok else "FAIL ") + what)
want = {"copy_from_a": (3, 3 * 64 << 20), "copy_from_b": (10000, 10000 * 4096),
        "copy_from_c": (5, 5 << 20)}
for sym, (calls, nbytes) in want.items():
    s = sites.get(sym)
    if not s:
        say(False, "%s: no site; sites: %s" % (sym, [(x["library"], x["symbol"]) for x in cs["sites"]]))
        continue
    if n == 1 or nbytes // calls >= 4 << 20:
        say(s["calls"] == calls and s["bytes"] == nbytes and not s["estimated"],
            "%s exact: %d calls, %d bytes (want %d, %d) at %s %s+0x%x"
            % (sym, s["calls"], s["bytes"], calls, nbytes, s["library"], sym, s["offset"]))
    else:
        tol = 4 * math.sqrt(calls * (n - 1))
        say(abs(s["calls"] - calls) <= tol,
            "%s estimated: %d calls from %d samples (want %d +- %.0f), %d bytes"
            % (sym, s["calls"], s["samples"], calls, tol, s["bytes"]))
cuda = [s for s in cs["sites"] if s["library"].startswith(("libcuda", "libcudart"))
        or s["symbol"].startswith(("cuda", "__cuda", "libcudart_static_"))]
say(not cuda, "no site inside the CUDA runtime or driver %s" % [(s["library"], s["symbol"]) for s in cuda])
sys.exit(bad)
EOF

for kind in static shared; do
  for n in 1 256; do
    rep=$OUT/rep-$kind-$n.json
    echo "== $kind cudart, PINFAST_CALLSITES=$n"
    LD_PRELOAD=$LIB PINFAST_STATS=json PINFAST_STATS_FILE=$rep PINFAST_CALLSITES=$n \
      "$OUT/check_$kind" sites || fail "$kind: the program failed"
    python3 "$OUT/check.py" "$rep" $n || fail "$kind, sampling $n: call sites"
    LD_PRELOAD=$LIB PINFAST_STATS=text PINFAST_CALLSITES=$n "$OUT/check_$kind" sites 2>&1 | grep "where from" -A5
  done
done

echo "== cost: 200000 synchronous 4 B H2D copies (us per copy)"
us() { "$@" "$OUT/check_static" small 200000 | sed -n 's/.*, \([0-9.]*\) us per copy/\1/p'; }
declare -A t
for round in 1 2 3; do
  t[plain]+="$(us env) "
  t[off]+="$(us env LD_PRELOAD=$LIB PINFAST_STATS=off PINFAST_CALLSITES=0) "
  t[default]+="$(us env LD_PRELOAD=$LIB PINFAST_STATS=off) "
  t[every]+="$(us env LD_PRELOAD=$LIB PINFAST_STATS=off PINFAST_CALLSITES=1) "
done
med() { printf '%s\n' $1 | sort -g | sed -n 2p; }
for k in plain off default every; do
  echo "$k: ${t[$k]}-> median $(med "${t[$k]}") us"
done
python3 - "$(med "${t[plain]}")" "$(med "${t[off]}")" "$(med "${t[default]}")" <<'EOF' || fail "call sites at the default cost more than 2% of a small copy"
import sys
plain, off, default = map(float, sys.argv[1:])
print("call sites (default) over call sites off: %+.2f%%; pinfast (default) over plain: %+.2f%%"
      % (100 * (default / off - 1), 100 * (default / plain - 1)))
sys.exit(default / off - 1 > 0.02)
EOF

if command -v nsys >/dev/null; then
  echo "== nsys: NVTX ranges"
  nsys profile --trace=cuda,nvtx --force-overwrite=true -o "$OUT/nvtx" \
    env LD_PRELOAD=$LIB PINFAST_STATS=off "$OUT/check_static" sites >/dev/null 2>&1
  nsys stats --report nvtx_sum --format csv "$OUT/nvtx.nsys-rep" > "$OUT/nvtx_sum.csv" 2>/dev/null
  cat "$OUT/nvtx_sum.csv"
  k=$(grep -c "pinfast stage H2D 64.0 MiB" "$OUT/nvtx_sum.csv")
  grep "pinfast stage H2D 64.0 MiB" "$OUT/nvtx_sum.csv" | grep -q ',3,' && echo "PASS nsys shows 3 ranges pinfast stage H2D 64.0 MiB" \
    || fail "nsys: no row of 3 'pinfast stage H2D 64.0 MiB' ranges ($k rows)"
else
  echo "SKIP nsys not found: NVTX ranges not checked"
fi

echo "== $fails failure(s)"
exit $((fails > 0))
