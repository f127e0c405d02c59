#!/usr/bin/env bash
# On the GPU machine: the bench harness with its results copied to $OUT.
set -u
export PYTHONUNBUFFERED=1
bench/run "$@"
rc=$?
mkdir -p "$OUT/r"
latest=$(ls -t docs/results/*-bench*.jsonl 2>/dev/null | grep -v raw | head -1)
if [ -n "$latest" ]; then
  stem=${latest%.jsonl}
  tar czf "$OUT/r/results.tgz" "$stem"* docs/results/*-pinfast-stats 2>/dev/null
fi
exit $rc
