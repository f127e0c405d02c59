/* test_regcache: pinfast's heap and its registration cache
 * (shim/memory/heap.c and register.c, linked in) with a stub driver, driven
 * from many threads at once so that AddressSanitizer and ThreadSanitizer
 * check their locking, which the preloaded tests cannot do there (the
 * sanitizer's malloc comes first: pinfast's heap is off).  The threads
 * allocate blocks (as malloc, calloc and posix_memalign do), copy from and
 * into them (pf_register_use/await .. pf_register_done), free and realloc
 * them, retire their registrations as an madvise or an munmap does
 * (pf_register_changed, with a real MADV_DONTNEED), pass copies to the
 * driver as they are (pf_register_guard), settle (the program's
 * cuCtxSynchronize), register and unregister parts of their blocks as the
 * program (pf_register_program, pf_register_program_undo), and ask
 * questions, at random.  The stub keeps a table of registrations and checks
 * what a real driver would not report:
 *   - no two registrations share a byte;
 *   - pinfast registers only a whole live or kept block of its heap, being
 *     registered (MAKING), with flags the program's own registration can be
 *     answered from;
 *   - nothing is unregistered while a copy holds it, nor twice, nor after
 *     its block went back to the system;
 *   - pinfast unregisters only in pf_register_settle, its exit handler and
 *     pf_register_program (a thread-local flag set around those calls):
 *     never in a free, a realloc, a retirement, a copy, a guard or a query.
 * The threads also check that no block is given to two owners at once, that
 * a block keeps its bytes while its owner has it, and that calloc's are
 * zero.  Single-threaded cases check the contract step by step, holding the
 * stub's registration or unregistration at a gate where they need to. */
#include "t.h"
#include "base/options.h"
#include "driver/driver.h"
#include "memory/block.h"
#include "memory/heap.h"
#include "memory/register.h"
#include "memory/register_guard.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE ((uintptr_t)4096)
#define THREADS 6
#define SLOTS 3
#define MIN_BLOCK (64 * KiB) /* PINFAST_REGISTER_MIN here */
#define HOST_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP)

/* ---- what heap.c and register.c need of the rest of the shim ---------------------- */
struct pf_options pf_options_parsed = {.reg = 1, .reg_min = MIN_BLOCK, .reg_after = 2, .hugepages = 1,
                                       .reg_max = 6 * MiB,   /* a few blocks: over the cap at times */
                                       .heap_keep = 4 * MiB}; /* warm blocks given back at times */
int pf_options_ready = 1;
const struct pf_options *pf_options_load(void) { return &pf_options_parsed; }
CUstreamCaptureMode pf_capture_relax(void) { return CU_STREAM_CAPTURE_MODE_RELAXED; }
void pf_capture_restore(CUstreamCaptureMode mode) { (void)mode; }
/* pinfast's malloc is the program's: the heap is on */
int pf_dynsym_own_first(const char *name) { (void)name; return 1; }
void *pf_real_table[PF_NSYMBOLS];

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

static void expect_no_failure(void)
{
    if (atomic_load(&failures))
        fail_msg("%d failure(s), the first: %s", atomic_load(&failures), first_failure);
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

/* A few microseconds to a yield: the cache drops its lock around each call */
static void dawdle(void)
{
    if (rnd() & 1)
        sched_yield();
    else
        for (volatile int i = (int)(rnd() % 2000); i > 0; i--)
            ;
}

/* ---- who is calling the driver ------------------------------------------------------ */
/* Set around pf_register_settle, pf_register_program, the exit handler and
 * a copy passed to the driver (which undoes only retired registrations over
 * its bytes): the only calls in which pinfast may unregister. */
static __thread int allowed;
/* Set around the program's own cuMemHostRegister/Unregister. */
static __thread int program;

static void settle(void)
{
    allowed = 1;
    pf_register_settle();
    allowed = 0;
}

/* ---- the stub driver: a table of registrations ------------------------------------ */
struct stub_reg { uintptr_t p, lo, hi, end; int users, prog; };

static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stub_reg stub[1024];
static int nstub;
static atomic_long registers, unregisters; /* pinfast's own */

static int stub_count(void)
{
    pthread_mutex_lock(&stub_lock);
    int n = nstub;
    pthread_mutex_unlock(&stub_lock);
    return n;
}

/* Whether pinfast holds a registration at p (a block's base). */
static int stub_has(const void *p)
{
    int has = 0;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub && !has; i++)
        has = stub[i].p == (uintptr_t)p && !stub[i].prog;
    pthread_mutex_unlock(&stub_lock);
    return has;
}

static const CUcontext stub_ctx = (CUcontext)(uintptr_t)0x1000;

static CUresult stub_ctx_get(CUcontext *ctx)
{
    *ctx = stub_ctx;
    return CUDA_SUCCESS;
}

static CUresult stub_ctx_push(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }
static CUresult stub_ctx_pop(CUcontext *ctx) { (void)ctx; return CUDA_SUCCESS; }

/* The single-threaded cases hold pinfast's registrations (0) or
 * unregistrations (1) here until the gate opens (5 s at most). */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gated[3], waiting[3];

