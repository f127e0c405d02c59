/* The registration cache (register.h).  One table of watched ranges, each
 * a page-aligned extent: a sighting (a pageable range copied, and how
 * often), a registration (registered with the driver, copies going through
 * it), or a range the driver refused.  One mutex guards it: it is taken by
 * copies of at least PINFAST_REGISTER_MIN and by the hooks only when their
 * range meets the table's bounds.  A registration is never unregistered
 * while a copy through it runs: copies hold a reference, and a drop waits
 * for them.  Registering and the unregistering a free() asks for are the
 * registrar's, one background thread: neither is paid in the program's
 * copy or free (docs/design.md says why). */
#include "register.h"
#include "../base/clock.h"
#include "../base/dynsym.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../base/signals.h"
#include "../driver/capture.h"
#include "../driver/driver.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

/* Slots in all; at most half of them registrations, so that sightings keep
 * room.  The free() hook scans them all when a block meets the bounds. */
#define SLOTS 256
#define MAX_LIVE (SLOTS / 2)
/* Frees handed to the registrar at most (and PINFAST_REGISTER_MAX bytes):
 * past them free() unregisters inline. */
#define QUEUE 64

/* DUE: waiting for the registrar.  LIVE: registered, or being registered
 * while `registered` is 0.  GONE: left the table, unregistered by whoever
 * marked it or, `deferred`, by whoever first drops over it. */
enum state { FREE, SEEN, DUE, REFUSED, LIVE, GONE };

struct pf_reg {
    uintptr_t base, end; /* the pages */
    uintptr_t lo, hi;    /* the bytes copies used: what free() must meet */
    enum state state;
    int registered;      /* the driver holds it (LIVE or GONE) */
    int deferred;        /* GONE by a free() left to the registrar */
    int orphan;          /* its context was destroyed while it was being registered */
    int refs;            /* copies through it under way, and its registering */
    unsigned count;      /* sightings */
    uint64_t last;       /* the last sighting or use (LRU) */
    unsigned long long uses;
    CUcontext ctx;       /* the context it was registered in */
};

static struct pf_reg slots[SLOTS];
static int top; /* slots past this one have never been used: scans stop here */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER; /* the registrar's */
static uintptr_t bound_lo = UINTPTR_MAX, bound_hi; /* of SEEN, REFUSED and LIVE extents */
uintptr_t pf_register_lo_ = UINTPTR_MAX, pf_register_hi_; /* of registered extents, and due */
static uint64_t clock_;
static int nlive;
static size_t live_bytes, peak_bytes, cap_bytes;
static int atexit_done, warned;
static enum { NONE, STARTING, RUNNING, STOPPED } registrar_state;
static pthread_t registrar_thread;
/* Blocks the program freed, handed to the registrar: released (the real
 * free) once nothing over their bytes is registered. */
static struct deferred { void *p; uintptr_t lo, hi; void (*release)(void *); } queue[QUEUE];
static int qhead, qlen;
static size_t qbytes;
static struct pf_register_stats stats;
static uint64_t register_ticks;
int pf_register_watch_;
/* Set while this thread is in pinfast's own cuMemHostRegister/Unregister:
 * what the driver maps or advises meanwhile is its own business, and the
 * registration it works on is held by this very thread. */
static __thread int in_driver;

static uintptr_t page(void) {
    static uintptr_t size;
    uintptr_t s = __atomic_load_n(&size, __ATOMIC_RELAXED);
    if (!s)
        __atomic_store_n(&size, s = (uintptr_t)sysconf(_SC_PAGESIZE), __ATOMIC_RELAXED);
    return s;
}

/* PINFAST_REGISTER_MAX, or: the locked-memory limit when it is finite, and
 * a quarter of the machine's memory (lock held). */
