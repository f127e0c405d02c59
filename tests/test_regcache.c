/* test_regcache: the registration cache (shim/memory/register.c, linked in
 * here) driven from many threads at once, so that ThreadSanitizer and
 * AddressSanitizer check its locking, which the preloaded tests cannot do
 * there (the sanitizer's free comes first: nothing is registered).  Its
 * driver is a stub that keeps the registrations in a table of its own and
 * checks what a real driver would not report: no two registrations share a
 * page, a copy the cache says is registered finds its bytes registered for
 * its whole length, nothing is unregistered while a copy through it runs
 * or unregistered twice, nor a block freed (the real free) while a
 * registration holds its pages.  The cache registers, and unregisters freed
 * blocks, on a thread of its own (the registrar), and the stub's
 * registration is slow: drops and frees race it.  Each thread copies from
 * random ranges of its own heap blocks, frees them (as free() does: handed
 * to the registrar, or dropped and freed at once), undoes them
 * as a copy passed through, an madvise or a fork would, and asks whether
 * the cache owns addresses, with random sizes and bytes; registrations are
 * capped low, so that threads evict each other's.  After each drop, and
 * when a block is really freed, the block's own pages must be registered
 * no more.  Single-threaded cases hold the stub's registration until told
 * (`gate`): a copy meanwhile is staged, a free returns at once, a drop
 * waits, and the block is freed only after its unregistration. */
#include "t.h"
#include "base/options.h"
#include "driver/driver.h"
#include "memory/register.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE ((uintptr_t)4096)
#define THREADS 6
#define BLOCKS 3
#define MIN_COPY ((size_t)8 << 10)   /* PINFAST_REGISTER_MIN here */
#define MAX_BLOCK ((size_t)160 << 10)

/* ---- what register.c needs of the rest of the shim -------------------------------- */
struct pf_options pf_options_parsed = {.reg = 1, .reg_min = MIN_COPY, .reg_after = 2,
                                       .reg_max = (size_t)320 << 10 /* two blocks: eviction */};
int pf_options_ready = 1;
const struct pf_options *pf_options_load(void) { return &pf_options_parsed; }
CUstreamCaptureMode pf_capture_relax(void) { return CU_STREAM_CAPTURE_MODE_RELAXED; }
void pf_capture_restore(CUstreamCaptureMode mode) { (void)mode; }
int pf_dynsym_own_first(const char *name) { (void)name; return 1; }
void *pf_real_table[PF_NSYMBOLS];

/* The cache asks whether free(NULL) reaches pinfast's free (entry/vm_entries.c):
 * here free is wrapped (-Wl,--wrap=free) to answer as pinfast's does. */
void __real_free(void *p);
void __wrap_free(void *p)
{
    if (!p && __atomic_load_n(&pf_register_probe_, __ATOMIC_RELAXED))
        __atomic_store_n(&pf_register_probe_, 2, __ATOMIC_RELAXED);
    __real_free(p);
}

/* ---- failures, kept by the threads (cmocka may only fail on the main one) --------- */
static atomic_int failures;
static char first_failure[256];

