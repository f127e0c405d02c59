/* A copy is walked with probability p = max(1/N, min(max(bytes/4 MiB,
 * t/1 ms), t/(SHARE w))), at most 1 (N = PINFAST_CALLSITES, w what a walk
 * costs the thread now), and then counts 1/p times its calls, bytes and time: an
 * unbiased (Horvitz-Thompson) estimate whose error per site is bounded in
 * docs/report.md.  A walk (glibc backtrace) costs ~0.2 us per frame with
 * warm caches, so small copies are sampled and long or large ones are
 * walked; but once the program's own memory traffic has evicted the
 * unwinder's tables a walk takes 15-40 us, 2-6% of a 32 MB copy, so a
 * copy is never made to bear more than 1/SHARE of its time in walks on
 * average.  w is the mean of the thread's last WALKS_KEPT timed walks
 * (its first, which pays one-time costs, is not timed): what a copy bears
 * on average is p times the mean, and the cost of walks varies, a cheap
 * one (caches still warm) among dear ones.  One walk slowed by preemption
 * lowers the rate for the next few walks only; the estimate stays
 * unbiased.
 *
 * The draw is split in two so that a small copy costs a decrement: each
 * thread counts down to its next copy walked at the base rate 1/N (the gaps
 * of independent 1/N draws are geometric), and a copy large or long enough
 * that p > 1/N, when not walked so, is walked with probability
 * (p - 1/N) / (1 - 1/N): p in all.
 *
 * Sites live in a fixed open-addressed table keyed by a hash of the first
 * FRAMES return addresses outside pinfast: claimed with one compare-and-swap,
 * counted with relaxed atomic adds, no lock.  Which of those frames is the
 * program's (not cudart's, not the driver's) is decided at exit, where
 * symbol names are at hand; a full table counts the rest as "other". */
#include "callsite.h"
#include "../base/clock.h"
#include "elfsym.h"
#include "../base/options.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SITES PF_CALLSITE_MAX
#define FRAMES 6     /* return addresses kept: static cudart is ~3 deep */
#define OWN_FRAMES 6 /* at most this many of pinfast's own are on top */
#define ALWAYS_BYTES (4u << 20)
#define ALWAYS_NS 1000000
#define SHARE 100 /* a copy bears at most 1/SHARE of its time in walks */
#define WALKS_KEPT 4
#define FIX 256 /* calls are kept in 1/256ths: weights are fractions */

struct counts {
    uint64_t calls_fix, bytes, ticks, samples, estimated;
};

struct site_entry {
    uint64_t key; /* hash of the frames; 0: free */
    int ready;    /* frames written */
    int nframes;
    void *frames[FRAMES];
    struct counts c;
};

static struct site_entry table[SITES];
static struct counts other;
static uintptr_t own_lo, own_hi; /* pinfast's own mapping */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned threads;

__thread struct pf_callsite_countdown pf_callsite_countdown;
/* Per thread: the random draws, ALWAYS_NS in ticks, the walks made and
 * the last timed ones' costs in ticks (0: none yet). */
static __thread uint64_t rng, always_ticks, walks, walk_cost[WALKS_KEPT];

static int find_own(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    uintptr_t me = (uintptr_t)&find_own, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t b = info->dlpi_addr + ph->p_vaddr;
        lo = b < lo ? b : lo;
        hi = b + ph->p_memsz > hi ? b + ph->p_memsz : hi;
    }
    if (me < lo || me >= hi)
        return 0;
    own_lo = lo, own_hi = hi;
    return 1;
}

/* Also loads libgcc_s for backtrace, which allocates: once, here. */
static void init(void) {
    dl_iterate_phdr(find_own, NULL);
    void *b[2];
    backtrace(b, 2);
}

/* xorshift64*, one stream per thread */
static double uniform(void) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

/* Copies up to and including the next one walked at rate 1/n: P(> k) = (1 - 1/n)^k. */
static uint64_t gap(int n) {
    if (n == 1)
        return 1;
    double g = floor(log(1 - uniform()) / log1p(-1.0 / n));
    return g < 1e18 ? 1 + (uint64_t)g : (uint64_t)1e18;
}

