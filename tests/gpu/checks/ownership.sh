#!/usr/bin/env bash
# What pinfast registers, and the waits it adds: ownership_check.c plain and
# under pinfast, line by line (times aside, every pair must read the same).
# Usage: LIB=/path/libpinfast.so OUT=dir tests/gpu/checks/ownership.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
LIB=${LIB:?LIB=libpinfast.so}
mkdir -p "$OUT"
cc -O2 -I/usr/local/cuda/include -o "$OUT/ownership_check" "$here/ownership_check.c" -L/usr/local/cuda/lib64/stubs -lcuda -ldl -lpthread || exit 2
cc -O2 -shared -fPIC -o "$OUT/libpf_plugin.so" "$here/ownership_plugin.c" || exit 2
rc=0
run() { # name, args...
    local name=$1
    shift
    timeout 300 "$OUT/ownership_check" "$@" >"$OUT/$name-plain.log" 2>"$OUT/$name-plain.err"
    echo "exit $?" >>"$OUT/$name-plain.log"
    LD_PRELOAD=$LIB PINFAST_STATS=json PINFAST_STATS_FILE="$OUT/$name-report.json" \
        timeout 300 "$OUT/ownership_check" "$@" >"$OUT/$name-pinfast.log" 2>"$OUT/$name-pinfast.err"
    echo "exit $?" >>"$OUT/$name-pinfast.log"
    echo "== $name: plain | pinfast"
    paste -d'|' "$OUT/$name-plain.log" "$OUT/$name-pinfast.log" | sed 's/|/\n    pinfast: /'
    # the same lines; waits: where plain takes under 10 ms and its kernel
    # sees the flag, so must pinfast (plain's own device-wide waits aside);
    # fork may take longer (the kernel copies registered pages for the
    # child: the report gives that time) but never waits for the device
    if [ "$name" = waits ]; then
        if paste -d'|' "$OUT/$name-plain.log" "$OUT/$name-pinfast.log" | sed '/^fork /s/10 ms OR MORE/under 10 ms/' |
            grep -E 'under 10 ms, the kernel saw[^|]*\|' | grep -Eq '\|.*(OR MORE|did NOT)'; then
            echo "   ADDED A WAIT"
            rc=1
        fi
    elif ! cmp -s "$OUT/$name-plain.log" "$OUT/$name-pinfast.log"; then
        echo "   DIFFERENT"
        rc=1
    fi
    sed 's/^/   plain time: /' "$OUT/$name-plain.err"
    sed 's/^/   pinfast time: /' "$OUT/$name-pinfast.err"
    grep -o '"registrations":{[^}]*}' "$OUT/$name-report.json" 2>/dev/null
}
run data data "$OUT/libpf_plugin.so"
run waits waits
run readonly-heap readonly heap
run readonly-mmap readonly mmap
echo "ownership: $([ $rc = 0 ] && echo all the same || echo DIFFERENCES)"
exit $rc