static size_t cap(void) {
    if (cap_bytes)
        return cap_bytes;
    size_t c = pf_options()->reg_max;
    if (!c) {
        c = (size_t)sysconf(_SC_PHYS_PAGES) * page() / 4;
        struct rlimit l;
        if (!getrlimit(RLIMIT_MEMLOCK, &l) && l.rlim_cur != RLIM_INFINITY && l.rlim_cur < c)
            c = l.rlim_cur;
    }
    return cap_bytes = c;
}

static int overlaps(uintptr_t a, uintptr_t b, uintptr_t lo, uintptr_t hi) { return a < hi && lo < b; }

/* The bounds and the hooks' flag, after the table changed (lock held). */
static void rebound(void) {
    uintptr_t lo = UINTPTR_MAX, hi = 0, rlo = UINTPTR_MAX, rhi = 0;
    for (int i = 0; i < top; i++) {
        const struct pf_reg *g = &slots[i];
        if (g->state != FREE) { /* GONE too: a drop over it waits for its retirement */
            lo = g->base < lo ? g->base : lo;
            hi = g->end > hi ? g->end : hi;
        }
        /* GONE: registered until retired; DUE: the registrar registers it
         * any time now, so that a guard must cancel it */
        if (g->state == LIVE || g->state == GONE || g->state == DUE) {
            rlo = g->base < rlo ? g->base : rlo;
            rhi = g->end > rhi ? g->end : rhi;
        }
    }
    __atomic_store_n(&pf_register_lo_, rlo, __ATOMIC_RELAXED);
    __atomic_store_n(&pf_register_hi_, rhi, __ATOMIC_RELAXED);
    __atomic_store_n(&bound_lo, lo, __ATOMIC_RELAXED);
    __atomic_store_n(&bound_hi, hi, __ATOMIC_RELAXED);
    __atomic_store_n(&pf_register_watch_, hi != 0, __ATOMIC_RELAXED);
}

/* g leaves the table: no copy finds it again (lock held). */
static void retire_mark(struct pf_reg *g) {
    if (g->state == LIVE) {
        nlive--;
        live_bytes -= g->end - g->base;
        g->state = GONE;
    } else {
        g->state = FREE;
    }
}

/* Registers g's pages (`reg`) or unregisters them, in g's context,
 * relaxed: a capture on another thread must not be invalidated by it (lock
 * held; dropped meanwhile). */
static CUresult driver(struct pf_reg *g, int reg) {
    pthread_mutex_unlock(&lock);
    uint64_t t0 = pf_ticks();
    CUstreamCaptureMode mode = pf_capture_relax();
    CUcontext cur = NULL;
    int pushed = PF_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur != g->ctx &&
                 PF_CALL(cuCtxPushCurrent_v2, g->ctx) == CUDA_SUCCESS;
    in_driver = 1;
    CUresult r = reg ? PF_CALL(cuMemHostRegister_v2, (void *)g->base, g->end - g->base, CU_MEMHOSTREGISTER_PORTABLE)
                     : PF_CALL(cuMemHostUnregister, (void *)g->base);
    in_driver = 0;
    if (pushed)
        PF_CALL(cuCtxPopCurrent_v2, &cur);
    pf_capture_restore(mode);
    pthread_mutex_lock(&lock);
    register_ticks += pf_ticks_since(t0);
    return r;
}

/* Unregisters g, once the copies through it ended (lock held; dropped
 * meanwhile). */
static void retire(struct pf_reg *g) {
    while (g->refs)
        pthread_cond_wait(&released, &lock);
    CUresult r;
    if (g->registered && (r = driver(g, 0)) != CUDA_SUCCESS)
        pf_msg(PF_INFO, "cuMemHostUnregister of %zu bytes at %p: error %d", (size_t)(g->end - g->base),
               (void *)g->base, (int)r);
    g->registered = 0;
    g->state = FREE;
    rebound();
    pthread_cond_broadcast(&released);
}

/* Drops the registrations and sightings matching `match` (lock held).
 * defer: the registrations are only marked, left to the registrar (and
 * nothing is waited for); returns how many matched, or are being undone. */
