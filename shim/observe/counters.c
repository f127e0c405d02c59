/* Per-thread counters: each thread counts in a block of its own with plain
 * loads and stores; blocks outlive their threads and go to the next. */
#include "counters.h"
#include "../base/clock.h"
#include "../base/libc.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCKS 256 /* threads counting at once in blocks of their own; more share one */

/* Threads beyond BLOCKS, and a thread after its block went back: atomic adds. */
struct pf_thread_counters pf_counters_shared;
static struct pf_thread_counters *blocks; /* every block made, newest first; never freed */
static int nblocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int keyed; /* key made: a block can go back when its thread ends */
__thread struct pf_thread_counters *pf_counters_mine;

struct pf_counter pf_alloc_counters[PF_ALLOC_API_COUNT];
struct pf_busy pf_busy[PF_COPY_API_COUNT][PF_DIR_COUNT][PF_MEM_COUNT][PF_PATH_COUNT];
int pf_stats_used;
static uint64_t start_ns;

void pf_counter_add_atomic(struct pf_counter *c, size_t bytes, uint64_t ticks, int result) {
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->ticks, ticks, __ATOMIC_RELAXED);
    if (result)
        __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
}

void pf_busy_add(struct pf_busy *b, uint64_t t0, uint64_t took, unsigned weight) {
    uint64_t t1 = t0 + took, first = 0, end = __atomic_load_n(&b->end, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&b->first, __ATOMIC_RELAXED))
        __atomic_compare_exchange_n(&b->first, &first, t0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    do {
        if (t1 <= end)
            return; /* inside time already counted */
    } while (!__atomic_compare_exchange_n(&b->end, &end, t1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    __atomic_fetch_add(&b->ticks, (t1 - (t0 > end ? t0 : end)) * weight, __ATOMIC_RELAXED);
}

uint64_t pf_busy_ticks(const struct pf_busy *b) {
    uint64_t ticks = __atomic_load_n(&b->ticks, __ATOMIC_RELAXED);
    uint64_t span = __atomic_load_n(&b->end, __ATOMIC_RELAXED) - __atomic_load_n(&b->first, __ATOMIC_RELAXED);
    return ticks < span ? ticks : span;
}

/* A later destructor of the ending thread counts in the shared block. */
static void thread_ends(void *p) {
    struct pf_thread_counters *b = p;
    pf_counters_mine = &pf_counters_shared;
    pthread_mutex_lock(&lock);
    b->owned = 0;
    pthread_mutex_unlock(&lock);
}

static void make_key(void) { keyed = !pthread_key_create(&key, thread_ends); }

/* This thread's block: one a thread that ended left, or a new one (mmap:
 * zero pages, touched only where counted), or the shared one. */
__attribute__((cold)) struct pf_thread_counters *pf_counters_claim(void) {
    pthread_once(&once, make_key);
    struct pf_thread_counters *b = NULL;
    pthread_mutex_lock(&lock);
    if (keyed) {
        for (b = blocks; b && b->owned; b = b->next)
            ;
        if (!b && nblocks < BLOCKS) {
            void *p = pf_libc_mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) {
                b = p;
                b->next = blocks;
                blocks = b;
                nblocks++;
            }
        }
        if (b)
            b->owned = 1;
    }
    pthread_mutex_unlock(&lock);
    if (b && pthread_setspecific(key, b)) {
        thread_ends(b);
        b = NULL;
    }
    return pf_counters_mine = b ? b : &pf_counters_shared;
}

/* No thread is inside claim() or thread_ends() while the process forks. */
void pf_counters_fork_prepare(void) { pthread_mutex_lock(&lock); }
void pf_counters_fork_done(void) { pthread_mutex_unlock(&lock); }

/* Only the forking thread lives on in the child: it keeps its block, the
 * other threads' blocks are free for the child's new threads. */
static void clear(struct pf_thread_counters *b) {
    memset(b->copies, 0, sizeof b->copies);
    memset(b->sizes, 0, sizeof b->sizes);
    memset(&b->trips, 0, sizeof b->trips);
}

void pf_counters_forked(void) {
    pthread_mutex_unlock(&lock);
    clear(&pf_counters_shared);
    for (struct pf_thread_counters *b = blocks; b; b = b->next) {
        clear(b);
        b->owned = b == pf_counters_mine;
    }
    memset(pf_alloc_counters, 0, sizeof pf_alloc_counters);
    memset(pf_busy, 0, sizeof pf_busy);
    pf_stats_used = 0;
    start_ns = pf_now_ns();
}

void pf_counters_each(void (*fn)(const struct pf_thread_counters *)) {
    fn(&pf_counters_shared);
    pthread_mutex_lock(&lock);
    for (const struct pf_thread_counters *b = blocks; b; b = b->next)
        fn(b);
    pthread_mutex_unlock(&lock);
}

uint64_t pf_counters_start_ns(void) { return start_ns; }

__attribute__((constructor)) static void stats_start(void) { start_ns = pf_now_ns(); }
