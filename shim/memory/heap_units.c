/* The free units of pinfast's reserved range (heap_units.h): a sorted
 * array of extents, at most one more than half the units (free and taken
 * alternate at worst). */
#include "heap_units.h"

#include <string.h>

static struct extent { uint32_t at, len; } * extents;
static size_t nextents;

size_t pf_units_bytes(uint32_t n) { return ((size_t)n / 2 + 2) * sizeof *extents; }

void pf_units_init(void *mem, uint32_t n) {
    extents = mem;
    extents[0] = (struct extent){0, n};
    nextents = 1;
}

/* Takes n units from the front of extent i. */
static uint32_t take_front(size_t i, uint32_t n) {
    uint32_t at = extents[i].at;
    extents[i].at += n;
    extents[i].len -= n;
    if (!extents[i].len)
        memmove(&extents[i], &extents[i + 1], (--nextents - i) * sizeof *extents);
    return at;
}

long pf_units_take(uint32_t n) {
    for (size_t i = 0; i < nextents; i++)
        if (extents[i].len >= n)
            return take_front(i, n);
    return -1;
}

/* The first extent at or after unit `at`. */
static size_t from(uint32_t at) {
    size_t i = 0;
    while (i < nextents && extents[i].at < at)
        i++;
    return i;
}

void pf_units_give(uint32_t at, uint32_t n) {
    size_t i = from(at);
    int left = i > 0 && extents[i - 1].at + extents[i - 1].len == at;
    int right = i < nextents && at + n == extents[i].at;
    if (left && right) {
        extents[i - 1].len += n + extents[i].len;
        memmove(&extents[i], &extents[i + 1], (--nextents - i) * sizeof *extents);
    } else if (left) {
        extents[i - 1].len += n;
    } else if (right) {
        extents[i].at = at;
        extents[i].len += n;
    } else {
        memmove(&extents[i + 1], &extents[i], (nextents++ - i) * sizeof *extents);
        extents[i] = (struct extent){at, n};
    }
}

int pf_units_free_at(uint32_t at, uint32_t n) {
    size_t i = from(at);
    return i < nextents && extents[i].at == at && extents[i].len >= n;
}

void pf_units_take_at(uint32_t at, uint32_t n) { take_front(from(at), n); }