static void failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failed(const char *fmt, ...)
{
    if (atomic_fetch_add(&failures, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first_failure, sizeof first_failure, fmt, ap);
    va_end(ap);
}

/* xorshift64*, one per thread (t_rand's state is the main thread's) */
static __thread uint64_t rng;

static uint64_t rnd(void)
{
    if (!rng) /* a thread of the cache's */
        rng = (uint64_t)(uintptr_t)&rng | 1;
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static size_t rnd_range(size_t lo, size_t hi) { return lo + (size_t)(rnd() % (hi - lo + 1)); }

/* ---- the stub driver: a table of registrations ------------------------------------ */
struct stub_reg { uintptr_t lo, hi; int users; };

static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stub_reg stub[1024];
static int nstub;
static atomic_long registers, unregisters;

/* A few microseconds to a yield: the cache drops its lock around each call */
static void dawdle(void)
{
    if (rnd() & 1)
        sched_yield();
    else
        for (volatile int i = (int)(rnd() % 2000); i > 0; i--)
            ;
}

static const CUcontext stub_ctx = (CUcontext)(uintptr_t)0x1000;

static CUresult stub_ctx_get(CUcontext *ctx)
{
    *ctx = stub_ctx;
    return CUDA_SUCCESS;
}

static CUresult stub_ctx_push(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }
static CUresult stub_ctx_pop(CUcontext *ctx) { (void)ctx; return CUDA_SUCCESS; }

/* The single-threaded cases hold registrations here until the gate opens
 * (5 s at most). */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gated, in_register;

static void gate_wait(void)
{
    pthread_mutex_lock(&gate_lock);
    in_register = 1;
    pthread_cond_broadcast(&gate_cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (gated && pthread_cond_timedwait(&gate_cv, &gate_lock, &until) == 0)
        ;
    in_register = 0;
    pthread_mutex_unlock(&gate_lock);
}

static atomic_int never_refuse; /* for a case that needs its registrations made */

static CUresult stub_register(void *p, size_t n, unsigned flags)
{
    (void)flags;
    uintptr_t lo = (uintptr_t)p & ~(PAGE - 1), hi = ((uintptr_t)p + n + PAGE - 1) & ~(PAGE - 1);
    if (__atomic_load_n(&gated, __ATOMIC_ACQUIRE)) {
        gate_wait();
    } else {
        usleep((useconds_t)rnd_range(20, 300)); /* registering is slow */
        if (!atomic_load(&never_refuse) && rnd() % 16 == 0) /* the locked-memory limit, say */
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub && !r; i++)
        if (stub[i].lo < hi && lo < stub[i].hi) {
            failed("%p+%zu registered over %#lx-%#lx, which shares a page", p, n, stub[i].lo, stub[i].hi);
            r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    if (!r && nstub == (int)(sizeof stub / sizeof stub[0]))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r)
        stub[nstub++] = (struct stub_reg){lo, hi, 0};
    pthread_mutex_unlock(&stub_lock);
    if (!r)
        atomic_fetch_add(&registers, 1);
    return r;
}

/* Set while the stub's one context is being destroyed: the driver then
 * releases its registrations itself, and unregistering one is an error. */
static atomic_int ctx_dying;

static CUresult stub_unregister(void *p)
{
    dawdle();
    if (atomic_load(&ctx_dying))
        failed("%p unregistered in a context being destroyed", p);
    CUresult r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub; i++)
        if (stub[i].lo == (uintptr_t)p) {
            if (stub[i].users)
                failed("%p unregistered while %d copies ran through it", p, stub[i].users);
            stub[i] = stub[--nstub];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&stub_lock);
    if (r)
        failed("%p unregistered, but not registered", p);
    else
        atomic_fetch_add(&unregisters, 1);
    return r;
}

/* A copy through a registration the cache gave: it must hold all of
 * [lo, hi); d: +1 at the copy's start, -1 at its end. */
static void stub_copy(uintptr_t lo, uintptr_t hi, int d)
{
    int found = 0;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub && !found; i++)
        if (stub[i].lo <= lo && hi <= stub[i].hi) {
            stub[i].users += d;
            found = 1;
        }
    pthread_mutex_unlock(&stub_lock);
    if (!found)
        failed("a copy of %#lx-%#lx through the cache, but it is not registered", lo, hi);
}

/* Whether a registration meets [lo, hi) */
static int stub_meets(uintptr_t lo, uintptr_t hi)
{
    int meets = 0;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub && !meets; i++)
        meets = stub[i].lo < hi && lo < stub[i].hi;
    pthread_mutex_unlock(&stub_lock);
    return meets;
}

/* The real free of a block the cache gave back: none of its own pages may
 * be registered any more. */
static atomic_long released;

