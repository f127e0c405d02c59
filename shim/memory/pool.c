/* Blocks are reused only with the exact size, allocating API, flags and
 * context they were made with, so that everything the driver says about a
 * pooled block (cuMemHostGetFlags, cuMemHostGetDevicePointer, the attributes
 * of its range) is what it says of a fresh one.  A freed block is reused only
 * after the context has been synchronised at the free, as the driver's own
 * cuMemFreeHost does: no queued copy or kernel (mapped memory) still uses it. */
#include "pool.h"
#include "../driver/capture.h"
#include "../base/clock.h"
#include "../driver/driver.h"
#include "hostmap.h"
#include "../base/options.h"
#include "../base/libc.h"

#include <pthread.h>
#include <stdlib.h>

struct pinned_block {
    void *p;
    size_t size;
    unsigned flags;
    int api;
    CUcontext ctx;
    unsigned long long ctx_id;
    uint64_t alloc_ns;                /* what a fresh one cost: the time a reuse saves */
    int idle;                         /* freed by the program, cached */
    unsigned settles;                 /* idle: the program's context waits seen since */
    struct pinned_block *prev, *next; /* idle blocks, most recently freed last */
    struct pinned_block *chain;       /* the next block of its bucket */
};

/* Every block by address, chained: a program holds at most thousands. */
#define BUCKETS 1024
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pinned_block *buckets[BUCKETS];
static struct pinned_block *oldest, *newest; /* idle list */
static struct pf_pool_stats stats;

static struct pinned_block **bucket(const void *p) {
    uintptr_t a = (uintptr_t)p >> 12; /* pinned blocks are page-aligned */
    return &buckets[(a ^ (a >> 10)) % BUCKETS];
}

static struct pinned_block *find(const void *p) {
    struct pinned_block *b = *bucket(p);
    while (b && b->p != p)
        b = b->chain;
    return b;
}

static void unhash(struct pinned_block *b) {
    struct pinned_block **at = bucket(b->p);
    while (*at != b)
        at = &(*at)->chain;
    *at = b->chain;
}

static void unlink_idle(struct pinned_block *b) {
    *(b->prev ? &b->prev->next : &oldest) = b->next;
    *(b->next ? &b->next->prev : &newest) = b->prev;
    b->prev = b->next = NULL;
    b->idle = 0;
    stats.idle_bytes -= b->size;
}

void *pf_pool_take(int api, size_t size, unsigned flags) {
    CUcontext ctx;
    unsigned long long id;
    /* during a capture the driver may refuse the allocation: let it answer */
    if (!pf_options()->pool_idle || pf_capturing() || !pf_current_context(&ctx, &id))
        return NULL;
    pthread_mutex_lock(&lock);
    struct pinned_block *b = newest;
    while (b && !(b->size == size && b->api == api && b->flags == flags && b->ctx_id == id))
        b = b->prev;
    if (b) {
        unlink_idle(b);
        stats.hits++;
        stats.saved_seconds += (double)b->alloc_ns * 1e-9;
    } else {
        stats.misses++;
    }
    pthread_mutex_unlock(&lock);
    return b ? b->p : NULL;
}

void pf_pool_adopt(void *p, int api, size_t size, unsigned flags, uint64_t alloc_ns) {
    struct pinned_block *b;
    if (!pf_options()->pool_idle || !(b = pf_libc_calloc(1, sizeof *b)))
        return; /* an untracked block is freed by the driver, as without pinfast */
    if (!pf_current_context(&b->ctx, &b->ctx_id)) {
        pf_libc_free(b);
        return;
    }
    b->p = p;
    b->size = size;
    b->api = api;
    b->flags = flags;
    b->alloc_ns = alloc_ns;
    struct pinned_block *stale;
    pthread_mutex_lock(&lock);
    /* the driver gave out this address again: the old record belonged to a
     * context destroyed behind pinfast's back, which freed the block */
    if ((stale = find(p))) {
        if (stale->idle)
            unlink_idle(stale);
        unhash(stale);
    }
    struct pinned_block **at = bucket(p);
    b->chain = *at;
    *at = b;
    pthread_mutex_unlock(&lock);
    pf_libc_free(stale);
}

