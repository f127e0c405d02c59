/* Cost of classifying a host pointer the map knows (target: under 200 ns
 * for known ranges).  Links the shim's interval map directly: N pinned-like
 * ranges are recorded, then random addresses inside and between them are
 * looked up; every answer is checked, so the run also proves the map right.
 * Prints one line per N; run by CTest, which checks only the answers. */
#include "../shim/memory/hostmap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

int main(void) {
    const uintptr_t base = (uintptr_t)1 << 40, stride = (uintptr_t)1 << 22, size = (uintptr_t)1 << 21;
    size_t added = 0;
    int bad = 0;
    for (size_t n = 16; n <= 16384; n *= 4) {
        for (; added < n; added++) /* ranges [base + i*stride, + size) */
            pf_hostmap_add((void *)(base + added * stride), size,
                           added % 2 ? PF_MEM_PINNED : PF_MEM_MANAGED, 0);
        const int lookups = 2000000;
        uintptr_t *addr = malloc(lookups * sizeof *addr);
        for (int i = 0; i < lookups; i++)
            addr[i] = base + (next() % n) * stride + next() % stride;
        double t0 = now();
        for (int i = 0; i < lookups; i++) {
            struct pf_range r;
            size_t k = (addr[i] - base) / stride;
            int inside = (addr[i] - base) % stride < size;
            int found = pf_hostmap_find((void *)addr[i], &r);
            enum pf_mem want = k % 2 ? PF_MEM_PINNED : PF_MEM_MANAGED;
            if (found != inside || (found && r.kind != want) ||
                (!found && (addr[i] < r.base || addr[i] >= r.end)))
                bad++;
        }
        double t = now() - t0;
        printf("hostmap: %6zu ranges: %.1f ns per lookup (%d lookups, half inside a range)\n", n,
               t / lookups * 1e9, lookups);
        free(addr);
    }
    printf("hostmap: %d wrong answers\n", bad);
    return bad != 0;
}