static void stub_free(void *p)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + malloc_usable_size(p);
    uintptr_t first = (lo + PAGE - 1) & ~(PAGE - 1), last = hi & ~(PAGE - 1);
    if (first < last && stub_meets(first, last))
        failed("%#lx-%#lx really freed while registered", lo, hi);
    free(p);
    atomic_fetch_add(&released, 1);
}

/* free() of pinfast's (entry/vm_entries.c) */
static void program_free(void *p)
{
    if (!pf_register_free(p, (uintptr_t)p + malloc_usable_size(p), stub_free))
        stub_free(p);
}

static atomic_long freed;

/* ---- the program: threads copying, freeing and undoing their own blocks ------------ */
struct block { unsigned char *p; size_t n; uint8_t salt; };

static uint8_t byte_at(const struct block *b, size_t i) { return (uint8_t)(b->salt + i * 131 + (i >> 9)); }

static void block_new(struct block *b)
{
    b->n = rnd_range(MIN_COPY, MAX_BLOCK) | 1;
    b->p = malloc(b->n);
    if (!b->p)
        abort();
    b->salt = (uint8_t)rnd();
    for (size_t i = 0; i < b->n; i++)
        b->p[i] = byte_at(b, i);
}

/* The pages only b's own copies can have registered: its first and last
 * may be shared with a neighbour's registration. */
static void own_pages(const struct block *b, uintptr_t lo, uintptr_t hi, uintptr_t *plo, uintptr_t *phi)
{
    uintptr_t first = ((uintptr_t)b->p + PAGE - 1) & ~(PAGE - 1), last = ((uintptr_t)b->p + b->n) & ~(PAGE - 1);
    *plo = lo > first ? lo : first;
    *phi = hi < last ? hi : last;
}

static void expect_undone(const struct block *b, uintptr_t lo, uintptr_t hi, const char *how)
{
    uintptr_t plo, phi;
    own_pages(b, lo, hi, &plo, &phi);
    if (plo < phi && stub_meets(plo, phi))
        failed("%s of %#lx-%#lx returned, but its pages are still registered", how, lo, hi);
}


/* The pieces of a copy of len bytes at lo the cache said are registered:
 * each must lie in one registration of the stub's, and the pieces must
 * make up the copy, in order; d: +1 at the copy's start, -1 at its end. */
static void pieces(const struct pf_hold *h, int held, uintptr_t lo, size_t len, int d)
{
    if (!held)
        return;
    if (held != h->n)
        failed("%d pieces said, %d given", held, h->n);
    size_t next = 0;
    for (int i = 0; i < h->n; i++) {
        if (h->piece[i].off != next || !h->piece[i].len)
            failed("piece %d of a copy of %zu at %zu+%zu, not at %zu", i, len, h->piece[i].off, h->piece[i].len, next);
        next = h->piece[i].off + h->piece[i].len;
        stub_copy(lo + h->piece[i].off, lo + next, d);
    }
    if (next != len)
        failed("the pieces of a copy of %zu end at %zu", len, next);
}
/* A copy of [off, off+len) of b: through a registration when the cache
 * has one (checked by the stub while it runs), else "staged".  Half read
 * (H2D: the bytes must be b's), half write (D2H: b gets new bytes). */
static void copy(struct block *b, size_t off, size_t len)
{
    int busy;
    struct pf_hold h;
    int held = pf_register_use(b->p + off, len, &busy, &h);
    uintptr_t lo = (uintptr_t)b->p + off;
    pieces(&h, held, lo, len, 1);
    if (rnd() & 1) {
        for (size_t i = off; i < off + len; i++)
            if (b->p[i] != byte_at(b, i)) {
                failed("byte %zu of a block of %zu is wrong", i, b->n);
                break;
            }
    } else {
        if (off == 0 && len == b->n)
            b->salt = (uint8_t)rnd();
        for (size_t i = off; i < off + len; i++)
            b->p[i] = byte_at(b, i);
    }
    if (held) {
        dawdle();
        pieces(&h, held, lo, len, -1);
        pf_register_done(&h, len);
    }
}

struct worker { uint64_t seed; int ops; };

