/* Forwarder for bench/hostmap_bench.c, which includes "../shim/hostmap.h":
 * the host map lives in memory/.  Goes once bench/ names memory/hostmap.h. */
#include "memory/hostmap.h"