static void gate_wait(int which)
{
    pthread_mutex_lock(&gate_lock);
    waiting[which]++;
    pthread_cond_broadcast(&gate_cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (gated[which] && pthread_cond_timedwait(&gate_cv, &gate_lock, &until) == 0)
        ;
    waiting[which]--;
    pthread_mutex_unlock(&gate_lock);
}

static void gate(int which, int closed)
{
    pthread_mutex_lock(&gate_lock);
    __atomic_store_n(&gated[which], closed, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_lock);
}

static int at_gate(int which)
{
    pthread_mutex_lock(&gate_lock);
    int n = waiting[which];
    pthread_mutex_unlock(&gate_lock);
    return n;
}

static int registering_now(void *arg) { (void)arg; return at_gate(0) > 0; }
static int measuring_now(void *arg) { (void)arg; return at_gate(2) > 0; }

/* mincore, as the registrar measures what of a block was touched: held at
 * gate 2 while it is closed. */
int mincore(void *addr, size_t length, unsigned char *vec)
{
    gate_wait(2);
    return (int)syscall(SYS_mincore, addr, length, vec);
}
static int unregistering_now(void *arg) { return at_gate(1) >= (int)(intptr_t)arg; }

static atomic_int never_refuse; /* the single-threaded cases need their registrations made */

/* pinfast's registration: a whole block of its heap, live or kept, which it
 * is registering (or which was retired meanwhile). */
static void check_block(void *p, size_t n, const char *what)
{
    pf_heap_lock();
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    if (!b)
        failed("%s %p+%zu: no block of the heap there", what, p, n);
    else if (b->base != (uintptr_t)p || (n != (size_t)-1 && (b->reg_len != n || n > b->size)))
        failed("%s %p+%zu: the block there is %#lx+%zu, its registration's length %zu", what, p, n,
               (unsigned long)b->base, b->size, b->reg_len);
    else if (n != (size_t)-1 && b->state != PF_BLOCK_LIVE && b->state != PF_BLOCK_KEPT &&
             !(b->state == PF_BLOCK_HELD && b->reg == PF_REG_STALE)) /* retired and freed meanwhile */
        failed("%s %p+%zu: its block is in state %d, neither live nor kept", what, p, n, b->state);
    else if (n != (size_t)-1 && b->reg != PF_REG_MAKING && b->reg != PF_REG_STALE)
        failed("%s %p+%zu: its block's registration is in state %d, not being made", what, p, n, b->reg);
    else if (n == (size_t)-1 && b->state == PF_BLOCK_UNUSED)
        failed("%s %p: its block went back to the system first", what, p);
    pf_heap_unlock();
}

/* Whether [p, p+n) is a registration of the program's that pinfast
 * answered from its own, being undone: pinfast makes it with the driver
 * for the program, the program's from then on. */
static int handed_over(void *p, size_t n)
{
    pf_heap_lock();
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    int over = 0;
    for (int i = 0; b && b->undoing && i < b->nhands; i++)
        over |= b->hand[i].lo == (uintptr_t)p && b->hand[i].len == n;
    pf_heap_unlock();
    return over;
}

static CUresult stub_register(void *p, size_t n, unsigned flags)
{
    uintptr_t lo = (uintptr_t)p & ~(PAGE - 1), hi = ((uintptr_t)p + n + PAGE - 1) & ~(PAGE - 1);
    int prog = program || handed_over(p, n);
    if (!prog) {
        if (flags != HOST_FLAGS)
            failed("pinfast registered %p with flags %#x: the program's cannot be answered from it", p, flags);
        check_block(p, n, "pinfast registered");
        if (__atomic_load_n(&gated[0], __ATOMIC_ACQUIRE)) {
            gate_wait(0);
        } else {
            usleep((useconds_t)rnd_range(20, 300)); /* registering is slow */
            if (!atomic_load(&never_refuse) && rnd() % 16 == 0) /* the locked-memory limit, say */
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub && !r; i++)
        if (stub[i].p < (uintptr_t)p + n && (uintptr_t)p < stub[i].end) {
            failed("%s registered %p+%zu over %s registration %#lx-%#lx",
                   prog ? "the program" : "pinfast", p, n, stub[i].prog ? "the program's" : "pinfast's",
                   (unsigned long)stub[i].p, (unsigned long)stub[i].end);
            r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    if (!r && nstub == (int)(sizeof stub / sizeof stub[0]))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r)
        stub[nstub++] = (struct stub_reg){(uintptr_t)p, lo, hi, (uintptr_t)p + n, 0, prog};
    pthread_mutex_unlock(&stub_lock);
    if (!r && !prog)
        atomic_fetch_add(&registers, 1);
    return r;
}

/* Set while the stub's one context is being destroyed: the driver then
 * releases its registrations itself, and unregistering one is an error. */
static atomic_int ctx_dying;

static CUresult stub_unregister(void *p)
{
    int prog = program;
    if (!prog) {
        if (!allowed)
            failed("pinfast unregistered %p outside a settle, the exit handler or the program's registration", p);
        if (atomic_load(&ctx_dying))
            failed("%p unregistered in a context being destroyed", p);
        check_block(p, (size_t)-1, "pinfast unregistered");
        if (__atomic_load_n(&gated[1], __ATOMIC_ACQUIRE))
            gate_wait(1);
        else
            dawdle();
    }
    CUresult r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub; i++)
        if (stub[i].p == (uintptr_t)p && stub[i].prog == prog) {
            if (stub[i].users)
                failed("%p unregistered while %d copies ran through it", p, stub[i].users);
            stub[i] = stub[--nstub];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&stub_lock);
    if (r && !prog)
        failed("pinfast unregistered %p, which it had not registered (or twice)", p);
    else if (!r && !prog)
        atomic_fetch_add(&unregisters, 1);
    return r;
}

/* A copy through a registration the cache gave: one of pinfast's must hold
 * all of [lo, hi); d: +1 at the copy's start, -1 at its end. */
static void stub_copy(uintptr_t lo, uintptr_t hi, int d)
{
    int found = 0;
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub && !found; i++)
        if (!stub[i].prog && stub[i].lo <= lo && hi <= stub[i].hi) {
            stub[i].users += d;
            found = 1;
        }
    pthread_mutex_unlock(&stub_lock);
    if (!found)
        failed("a copy of %#lx-%#lx through the cache, but pinfast has not registered it", (unsigned long)lo,
               (unsigned long)hi);
}

/* ---- the program's calls, as the entry points make them ----------------------------- */
/* cuMemHostRegister (entry/alloc_entries.c) */
static CUresult program_register(void *p, size_t n, unsigned flags, int *answered)
{
    CUresult r;
    allowed = 1;
    *answered = pf_register_program(p, n, flags, &r);
    allowed = 0;
    if (!*answered) {
        program = 1;
        r = stub_register(p, n, flags);
        program = 0;
    }
    pf_register_program_result(p, n, flags, r);
    return r;
}

/* cuMemHostUnregister */
static CUresult program_unregister(void *p, int *answered)
{
    CUresult r;
    *answered = pf_register_program_undo(p, &r);
    if (!*answered) {
        program = 1;
        r = stub_unregister(p);
        program = 0;
        pf_register_program_undone(p, r); /* as entry/alloc_entries.c */
    }
    return r;
}

/* ---- blocks no two owners have at once ------------------------------------------- */
static pthread_mutex_t owned_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t owned[THREADS * SLOTS + 64];

static void own(void *p, int take)
{
    pthread_mutex_lock(&owned_lock);
    int at = -1;
    for (int i = 0; i < (int)(sizeof owned / sizeof owned[0]); i++) {
        if (owned[i] == (uintptr_t)p) {
            if (take)
                failed("%p given out while another owner has it", p);
            at = i;
            break;
        }
        if (take && !owned[i] && at < 0)
            at = i;
    }
    if (at < 0)
        failed("%p: %s", p, take ? "too many blocks owned" : "freed but not owned");
    else
        owned[at] = take ? (uintptr_t)p : 0;
    pthread_mutex_unlock(&owned_lock);
}

static void *no_other(size_t n)
{
    failed("realloc to %zu bytes went to the real allocator", n);
    return NULL;
}

/* ---- the program: threads working on their own blocks ----------------------------- */
enum { NONE, HANDED, OWN }; /* the slot's program registration */

struct slot {
    unsigned char *p;
    size_t n;
    uint8_t salt;
    int advised;
    int reg;          /* NONE, HANDED (answered from pinfast's), OWN (the driver's) */
    unsigned char *rp; /* its start */
    unsigned flags;
};

static uint8_t byte_at(const struct slot *s, size_t i) { return (uint8_t)(s->salt + i * 131 + (i >> 9)); }

static void fill(struct slot *s, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        s->p[i] = byte_at(s, i);
}

/* A sample of [lo, hi): its ends and a byte a page */
static void check(const struct slot *s, size_t lo, size_t hi, const char *what)
{
    for (size_t i = lo; i < hi; i = i + 4093 < hi || i == hi - 1 ? i + 4093 : hi - 1)
        if (s->p[i] != byte_at(s, i)) {
            failed("%s: byte %zu of a block of %zu at %p is %#x, not %#x", what, i, s->n, (void *)s->p, s->p[i],
                   byte_at(s, i));
            return;
        }
}

