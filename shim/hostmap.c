/* Forwarder for bench/CMakeLists.txt, which builds hostmap_bench from
 * shim/hostmap.c: the host map lives in memory/ (not part of the library's
 * sources).  Goes once bench/ names memory/hostmap.c. */
#include "memory/hostmap.c"