static void *work(void *arg)
{
    struct worker *w = arg;
    rng = w->seed;
    struct block b[BLOCKS];
    for (int i = 0; i < BLOCKS; i++)
        block_new(&b[i]);
    for (int op = 0; op < w->ops && !atomic_load(&failures); op++) {
        struct block *k = &b[rnd() % BLOCKS];
        size_t off = rnd_range(0, k->n - 1), len = rnd_range(1, k->n - off);
        unsigned what = (unsigned)(rnd() % 100);
        if (what < 50) {        /* the whole block, again and again: registered */
            copy(k, 0, k->n);
        } else if (what < 65) { /* a part: inside a registration, or a sighting */
            copy(k, off, len);
        } else if (what < 78) { /* free() */
            program_free(k->p);
            atomic_fetch_add(&freed, 1);
            block_new(k);
        } else if (what < 88) { /* a copy passed to the driver as it is */
            uintptr_t lo = (uintptr_t)k->p + off;
            pf_register_guard((void *)lo, len);
            expect_undone(k, lo, lo + len, "a guard");
        } else if (what < 93) { /* madvise(MADV_DONTNEED) over a part */
            uintptr_t lo = (uintptr_t)k->p + off;
            pf_register_drop(lo, lo + len, PF_REGISTER_UNMAPPED);
            expect_undone(k, lo, lo + len, "an unmap");
        } else if (what < 98) { /* classify.c: its own pages only shrink meanwhile */
            uintptr_t a = (uintptr_t)k->p + off, plo, phi;
            own_pages(k, a, a + 1, &plo, &phi);
            int owns = pf_register_owns(a);
            if (plo < phi && stub_meets(plo, phi) && !owns)
                failed("%#lx is registered, but the cache does not own it", a);
        } else if (what < 99) { /* fork(): everything, while the others copy */
            pf_register_drop(0, UINTPTR_MAX, PF_REGISTER_UNMAPPED);
        } else { /* the report, read while the others work */
            struct pf_register_stats st;
            pf_register_stats(&st);
        }
    }
    for (int i = 0; i < BLOCKS; i++) {
        program_free(b[i].p);
        atomic_fetch_add(&freed, 1);
    }
    return NULL;
}

static int all_released(void *arg)
{
    (void)arg;
    return atomic_load(&released) == atomic_load(&freed);
}

static int setup(void **s)
{
    (void)s;
    pf_real_table[PF_S_cuCtxGetCurrent] = (void *)stub_ctx_get;
    pf_real_table[PF_S_cuCtxPushCurrent_v2] = (void *)stub_ctx_push;
    pf_real_table[PF_S_cuCtxPopCurrent_v2] = (void *)stub_ctx_pop;
    pf_real_table[PF_S_cuMemHostRegister_v2] = (void *)stub_register;
    pf_real_table[PF_S_cuMemHostUnregister] = (void *)stub_unregister;
    return 0;
}

static void expect_no_failure(void)
{
    if (atomic_load(&failures))
        fail_msg("%d failure(s), the first: %s", atomic_load(&failures), first_failure);
}

static void test_threads(void **s)
{
    (void)s;
    struct worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.seed = t_rand() | 1, .ops = 1500};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    if (!t_await(all_released, NULL))
        fail_msg("%ld of %ld freed blocks not released", atomic_load(&freed) - atomic_load(&released),
                 atomic_load(&freed));
    expect_no_failure();
    struct pf_register_stats st;
    pf_register_stats(&st);
    print_message("registered %llu, refused %llu, dropped %llu, evicted %llu, guarded %llu, frees deferred "
                  "%llu; %llu copies through them, %llu across several\n", st.registered, st.refused, st.dropped,
                  st.evicted, st.guarded, st.deferred, st.copies, st.spanned);
    /* every block freed: nothing registered, every registration undone once */
    assert_int_equal(nstub, 0);
    assert_int_equal(st.live, 0);
    assert_int_equal(atomic_load(&registers), atomic_load(&unregisters));
    assert_int_equal((long)st.registered, atomic_load(&registers));
    /* the run did what it is for */
    assert_true(st.registered > 0 && st.evicted > 0 && st.dropped > 0 && st.copies > 0 && st.deferred > 0);
}