static const size_t usual[] = {96 * KiB, 200 * KiB, 640 * KiB, MiB + 5, 2 * MiB + 100};

static size_t some_size(void)
{
    return rnd() & 1 ? usual[rnd() % (sizeof usual / sizeof usual[0])] : rnd_range(MIN_BLOCK, 5 * MiB / 2);
}

static void slot_new(struct slot *s)
{
    size_t align = rnd() % 4 == 0 ? (size_t)1 << rnd_range(7, 16) : 16; /* posix_memalign, or malloc */
    int zero = rnd() % 5 == 0;                                          /* calloc */
    *s = (struct slot){.n = some_size(), .salt = (uint8_t)rnd()};
    s->p = pf_heap_alloc(s->n, align, zero);
    if (!s->p) {
        failed("pf_heap_alloc(%zu, %zu, %d) gave nothing", s->n, align, zero);
        abort();
    }
    own(s->p, 1);
    if ((uintptr_t)s->p % (align < 64 ? 64 : align))
        failed("a block of %zu aligned to %zu at %p", s->n, align, (void *)s->p);
    if (pf_heap_usable(s->p) < s->n)
        failed("%zu usable bytes at %p, %zu asked", pf_heap_usable(s->p), (void *)s->p, s->n);
    if (zero)
        for (size_t i = 0; i < s->n; i = i + 4093 < s->n || i == s->n - 1 ? i + 4093 : s->n - 1)
            if (s->p[i]) {
                failed("byte %zu of a block of %zu calloc gave is %#x", i, s->n, s->p[i]);
                break;
            }
    fill(s, 0, s->n);
}

