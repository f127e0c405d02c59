#!/usr/bin/env bash
# The fake driver (tests/fake) against the real one, where the tests rely on
# it answering alike: each probe below prints JSON lines of what the driver
# answered, run on the GPU's driver and on the fake; any difference is
# printed and fails the check.  The probes and the fake come from a build
# tree (tests/gpu_probe_*, tests/fake/libcuda.so.1).
#   probe_ctx_flags         a context's scheduling flags (registered copies'
#                           own wait in blocking-sync contexts)
#   probe_ctx_registration  what a destroyed context leaves of its
#                           registrations and pinned allocations
#   probe_dontfork          a registered range's MADV_DONTFORK advice, and
#                           what a forked child gets of the range
#   probe_reg_pieces        copies across a registration's end, or across
#                           two registrations (their results; the times,
#                           fields named *_gbps and *_us, are left out)
# Usage: B=build tests/gpu/checks/fake_parity.sh
set -u -o pipefail
B=${B:-build}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
rc=0
for p in ctx_flags ctx_registration dontfork reg_pieces; do
    exe=$B/tests/gpu_probe_$p
    timeout 120 "$exe" 2>&1 | sed -E 's/"[a-z0-9_]+_(gbps|us)":[0-9.]+,//g' >"$OUT/$p-driver.jsonl" ||
        { echo "$p: exit $? on the driver"; rc=1; }
    LD_LIBRARY_PATH=$B/tests/fake timeout 120 "$exe" 2>&1 | sed -E 's/"[a-z0-9_]+_(gbps|us)":[0-9.]+,//g' \
        >"$OUT/$p-fake.jsonl" || { echo "$p: exit $? on the fake"; rc=1; }
    if diff "$OUT/$p-driver.jsonl" "$OUT/$p-fake.jsonl" >"$OUT/$p.diff"; then
        echo "$p: the same $(wc -l <"$OUT/$p-driver.jsonl") lines"
    else
        echo "$p: the fake answers otherwise (< driver, > fake):"
        cat "$OUT/$p.diff"
        rc=1
    fi
done
exit $rc
