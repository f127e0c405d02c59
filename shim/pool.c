/* Blocks are reused only with the exact size, allocating API, flags and
 * context they were made with, so that everything the driver says about a
 * pooled block (cuMemHostGetFlags, cuMemHostGetDevicePointer, the attributes
 * of its range) is what it says of a fresh one.  A freed block is reused only
 * after the context has been synchronised at the free, as the driver's own
 * cuMemFreeHost does: no queued copy or kernel (mapped memory) still uses it. */
#include "pool.h"
#include "clock.h"
#include "driver.h"
#include "message.h"
#include "options.h"

#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

struct block {
    void *p;
    size_t size;
    unsigned flags;
    int api;
    CUcontext ctx;
    unsigned long long ctx_id;
    uint64_t alloc_ns;         /* what a fresh one cost: the time a reuse saves */
    int idle;                  /* freed by the program, cached */
    struct block *prev, *next; /* idle blocks, most recently freed last */
    UT_hash_handle hh;         /* every block, by p */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct block *blocks;           /* by address */
static struct block *oldest, *newest;  /* idle list */
static struct pf_pool_stats stats;

static void unlink_idle(struct block *b) {
    *(b->prev ? &b->prev->next : &oldest) = b->next;
    *(b->next ? &b->next->prev : &newest) = b->prev;
    b->prev = b->next = NULL;
    b->idle = 0;
    stats.idle_bytes -= b->size;
}

void *pf_pool_take(int api, size_t size, unsigned flags) {
    CUcontext ctx;
    unsigned long long id;
    if (!pf_options()->pool_idle || !pf_current_context(&ctx, &id))
        return NULL;
    pthread_mutex_lock(&lock);
    struct block *b = newest;
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
    struct block *b;
    if (!pf_options()->pool_idle || !(b = calloc(1, sizeof *b)))
        return; /* an untracked block is freed by the driver, as without pinfast */
    if (!pf_current_context(&b->ctx, &b->ctx_id)) {
        free(b);
        return;
    }
    b->p = p;
    b->size = size;
    b->api = api;
    b->flags = flags;
    b->alloc_ns = alloc_ns;
    struct block *stale;
    pthread_mutex_lock(&lock);
    /* the driver gave out this address again: the old record belonged to a
     * destroyed context, which freed the block */
    HASH_FIND_PTR(blocks, &p, stale);
    if (stale) {
        if (stale->idle)
            unlink_idle(stale);
        HASH_DEL(blocks, stale);
    }
    HASH_ADD_PTR(blocks, p, b);
    pthread_mutex_unlock(&lock);
    free(stale);
}

/* The block's context, if it still exists: a destroyed context took its
 * blocks with it, and their addresses may belong to someone else by now. */
static int alive(const struct block *b) {
    unsigned long long id;
    return PF_CALL(cuCtxGetId, b->ctx, &id) == CUDA_SUCCESS && id == b->ctx_id;
}

int pf_pool_free(void *p, CUresult *result) {
    struct block *b;
    pthread_mutex_lock(&lock);
    HASH_FIND_PTR(blocks, &p, b);
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
    int cache = pf_current_context(&ctx, &id) && id == b->ctx_id &&
                PF_CALL(cuCtxSynchronize) == CUDA_SUCCESS;
    uint64_t synced = pf_now_ns() - t0;
    struct block *trim = NULL;
    pthread_mutex_lock(&lock);
    stats.sync_seconds += (double)synced * 1e-9;
    if (b->idle) { /* another thread freed it meanwhile */
        pthread_mutex_unlock(&lock);
        *result = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    if (!cache) { /* not ours to keep: the driver frees it and gives its own answer */
        HASH_DEL(blocks, b);
        pthread_mutex_unlock(&lock);
        free(b);
        return 0;
    }
    b->idle = 1;
    b->prev = newest;
    *(newest ? &newest->next : &oldest) = b;
    newest = b;
    stats.idle_bytes += b->size;
    /* over the cap: the least recently freed blocks go back to the driver */
    while (stats.idle_bytes > pf_options()->pool_idle && oldest) {
        struct block *o = oldest;
        unlink_idle(o);
        HASH_DEL(blocks, o);
        o->next = trim;
        trim = o;
        stats.trimmed++;
    }
    if (stats.idle_bytes > stats.peak_idle_bytes)
        stats.peak_idle_bytes = stats.idle_bytes;
    pthread_mutex_unlock(&lock);
    while (trim) {
        struct block *o = trim;
        trim = o->next;
        if (alive(o))
            PF_CALL(cuMemFreeHost, o->p);
        free(o);
    }
    *result = CUDA_SUCCESS;
    return 1;
}

void pf_pool_stats(struct pf_pool_stats *out) {
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

void pf_pool_forked(void) {
    pthread_mutex_init(&lock, NULL);
    blocks = oldest = newest = NULL; /* the records leak: the child must not free them */
    stats = (struct pf_pool_stats){0};
}