/* The program's registration over s undone. */
static void slot_unregister(struct slot *s)
{
    if (s->reg == NONE)
        return;
    int answered;
    CUresult r = program_unregister(s->rp, &answered);
    if (r != CUDA_SUCCESS)
        failed("the program's cuMemHostUnregister(%p) of its own registration (%s): %d", (void *)s->rp,
               s->reg == HANDED ? "answered from pinfast's" : "the driver's", (int)r);
    if (s->reg == HANDED && !answered)
        failed("a registration answered from pinfast's was undone by the driver");
    s->reg = NONE;
    if (rnd() % 4 == 0 && (r = program_unregister(s->rp, &answered)) != CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
        failed("the program's second cuMemHostUnregister(%p): %d", (void *)s->rp, (int)r);
}

static void slot_free(struct slot *s)
{
    slot_unregister(s);
    own(s->p, 0);
    pf_heap_free(s->p, NULL);
    s->p = NULL;
}

/* A copy of [off, off+len) of s: through a registration when the cache
 * has one (checked by the stub while it runs), else "staged".  Half read
 * (H2D: the bytes must be s's), half write (D2H: s gets them again). */
static void copy(struct slot *s, size_t off, size_t len, int await)
{
    size_t busy;
    struct pf_hold h;
    int held = await ? pf_register_await(s->p + off, len, &h) : pf_register_use(s->p + off, len, 0, &busy, &h);
    uintptr_t lo = (uintptr_t)s->p + off;
    if (held && (h.n != 1 || h.piece[0].off || h.piece[0].len != len))
        failed("a copy of %zu held in %d piece(s), the first %zu+%zu", len, h.n, h.piece[0].off, h.piece[0].len);
    if (held)
        stub_copy(lo, lo + len, 1);
    if (rnd() & 1)
        check(s, off, off + len, "a copy's source");
    else
        fill(s, off, off + len);
    if (held) {
        dawdle();
        stub_copy(lo, lo + len, -1);
        pf_register_done(&h, len);
    }
}

struct worker { uint64_t seed; int ops; };

static void *work(void *arg)
{
    struct worker *w = arg;
    rng = w->seed;
    struct slot s[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        slot_new(&s[i]);
    for (int op = 0; op < w->ops && !atomic_load(&failures); op++) {
        struct slot *k = &s[rnd() % SLOTS];
        size_t off = rnd_range(0, k->n - 1), len = rnd_range(1, k->n - off);
        unsigned what = (unsigned)(rnd() % 100);
        if (what < 36) {        /* the whole block, again and again: registered */
            copy(k, 0, k->n, 0);
        } else if (what < 44) { /* a part: inside a registration, or a sighting */
            copy(k, off, len, 0);
        } else if (what < 48) { /* a copy that can be neither staged nor passed through */
            copy(k, off, len, 1);
        } else if (what < 58) { /* free(), malloc() */
            slot_free(k);
            slot_new(k);
        } else if (what < 62 && k->reg == NONE) { /* realloc() */
            size_t n = rnd() & 1 || k->n / 2 < MIN_BLOCK ? some_size() : rnd_range(k->n / 2, k->n);
            check(k, 0, k->n, "before realloc");
            own(k->p, 0);
            unsigned char *q = pf_heap_realloc(k->p, n, no_other);
            if (!q)
                abort();
            own(q, 1);
            k->p = q;
            check(k, 0, n < k->n ? n : k->n, "realloc's copy");
            if (n > k->n)
                fill(k, k->n, n);
            k->n = n;
            k->advised = 0;
        } else if (what < 67 && k->reg == NONE) { /* madvise(MADV_DONTNEED) over a part */
            uintptr_t lo = ((uintptr_t)k->p + off + PAGE - 1) & ~(PAGE - 1), hi = ((uintptr_t)k->p + off + len) & ~(PAGE - 1);
            pf_register_changed((uintptr_t)k->p + off, (uintptr_t)k->p + off + len);
            if (lo < hi)
                syscall(SYS_madvise, lo, hi - lo, MADV_DONTNEED);
            fill(k, off, off + len); /* zeros there now */
        } else if (what < 71) { /* cuCtxSynchronize */
            settle();
        } else if (what < 76) { /* the program's own registration of a part, or its undoing */
            if (k->reg != NONE) {
                slot_unregister(k);
                continue;
            }
            unsigned flags = rnd() % 5 ? (unsigned)(rnd() % 4) : CU_MEMHOSTREGISTER_READ_ONLY;
            int answered;
            CUresult r = program_register(k->p + off, len, flags, &answered);
            if (r == CUDA_SUCCESS) {
                k->reg = answered ? HANDED : OWN;
                k->rp = k->p + off;
                k->flags = flags;
            } else {
                failed("the program's cuMemHostRegister(%p, %zu, %#x) (%s): %d", (void *)(k->p + off), len, flags,
                       answered ? "answered by pinfast" : "the driver's", (int)r);
            }
            if (answered && (flags & ~HOST_FLAGS))
                failed("a registration with flags %#x answered from pinfast's", flags);
        } else if (what < 82) { /* a copy passed to the driver as it is */
            allowed = 1;
            pf_register_guard(k->p + off, len);
            allowed = 0;
        } else if (what < 88) { /* classify.c and the queries */
            unsigned flags = 99;
            int handed = pf_register_handed_flags((uintptr_t)k->p + off, &flags);
            int owns = pf_register_owns((uintptr_t)k->p + off);
            int in = k->reg == HANDED && (uintptr_t)k->p + off >= (uintptr_t)k->rp;
            if (k->reg == HANDED && (uintptr_t)k->rp == (uintptr_t)k->p + off &&
                (!handed || flags != (k->flags | CU_MEMHOSTREGISTER_DEVICEMAP)))
                failed("the program registered %p with flags %#x: answered %d, %#x", (void *)k->rp, k->flags,
                       handed, flags);
            if (handed && owns)
                failed("%p: the program's registration, and pinfast's own", (void *)(k->p + off));
            if (handed && !in)
                failed("%p: the program's registration, which it did not make", (void *)(k->p + off));
            if (k->reg == OWN && owns)
                failed("%p: pinfast's, over the program's own registration", (void *)(k->p + off));
        } else if (what < 91) { /* madvise(MADV_HUGEPAGE) */
            /* (the advice stays on the memory: a block an earlier owner advised is not advisable either) */
            if (k->advised && pf_heap_advisable(k->p, k->n))
                failed("%p+%zu, advised by the program: pinfast may advise it too", (void *)k->p, k->n);
            if (rnd() & 1) {
                pf_heap_advised((uintptr_t)k->p + off, (uintptr_t)k->p + off + len);
                k->advised = 1;
            }
        } else if (what < 93) { /* malloc_trim() */
            pf_heap_trim();
        } else if (what < 95) { /* the report, read while the others work */
            struct pf_register_stats st;
            pf_register_stats(&st);
        } else { /* a sample of every block: its bytes are still its own */
            for (int i = 0; i < SLOTS; i++)
                check(&s[i], 0, s[i].n, "a block its owner has");
        }
    }
    for (int i = 0; i < SLOTS; i++)
        slot_free(&s[i]);
    return NULL;
}

/* Settles until nothing is registered (5 s at most): kept blocks are
 * undone after two settles, retired ones at the next. */
static int settled(void *arg)
{
    (void)arg;
    settle();
    return stub_count() == 0 && !pf_register_watching();
}

static void settle_all(void)
{
    if (!t_await(settled, NULL) && stub_count())
        fail_msg("%d registration(s) left after settles for 5 s", stub_count());
    else if (pf_register_watching()) /* nothing registered, due or being registered */
        fail_msg("nothing registered for 5 s, but the hooks still watch (pf_register_watch_)");
    expect_no_failure();
}

static int setup(void **s)
{
    (void)s;
    pf_real_table[PF_S_cuCtxGetCurrent] = (void *)stub_ctx_get;
    pf_real_table[PF_S_cuCtxPushCurrent_v2] = (void *)stub_ctx_push;
    pf_real_table[PF_S_cuCtxPopCurrent_v2] = (void *)stub_ctx_pop;
    pf_real_table[PF_S_cuMemHostRegister_v2] = (void *)stub_register;
    pf_real_table[PF_S_cuMemHostUnregister] = (void *)stub_unregister;
    pf_heap_start();
    return 0;
}

/* Before each case: the failures of the one before forgotten, the gates
 * open, what it left registered undone where it can be. */
static int fresh_start(void **s)
{
    (void)s;
    gate(0, 0);
    gate(1, 0);
    atomic_store(&ctx_dying, 0);
    atomic_store(&never_refuse, 0);
    t_await(settled, NULL);
    atomic_store(&failures, 0);
    first_failure[0] = 0;
    return 0;
}

static void test_threads(void **s)
{
    (void)s;
    struct worker w[THREADS];
    pthread_t th[THREADS];
    int ops = getenv("PFT_QUICK") ? 300 : 1500;
#if defined(__SANITIZE_THREAD__)
    ops = 800; /* some 15 times slower there */
#endif
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.seed = t_rand() | 1, .ops = ops};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    expect_no_failure();
    settle_all();
    struct pf_register_stats st;
    pf_register_stats(&st);
    print_message("registered %llu, refused %llu, over the cap %llu, retired %llu, undone %llu, guarded %llu, "
                  "handed %llu; %llu copies through them; heap: %llu blocks, %llu reused, %llu given back\n",
                  st.registered, st.refused, st.over_cap, st.retired, st.undone, st.guarded, st.handed, st.copies,
                  st.heap_blocks, st.heap_reused, st.heap_released);
    /* every block freed: nothing registered, every registration undone once */
    assert_int_equal(stub_count(), 0);
    assert_int_equal(st.live, 0);
    assert_int_equal(st.live_bytes, 0);
    assert_int_equal(atomic_load(&registers), atomic_load(&unregisters));
    assert_int_equal((long)st.registered, atomic_load(&registers));
    /* every block given back once the warm ones are trimmed: none held
     * for good */
    pf_heap_trim();
    struct pf_heap_stats hs;
    pf_heap_stats(&hs);
    assert_int_equal(hs.live_bytes, 0);
    assert_int_equal(hs.kept_bytes, 0);
    if (hs.released != hs.served)
        fail_msg("every block freed and settled, the warm ones trimmed: %llu of %llu given back", hs.released,
                 hs.served);
    /* the run did what it is for */
    assert_true(st.registered > 0 && st.retired > 0 && st.undone > 0 && st.copies > 0 && st.handed > 0 &&
                st.heap_reused > 0 && st.heap_released > 0);
}

/* ---- one thread, step by step ---------------------------------------------------------- */
#define N (256 * KiB)

struct range { void *p; size_t n; };

/* Whether a copy of r goes through a registration now. */
static int direct(void *arg)
{
    const struct range *r = arg;
    size_t busy;
    struct pf_hold h;
    int held = pf_register_use(r->p, r->n, 0, &busy, &h);
    if (held) {
        stub_copy((uintptr_t)r->p, (uintptr_t)r->p + r->n, 1);
        stub_copy((uintptr_t)r->p, (uintptr_t)r->p + r->n, -1);
        pf_register_done(&h, r->n);
    }
    return held;
}

static void *block_base(void *p) { return (void *)((uintptr_t)p & ~(2 * MiB - 1)); }

/* A new block of n bytes (calloc's: never a kept one), written (a block
 * never touched is not registered), copied twice (staged: the second hands
 * it to the registrar), then registered. */
static unsigned char *registered_block(size_t n)
{
    atomic_store(&never_refuse, 1);
    unsigned char *p = pf_heap_alloc(n, 16, 1);
    assert_non_null(p);
    memset(p, 1, n);
    assert_int_equal((uintptr_t)p % (2 * MiB), 64); /* a glibc-style header below it */
    struct range r = {p, n};
    size_t busy;
    struct pf_hold h;
    assert_int_equal(pf_register_use(p, n, 0, &busy, &h), 0);
    assert_false(busy);
    assert_int_equal(pf_register_use(p, n, 0, &busy, &h), 0);
    assert_true(busy); /* due: staged */
    if (!t_await(direct, &r))
        fail_msg("a block copied twice was not registered");
    assert_true(stub_has(block_base(p)));
    return p;
}

/* Copied twice: registered; freed: kept, still registered, and a malloc of
 * the same size gets it back, its copies direct at once, with no new
 * registration; unused for two settles, it is undone. */
static void test_kept_registered(void **s)
{
    (void)s;
    unsigned char *p = registered_block(N);
    long made = atomic_load(&registers), undone = atomic_load(&unregisters);
    pf_heap_free(p, NULL);
    assert_true(stub_has(block_base(p)));
    unsigned char *q = pf_heap_alloc(N, 16, 0);
    assert_ptr_equal(q, p);
    struct range r = {q, N};
    assert_true(direct(&r));
    assert_int_equal(atomic_load(&registers), made);
    /* a smaller malloc that fits it gets it too; one much smaller does not */
    pf_heap_free(q, NULL);
    q = pf_heap_alloc(N - 8 * KiB, 16, 0);
    assert_ptr_equal(q, p);
    pf_heap_free(q, NULL);
    unsigned char *small = pf_heap_alloc(N / 2, 16, 0);
    assert_ptr_not_equal(small, p);
    pf_heap_free(small, NULL);
    assert_int_equal(atomic_load(&unregisters), undone);
    /* kept and unused: undone at the second settle, not the first */
    settle();
    assert_true(stub_has(block_base(p)));
    settle();
    assert_false(stub_has(block_base(p)));
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    settle_all();
}

struct settler { pthread_t th; atomic_int done; };

static void *settle_thread(void *arg)
{
    struct settler *t = arg;
    settle();
    atomic_store(&t->done, 1);
    return NULL;
}

/* A retirement (an madvise, an munmap) makes no copy take the registration
 * again and undoes nothing; the next settle undoes it, once the copy
 * holding it ended. */
static void test_changed_retires(void **s)
{
    (void)s;
    unsigned char *p = registered_block(N);
    long undone = atomic_load(&unregisters);
    size_t busy;
    struct pf_hold h;
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 1);
    stub_copy((uintptr_t)p, (uintptr_t)p + N, 1);
    pf_register_changed((uintptr_t)p + PAGE, (uintptr_t)p + 2 * PAGE);
    struct pf_hold h2;
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h2), 0);
    assert_int_equal(pf_register_use(p + PAGE, 64, 0, &busy, &h2), 0);
    assert_int_equal(pf_register_await(p, N, &h2), 0);
    assert_int_equal(atomic_load(&unregisters), undone);
    assert_true(stub_has(block_base(p)));
    /* the settle waits for the copy */
    struct settler t = {0};
    assert_int_equal(pthread_create(&t.th, NULL, settle_thread, &t), 0);
    usleep(50 * 1000);
    assert_false(atomic_load(&t.done));
    assert_int_equal(atomic_load(&unregisters), undone);
    stub_copy((uintptr_t)p, (uintptr_t)p + N, -1);
    pf_register_done(&h, N);
    assert_int_equal(pthread_join(t.th, NULL), 0);
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    assert_false(stub_has(block_base(p)));
    expect_no_failure();
    pf_heap_free(p, NULL);
    /* retired, then freed: held until undone, never given out meanwhile */
    p = registered_block(N);
    pf_register_changed((uintptr_t)p, (uintptr_t)p + N);
    pf_heap_free(p, NULL);
    unsigned char *q = pf_heap_alloc(N, 16, 0);
    assert_ptr_not_equal(q, p);
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    settle();
    assert_int_equal(atomic_load(&unregisters), undone + 2);
    pf_heap_free(q, NULL);
    settle_all();
}