/* ---- one thread, the registration held at the gate ------------------------------------ */
static void gate(int closed)
{
    pthread_mutex_lock(&gate_lock);
    __atomic_store_n(&gated, closed, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_lock);
}

static int registering_now(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate_lock);
    int now = in_register;
    pthread_mutex_unlock(&gate_lock);
    return now;
}

/* Two copies of the n bytes at p, both staged: the second hands the range
 * to the registrar, which is held at the gate. */
static void make_due(unsigned char *p, size_t n)
{
    gate(1);
    int busy;
    struct pf_hold h;
    assert_int_equal(pf_register_use(p, n, &busy, &h), 0);
    assert_false(busy);
    assert_int_equal(pf_register_use(p, n, &busy, &h), 0);
    assert_true(busy);
    assert_true(t_await(registering_now, NULL));
    assert_int_equal(pf_register_use(p, n, &busy, &h), 0); /* while it is registered: staged */
    assert_true(busy);
    assert_int_equal(pf_register_use(p + PAGE, 64, &busy, &h), 0); /* even a small copy */
    assert_true(busy);
}

/* Whether a copy of n bytes at p goes through registrations now. */
static int direct(void *p, size_t n)
{
    int busy;
    struct pf_hold h;
    int held = pf_register_use(p, n, &busy, &h);
    if (held)
        pf_register_done(&h, n);
    return held;
}

static int direct_now(void *p) { return direct(p, MAX_BLOCK); }
static int direct_now_half(void *p) { return direct(p, MAX_BLOCK / 2); }

static int released_to(void *want) { return atomic_load(&released) >= *(long *)want; }

/* free() of a block being registered returns at once; the registrar ends
 * the registration, unregisters it, and only then frees the block (stub_free
 * checks). */
static void test_free_while_registering(void **s)
{
    (void)s;
    long before = atomic_load(&released), want = before + 1;
    unsigned char *p = malloc(MAX_BLOCK);
    assert_non_null(p);
    make_due(p, MAX_BLOCK);
    assert_int_equal(pf_register_free(p, (uintptr_t)p + malloc_usable_size(p), stub_free), 1);
    assert_true(registering_now(NULL)); /* free() did not wait for it */
    assert_int_equal(atomic_load(&released), before);
    gate(0);
    assert_true(t_await(released_to, &want));
    expect_no_failure();
    assert_int_equal(nstub, 0);
}

struct dropping { uintptr_t lo, hi; atomic_int done; };

static void *drop_range(void *arg)
{
    struct dropping *d = arg;
    pf_register_drop(d->lo, d->hi, PF_REGISTER_UNMAPPED);
    atomic_store(&d->done, 1);
    return NULL;
}

/* A range becomes direct only once the registrar is done; an unmap of a
 * range being registered waits for the registration, then undoes it. */
static void test_drop_while_registering(void **s)
{
    (void)s;
    /* whole pages: no page of one is the other's */
    unsigned char *p = aligned_alloc(PAGE, MAX_BLOCK), *q = aligned_alloc(PAGE, MAX_BLOCK);
    assert_true(p && q);
    make_due(p, MAX_BLOCK);
    gate(0);
    assert_true(t_await(direct_now, p));
    make_due(q, MAX_BLOCK);
    struct dropping d = {.lo = (uintptr_t)q, .hi = (uintptr_t)q + MAX_BLOCK};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drop_range, &d), 0);
    usleep(50 * 1000);
    assert_false(atomic_load(&d.done)); /* waiting for the registration */
    gate(0);
    assert_int_equal(pthread_join(th, NULL), 0);
    uintptr_t first = (d.lo + PAGE - 1) & ~(PAGE - 1), last = d.hi & ~(PAGE - 1);
    assert_false(stub_meets(first, last));
    long want = atomic_load(&released) + 2;
    program_free(p);
    program_free(q);
    assert_true(t_await(released_to, &want));
    expect_no_failure();
    assert_int_equal(nstub, 0);
}

