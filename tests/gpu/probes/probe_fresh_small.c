/* probe_fresh_small.c - what bounds a copy into a small fresh destination
 * (1-16 MiB, mapped and never touched, 4 KiB pages: no huge page fits or
 * is advised): the host alone faulting the pages in, from a resident
 * source, each way timed over a new mapping each round.
 *   memset      one thread writes every byte (the fault inside the write)
 *   memcpy      one thread copies a resident buffer in
 *   populate    one thread MADV_POPULATE_WRITE, no copy
 *   populate+T  T threads populate a piece each at once, then one copies
 *   memcpy+T    T threads copy a contiguous piece each at once
 *   tasks+T     the caller and T threads take tasks of TASK KiB in turn from
 *               a shared counter, as pinfast's caller and workers do
 *   stripes+T   the same, the tasks taken round the 2 MiB regions of the
 *               destination (one page table each): the first of each
 *               region, then the second of each, ...
 * (the threads started and waiting before the clock starts: spinning, as a
 * pool's awake workers would, or with --asleep blocked in the kernel for a
 * millisecond first and woken as the clock starts, as a pool's sleeping
 * workers are by a copy)
 * One JSON line per size and way: median GB/s of the copy's bytes over
 * ROUNDS rounds.
 *   probe_fresh_small [MiB ...]                  every way, 2-8 threads
 *   probe_fresh_small [--asleep] --tasks T,.. KiB,.. MiB ..  tasks+T and stripes+T only */
#include "../probe.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define ROUNDS 41
#define MAX_THREADS 16

enum way { MEMSET, MEMCPY, POPULATE, POPULATE_T, MEMCPY_T, TASKS_T, STRIPES_T };
static const char *names[] = {"memset", "memcpy", "populate", "populate+T", "memcpy+T", "tasks+T", "stripes+T"};

struct piece {
    char *dst;
    const char *src;
    size_t len;
    int populate;
    pthread_t t;
};

static int go, done;        /* the start, and the pieces finished */
static int asleep, waiting; /* --asleep; the threads about to block */
/* tasks+T, stripes+T: the tasks' size, their offsets in the order they are
 * taken, how many, and the next to take */
static size_t task_len, *order;
static int ntasks, next_task;

static void take_tasks(char *dst, const char *src, size_t len) {
    int k;
    while ((k = __atomic_fetch_add(&next_task, 1, __ATOMIC_RELAXED)) < ntasks) {
        size_t off = order[k];
        memcpy(dst + off, src + off, len - off < task_len ? len - off : task_len);
    }
}

/* The tasks' order: by offset, or (stripes) round the 2 MiB regions of dst:
 * each task keyed by its rank within its region, then its region. */
static size_t *keys;

static int by_key(const void *a, const void *b) {
    size_t x = keys[*(const size_t *)a / task_len], y = keys[*(const size_t *)b / task_len];
    return (x > y) - (x < y);
}

static void plan_tasks(const char *dst, size_t len, int stripes) {
    ntasks = (int)((len + task_len - 1) / task_len);
    order = realloc(order, (size_t)ntasks * sizeof *order);
    keys = realloc(keys, (size_t)ntasks * sizeof *keys);
    uintptr_t base = (uintptr_t)dst >> 21;
    for (int i = 0, first = 0; i < ntasks; i++) {
        size_t region = (((uintptr_t)dst + (size_t)i * task_len) >> 21) - base;
        if (i && region != keys[i - 1] % 64)
            first = i;
        keys[i] = (size_t)(i - first) * 64 + region; /* at most 64 regions: 128 MiB */
        order[i] = (size_t)i * task_len;
    }
    if (stripes)
        qsort(order, (size_t)ntasks, sizeof *order, by_key);
}

