/* Sizes of pageable copies go into a small set (lock-free, bounded: once
 * full, later sizes are not remembered).  A pinned allocation matches a size
 * n when it is n, or the power of two above n (PyTorch's host allocator
 * rounds up so).  Matching blocks are remembered until freed, to know how
 * much such memory was held at once.  A program that allocates its pinned
 * buffers before it copies never matches. */
#include "pin_after_copy.h"

#include <pthread.h>
#include <string.h>

#define SIZES 64
#define HELD 64

static size_t sizes[SIZES]; /* 0: free */
static struct {
    const void *p;
    size_t n;
} held[HELD];
static uint64_t count, bytes, live, peak;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void pf_pin_after_copy_copy_large(size_t n) {
    for (unsigned i = 0; i < SIZES; i++) {
        size_t *s = &sizes[(n / PF_PIN_AFTER_COPY_MIN_BYTES + i) % SIZES];
        size_t v = __atomic_load_n(s, __ATOMIC_RELAXED);
        if (!v && __atomic_compare_exchange_n(s, &v, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return;
        if (v == n) /* v: what another thread put there first */
            return;
    }
}

static int copied_before(size_t m) {
    int pow2 = !(m & (m - 1));
    for (unsigned i = 0; i < SIZES; i++) {
        size_t n = __atomic_load_n(&sizes[i], __ATOMIC_RELAXED);
        if (n && (n == m || (pow2 && n > m / 2 && n < m)))
            return 1;
    }
    return 0;
}

void pf_pin_after_copy_alloc(const void *p, size_t n) {
    if (n < PF_PIN_AFTER_COPY_MIN_BYTES || !copied_before(n))
        return;
    pthread_mutex_lock(&lock);
    count++;
    bytes += n;
    for (unsigned i = 0; i < HELD; i++)
        if (!held[i].p) { /* a full table: held at once is then a lower bound */
            held[i].p = p, held[i].n = n;
            live += n;
            peak = live > peak ? live : peak;
            break;
        }
    pthread_mutex_unlock(&lock);
}

void pf_pin_after_copy_free(const void *p) {
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < HELD; i++)
        if (held[i].p == p) {
            live -= held[i].n;
            held[i].p = NULL;
            break;
        }
    pthread_mutex_unlock(&lock);
}

void pf_pin_after_copy_stats(struct pf_pin_after_copy_stats *s) {
    pthread_mutex_lock(&lock);
    s->count = count, s->bytes = bytes, s->peak_bytes = peak;
    pthread_mutex_unlock(&lock);
}

void pf_pin_after_copy_reset(void) {
    memset(sizes, 0, sizeof sizes);
    memset(held, 0, sizeof held);
    count = bytes = live = peak = 0;
    pthread_mutex_init(&lock, NULL);
}
