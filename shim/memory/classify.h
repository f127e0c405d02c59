/* What kind of memory an address is, for choosing a path and for the report. */
#ifndef PINFAST_CLASSIFY_H
#define PINFAST_CLASSIFY_H

#include "hostmap.h"

#include <stdint.h>

/* From the map of intercepted allocations first (it alone tells the program's
 * pinned memory from pinfast's), then from the driver. */
enum pf_mem pf_classify(uintptr_t p);

/* The same without this thread's cache of earlier answers: for decisions
 * that must not rest on a region-wide answer. */
enum pf_mem pf_classify_uncached(uintptr_t p);

#endif