static void *piece_main(void *arg) {
    struct piece *p = arg;
    if (asleep) {
        __atomic_fetch_add(&waiting, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
            syscall(SYS_futex, &go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        probe_relax();
    if (task_len)
        take_tasks(p->dst, p->src, p->len);
    else if (p->populate)
        madvise(p->dst, p->len, MADV_POPULATE_WRITE);
    else
        memcpy(p->dst, p->src, p->len);
    __atomic_fetch_add(&done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* One round of `w` into a new mapping: seconds.  The threads of a T way
 * are started first and spin until the clock starts, or (asleep) block
 * until it does. */
static double once(enum way w, size_t len, const char *src, int t) {
    char *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (dst == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    struct piece p[MAX_THREADS];
    int n = 0;
    go = done = next_task = waiting = 0;
    if (w >= TASKS_T)
        plan_tasks(dst, len, w == STRIPES_T);
    if (w >= TASKS_T)
        for (; n < t; n++) {
            p[n] = (struct piece){dst, src, len, 0, 0};
            pthread_create(&p[n].t, NULL, piece_main, &p[n]);
        }
    else if (w >= POPULATE_T) {
        size_t per = (len / (size_t)t + 4095) & ~(size_t)4095;
        for (size_t off = 0; off < len; off += per, n++) {
            p[n] = (struct piece){dst + off, src + off, len - off < per ? len - off : per, w == POPULATE_T, 0};
            pthread_create(&p[n].t, NULL, piece_main, &p[n]);
        }
    }
    if (asleep && n) { /* all blocked, their CPUs idle a while */
        while (__atomic_load_n(&waiting, __ATOMIC_ACQUIRE) < n)
            probe_relax();
        usleep(1000);
    }
    double t0 = probe_now();
    switch (w) {
    case MEMSET: memset(dst, 1, len); break;
    case MEMCPY: memcpy(dst, src, len); break;
    case POPULATE: madvise(dst, len, MADV_POPULATE_WRITE); break;
    case POPULATE_T:
    case MEMCPY_T:
    case TASKS_T:
    case STRIPES_T:
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        if (asleep)
            syscall(SYS_futex, &go, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        if (w >= TASKS_T)
            take_tasks(dst, src, len);
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

/* Median GB/s of ROUNDS rounds of w. */
static void report(enum way w, size_t mib, const char *src, int t) {
    size_t len = mib << 20;
    double v[ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        v[r] = once(w, len, src, t);
    double s = probe_median(v, ROUNDS);
    printf("{\"probe\":\"fresh_small\",\"mib\":%zu,\"way\":\"%s\",\"threads\":%d,\"task_kib\":%zu,"
           "\"asleep\":%d,\"median_us\":%.1f,\"gbps\":%.2f}\n",
           mib, names[w], t, task_len >> 10, asleep, s * 1e6, (double)len / s / 1e9);
    fflush(stdout);
}

/* A comma list of numbers into v (at most 16): how many. */
static int list(const char *s, size_t *v) {
    int n = 0;
    for (char *e; *s && n < 16; s = *e ? e + 1 : e)
        v[n++] = strtoul(s, &e, 10);
    return n;
}

int main(int argc, char **argv) {
    size_t mibs[16] = {1, 2, 4, 16}, ts[16] = {2, 4, 8}, kibs[16] = {0};
    if (argc > 1 && !strcmp(argv[1], "--asleep")) {
        asleep = 1;
        argv++;
        argc--;
    }
    int nm = 4, nt = 3, nk = 1, tasks = argc > 3 && !strcmp(argv[1], "--tasks");
    if (tasks) {
        nt = list(argv[2], ts);
        nk = list(argv[3], kibs);
        argv += 3;
        argc -= 3;
    }
    if (argc > 1)
        for (nm = 0; nm < argc - 1 && nm < 16; nm++)
            mibs[nm] = strtoul(argv[nm + 1], NULL, 10);
    for (int m = 0; m < nm; m++) {
        char *src = malloc(mibs[m] << 20);
        memset(src, 7, mibs[m] << 20);
        for (int w = tasks ? TASKS_T : MEMSET; w <= (tasks ? STRIPES_T : MEMCPY_T); w++)
            for (int k = 0; k < (w >= POPULATE_T ? nt : 1); k++)
                for (int j = 0; j < (w >= TASKS_T ? nk : 1); j++) {
                    task_len = w >= TASKS_T ? kibs[j] << 10 : 0;
                    report((enum way)w, mibs[m], src, w >= POPULATE_T ? (int)ts[k] : 1);
                }
        free(src);
    }
    return 0;
}