static void count(struct counts *c, double w, size_t bytes, uint64_t ticks) {
    __atomic_fetch_add(&c->calls_fix, (uint64_t)(w * FIX + 0.5), __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->bytes, (uint64_t)((double)bytes * w + 0.5), __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->ticks, (uint64_t)((double)ticks * w + 0.5), __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->samples, 1, __ATOMIC_RELAXED);
    if (w > 1)
        __atomic_fetch_add(&c->estimated, 1, __ATOMIC_RELAXED);
}

static uint64_t hash(void *const *f, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        h = (h ^ (uintptr_t)f[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

static struct counts *slot_for(void *const *f, int n) {
    uint64_t key = hash(f, n);
    for (unsigned i = 0; i < SITES; i++) {
        struct site_entry *s = &table[(key + i) % SITES];
        uint64_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (!k && __atomic_compare_exchange_n(&s->key, &k, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            memcpy(s->frames, f, (size_t)n * sizeof *f);
            s->nframes = n;
            __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
            return &s->c;
        }
        if (k == key)
            return &s->c;
    }
    return &other;
}

static int own(const void *ret) { return (uintptr_t)ret >= own_lo && (uintptr_t)ret < own_hi; }

/* What a walk costs this thread now, in ticks (0: not known yet). */
static uint64_t walk_ticks(void) {
    uint64_t sum = 0, n = 0;
    for (int i = 0; i < WALKS_KEPT; i++)
        if (walk_cost[i])
            sum += walk_cost[i], n++;
    return n ? sum / n : 0;
}

static void walk(double p, size_t bytes, uint64_t ticks) {
    pthread_once(&once, init);
    void *b[OWN_FRAMES + FRAMES];
    uint64_t t0 = pf_ticks();
    int got = backtrace(b, OWN_FRAMES + FRAMES), i = 0;
    while (i < got && !own(b[i])) /* a sanitizer's interceptor of backtrace */
        i++;
    while (i < got && own(b[i]))
        i++;
    int kept = got - i < FRAMES ? got - i : FRAMES;
    if (kept > 0)
        count(slot_for(b + i, kept), p < 1 ? 1 / p : 1, bytes, ticks);
    if (walks++) /* the whole walk: its table's lines may be cold too */
        walk_cost[walks % WALKS_KEPT] = pf_ticks_since(t0) | 1;
}

/* Without call sites, the countdown never ends and no copy is small enough
 * to leave the inline path. */
static void setup(int n, struct pf_callsite_countdown *c) {
    if (!n) {
        c->left = c->small_bytes = c->small_ticks = UINT64_MAX;
        return;
    }
    rng = 0x9E3779B97F4A7C15ull * (__atomic_add_fetch(&threads, 1, __ATOMIC_RELAXED) | 1);
    always_ticks = pf_ns_to_ticks(ALWAYS_NS);
    c->small_bytes = ALWAYS_BYTES / (unsigned)n;
    c->small_ticks = always_ticks / (unsigned)n;
    c->left = gap(n);
}

/* The copy the countdown reached, one with p > 1/N, or a thread's first.
 * Without a report (PINFAST_STATS=off) nothing reads the sites: no walk. */
void pf_callsite_sample(size_t bytes, uint64_t ticks) {
    const struct pf_options *o = pf_options();
    int n = o->stats == PF_STATS_OFF ? 0 : o->callsites;
    struct pf_callsite_countdown *c = &pf_callsite_countdown;
    if (!c->left)
        setup(n, c);
    if (!n)
        return;
    int base = --c->left == 0;
    if (base)
        c->left = gap(n);
    double q = 1.0 / n, big = (double)bytes / ALWAYS_BYTES, w = (double)walk_ticks();
    if ((double)ticks / (double)always_ticks > big)
        big = (double)ticks / (double)always_ticks;
    if (w && big > (double)ticks / (SHARE * w))
        big = (double)ticks / (SHARE * w);
    double p = big > 1 ? 1 : big > q ? big : q;
    if (base || (p > q && uniform() < (p - q) / (1 - q)))
        walk(p, bytes, ticks);
}

void pf_callsite_reset(void) {
    memset(table, 0, sizeof table);
    memset(&other, 0, sizeof other);
}

/* ---- at exit: names ------------------------------------------------------ */

/* Names go into JSON strings and aligned text as they are, cut to size. */
static void clean(char *dst, size_t size, const char *src) {
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
    for (char *c = dst; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Names the function holding return address ret; 1 when it belongs to the
 * driver or the CUDA runtime (shared, or linked statically: by its names). */
static int name(void *ret, struct pf_site *s) {
    static const char *const cuda_libs[] = {"libcuda.so", "libcudart"};
    static const char *const cuda_syms[] = {"cuda", "__cuda", "libcudart_static_", "_ZN6cudart", "_ZNK6cudart"};
    static char exe[4096];
    uintptr_t a = (uintptr_t)ret - 1; /* the call, not what follows it */
    Dl_info info;
    struct link_map *map = NULL;
    const ElfW(Sym) *sym = NULL;
    memset(s, 0, sizeof *s);
    s->address = (uintptr_t)ret;
    s->offset = (uintptr_t)ret;
    if (!dladdr1((void *)a, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) {
        clean(s->library, sizeof s->library, "?");
        return 0;
    }
    const char *path = map->l_name;
    if (!path[0]) { /* the program itself */
        if (!exe[0]) {
            ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
            exe[k > 0 ? k : 0] = 0;
        }
        path = exe;
    }
    clean(s->library, sizeof s->library, base_name(path));
    s->offset = (uintptr_t)ret - (uintptr_t)info.dli_fbase;
    char sname[sizeof s->symbol];
    uintptr_t start;
    if (dladdr1((void *)a, &info, (void **)&sym, RTLD_DL_SYMENT) && info.dli_sname && sym &&
        a - (uintptr_t)info.dli_saddr < sym->st_size) {
        clean(s->symbol, sizeof s->symbol, info.dli_sname);
        s->offset = (uintptr_t)ret - (uintptr_t)info.dli_saddr;
    } else if (!pf_elfsym(path, map->l_addr, a, sname, sizeof sname, &start)) {
        clean(s->symbol, sizeof s->symbol, sname);
        s->offset = (uintptr_t)ret - start;
    }
    for (size_t i = 0; i < sizeof cuda_libs / sizeof *cuda_libs; i++)
        if (!strncmp(s->library, cuda_libs[i], strlen(cuda_libs[i])))
            return 1;
    for (size_t i = 0; i < sizeof cuda_syms / sizeof *cuda_syms; i++)
        if (!strncmp(s->symbol, cuda_syms[i], strlen(cuda_syms[i])))
            return 1;
    return 0;
}

static void add_counts(struct pf_site *s, const struct counts *c) {
    s->calls += (__atomic_load_n(&c->calls_fix, __ATOMIC_RELAXED) + FIX / 2) / FIX;
    s->bytes += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    s->ns += pf_ticks_to_ns(__atomic_load_n(&c->ticks, __ATOMIC_RELAXED));
    s->samples += __atomic_load_n(&c->samples, __ATOMIC_RELAXED);
    s->estimated |= __atomic_load_n(&c->estimated, __ATOMIC_RELAXED) != 0;
}

int pf_callsite_collect(struct pf_site *sites, int max, struct pf_site *rest) {
    int n = 0;
    memset(rest, 0, sizeof *rest);
    add_counts(rest, &other);
    for (int i = 0; i < SITES; i++) {
        const struct site_entry *t = &table[i];
        if (!__atomic_load_n(&t->key, __ATOMIC_RELAXED))
            continue;
        if (!__atomic_load_n(&t->ready, __ATOMIC_ACQUIRE)) { /* claimed this instant */
            add_counts(rest, &t->c);
            continue;
        }
        struct pf_site s;
        int f = 0;
        while (name(t->frames[f], &s) && f + 1 < t->nframes)
            f++;
        int k = 0;
        while (k < n && sites[k].address != s.address)
            k++;
        if (k == n && n == max) {
            add_counts(rest, &t->c);
            continue;
        }
        if (k == n)
            sites[n++] = s;
        add_counts(&sites[k], &t->c);
    }
    pf_elfsym_release();
    return n;
}