static int drop_where(int (*match)(const struct pf_reg *, const void *), const void *arg,
                      unsigned long long *counter, int defer) {
    struct pf_reg *gone[SLOTS];
    int n = 0;
    for (int i = 0; i < top; i++) {
        struct pf_reg *g = &slots[i];
        if (g->state == FREE || !match(g, arg))
            continue;
        if (g->state == GONE) { /* undone by another thread, or by the first drop over it */
            if (defer || g->deferred)
                gone[n++] = g;
            g->deferred = defer && g->deferred;
            continue;
        }
        if (g->state == LIVE) {
            gone[n++] = g;
            g->deferred = defer;
            (*counter)++;
        }
        retire_mark(g);
    }
    rebound();
    if (defer)
        return n;
    for (int i = 0; i < n; i++)
        retire(gone[i]);
    /* and those another thread is undoing: the memory changes owner, or
     * the driver sees it, only once they are undone */
    for (int busy = 1; busy;) {
        busy = 0;
        for (int i = 0; i < top && !busy; i++)
            busy = slots[i].state == GONE && match(&slots[i], arg);
        if (busy)
            pthread_cond_wait(&released, &lock);
    }
    return 0;
}

struct span { uintptr_t lo, hi; int freed; };

static int meets(const struct pf_reg *g, const void *arg) {
    const struct span *s = arg;
    return s->freed ? overlaps(g->lo, g->hi, s->lo, s->hi) : overlaps(g->base, g->end, s->lo, s->hi);
}

/* The drop of [lo, hi); with `release`, of the freed block p, which the
 * registrar takes when it holds registrations and there is room: 1 then. */
static int drop_span(uintptr_t lo, uintptr_t hi, int how, void *p, void (*release)(void *)) {
    if (!pf_register_watching() || in_driver || hi <= __atomic_load_n(&bound_lo, __ATOMIC_RELAXED) ||
        lo >= __atomic_load_n(&bound_hi, __ATOMIC_RELAXED))
        return 0;
    struct span s = {lo, hi, how == PF_REGISTER_FREED};
    /* free() may be reached from a thread being cancelled: never inside the
     * wait, with the lock held */
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    pthread_mutex_lock(&lock);
    int defer = release && registrar_state == RUNNING && qlen < QUEUE && qbytes + (hi - lo) <= cap();
    int taken = drop_where(meets, &s, how == PF_REGISTER_GUARD ? &stats.guarded : &stats.dropped, defer) > 0;
    if (taken) {
        queue[(qhead + qlen++) % QUEUE] = (struct deferred){p, lo, hi, release};
        qbytes += hi - lo;
        stats.deferred++;
        pthread_cond_signal(&work);
    }
    pthread_mutex_unlock(&lock);
    pthread_setcancelstate(cancel, NULL);
    return taken;
}

void pf_register_drop(uintptr_t lo, uintptr_t hi, int how) { drop_span(lo, hi, how, NULL, NULL); }

int pf_register_free(void *p, uintptr_t hi, void (*release)(void *)) {
    return drop_span((uintptr_t)p, hi, PF_REGISTER_FREED, p, release);
}

/* The least recently used registration no copy holds (lock held). */
static struct pf_reg *lru_live(void) {
    struct pf_reg *v = NULL;
    for (int i = 0; i < top; i++)
        if (slots[i].state == LIVE && !slots[i].refs && (!v || slots[i].last < v->last))
            v = &slots[i];
    return v;
}

/* A slot for a new sighting: a free one, else the least recently seen
 * sighting (lock held). */
static struct pf_reg *slot_for_sighting(void) {
    struct pf_reg *v = NULL;
    for (int i = 0; i < SLOTS; i++) {
        if (slots[i].state == FREE) {
            top = i + 1 > top ? i + 1 : top;
            return &slots[i];
        }
        if ((slots[i].state == SEEN || slots[i].state == REFUSED) && (!v || slots[i].last < v->last))
            v = &slots[i];
    }
    return v;
}

/* Whether h holds pages, registered or being registered or undone. */
static int holds(const struct pf_reg *h) { return h->state == LIVE || h->state == GONE; }

