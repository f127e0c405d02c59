/* The free 2 MiB units of pinfast's reserved range (heap.c), as extents
 * in address order: first fit, merged with their neighbours when given
 * back.  Private to memory/; the heap's lock held for all. */
#ifndef PINFAST_HEAP_UNITS_H
#define PINFAST_HEAP_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* The bytes the table of a range of n units takes; made at mem, all free. */
size_t pf_units_bytes(uint32_t n);
void pf_units_init(void *mem, uint32_t n);
/* n free units, first fit: the first, or -1. */
long pf_units_take(uint32_t n);
/* Units [at, at+n) are free again. */
void pf_units_give(uint32_t at, uint32_t n);
/* Whether units [at, at+n) are all free; taken (they are). */
int pf_units_free_at(uint32_t at, uint32_t n);
void pf_units_take_at(uint32_t at, uint32_t n);

#endif