/* calloc never gets a kept block (a new mapping's zeros are free); malloc
 * gets the registered one first. */
static void test_calloc_not_kept(void **s)
{
    (void)s;
    unsigned char *p = registered_block(N);
    memset(p, 0x5A, N);
    pf_heap_free(p, NULL);
    unsigned char *z = pf_heap_alloc(N, 16, 1);
    assert_non_null(z);
    assert_ptr_not_equal(z, p);
    for (size_t i = 0; i < N; i++)
        if (z[i])
            fail_msg("byte %zu of a calloc'd block is %#x", i, z[i]);
    memset(z, 0xA5, N);
    pf_heap_free(z, NULL); /* kept, not registered */
    unsigned char *z2 = pf_heap_alloc(N, 16, 1);
    assert_ptr_not_equal(z2, z);
    assert_ptr_not_equal(z2, p);
    for (size_t i = 0; i < N; i += 512)
        if (z2[i])
            fail_msg("byte %zu of a calloc'd block is %#x", i, z2[i]);
    unsigned char *m = pf_heap_alloc(N, 16, 0);
    assert_ptr_equal(m, p); /* the registered one, before the warm one */
    pf_heap_free(m, NULL);
    pf_heap_free(z2, NULL);
    settle_all();
}

static void *fail_other(size_t n)
{
    fail_msg("realloc to %zu went to the real allocator", n);
    return NULL;
}

/* Whether a block of the heap holds the unit at a. */
static int taken(uintptr_t a)
{
    pf_heap_lock();
    int t = pf_heap_find(a) != NULL;
    pf_heap_unlock();
    return t;
}

/* realloc of a registered block: in place when it fits; else moved by a
 * copy, the old block kept registered, nothing undone, even when the units
 * after it are free (`free_after`): grown in place, it would hold bytes
 * past its registration, and the driver refuses a copy across a
 * registration's end. */
static void realloc_case(int free_after)
{
    pf_heap_trim(); /* warm blocks given back: room after p, as a rule */
    unsigned char *p = registered_block(N);
    for (size_t i = 0; i < N; i++)
        p[i] = (uint8_t)(i * 7 + 3);
    long undone = atomic_load(&unregisters), made = atomic_load(&registers);
    assert_ptr_equal(pf_heap_realloc(p, N - 100, fail_other), p);
    unsigned char *fill[64];
    int nfill = 0;
    while (!free_after && !taken((uintptr_t)block_base(p) + 2 * MiB) && nfill < 64)
        fill[nfill++] = pf_heap_alloc(N, 16, 1); /* first fit: the holes, then the units after p */
    if (taken((uintptr_t)block_base(p) + 2 * MiB) == free_after)
        fail_msg("64 blocks, and the units after %p %s", (void *)p, free_after ? "taken" : "still free");
    size_t to = free_after ? 3 * N : 3 * MiB;
    unsigned char *q = pf_heap_realloc(p, to, fail_other);
    assert_non_null(q);
    if (q == p)
        fail_msg("a registered block grew in place (the units after it %s)", free_after ? "free" : "taken");
    for (size_t i = 0; i < N - 100; i++)
        if (q[i] != (uint8_t)(i * 7 + 3))
            fail_msg("byte %zu kept by realloc is %#x", i, q[i]);
    assert_int_equal(atomic_load(&unregisters), undone);
    assert_true(stub_has(block_base(p)));
    unsigned char *again = pf_heap_alloc(N, 16, 0); /* the old block, kept registered */
    assert_ptr_equal(again, p);
    struct range r = {again, N};
    assert_true(direct(&r));
    pf_heap_free(again, NULL);
    pf_heap_free(q, NULL);
    while (nfill)
        pf_heap_free(fill[--nfill], NULL);
    assert_int_equal(atomic_load(&unregisters), undone);
    assert_int_equal(atomic_load(&registers), made);
    settle_all();
}

static void test_realloc_registered_free_after(void **s)
{
    (void)s;
    realloc_case(1);
}

