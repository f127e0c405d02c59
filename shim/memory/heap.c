/* pinfast's heap (heap.h).  One address range, reserved inaccessible on the
 * first large allocation, is cut into 2 MiB units; a block takes whole
 * units (its tail stays inaccessible) and starts on one, so that a lookup
 * by address is one array load, and a freed range is reserved again in
 * place: no other mapping of the program's, a library's or the C
 * library's can land where a registration of pinfast's may still be.
 * Each block carries a header as glibc's mmapped chunks do, so that a
 * block reaching glibc's own free or malloc_usable_size (a library bound to
 * glibc directly) is understood there.  Nothing here allocates or calls a
 * wrapped function: mappings are made by system calls. */
#include "heap.h"
#include "block.h"
#include "heap_units.h"
#include "../base/dynsym.h"
#include "../base/libc.h"
#include "../base/message.h"
#include "../base/options.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNIT ((uintptr_t)2 << 20)
#define MAX_BLOCKS (1u << 18)
/* The header glibc reads below an mmapped chunk: the offset of the chunk
 * from its mapping, and its size with IS_MMAPPED. */
#define HEADER 16
#define IS_MMAPPED 2

uintptr_t pf_heap_lo_, pf_heap_len_;
size_t pf_heap_min_ = SIZE_MAX;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int reserved;            /* 1: reserved; -1: failed, the heap is off */
static struct pf_block *blocks; /* MAX_BLOCKS records */
static uint32_t nrec, free_rec; /* records used so far; the unused list (index + 1) */
static uint32_t *unit_map;      /* per unit: the record holding it, index + 1 */
static size_t nunits;
static uint32_t kept_head, kept_tail; /* oldest first, index + 1 */
static uint32_t classes[64];          /* kept blocks by log2 of their size, index + 1 */
static size_t keep_cap;
static uint64_t kept_clock;
static struct pf_heap_stats stats;
static uintptr_t page_;

