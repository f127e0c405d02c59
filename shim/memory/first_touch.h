/* Destinations never touched: huge-page advice before a D2H writes them,
 * and their faults taken ahead of the copy, spread across threads. */
#ifndef PINFAST_FIRST_TOUCH_H
#define PINFAST_FIRST_TOUCH_H

#include <stddef.h>

#define PF_HUGE_PAGE ((size_t)2 << 20)

/* Advises MADV_HUGEPAGE on the 2 MiB aligned interior of [p, p+n) when it
 * is not yet in memory and the system uses huge pages on advice; returns
 * the interior's length, its start in *interior (0: nothing advised). */
size_t pf_first_touch_advise(void *p, size_t n, char **interior);

/* The page-aligned interior of [p, p+n), its length (0: none) and start in
 * *interior, when its first page is not yet in memory: a destination never
 * touched, for which pf_first_touch_advise gave no advice. */
size_t pf_first_touch_fresh(void *p, size_t n, char **interior);

/* Faults [p, p+n) in, writable, changing no byte (MADV_POPULATE_WRITE);
 * where the kernel cannot, the copy faults the pages itself. */
void pf_first_touch_populate(void *p, size_t n);

#endif