static void test_realloc_registered_moves(void **s)
{
    (void)s;
    realloc_case(0);
}

/* The program's registration inside pinfast's is answered from it (no
 * driver call): SUCCESS, then ALREADY_REGISTERED; its flags; pinfast's
 * stays and copies go on through it; the program's unregistration is
 * answered too, and one of memory the program never registered is
 * NOT_REGISTERED.  A registration pinfast's cannot answer (other flags)
 * undoes pinfast's first; the block is the program's from then on. */
static void test_program_registration(void **s)
{
    (void)s;
    unsigned char *p = registered_block(2 * N);
    struct range r = {p, 2 * N};
    long made = atomic_load(&registers), undone = atomic_load(&unregisters);
    int answered;
    assert_int_equal(program_register(p + PAGE, 2 * PAGE, CU_MEMHOSTREGISTER_PORTABLE, &answered), CUDA_SUCCESS);
    assert_true(answered);
    assert_int_equal(program_register(p + PAGE, 2 * PAGE, CU_MEMHOSTREGISTER_PORTABLE, &answered),
                     CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    assert_true(answered);
    unsigned flags = 0;
    assert_true(pf_register_handed_flags((uintptr_t)p + PAGE, &flags));
    /* the driver reports every registration mapped (unified addressing) */
    assert_int_equal(flags, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    assert_false(pf_register_owns((uintptr_t)p + PAGE));
    assert_true(pf_register_owns((uintptr_t)p + N));
    assert_true(direct(&r));
    assert_int_equal(program_unregister(p + PAGE, &answered), CUDA_SUCCESS);
    assert_true(answered);
    assert_int_equal(program_unregister(p + PAGE, &answered), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    assert_true(answered);
    assert_int_equal(program_unregister(p, &answered), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    assert_true(answered);
    assert_false(pf_register_handed_flags((uintptr_t)p + PAGE, &flags));
    assert_true(pf_register_owns((uintptr_t)p + PAGE));
    assert_true(direct(&r));
    assert_true(stub_has(block_base(p)));
    assert_int_equal(atomic_load(&registers), made);
    assert_int_equal(atomic_load(&unregisters), undone);
    /* flags pinfast's registration does not have: the driver's answer */
    assert_int_equal(program_register(p, 2 * N, CU_MEMHOSTREGISTER_READ_ONLY, &answered), CUDA_SUCCESS);
    assert_false(answered);
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    assert_false(stub_has(block_base(p)));
    for (int i = 0; i < 4; i++)
        assert_false(direct(&r));
    assert_int_equal(atomic_load(&registers), made);
    assert_int_equal(program_unregister(p, &answered), CUDA_SUCCESS);
    assert_false(answered);
    pf_heap_free(p, NULL);
    settle_all();
}

/* A block the program registered itself, unregistered and freed: kept for
 * reuse as any other, not held for good (as a block freed while the
 * driver still holds its pages is). */
static void test_program_registration_freed(void **s)
{
    (void)s;
    atomic_store(&never_refuse, 1);
    unsigned char *p = pf_heap_alloc(N, 16, 0);
    assert_non_null(p);
    int answered;
    assert_int_equal(program_register(p, N, 0, &answered), CUDA_SUCCESS);
    assert_false(answered);
    assert_int_equal(program_unregister(p, &answered), CUDA_SUCCESS);
    assert_false(answered);
    pf_heap_free(p, NULL);
    settle();
    settle();
    pf_heap_lock();
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    int state = b ? b->state : PF_BLOCK_UNUSED;
    pf_heap_unlock();
    if (state == PF_BLOCK_HELD)
        fail_msg("a block the program registered and unregistered, then freed, is held for good: never reused "
                 "nor given back");
    settle_all();
}

/* Whether p's block is registered, or not, but not being registered. */
static int heard_back(void *p)
{
    pf_heap_lock();
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    int heard = b && b->reg != PF_REG_MAKING;
    pf_heap_unlock();
    return heard;
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
    atomic_store(&never_refuse, 1);
    unsigned char *p = pf_heap_alloc(N, 16, 0);
    assert_non_null(p);
    memset(p, 1, N); /* a block never touched is not registered */
    struct range r = {p, N};
    long undone = atomic_load(&unregisters);
    gate(0, 1);
    size_t busy;
    struct pf_hold h;
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 0);
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 0);
    assert_true(t_await(registering_now, NULL));
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 0); /* while it is registered: staged */
    assert_true(busy);
    atomic_store(&ctx_dying, 1);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, context_gone, NULL), 0);
    usleep(50 * 1000);
    gate(0, 0); /* the registration succeeds, just before the context goes */
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(t_await(heard_back, p)); /* the registrar hears back */
    /* the driver released it with the context */
    pthread_mutex_lock(&stub_lock);
    for (int i = 0; i < nstub; i++)
        if (stub[i].p == (uintptr_t)block_base(p))
            stub[i] = stub[--nstub];
    pthread_mutex_unlock(&stub_lock);
    settle();
    atomic_store(&ctx_dying, 0);
    expect_no_failure();
    assert_int_equal(atomic_load(&unregisters), undone);
    assert_false(direct(&r));
    pf_heap_free(p, NULL);
    settle_all();
}

/* A block due (the registrar busy with another) and freed: registered
 * kept all the same, and the next malloc of its size gets it registered;
 * once every registration is undone, the hooks stop watching (settle_all). */
static void test_free_due(void **s)
{
    (void)s;
    atomic_store(&never_refuse, 1);
    unsigned char *a = pf_heap_alloc(N, 16, 1), *b = pf_heap_alloc(N, 16, 1);
    assert_true(a && b);
    memset(a, 1, N); /* blocks never touched are not registered */
    memset(b, 1, N);
    gate(0, 1);
    size_t busy;
    struct pf_hold h;
    pf_register_use(a, N, 0, &busy, &h);
    pf_register_use(a, N, 0, &busy, &h);
    assert_true(t_await(registering_now, NULL)); /* a: being registered, at the gate */
    pf_register_use(b, N, 0, &busy, &h);
    pf_register_use(b, N, 0, &busy, &h);
    assert_true(busy); /* b: due */
    pf_heap_free(b, NULL);
    gate(0, 0);
    struct range r = {a, N};
    assert_true(t_await(direct, &r));
    assert_true(t_await(heard_back, b));
    unsigned char *again = pf_heap_alloc(N, 16, 0);
    assert_ptr_equal(again, b);
    struct range rb = {again, N};
    if (stub_has(block_base(b)))
        assert_true(direct(&rb));
    pf_heap_free(again, NULL);
    pf_heap_free(a, NULL);
    settle_all();
}

static void *settle_and_mark(void *arg)
{
    settle();
    atomic_fetch_add((atomic_int *)arg, 1);
    return NULL;
}

/* An unregistration under way (held at the gate): a second settle does not
 * undo the same block again, and a malloc that gets the block meanwhile
 * does not copy through the registration being undone. */
