/* Destinations never touched: huge-page advice before a D2H writes them. */
#ifndef PINFAST_FRESH_H
#define PINFAST_FRESH_H

#include <stddef.h>

/* Advises MADV_HUGEPAGE on the 2 MiB aligned interior of [p, p+n) when it
 * is not yet in memory and the system uses huge pages on advice; returns 1
 * if it did. */
int pf_fresh_advise(void *p, size_t n);

#endif