/* Copied until it holds: two pieces said registered, laid end to end. */
static int two_pieces(void *p)
{
    int busy;
    struct pf_hold h;
    int held = pf_register_use(p, MAX_BLOCK, &busy, &h);
    pieces(&h, held, (uintptr_t)p, MAX_BLOCK, 1);
    pieces(&h, held, (uintptr_t)p, MAX_BLOCK, -1);
    if (held)
        pf_register_done(&h, MAX_BLOCK);
    return held == 2;
}

/* A copy longer than a registration (a growing prefix) registers only the
 * pages it lacks, undoing nothing, and then goes through both. */
static void test_growing_prefix(void **s)
{
    (void)s;
    gate(0);
    atomic_store(&never_refuse, 1);
    unsigned char *p = aligned_alloc(PAGE, MAX_BLOCK);
    assert_non_null(p);
    assert_true(t_await(direct_now_half, p));
    long unregistered = atomic_load(&unregisters), made = atomic_load(&registers);
    assert_true(t_await(two_pieces, p));
    assert_int_equal(atomic_load(&unregisters), unregistered);
    assert_int_equal(atomic_load(&registers), made + 1);
    atomic_store(&never_refuse, 0);
    expect_no_failure();
    long want = atomic_load(&released) + 1;
    program_free(p);
    assert_true(t_await(released_to, &want));
    assert_int_equal(nstub, 0);
}

/* A copy that can be neither staged nor passed through waits for the
 * registration that will hold it; one that nothing will hold whole (half
 * of it being registered) does not wait: it is passed through. */
static void test_await_partial(void **s)
{
    (void)s;
    unsigned char *p = aligned_alloc(PAGE, MAX_BLOCK);
    assert_non_null(p);
    make_due(p, MAX_BLOCK / 2);
    struct pf_hold h;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pf_register_await(p, MAX_BLOCK, &h), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(registering_now(NULL)); /* it did not wait for the registration */
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (waited > 1)
        fail_msg("a copy half of which is being registered waited %.1f s for it", waited);
    gate(0);
    assert_true(t_await(direct_now_half, p));
    long want = atomic_load(&released) + 1;
    program_free(p);
    assert_true(t_await(released_to, &want));
    expect_no_failure();
    assert_int_equal(nstub, 0);
}

static void *context_gone(void *arg)
{
    (void)arg;
    pf_register_context_gone(stub_ctx);
    return NULL;
}

/* The context is destroyed while the registrar registers in it: the
 * registration went with the context, and is never unregistered. */
static void test_context_gone_while_registering(void **s)
{
    (void)s;
    unsigned char *p = aligned_alloc(PAGE, MAX_BLOCK);
    assert_non_null(p);
    long unregistered = atomic_load(&unregisters);
    make_due(p, MAX_BLOCK);
    atomic_store(&ctx_dying, 1);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, context_gone, NULL), 0);
    usleep(50 * 1000);
    gate(0); /* the registration succeeds, just before the context goes */
    assert_int_equal(pthread_join(th, NULL), 0);
    /* the driver released it with the context */
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub; i++)
        if (stub[i].lo == (uintptr_t)p)
            stub[i] = stub[--nstub];
    pthread_mutex_unlock(&stub_lock);
    atomic_store(&ctx_dying, 0);
    expect_no_failure();
    assert_int_equal(atomic_load(&unregisters), unregistered);
    assert_false(direct_now(p));
    long want = atomic_load(&released) + 1;
    program_free(p);
    assert_true(t_await(released_to, &want));
    assert_int_equal(nstub, 0);
}

int main(void)
{
    t_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_free_while_registering),
        cmocka_unit_test(test_drop_while_registering),
        cmocka_unit_test(test_context_gone_while_registering),
        cmocka_unit_test(test_growing_prefix),
        cmocka_unit_test(test_await_partial),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
