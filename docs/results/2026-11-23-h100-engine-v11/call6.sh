#!/usr/bin/env bash
# session 6 call 6: the harness, transfer workloads, 5 runs each, library with boxes
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --runs 5 --workloads sweep,pipeline,readback 2>&1 | grep -v "^\[" | tail -80
