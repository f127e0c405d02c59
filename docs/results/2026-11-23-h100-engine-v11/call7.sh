#!/usr/bin/env bash
# session 6 call 7: the harness, the other workloads, library with boxes
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
bash tests/gpu/bench.sh --build build-bench --no-build --no-fail --workloads inference,compute,small,churn,bidir,torch_copy,torch_train 2>&1 | grep -v "^\[" | tail -60
