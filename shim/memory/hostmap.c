/* A sorted array searched by bisection under a reader-writer lock: lookups
 * (every copy) vastly outnumber changes (allocations), ranges do not overlap,
 * and a program holds at most thousands of pinned blocks. */
#include "hostmap.h"
#include "../base/libc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct pf_range *ranges;
static size_t count, cap;
static size_t live; /* read without the lock: skip it all while empty */
unsigned pf_hostmap_generation_;

void pf_hostmap_touch(void) { __atomic_fetch_add(&pf_hostmap_generation_, 1, __ATOMIC_RELEASE); }

/* First index whose base is > p. */
static size_t upper(uintptr_t p) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void pf_hostmap_add(const void *base, size_t size, enum pf_mem kind, unsigned flags) {
    uintptr_t b = (uintptr_t)base;
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(b);
    if (i > 0 && ranges[i - 1].base == b) {
        ranges[i - 1] = (struct pf_range){b, b + size, kind, flags};
    } else {
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct pf_range *n = pf_libc_realloc(ranges, ncap * sizeof *n);
            if (!n) { /* unknown ranges are classified by the driver instead */
                pthread_rwlock_unlock(&lock);
                return;
            }
            ranges = n;
            cap = ncap;
        }
        memmove(&ranges[i + 1], &ranges[i], (count - i) * sizeof *ranges);
        ranges[i] = (struct pf_range){b, b + size, kind, flags};
        count++;
    }
    __atomic_store_n(&live, count, __ATOMIC_RELEASE);
    pf_hostmap_touch();
    pthread_rwlock_unlock(&lock);
}

int pf_hostmap_remove(const void *base, struct pf_range *out) {
    if (!__atomic_load_n(&live, __ATOMIC_ACQUIRE)) {
        pf_hostmap_touch(); /* a device free: see pf_hostmap_generation */
        return 0;
    }
    uintptr_t b = (uintptr_t)base;
    int found = 0;
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(b);
    if (i > 0 && ranges[i - 1].base == b) {
        if (out)
            *out = ranges[i - 1];
        memmove(&ranges[i - 1], &ranges[i], (count - i) * sizeof *ranges);
        count--;
        found = 1;
    }
    __atomic_store_n(&live, count, __ATOMIC_RELEASE);
    pf_hostmap_touch();
    pthread_rwlock_unlock(&lock);
    return found;
}

int pf_hostmap_find(const void *p, struct pf_range *out) {
    out->base = 0;
    out->end = UINTPTR_MAX;
    if (!__atomic_load_n(&live, __ATOMIC_ACQUIRE))
        return 0;
    uintptr_t a = (uintptr_t)p;
    int found = 0;
    pthread_rwlock_rdlock(&lock);
    size_t i = upper(a);
    if (i > 0 && a < ranges[i - 1].end) {
        *out = ranges[i - 1];
        found = 1;
    } else {
        out->base = i > 0 ? ranges[i - 1].end : 0;
        out->end = i < count ? ranges[i].base : UINTPTR_MAX;
    }
    pthread_rwlock_unlock(&lock);
    return found;
}

void pf_hostmap_fork_prepare(void) { pthread_rwlock_wrlock(&lock); }
void pf_hostmap_fork_done(void) { pthread_rwlock_unlock(&lock); }
/* glibc records a write lock's owner by thread id, which the child does not
 * share with the parent: its unlock alone would leave the lock held for ever,
 * so the lock is made anew.  The unlock before tells a thread checker
 * (TSan), which sees the same thread, that the lock was released. */
void pf_hostmap_forked(void) {
    pthread_rwlock_unlock(&lock);
    pthread_rwlock_init(&lock, NULL);
}