static void test_undo_exclusive(void **s)
{
    (void)s;
    unsigned char *p = registered_block(N);
    long undone = atomic_load(&unregisters);
    pf_register_changed((uintptr_t)p, (uintptr_t)p + PAGE);
    gate(1, 1);
    atomic_int done = 0;
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, settle_and_mark, &done), 0);
    assert_true(t_await(unregistering_now, (void *)(intptr_t)1));
    assert_int_equal(pthread_create(&t2, NULL, settle_and_mark, &done), 0);
    usleep(50 * 1000);
    gate(1, 0);
    assert_int_equal(pthread_join(t1, NULL), 0);
    assert_int_equal(pthread_join(t2, NULL), 0);
    expect_no_failure();
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    pf_heap_free(p, NULL);
    settle_all();

    /* kept unused for two settles: undone at the second, reused meanwhile */
    p = registered_block(N);
    undone = atomic_load(&unregisters);
    pf_heap_free(p, NULL);
    settle();
    gate(1, 1);
    done = 0;
    assert_int_equal(pthread_create(&t1, NULL, settle_and_mark, &done), 0);
    assert_true(t_await(unregistering_now, (void *)(intptr_t)1));
    unsigned char *q = pf_heap_alloc(N, 16, 0);
    size_t busy;
    struct pf_hold h;
    int held = q == p ? pf_register_use(q, N, 0, &busy, &h) : 0;
    if (held)
        stub_copy((uintptr_t)q, (uintptr_t)q + N, 1);
    gate(1, 0);
    usleep(20 * 1000);
    if (held) {
        stub_copy((uintptr_t)q, (uintptr_t)q + N, -1);
        pf_register_done(&h, N);
    }
    assert_int_equal(pthread_join(t1, NULL), 0);
    expect_no_failure();
    if (held)
        fail_msg("a copy went through a registration being undone");
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    pf_heap_free(q, NULL);
    settle_all();
}

/* Registrations of the program's sharing no byte, in one registered block
 * (pages they may share): each answered from pinfast's (SUCCESS, its own
 * flags), one meeting another's bytes refused as the driver refuses it, each undone by its own
 * cuMemHostUnregister; no driver call.  Past the room kept for them, the
 * driver answers: pinfast's registration is undone, those answered from it
 * made with the driver, and every one of them is still the program's to
 * undo, after which the block is pinfast's again. */
static void test_program_registrations_share_block(void **s)
{
    (void)s;
    unsigned char *p = registered_block(2 * N);
    long made = atomic_load(&registers), undone = atomic_load(&unregisters);
    int answered, count = PF_HANDS + 2;
    unsigned flags = 0;
    /* each [(4i+1) pages, (4i+2) pages + 8): two pages, three apart */
    for (int i = 0; i < PF_HANDS - 1; i++) {
        assert_int_equal(program_register(p + (4 * i + 1) * PAGE, PAGE + 8, (unsigned)i & 1, &answered), CUDA_SUCCESS);
        assert_true(answered);
    }
    assert_int_equal(program_register(p + 2 * PAGE, 16, 0, &answered), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    assert_true(answered);
    assert_int_equal(program_register(p + 2 * PAGE + 100, 16, 0, &answered), CUDA_SUCCESS);
    assert_true(answered);
    assert_int_equal(program_unregister(p + 2 * PAGE + 100, &answered), CUDA_SUCCESS);
    assert_true(answered);
    assert_int_equal(program_register(p + (4 * PF_HANDS - 3) * PAGE, PAGE + 8, 0, &answered), CUDA_SUCCESS);
    assert_true(answered);
    assert_true(pf_register_handed_flags((uintptr_t)p + 5 * PAGE, &flags));
    assert_int_equal(flags, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    assert_false(pf_register_handed_flags((uintptr_t)p + 3 * PAGE, &flags));
    assert_true(pf_register_owns((uintptr_t)p + 3 * PAGE));
    assert_int_equal(program_unregister(p + 5 * PAGE, &answered), CUDA_SUCCESS);
    assert_true(answered);
    assert_int_equal(program_unregister(p + 5 * PAGE, &answered), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    assert_int_equal(program_register(p + 5 * PAGE, PAGE + 8, 1, &answered), CUDA_SUCCESS);
    assert_true(answered);
    assert_int_equal(atomic_load(&registers), made);
    assert_int_equal(atomic_load(&unregisters), undone);
    /* past the room: the driver's answers from now on */
    for (int i = PF_HANDS; i < count; i++) {
        assert_int_equal(program_register(p + (4 * i + 1) * PAGE, PAGE + 8, 0, &answered), CUDA_SUCCESS);
        assert_false(answered);
    }
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    assert_false(stub_has(block_base(p)));
    assert_int_equal(stub_count(), count);
    for (int i = 0; i < count; i++) {
        assert_int_equal(program_unregister(p + (4 * i + 1) * PAGE, &answered), CUDA_SUCCESS);
        assert_false(answered);
    }
    assert_int_equal(stub_count(), 0);
    pf_heap_lock();
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    int reg = b->reg;
    pf_heap_unlock();
    assert_int_equal(reg, PF_REG_NONE);
    pf_heap_free(p, NULL);
    settle_all();
}

/* The program's registration answered from pinfast's stays while the
 * program has it: not undone by settles after a change under it (an
 * madvise), nor by a copy passed to the driver within it; a copy passed
 * to the driver over the rest of the block undoes pinfast's, the
 * program's made with the driver; its cuMemHostUnregister then succeeds. */
static void test_program_registration_retired(void **s)
{
    (void)s;
    unsigned char *p = registered_block(2 * N);
    long undone = atomic_load(&unregisters);
    int answered;
    assert_int_equal(program_register(p, N, 0, &answered), CUDA_SUCCESS);
    assert_true(answered);
    pf_register_changed((uintptr_t)p + N, (uintptr_t)p + N + PAGE);
    settle();
    settle();
    allowed = 1;
    pf_register_guard(p + PAGE, 64);
    allowed = 0;
    assert_int_equal(atomic_load(&unregisters), undone);
    assert_true(stub_has(block_base(p)));
    assert_int_equal(program_unregister(p, &answered), CUDA_SUCCESS);
    assert_true(answered);
    settle();
    assert_false(stub_has(block_base(p)));
    assert_int_equal(atomic_load(&unregisters), undone + 1);

    p = registered_block(2 * N);
    undone = atomic_load(&unregisters);
    assert_int_equal(program_register(p, N, 0, &answered), CUDA_SUCCESS);
    pf_register_changed((uintptr_t)p + N, (uintptr_t)p + N + PAGE);
    allowed = 1;
    pf_register_guard(p + N + PAGE, 64);
    allowed = 0;
    assert_int_equal(atomic_load(&unregisters), undone + 1);
    assert_false(stub_has(block_base(p)));
    assert_int_equal(stub_count(), 1);
    assert_int_equal(program_unregister(p, &answered), CUDA_SUCCESS);
    assert_false(answered);
    assert_int_equal(stub_count(), 0);
    pf_heap_free(p, NULL);
    settle_all();
}

/* A block freed while the program's registration answered from pinfast's
 * holds it: no malloc gets it; the program's cuMemHostUnregister after
 * the free succeeds, as the driver's would; the next settle gives it back. */
static void test_program_registration_freed_first(void **s)
{
    (void)s;
    unsigned char *p = registered_block(N);
    int answered;
    assert_int_equal(program_register(p, N, 0, &answered), CUDA_SUCCESS);
    assert_true(answered);
    pf_heap_free(p, NULL);
    unsigned char *q = pf_heap_alloc(N, 16, 0);
    assert_ptr_not_equal(q, p);
    pf_heap_free(q, NULL);
    assert_int_equal(program_unregister(p, &answered), CUDA_SUCCESS);
    assert_true(answered);
    settle();
    assert_false(stub_has(block_base(p)));
    settle_all();
}

static int untouched_counted(void *arg)
{
    struct pf_register_stats st;
    pf_register_stats(&st);
    return st.untouched > *(const unsigned long long *)arg;
}

/* A block never touched (calloc's, a new mapping) is not registered:
 * registering would make its pages resident.  It is
 * counted and measured again only after twice as many copies; written by
 * then, it is registered. */
static void test_untouched_not_registered(void **s)
{
    (void)s;
    atomic_store(&never_refuse, 1);
    unsigned char *p = pf_heap_alloc(N, 16, 1);
    assert_non_null(p);
    struct pf_register_stats st;
    pf_register_stats(&st);
    unsigned long long before = st.untouched;
    size_t busy;
    struct pf_hold h;
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 0);
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 0);
    assert_true(busy); /* due */
    if (!t_await(untouched_counted, &before))
        fail_msg("a block never touched was not found so");
    assert_false(stub_has(block_base(p)));
    memset(p, 1, N);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 0);
        assert_false(busy); /* not due again before four copies */
    }
    assert_int_equal(pf_register_use(p, N, 0, &busy, &h), 0);
    assert_true(busy);
    struct range r = {p, N};
    if (!t_await(direct, &r))
        fail_msg("a block written since it was found untouched was not registered");
    pf_heap_free(p, NULL);
    settle_all();
}

