/* Moving bytes between the program's memory and pinned slots. */
#ifndef PINFAST_HOSTCOPY_H
#define PINFAST_HOSTCOPY_H

#include "../base/types.h"

#include <stddef.h>

/* memcpy, or with non-temporal (streaming) stores, which write around the
 * caches: a slot the DMA engine reads next need not be snooped out of a
 * core's cache, and nothing is read for ownership. */
void pf_copy_bytes(enum pf_host_copy kind, void *dst, const void *src, size_t len);

/* len bytes of rows `row` bytes wide (0: one run), `dpitch` and `spitch`
 * apart on each side. */
void pf_copy_rows(enum pf_host_copy kind, char *dst, size_t dpitch, const char *src, size_t spitch, size_t row,
                  size_t len);

#endif
