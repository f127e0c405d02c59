/* Moving bytes between the program's memory and pinned slots. */
#ifndef PINFAST_COPY_H
#define PINFAST_COPY_H

#include <stddef.h>

enum pf_copy_kind { PF_COPY_MEMCPY, PF_COPY_STREAM, PF_COPY_AUTO };

/* memcpy, or with non-temporal (streaming) stores, which write around the
 * caches: a slot the DMA engine reads next need not be snooped out of a
 * core's cache, and nothing is read for ownership. */
void pf_copy(enum pf_copy_kind kind, void *dst, const void *src, size_t len);

#endif