static void *sys_map(uintptr_t at, size_t n, int prot, int flags) {
    return pf_libc_mmap((void *)at, n, prot, flags | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

int pf_heap_reserve_again(uintptr_t at, size_t n) {
    return sys_map(at, n, PROT_NONE, MAP_FIXED | MAP_NORESERVE) == MAP_FAILED ? -1 : 0;
}

void pf_heap_lock(void) { pthread_mutex_lock(&lock); }
void pf_heap_unlock(void) { pthread_mutex_unlock(&lock); }
void pf_heap_wait(pthread_cond_t *c) { pthread_cond_wait(c, &lock); }

void pf_heap_start(void) {
    const struct pf_options *o = pf_options();
    /* a malloc preloaded before pinfast, a sanitizer's or valgrind's would
     * never hand pinfast's blocks back to it */
    if (o->disable || !o->reg || !pf_dynsym_own_first("malloc") || !pf_dynsym_own_first("free"))
        return;
    page_ = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t ram = (size_t)sysconf(_SC_PHYS_PAGES) * page_;
    keep_cap = o->heap_keep ? o->heap_keep : ram / 8 < ((size_t)8 << 30) ? ram / 8 : (size_t)8 << 30;
    __atomic_store_n(&pf_heap_min_, o->reg_min, __ATOMIC_RELAXED);
}

/* The range and the tables, on the first large allocation: twice the
 * machine's memory, from 16 GiB to 16 TiB, less where the address space is
 * limited (lock held). */
static int reserve(void) {
    if (reserved)
        return reserved > 0;
    size_t ram = (size_t)sysconf(_SC_PHYS_PAGES) * page_, len = 2 * ram;
    len = len < ((size_t)16 << 30) ? (size_t)16 << 30 : len > ((size_t)16 << 40) ? (size_t)16 << 40 : len;
    len &= ~(UNIT - 1);
    for (; len >= ((size_t)1 << 30); len /= 2) {
        void *r = sys_map(0, len + UNIT, PROT_NONE, MAP_NORESERVE);
        if (r == MAP_FAILED)
            continue;
        uintptr_t lo = ((uintptr_t)r + UNIT - 1) & ~(UNIT - 1);
        nunits = len / UNIT;
        void *map = sys_map(0, nunits * sizeof *unit_map, PROT_READ | PROT_WRITE, MAP_NORESERVE);
        void *ext = sys_map(0, pf_units_bytes((uint32_t)nunits), PROT_READ | PROT_WRITE, MAP_NORESERVE);
        void *rec = sys_map(0, MAX_BLOCKS * sizeof *blocks, PROT_READ | PROT_WRITE, MAP_NORESERVE);
        if (map == MAP_FAILED || ext == MAP_FAILED || rec == MAP_FAILED) {
            pf_libc_munmap(r, len + UNIT);
            break;
        }
        unit_map = map, blocks = rec;
        pf_units_init(ext, (uint32_t)nunits);
        __atomic_store_n(&pf_heap_lo_, lo, __ATOMIC_RELAXED);
        __atomic_store_n(&pf_heap_len_, len, __ATOMIC_RELEASE);
        return reserved = 1;
    }
    __atomic_store_n(&pf_heap_min_, SIZE_MAX, __ATOMIC_RELAXED);
    reserved = -1;
    return 0;
}

static uint32_t unit_of(uintptr_t p) { return (uint32_t)((p - pf_heap_lo_) / UNIT); }

struct pf_block *pf_heap_find(uintptr_t p) {
    if (!pf_heap_owns((const void *)p))
        return NULL;
    uint32_t r = unit_map[unit_of(p)];
    return r ? &blocks[r - 1] : NULL;
}

struct pf_block *pf_heap_blocks(size_t *n) {
    *n = nrec;
    return blocks;
}

static uint32_t index_of(const struct pf_block *b) { return (uint32_t)(b - blocks) + 1; }

static unsigned class_of(size_t n) { return 63u - (unsigned)__builtin_clzll(n); }

static void kept_push(struct pf_block *b) {
    uint32_t *c = &classes[class_of(b->size)];
    b->cprev = 0;
    b->cnext = *c;
    if (*c)
        blocks[*c - 1].cprev = index_of(b);
    *c = index_of(b);
    b->kept_at = ++kept_clock;
    b->prev = kept_tail;
    b->next = 0;
    if (kept_tail)
        blocks[kept_tail - 1].next = index_of(b);
    else
        kept_head = index_of(b);
    kept_tail = index_of(b);
    stats.kept_bytes += b->size;
    stats.peak_kept_bytes = stats.kept_bytes > stats.peak_kept_bytes ? stats.kept_bytes : stats.peak_kept_bytes;
}

static void kept_pull(struct pf_block *b) {
    if (b->cprev)
        blocks[b->cprev - 1].cnext = b->cnext;
    else
        classes[class_of(b->size)] = b->cnext;
    if (b->cnext)
        blocks[b->cnext - 1].cprev = b->cprev;
    b->cprev = b->cnext = 0;
    if (b->prev)
        blocks[b->prev - 1].next = b->next;
    else
        kept_head = b->next;
    if (b->next)
        blocks[b->next - 1].prev = b->prev;
    else
        kept_tail = b->prev;
    b->prev = b->next = 0;
    stats.kept_bytes -= b->size;
}

/* Kept and not registered: the registrar may change that meanwhile. */
static int warm(const struct pf_block *b) { return b->reg == PF_REG_NONE || b->reg == PF_REG_REFUSED; }

void pf_heap_release(struct pf_block *b) {
    if (b->state == PF_BLOCK_KEPT)
        kept_pull(b);
    stats.live_bytes -= b->state == PF_BLOCK_LIVE ? b->size : 0;
    uint32_t at = unit_of(b->base);
    if (pf_heap_reserve_again(b->base, (size_t)b->units * UNIT))
        return; /* the range stays the block's: never given out again */
    memset(&unit_map[at], 0, b->units * sizeof *unit_map);
    pf_units_give(at, b->units);
    uint32_t i = index_of(b);
    *b = (struct pf_block){.next = free_rec, .gen = b->gen + 1};
    free_rec = i;
    stats.released++;
}

/* The header glibc would find below p. */
static void header(const struct pf_block *b) {
    size_t *h = (size_t *)(b->base + b->user_off);
    h[-2] = b->user_off - HEADER;
    h[-1] = (b->size - b->user_off + HEADER) | IS_MMAPPED;
}

/* How much a kept block is worth to the next malloc: registered (copies
 * go direct at once), then touched (no page to fault in and clear), then
 * cold. */
static int worth(const struct pf_block *b) { return b->reg == PF_REG_LIVE || b->reg == PF_REG_MAKING ? 2 : !b->cold; }

/* The kept block that fits n bytes best (the worthiest, then the
 * smallest), at most a quarter larger than `need`: of need's size class or
 * the next; NULL when none (lock held). */
static struct pf_block *fitting(size_t need, size_t n, size_t align) {
    struct pf_block *best = NULL;
    for (unsigned c = class_of(need); c <= class_of(need) + 1 && c < 64; c++) {
        for (uint32_t i = classes[c]; i; i = blocks[i - 1].cnext) {
            struct pf_block *b = &blocks[i - 1];
            if (b->size - b->user_off < n || b->size > need + need / 4 || b->user_off % align)
                continue;
            int w = worth(b), best_w = best ? worth(best) : -1;
            if (w > best_w || (w == best_w && b->size < best->size))
                best = b;
            if (w == 2 && b->size == need) /* none fits better */
                return best;
        }
    }
    return best;
}

/* Whether the block's first page wholly the program's (its header is on
 * the page before) holds memory: the program touched the block.  One
 * look, not a walk of its pages. */
static int touched(const struct pf_block *b) {
    unsigned char v = 0;
    uintptr_t first = (b->base + b->user_off + page_ - 1) & ~(page_ - 1);
    return syscall(SYS_mincore, first, page_, &v) == 0 && (v & 1);
}

/* A new block of `need` bytes (lock held). */
static struct pf_block *fresh(size_t need, uint32_t off) {
    uint32_t units = (uint32_t)((need + UNIT - 1) / UNIT);
    if (!free_rec && nrec == MAX_BLOCKS)
        return NULL;
    long at = pf_units_take(units);
    if (at < 0)
        return NULL;
    uintptr_t base = pf_heap_lo_ + (uintptr_t)at * UNIT;
    if (sys_map(base, need, PROT_READ | PROT_WRITE, MAP_FIXED) == MAP_FAILED) {
        pf_units_give((uint32_t)at, units);
        return NULL;
    }
    uint32_t i = free_rec ? free_rec : ++nrec;
    struct pf_block *b = &blocks[i - 1];
    free_rec = free_rec ? b->next : 0;
    *b = (struct pf_block){.base = base, .size = need, .units = units, .user_off = off, .gen = b->gen};
    for (uint32_t u = 0; u < units; u++)
        unit_map[at + u] = i;
    stats.served++;
    return b;
}

void *pf_heap_alloc(size_t n, size_t align, int zero) {
    if (!pf_heap_serves(n) || align > UNIT || n > ((size_t)1 << 46))
        return NULL;
    uint32_t off = align > 64 ? (uint32_t)align : 64;
    pthread_mutex_lock(&lock);
    if (!reserve()) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    size_t need = (off + n + page_ - 1) & ~(page_ - 1);
    /* calloc wants zeros: a new mapping has them for free */
    struct pf_block *b = zero ? NULL : fitting(need, n, align < 64 ? 64 : align);
    if (b) {
        kept_pull(b);
        stats.reused++;
        if (b->reg == PF_REG_REFUSED) /* over the cap then, perhaps not now */
            b->reg = PF_REG_NONE;
    } else {
        b = fresh(need, off);
    }
    if (b) {
        b->state = PF_BLOCK_LIVE;
        b->asked = n;
        b->align_log2 = (uint8_t)class_of(align);
        b->settles = 0;
        b->cold = (uint8_t)zero;
        stats.live_bytes += b->size;
        header(b);
    }
    pthread_mutex_unlock(&lock);
    return b ? (void *)(b->base + b->user_off) : NULL;
}

/* The live block at p, the program's pointer (lock held); glibc's answer
 * to a pointer it never gave out otherwise. */
static struct pf_block *live(void *p, const char *fn) {
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    if (b && b->state == PF_BLOCK_LIVE && (uintptr_t)p == b->base + b->user_off)
        return b;
    pthread_mutex_unlock(&lock);
    pf_msg(PF_ERROR, "%s(): invalid pointer %p (not a live block of pinfast's heap)", fn, p);
    abort();
}

size_t pf_heap_free(void *p, size_t *align) {
    pthread_mutex_lock(&lock);
    struct pf_block *b = live(p, "free");
    size_t asked = b->asked;
    if (align)
        *align = (size_t)1 << b->align_log2;
    stats.live_bytes -= b->size;
    if (b->reg == PF_REG_STALE || b->reg == PF_REG_PROGRAM || b->nhands) {
        b->state = PF_BLOCK_HELD; /* pages the driver still holds, for pinfast or the program */
    } else if (b->altered && warm(b)) {
        b->state = PF_BLOCK_HELD; /* its pages are not as pinfast mapped them */
        pf_heap_release(b);
    } else { /* one due is registered kept: the next fitting malloc gets it warm */
        b->state = PF_BLOCK_KEPT;
        b->cold = b->cold && warm(b) && !touched(b); /* (only calloc's may be untouched) */
        stats.kept_blocks++;
        kept_push(b);
        /* warm blocks within PINFAST_HEAP_KEEP, the oldest given back first */
        size_t bytes = 0;
        for (uint32_t i = stats.kept_bytes > keep_cap ? kept_head : 0; i; i = blocks[i - 1].next)
            bytes += warm(&blocks[i - 1]) ? blocks[i - 1].size : 0;
        for (uint32_t i = kept_head; i && bytes > keep_cap;) {
            struct pf_block *o = &blocks[i - 1];
            i = o->next;
            if (warm(o)) {
                bytes -= o->size;
                pf_heap_release(o);
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return asked;
}

size_t pf_heap_usable(const void *p) {
    pthread_mutex_lock(&lock);
    struct pf_block *b = live((void *)p, "malloc_usable_size");
    size_t n = b->size - b->user_off;
    pthread_mutex_unlock(&lock);
    return n;
}

/* b grows in place to `need` bytes when the units after it are free, as
 * glibc's mremap would (lock held): 1 then.  Never while a registration
 * of pinfast's holds it, or may be made: the driver refuses a copy that
 * runs from a registration into memory past its end, so the grown part
 * would make copies across the old end fail. */
static int grow(struct pf_block *b, size_t need) {
    if (b->reg == PF_REG_DUE || b->reg == PF_REG_MAKING || b->reg == PF_REG_LIVE || b->reg == PF_REG_STALE)
        return 0;
    uint32_t units = (uint32_t)((need + UNIT - 1) / UNIT), end = unit_of(b->base) + b->units, more = units - b->units;
    if (units > b->units && !pf_units_free_at(end, more))
        return 0;
    if (sys_map(b->base + b->size, need - b->size, PROT_READ | PROT_WRITE, MAP_FIXED) == MAP_FAILED)
        return 0;
    if (units > b->units) {
        pf_units_take_at(end, more);
        for (uint32_t u = end; u < end + more; u++)
            unit_map[u] = index_of(b);
        b->units = units;
    }
    stats.live_bytes += need - b->size;
    b->size = need;
    header(b);
    return 1;
}

void *pf_heap_realloc(void *p, size_t n, void *(*other)(size_t)) {
    pthread_mutex_lock(&lock);
    struct pf_block *b = live(p, "realloc");
    size_t have = b->size - b->user_off;
    int stays = (n <= have && n >= have / 2) ||
                (n > have && n < ((size_t)1 << 46) && grow(b, (b->user_off + n + page_ - 1) & ~(page_ - 1)));
    if (stays)
        b->asked = n;
    pthread_mutex_unlock(&lock);
    if (stays)
        return p;
    void *q = pf_heap_alloc(n, 16, 0);
    if (!q && !(q = other(n)))
        return NULL;
    memcpy(q, p, n < have ? n : have);
    pf_heap_free(p, NULL);
    return q;
}

void pf_heap_trim(void) {
    pthread_mutex_lock(&lock);
    for (uint32_t i = kept_head; i;) {
        struct pf_block *b = &blocks[i - 1];
        i = b->next;
        if (warm(b))
            pf_heap_release(b);
    }
    pthread_mutex_unlock(&lock);
}

void pf_heap_stats(struct pf_heap_stats *out) {
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

void pf_heap_fork_prepare(void) { pthread_mutex_lock(&lock); }
void pf_heap_fork_done(void) { pthread_mutex_unlock(&lock); }