static int released_more(void *arg)
{
    struct pf_heap_stats h;
    pf_heap_stats(&h);
    return h.released > *(const unsigned long long *)arg;
}

/* A block retired and freed while the registrar measures what of it was
 * touched: nothing is registered, and the block, whose memory the program
 * changed, goes back to the system. */
static void test_freed_while_measured(void **s)
{
    (void)s;
    atomic_store(&never_refuse, 1);
    unsigned char *p = pf_heap_alloc(N, 16, 1);
    assert_non_null(p);
    memset(p, 1, N);
    struct pf_heap_stats st;
    pf_heap_stats(&st);
    unsigned long long before = st.released;
    gate(2, 1);
    size_t busy;
    struct pf_hold h;
    pf_register_use(p, N, 0, &busy, &h);
    pf_register_use(p, N, 0, &busy, &h);
    assert_true(t_await(measuring_now, NULL));
    pf_register_changed((uintptr_t)p, (uintptr_t)p + 4096);
    pf_heap_free(p, NULL);
    gate(2, 0);
    if (!t_await(released_more, &before))
        fail_msg("a block retired and freed while measured was never given back");
    assert_false(stub_has(block_base(p)));
    settle_all();
}

/* A block refused at the cap is tried again for its next owner, once a
 * settle made room. */
static void test_refused_next_owner(void **s)
{
    (void)s;
    const size_t n = 2 * MiB; /* three such blocks pass the 6 MiB cap */
    unsigned char *a = registered_block(n), *b = registered_block(n);
    unsigned char *c = pf_heap_alloc(n, 16, 1);
    assert_non_null(c);
    memset(c, 1, n); /* a block never touched is not registered */
    struct range r = {c, n};
    for (int i = 0; i < 4; i++)
        assert_false(direct(&r));
    assert_true(t_await(heard_back, c));
    struct pf_register_stats st;
    pf_register_stats(&st);
    assert_true(st.over_cap > 0);
    pf_heap_free(c, NULL);
    pf_heap_free(b, NULL);
    settle();
    settle();
    assert_false(stub_has(block_base(b)));
    unsigned char *d = pf_heap_alloc(n, 16, 0);
    assert_ptr_equal(d, c);
    r.p = d;
    if (!t_await(direct, &r))
        fail_msg("a block refused at the cap was not registered for its next owner, with room under the cap");
    pf_heap_free(d, NULL);
    pf_heap_free(a, NULL);
    settle_all();
}

/* Of two kept blocks of one size, a malloc gets the one the program
 * touched, not calloc's zeros left untouched: no page to fault in. */
static void test_kept_touched_first(void **s)
{
    (void)s;
    unsigned char *a = pf_heap_alloc(N, 16, 0), *b = pf_heap_alloc(N, 16, 1);
    assert_non_null(a);
    assert_non_null(b);
    memset(a, 1, N);
    pf_heap_free(a, NULL);
    pf_heap_free(b, NULL); /* the newest kept */
    unsigned char *c = pf_heap_alloc(N, 16, 0);
    if (c != a)
        fail_msg("a malloc got the untouched kept block %p, not the touched one %p", (void *)c, (void *)a);
    pf_heap_free(c, NULL);
    settle_all();
}

/* ---- at exit: pinfast's handler undoes what is left --------------------------------- */
static unsigned char *leftover;

/* Registered first, so that it runs last, after pinfast's exit handler. */
static void at_exit_check(void)
{
    if (atomic_load(&failures) || stub_count()) {
        fprintf(stderr, "test_regcache: at exit, %d registration(s) left; %d failure(s), the first: %s\n",
                stub_count(), atomic_load(&failures), first_failure);
        _exit(1);
    }
}

/* A block registered and left live: the exit handler undoes it. */
static void test_exit_leftover(void **s)
{
    (void)s;
    leftover = registered_block(N);
    assert_int_equal(stub_count(), 1);
}

int main(void)
{
    t_seed();
    atexit(at_exit_check);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_threads, fresh_start),
        cmocka_unit_test_setup(test_kept_registered, fresh_start),
        cmocka_unit_test_setup(test_changed_retires, fresh_start),
        cmocka_unit_test_setup(test_calloc_not_kept, fresh_start),
        cmocka_unit_test_setup(test_untouched_not_registered, fresh_start),
        cmocka_unit_test_setup(test_freed_while_measured, fresh_start),
        cmocka_unit_test_setup(test_realloc_registered_free_after, fresh_start),
        cmocka_unit_test_setup(test_realloc_registered_moves, fresh_start),
        cmocka_unit_test_setup(test_program_registration, fresh_start),
        cmocka_unit_test_setup(test_program_registration_freed, fresh_start),
        cmocka_unit_test_setup(test_context_gone_while_registering, fresh_start),
        cmocka_unit_test_setup(test_free_due, fresh_start),
        cmocka_unit_test_setup(test_undo_exclusive, fresh_start),
        cmocka_unit_test_setup(test_program_registrations_share_block, fresh_start),
        cmocka_unit_test_setup(test_program_registration_retired, fresh_start),
        cmocka_unit_test_setup(test_program_registration_freed_first, fresh_start),
        cmocka_unit_test_setup(test_refused_next_owner, fresh_start),
        cmocka_unit_test_setup(test_kept_touched_first, fresh_start),
        cmocka_unit_test_setup(test_exit_leftover, fresh_start),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    allowed = 1; /* the exit handler runs on this thread */
    return rc;
}
