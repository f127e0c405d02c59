/* Per-thread counters: each thread counts in a block of its own with plain
 * loads and stores; blocks outlive their threads and go to the next. */
#include "counters.h"
#include "callsite.h"
#include "latepin.h"
#include "names.h"
#include "trace.h"
#include "../base/clock.h"
#include "../base/options.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCKS 256 /* threads counting at once in blocks of their own; more share one */

/* Threads beyond BLOCKS, and a thread after its block went back: atomic adds. */
static struct pf_thread_counters shared;
static struct pf_thread_counters *blocks; /* every block made, newest first; never freed */
static int nblocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int keyed; /* key made: a block can go back when its thread ends */
static __thread struct pf_thread_counters *mine;

struct pf_counter pf_alloc_counters[PF_ALLOC_API_COUNT];
int pf_stats_used;
static uint64_t start_ns;

static void add_atomic(struct pf_counter *c, size_t bytes, uint64_t ticks, int result) {
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->ticks, ticks, __ATOMIC_RELAXED);
    if (result)
        __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
}

/* No lock prefix: only this thread writes v. */
static inline void bump(uint64_t *v, uint64_t by) {
    __atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + by, __ATOMIC_RELAXED);
}

static inline void add(struct pf_thread_counters *b, struct pf_counter *c, size_t bytes, uint64_t ticks,
                       int result) {
    if (__builtin_expect(b == &shared, 0)) {
        add_atomic(c, bytes, ticks, result);
        return;
    }
    bump(&c->calls, 1);
    bump(&c->ticks, ticks);
    if (result)
        bump(&c->errors, 1);
    else
        bump(&c->bytes, bytes);
}

/* A later destructor of the ending thread counts in the shared block. */
static void thread_ends(void *p) {
    struct pf_thread_counters *b = p;
    mine = &shared;
    pthread_mutex_lock(&lock);
    b->owned = 0;
    pthread_mutex_unlock(&lock);
}

static void make_key(void) { keyed = !pthread_key_create(&key, thread_ends); }

/* This thread's block: one a thread that ended left, or a new one (mmap:
 * zero pages, touched only where counted), or the shared one. */
__attribute__((cold)) static struct pf_thread_counters *claim(void) {
    pthread_once(&once, make_key);
    struct pf_thread_counters *b = NULL;
    pthread_mutex_lock(&lock);
    if (keyed) {
        for (b = blocks; b && b->owned; b = b->next)
            ;
        if (!b && nblocks < BLOCKS) {
            void *p = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
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
    return mine = b ? b : &shared;
}

static inline struct pf_thread_counters *counters(void) {
    struct pf_thread_counters *b = mine;
    return __builtin_expect(b != NULL, 1) ? b : claim();
}

static int bucket(size_t bytes) {
    int k = bytes ? 63 - __builtin_clzll((unsigned long long)bytes) : 0;
    return k < PF_SIZE_BUCKETS ? k : PF_SIZE_BUCKETS - 1;
}

/* A call that ended just now and took ticks; out of line, so that the
 * common path saves no registers for it. */
__attribute__((cold)) static void trace(const char *api, const char *dir, const char *mem,
                                        const char *path, size_t bytes, uint64_t ticks,
                                        int result) {
    uint64_t ns = pf_ticks_to_ns(ticks);
    pf_trace(api, dir, mem, path, bytes, pf_now_ns() - ns, ns, result);
}

__thread struct pf_time_sampler pf_time_sampler;

/* A thread's first small copies, and every copy when each is to be timed. */
unsigned pf_time_weight_slow(void) {
    struct pf_time_sampler *t = &pf_time_sampler;
    if (t->small < PF_TIME_EXACT && ++t->small == PF_TIME_EXACT)
        t->rng = (uint32_t)(uintptr_t)t * 2654435761u | 1; /* a stream per thread */
    return 1;
}

void pf_stats_copy(enum pf_copy_api api, enum pf_dir dir, enum pf_mem mem, enum pf_path path,
                   size_t bytes, uint64_t ticks, int result) {
    struct pf_thread_counters *b = counters();
    add(b, &b->copies[api][dir][mem][path], bytes, ticks, result);
    add(b, &b->sizes[dir][bucket(bytes)], bytes, ticks, result);
    if (!result && mem == PF_MEM_PAGEABLE && (dir == PF_DIR_H2D || dir == PF_DIR_D2H))
        pf_latepin_copy(bytes);
    if (__builtin_expect(pf_options()->trace != NULL, 0))
        trace(pf_copy_api_names[api], pf_dir_names[dir], pf_mem_names[mem], pf_path_names[path], bytes, ticks,
              result);
    /* last, a tail call: its stack walks are no part of the traced call */
    pf_callsite_copy(result ? 0 : bytes, ticks);
}

void pf_stats_alloc(enum pf_alloc_api api, size_t bytes, uint64_t ticks, int result) {
    add_atomic(&pf_alloc_counters[api], bytes, ticks, result);
    if (pf_options()->trace)
        trace(pf_alloc_api_names[api], "-", "-", "-", bytes, ticks, result);
}

void pf_stats_round_trip(size_t bytes) {
    struct pf_thread_counters *b = counters();
    add(b, &b->trips, bytes, 0, 0);
}

/* No thread is inside claim() or thread_ends() while the process forks. */
void pf_stats_fork_prepare(void) { pthread_mutex_lock(&lock); }
void pf_stats_fork_done(void) { pthread_mutex_unlock(&lock); }

/* Only the forking thread lives on in the child: it keeps its block, the
 * other threads' blocks are free for the child's new threads. */
static void clear(struct pf_thread_counters *b) {
    memset(b->copies, 0, sizeof b->copies);
    memset(b->sizes, 0, sizeof b->sizes);
    memset(&b->trips, 0, sizeof b->trips);
}

void pf_stats_forked(void) {
    pthread_mutex_unlock(&lock);
    clear(&shared);
    for (struct pf_thread_counters *b = blocks; b; b = b->next) {
        clear(b);
        b->owned = b == mine;
    }
    memset(pf_alloc_counters, 0, sizeof pf_alloc_counters);
    pf_callsite_reset();
    pf_latepin_reset();
    pf_stats_used = 0;
    start_ns = pf_now_ns();
}


void pf_counters_each(void (*fn)(const struct pf_thread_counters *)) {
    fn(&shared);
    pthread_mutex_lock(&lock);
    for (const struct pf_thread_counters *b = blocks; b; b = b->next)
        fn(b);
    pthread_mutex_unlock(&lock);
}

uint64_t pf_counters_start_ns(void) { return start_ns; }

__attribute__((constructor)) static void stats_start(void) { start_ns = pf_now_ns(); }
