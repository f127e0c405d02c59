/* probe_fresh_small.c - what bounds a copy into a small fresh destination
 * (1-16 MiB, mapped and never touched, 4 KiB pages: no huge page fits or
 * is advised): the host alone faulting the pages in, from a resident
 * source, each way timed over a new mapping each round.
 *   memset      one thread writes every byte (the fault inside the write)
 *   memcpy      one thread copies a resident buffer in
 *   populate    one thread MADV_POPULATE_WRITE, no copy
 *   populate+T  T threads populate a piece each at once, then one copies
 *   memcpy+T    T threads copy a piece each at once (as the workers do)
 * (the threads started and waiting before the clock starts)
 * One JSON line per size and way: median GB/s of the copy's bytes over
 * ROUNDS rounds.
 *   probe_fresh_small [MiB ...] */
#include "../probe.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define ROUNDS 41
#define MAX_THREADS 16

enum way { MEMSET, MEMCPY, POPULATE, POPULATE_T, MEMCPY_T };
static const char *names[] = {"memset", "memcpy", "populate", "populate+T", "memcpy+T"};

struct piece {
    char *dst;
    const char *src;
    size_t len;
    int populate;
    pthread_t t;
};

static int go, done; /* the start, and the pieces finished */

static void *piece_main(void *arg) {
    struct piece *p = arg;
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        probe_relax();
    if (p->populate)
        madvise(p->dst, p->len, MADV_POPULATE_WRITE);
    else
        memcpy(p->dst, p->src, p->len);
    __atomic_fetch_add(&done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* One round of `w` into a new mapping: seconds.  The threads of a T way
 * are started first and spin until the clock starts, as a pool's awake
 * workers would. */
static double once(enum way w, size_t len, const char *src, int t) {
    char *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (dst == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    struct piece p[MAX_THREADS];
    int n = 0;
    if (w >= POPULATE_T) {
        size_t per = (len / (size_t)t + 4095) & ~(size_t)4095;
        go = done = 0;
        for (size_t off = 0; off < len; off += per, n++) {
            p[n] = (struct piece){dst + off, src + off, len - off < per ? len - off : per, w == POPULATE_T, 0};
            pthread_create(&p[n].t, NULL, piece_main, &p[n]);
        }
    }
    double t0 = probe_now();
    switch (w) {
    case MEMSET: memset(dst, 1, len); break;
    case MEMCPY: memcpy(dst, src, len); break;
    case POPULATE: madvise(dst, len, MADV_POPULATE_WRITE); break;
    case POPULATE_T:
    case MEMCPY_T:
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < n)
            probe_relax();
        if (w == POPULATE_T)
            memcpy(dst, src, len);
        break;
    }
    double s = probe_now() - t0;
    for (int i = 0; i < n; i++)
        pthread_join(p[i].t, NULL);
    munmap(dst, len);
    return s;
}

int main(int argc, char **argv) {
    size_t mibs[16] = {1, 2, 4, 16};
    int nm = 4;
    if (argc > 1)
        for (nm = 0; nm < argc - 1 && nm < 16; nm++)
            mibs[nm] = strtoul(argv[nm + 1], NULL, 10);
    static const int threads[] = {2, 4, 8};
    for (int m = 0; m < nm; m++) {
        size_t len = mibs[m] << 20;
        char *src = malloc(len);
        memset(src, 7, len);
        for (int w = MEMSET; w <= MEMCPY_T; w++)
            for (int k = 0; k < (w >= POPULATE_T ? 3 : 1); k++) {
                int t = w >= POPULATE_T ? threads[k] : 1;
                double v[ROUNDS];
                for (int r = 0; r < ROUNDS; r++)
                    v[r] = once((enum way)w, len, src, t);
                double s = probe_median(v, ROUNDS);
                printf("{\"probe\":\"fresh_small\",\"mib\":%zu,\"way\":\"%s\",\"threads\":%d,\"median_us\":%.1f,"
                       "\"gbps\":%.2f}\n",
                       mibs[m], names[w], t, s * 1e6, (double)len / s / 1e9);
            }
        free(src);
    }
    return 0;
}