/* Registers g (DUE), making room under the caps.  Only pages no
 * registration holds are registered: g shrinks to the first run of them (a
 * longer copy over a registration, or across two, adds what it lacks; the
 * next sighting takes any other run), and nothing registered is ever undone
 * to make room for a wider one, as undoing synchronises the device.  g is
 * LIVE and held meanwhile, so that copies over it are staged and a drop
 * waits for its end.  Left a sighting when the run passes the cap (lock
 * held; dropped meanwhile). */
static void registering(struct pf_reg *g) {
    uintptr_t base = g->base, end = g->end;
    for (int moved = 1; moved && base < end;) {
        moved = 0;
        for (int i = 0; i < top; i++)
            if (&slots[i] != g && holds(&slots[i]) && slots[i].base <= base && base < slots[i].end) {
                base = slots[i].end;
                moved = 1;
            }
    }
    if (base >= end) { /* all registered already */
        retire_mark(g);
        rebound();
        return;
    }
    for (int i = 0; i < top; i++)
        if (&slots[i] != g && holds(&slots[i]) && base < slots[i].base && slots[i].base < end)
            end = slots[i].base;
    size_t size = end - base;
    int refused = 0; /* by the driver, for a part of the run: as this will be */
    for (int i = 0; i < top; i++)
        refused |= &slots[i] != g && slots[i].state == REFUSED && overlaps(slots[i].base, slots[i].end, base, end);
    if (size > cap() || refused) {
        g->state = refused ? REFUSED : SEEN;
        return;
    }
    uintptr_t lo = g->lo > base ? g->lo : base, hi = g->hi < end ? g->hi : end;
    *g = (struct pf_reg){.base = base, .end = end, .lo = lo, .hi = hi, .state = LIVE, .refs = 1,
                         .count = g->count, .last = g->last, .ctx = g->ctx};
    nlive++;
    live_bytes += size;
    rebound(); /* the guard sees it from now on, registered or not yet */
    struct pf_reg *v;
    while ((nlive > MAX_LIVE || live_bytes > cap()) && g->state == LIVE && (v = lru_live())) {
        stats.evicted++;
        retire_mark(v);
        retire(v);
    }
    int tried = g->state == LIVE && nlive <= MAX_LIVE && live_bytes <= cap();
    CUresult r = tried ? driver(g, 1) : CUDA_SUCCESS;
    /* one made in a context destroyed meanwhile went with it */
    if (tried && r == CUDA_SUCCESS && !g->orphan) {
        g->registered = 1; /* usable once LIVE still: a free() meanwhile left it GONE */
        stats.registered++;
        peak_bytes = live_bytes > peak_bytes ? live_bytes : peak_bytes;
        pf_msg(PF_DEBUG, "registered %zu bytes at %p", size, (void *)g->base);
    } else if (tried && r != CUDA_SUCCESS) {
        /* the program's own registration, a file mapping, the locked-memory
         * limit: this range is staged from now on */
        stats.refused++;
        pf_msg_once(warned, PF_INFO, "cuMemHostRegister of %zu bytes at %p: error %d; such ranges are staged",
                    size, (void *)g->base, (int)r);
    }
    if (!g->registered && g->state == LIVE) { /* not dropped meanwhile: back to a sighting */
        retire_mark(g);
        g->state = tried ? REFUSED : SEEN;
        rebound();
    }
    g->refs--;
    pthread_cond_broadcast(&released);
}

/* Releases the oldest deferred free, once nothing over its bytes is
 * registered (lock held; dropped meanwhile). */
static void release_one(void) {
    struct deferred d = queue[qhead];
    qhead = (qhead + 1) % QUEUE;
    qlen--;
    qbytes -= d.hi - d.lo;
    struct span s = {d.lo, d.hi, 1};
    drop_where(meets, &s, &stats.dropped, 0);
    pthread_mutex_unlock(&lock);
    d.release(d.p);
    pthread_mutex_lock(&lock);
}

