#!/usr/bin/env bash
# session 6 call 8: the GPU safety suites on the library with boxes; small copies on fixed CPUs
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
B=build-gpu OUT=$OUT bash tests/gpu/safety.sh > /dev/null 2>&1; echo "safety rc=$?"
tail -40 $OUT/safety.log; tar czf $OUT/safety.tgz -C $OUT safety; rm -rf $OUT/safety
bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 7 --cpus 2-5 --workloads small,small_shared 2>&1 | grep -v "^\[" | tail -40