/* The blocks of the list `trim` go back to the driver (lock not held). */
static void give_back(struct pinned_block *trim) {
    while (trim) {
        struct pinned_block *o = trim;
        trim = o->next;
        PF_CALL(cuMemFreeHost, o->p);
        pf_libc_free(o);
    }
}

int pf_pool_free(void *p, CUresult *result) {
    pthread_mutex_lock(&lock);
    struct pinned_block *b = find(p);
    int idle = b && b->idle;
    pthread_mutex_unlock(&lock);
    if (!b)
        return 0;
    if (idle) { /* freed twice: what the driver answers for memory it does not know */
        *result = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    CUcontext ctx;
    unsigned long long id;
    uint64_t t0 = pf_now_ns();
    /* the synchronisation would invalidate a capture under way in any mode
     * (tests/gpu/probes/capture_modes.c): then the driver frees the block */
    int cache = !pf_capturing() && pf_current_context(&ctx, &id) && id == b->ctx_id &&
                PF_CALL(cuCtxSynchronize) == CUDA_SUCCESS;
    uint64_t synced = pf_now_ns() - t0;
    struct pinned_block *trim = NULL;
    pthread_mutex_lock(&lock);
    stats.sync_seconds += (double)synced * 1e-9;
    if (b->idle) { /* another thread freed it meanwhile */
        pthread_mutex_unlock(&lock);
        *result = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    if (!cache) { /* not ours to keep: the driver frees it and gives its own answer */
        unhash(b);
        pthread_mutex_unlock(&lock);
        pf_libc_free(b);
        return 0;
    }
    b->idle = 1;
    b->settles = 0;
    b->prev = newest;
    *(newest ? &newest->next : &oldest) = b;
    newest = b;
    stats.idle_bytes += b->size;
    /* over the cap: the least recently freed blocks go back to the driver */
    while (stats.idle_bytes > pf_options()->pool_idle && oldest) {
        struct pinned_block *o = oldest;
        unlink_idle(o);
        unhash(o);
        o->next = trim;
        trim = o;
        stats.trimmed++;
    }
    if (stats.idle_bytes > stats.peak_idle_bytes)
        stats.peak_idle_bytes = stats.idle_bytes;
    pthread_mutex_unlock(&lock);
    give_back(trim);
    *result = CUDA_SUCCESS;
    return 1;
}

int pf_pool_idle_at(uintptr_t p) {
    if (!__atomic_load_n(&oldest, __ATOMIC_RELAXED))
        return 0;
    pthread_mutex_lock(&lock);
    struct pinned_block *b = oldest;
    while (b && p - (uintptr_t)b->p >= b->size)
        b = b->next;
    pthread_mutex_unlock(&lock);
    return b != NULL;
}

void pf_pool_settle(void) {
    struct pinned_block *trim = NULL;
    pthread_mutex_lock(&lock);
    for (struct pinned_block *b = oldest, *next; b; b = next) {
        next = b->next;
        if (++b->settles < 2)
            continue;
        unlink_idle(b);
        unhash(b);
        b->next = trim;
        trim = b;
        stats.trimmed++;
    }
    pthread_mutex_unlock(&lock);
    give_back(trim);
}

void pf_pool_stats(struct pf_pool_stats *out) {
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

/* The driver freed the context's blocks with it: forget them, idle or in
 * the program's hands, and their host-map entries. */
void pf_pool_context_gone(CUcontext ctx) {
    struct pinned_block *dead = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < BUCKETS; i++)
        for (struct pinned_block **at = &buckets[i]; *at;) {
            struct pinned_block *b = *at;
            if (b->ctx != ctx) {
                at = &b->chain;
                continue;
            }
            *at = b->chain;
            if (b->idle)
                unlink_idle(b);
            b->next = dead;
            dead = b;
        }
    pthread_mutex_unlock(&lock);
    while (dead) {
        struct pinned_block *b = dead;
        dead = b->next;
        pf_hostmap_remove(b->p, &(struct pf_range){0});
        pf_libc_free(b);
    }
}

void pf_pool_forked(void) {
    pthread_mutex_init(&lock, NULL);
    /* the records leak: the child must not free them */
    for (int i = 0; i < BUCKETS; i++)
        buckets[i] = NULL;
    oldest = newest = NULL;
    stats = (struct pf_pool_stats){0};
}