static struct pf_reg *next_due(void) {
    for (int i = 0; i < top; i++)
        if (slots[i].state == DUE)
            return &slots[i];
    return NULL;
}

/* The registrar: frees first (their memory waits), then registrations;
 * asleep when there is neither. */
static void *registrar(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    for (struct pf_reg *g;;) {
        if (qlen)
            release_one();
        else if (registrar_state != STOPPED && (g = next_due()))
            registering(g);
        else if (registrar_state == STOPPED)
            break;
        else
            pthread_cond_wait(&work, &lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void unregister_all_at_exit(void);

/* The registrar, on first need (lock not held: creating a thread may free
 * memory). */
static void start_registrar(void) {
    sigset_t old;
    pf_signals_block(&old);
    int failed = pthread_create(&registrar_thread, NULL, registrar, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed)
        pf_msg(PF_INFO, "no registrar thread (error %d): nothing is registered", failed);
    else
        pthread_setname_np(registrar_thread, "pinfast-reg");
    pthread_mutex_lock(&lock);
    if (!atexit_done++)
        atexit(unregister_all_at_exit);
    registrar_state = failed ? STOPPED : RUNNING;
    pthread_mutex_unlock(&lock);
}

int pf_register_probe_;

/* Whether the program's free() is pinfast's (entry/vm_entries.c), which
 * alone sees heap blocks freed: a sanitizer's malloc, or one preloaded
 * before pinfast, frees and reuses memory unseen, and then nothing may be
 * registered.  First in the symbol tables is not enough: valgrind's
 * memcheck redirects every object's free, pinfast's included, so a call of
 * free(NULL) must be seen to land in it. */
static int frees_seen(void) {
    static int seen = -1;
    int s = __atomic_load_n(&seen, __ATOMIC_RELAXED);
    if (s < 0) {
        s = pf_dynsym_own_first("free");
        if (s) {
            void (*volatile f)(void *) = free; /* not inlined: the call as the program makes it */
            pthread_mutex_lock(&lock);
            __atomic_store_n(&pf_register_probe_, 1, __ATOMIC_RELAXED);
            f(NULL);
            s = __atomic_load_n(&pf_register_probe_, __ATOMIC_RELAXED) == 2;
            __atomic_store_n(&pf_register_probe_, 0, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&lock);
        }
        if (!s)
            pf_msg(PF_INFO, "free() does not reach pinfast's (a sanitizer's or valgrind's, or a malloc "
                            "preloaded before it): no registrations");
        __atomic_store_n(&seen, s, __ATOMIC_RELAXED);
    }
    return s;
}

/* The registration holding the page at pos, or NULL; `coming`: one due or
 * being made will do (lock held). */
static struct pf_reg *holding(uintptr_t pos, int coming) {
    for (int i = 0; i < top; i++) {
        struct pf_reg *g = &slots[i];
        if (g->base <= pos && pos < g->end &&
            ((g->state == LIVE && g->registered) || (coming && (g->state == DUE || g->state == LIVE))))
            return g;
    }
    return NULL;
}

/* Whether every page of [base, end) is registered, or due or being
 * registered (lock held). */
static int coverable(uintptr_t base, uintptr_t end) {
    const struct pf_reg *g;
    for (uintptr_t pos = base; pos < end; pos = g->end)
        if (!(g = holding(pos, 1)))
            return 0;
    return 1;
}

/* The registrations holding all of [base, end), the pages of the copy
 * [lo, hi), in address order, into h: their count, 0 when a page is not
 * registered or PF_REG_PIECES do not cover it (lock held). */
static int cover(uintptr_t base, uintptr_t end, uintptr_t lo, uintptr_t hi, struct pf_hold *h) {
    int k = 0;
    for (uintptr_t pos = base; pos < end;) {
        struct pf_reg *f = holding(pos, 0);
        if (!f || k == PF_REG_PIECES)
            return 0;
        uintptr_t a = lo > f->base ? lo : f->base, b = hi < f->end ? hi : f->end;
        h->piece[k++] = (struct pf_piece){f, a - lo, b - a};
        pos = f->end;
    }
    return h->n = k;
}

/* The copy [lo, hi) holds the pieces of h (lock held). */
static void hold(struct pf_hold *h, uintptr_t lo, uintptr_t hi, uint64_t now) {
    for (int i = 0; i < h->n; i++) {
        struct pf_reg *g = h->piece[i].g;
        g->refs++;
        g->last = now;
        g->uses++;
        uintptr_t a = lo > g->base ? lo : g->base, b = hi < g->end ? hi : g->end;
        g->lo = a < g->lo ? a : g->lo;
        g->hi = b > g->hi ? b : g->hi;
    }
}

/* A registration due or being made meets [base, end): a copy over it is
 * staged (the driver may take its pages for pinned any moment), and one
 * that cannot be waits for it (lock held). */
static struct pf_reg *pending(uintptr_t base, uintptr_t end, int due) {
    for (int i = 0; i < top; i++) {
        struct pf_reg *g = &slots[i];
        if (overlaps(g->base, g->end, base, end) &&
            (due ? g->state == DUE : g->state == DUE || (g->state == LIVE && !g->registered)))
            return g;
    }
    return NULL;
}

int pf_register_use(const void *host, size_t n, int *busy, struct pf_hold *h) {
    const struct pf_options *o = pf_options();
    /* a smaller copy is only looked up: one over a registration must not
     * reach the driver as a plain copy (the guards in entry/copy_entries.c
     * and entry/batch_entries.c) */
    int sight = o->reg && n >= o->reg_min && frees_seen();
    *busy = 0;
    h->n = 0;
    if (!n || (!sight && !pf_register_near(host, n)))
        return 0;
    uintptr_t lo = (uintptr_t)host, hi = lo + n;
    uintptr_t base = lo & ~(page() - 1), end = (hi + page() - 1) & ~(page() - 1);
    CUcontext ctx = NULL; /* asked before the lock: no driver call under it */
    if (PF_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS)
        ctx = NULL;
    pthread_mutex_lock(&lock);
    uint64_t now = ++clock_;
    int k = cover(base, end, lo, hi, h);
    struct pf_reg *seen = NULL;
    if (k) {
        hold(h, lo, hi, now);
    } else {
        *busy = pending(base, end, 0) != NULL;
        for (int i = 0; i < top && sight && !seen; i++)
            if (slots[i].state != FREE && slots[i].state != GONE && slots[i].base == base && slots[i].end == end)
                seen = &slots[i];
    }
    int start = 0;
    if (k || !sight) {
        seen = NULL;
    } else if (seen) {
        seen->count += seen->state == SEEN || seen->state == REFUSED;
    } else if ((seen = slot_for_sighting())) { /* a new range: its first sighting */
        *seen = (struct pf_reg){.base = base, .end = end, .lo = lo, .hi = hi, .state = SEEN};
        rebound();
    }
    if (seen && seen->state == SEEN && seen->count + 1 >= (unsigned)o->reg_after && ctx &&
        end - base <= cap()) {
        seen->lo = lo < seen->lo ? lo : seen->lo;
        seen->hi = hi > seen->hi ? hi : seen->hi;
        seen->state = DUE; /* this copy is staged; the registrar registers it */
        *busy = 1;
        seen->ctx = ctx;
        start = registrar_state == NONE;
        registrar_state = start ? STARTING : registrar_state;
        pthread_cond_signal(&work);
    }
    if (seen)
        seen->last = now;
    pthread_mutex_unlock(&lock);
    if (start)
        start_registrar();
    return k;
}

int pf_register_await(const void *host, size_t n, struct pf_hold *h) {
    uintptr_t lo = (uintptr_t)host, hi = lo + n;
    uintptr_t base = lo & ~(page() - 1), end = (hi + page() - 1) & ~(page() - 1);
    int k = 0;
    h->n = 0;
    pthread_mutex_lock(&lock);
    /* a copy some of whose pages nothing will register is passed through
     * (its guard cancels what is due): registering the rest would only be
     * undone */
    for (struct pf_reg *g; !(k = cover(base, end, lo, hi, h)) && coverable(base, end);) {
        if ((g = pending(base, end, 1)))
            registering(g); /* as the registrar would */
        else if (pending(base, end, 0))
            pthread_cond_wait(&released, &lock);
        else
            break;
    }
    if (k)
        hold(h, lo, hi, ++clock_);
    pthread_mutex_unlock(&lock);
    return k;
}

void pf_register_done(struct pf_hold *h, size_t bytes) {
    pthread_mutex_lock(&lock);
    if (bytes) {
        stats.copies++;
        stats.bytes += bytes;
        stats.spanned += h->n > 1;
    }
    int freed = 0;
    for (int i = 0; i < h->n; i++)
        freed |= !--h->piece[i].g->refs;
    if (freed)
        pthread_cond_broadcast(&released);
    pthread_mutex_unlock(&lock);
}

int pf_register_owns(uintptr_t p) {
    if (!pf_register_watching())
        return 0;
    int owns = 0;
    pthread_mutex_lock(&lock);
    /* being registered too: the driver may hold it before the registrar
     * hears back */
    for (int i = 0; i < top && !owns; i++)
        owns = (slots[i].state == LIVE || slots[i].state == GONE) && p - slots[i].base < slots[i].end - slots[i].base;
    pthread_mutex_unlock(&lock);
    return owns;
}

static int in_context(const struct pf_reg *g, const void *ctx) {
    return (g->state == LIVE || g->state == DUE) && g->ctx == ctx;
}

/* The driver released them with the context: forgotten, not unregistered. */
void pf_register_context_gone(CUcontext ctx) {
    if (!pf_register_watching())
        return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < top; i++)
        if (in_context(&slots[i], ctx)) {
            slots[i].registered = 0;
            slots[i].orphan = 1; /* for the registrar, should it be registering it */
        }
    unsigned long long forgotten = 0;
    drop_where(in_context, ctx, &forgotten, 0);
    pthread_mutex_unlock(&lock);
}

/* Registrations are the process's: released before the driver's own
 * teardown (atexit handlers run before the libraries' destructors), the
 * deferred frees made, the registrar stopped; no new registration is made
 * past this point, and frees are made inline. */
static void unregister_all_at_exit(void) {
    struct span all = {0, UINTPTR_MAX, 0};
    unsigned long long undone = 0;
    pthread_mutex_lock(&lock);
    cap_bytes = 1; /* nothing fits any more */
    int running = registrar_state == RUNNING;
    registrar_state = STOPPED;
    pthread_cond_signal(&work);
    drop_where(meets, &all, &undone, 0);
    while (qlen)
        release_one();
    pthread_mutex_unlock(&lock);
    if (running)
        pthread_join(registrar_thread, NULL);
}

/* The registrar is the parent's (a new one starts on need).  So are the
 * frees handed to it: the child leaves those blocks allocated (at most
 * QUEUE; freeing them here could meet a malloc whose own fork handler has
 * not run yet). */
void pf_register_forked(void) {
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&released, NULL);
    pthread_cond_init(&work, NULL);
    registrar_state = NONE;
    qhead = qlen = 0;
    qbytes = 0;
    for (int i = 0; i < SLOTS; i++)
        slots[i] = (struct pf_reg){.state = FREE};
    nlive = top = 0;
    live_bytes = peak_bytes = 0;
    stats = (struct pf_register_stats){0};
    register_ticks = 0;
    rebound();
}

void pf_register_stats(struct pf_register_stats *out) {
    pthread_mutex_lock(&lock);
    *out = stats;
    out->live = (unsigned long long)nlive;
    out->live_bytes = live_bytes;
    out->peak_bytes = peak_bytes;
    out->register_seconds = (double)pf_ticks_to_ns(register_ticks) * 1e-9;
    pthread_mutex_unlock(&lock);
}
