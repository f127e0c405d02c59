#!/bin/sh
# valgrind.sh [build dir] - run the tests labelled "valgrind" under memcheck.
#
# Takes each test's command and environment from CTest itself
# (ctest --show-only=json-v1), so the plain and the pinfast variants run
# exactly as registered (LD_PRELOAD included: valgrind hands it on to the
# program), with PFT_QUICK=1 (small sizes) and PINFAST_MIN_SIZE=0 (so that
# the staging engine runs even for small copies).  memcheck's free replaces
# pinfast's, so pinfast's registration cache registers nothing here
# (test_data's test_freed_blocks checks it).  Fails on the first test
# that fails or that memcheck reports an error in.  Use a build without
# sanitizers.  Extra valgrind options: $VALGRIND_OPTS.
set -eu
build=${1:-build}
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not found" >&2; exit 2; }
list=$(mktemp)
trap 'rm -f "$list"' EXIT
ctest --test-dir "$build" -L valgrind --show-only=json-v1 > "$list"
python3 - "$list" <<'PY'
import json, os, subprocess, sys, time
tests = json.load(open(sys.argv[1]))["tests"]
failed = 0
for t in tests:
    env = dict(os.environ)
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    for kv in props.get("ENVIRONMENT", []):
        k, _, v = kv.partition("=")
        env[k] = v
    env["PFT_QUICK"] = "1"
    env["PINFAST_MIN_SIZE"] = "0"
    cmd = ["valgrind", "--error-exitcode=1", "--trace-children=yes", "--quiet"]
    cmd += os.environ.get("VALGRIND_OPTS", "").split()
    cmd += t["command"]
    t0 = time.time()
    r = subprocess.run(cmd, env=env, cwd=props.get("WORKING_DIRECTORY"),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = r.returncode == 0
    print("%-28s %s  %.1f s" % (t["name"], "passed" if ok else "FAILED (status %d)" % r.returncode,
                                 time.time() - t0), flush=True)
    if not ok:
        failed += 1
        print(r.stdout[-6000:])
print("%d of %d tests failed under valgrind" % (failed, len(tests)))
sys.exit(1 if failed else 0)
PY
