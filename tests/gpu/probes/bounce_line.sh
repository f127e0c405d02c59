#!/usr/bin/env bash
# Where the line between bounce, staging and pass-through falls for an
# asynchronous pageable H2D (tests/gpu/probes/bounce_line.c): the probe
# plain, under pinfast with PINFAST_BOUNCE=0 (small copies pass through, as
# before the bounce area) and at the defaults, one table each.
#   B=build-gpu tests/gpu/probes/bounce_line.sh    ($B/libpinfast.so)
set -u
B=${B:-build-gpu}
CUDA=${CUDA_HOME:-/usr/local/cuda}
cc -O2 -Wall -Wextra -I"$CUDA/include" tests/gpu/probes/bounce_line.c -L"$CUDA/lib64/stubs" -lcuda \
  -o /tmp/bounce_line || exit 2
LIB=$(cd "$B" && pwd)/libpinfast.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/tmp/bounce_line plain || exit 1
LD_PRELOAD=$LIB PINFAST_BOUNCE=0 PINFAST_STATS=off /tmp/bounce_line "pinfast PINFAST_BOUNCE=0" || exit 1
LD_PRELOAD=$LIB PINFAST_STATS=text /tmp/bounce_line "pinfast default" || exit 1
