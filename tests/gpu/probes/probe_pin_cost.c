/* probe_pin_cost.c - what pinning staging memory costs, by size and way,
 * and how fast the copy engine reads what each way pinned:
 *   hostalloc    cuMemHostAlloc(PORTABLE) (pinfast's slots and bounce area)
 *   register4k   mmap, 4 KiB pages (MADV_NOHUGEPAGE), MADV_POPULATE_WRITE,
 *                cuMemHostRegister(PORTABLE)
 *   registerthp  mmap aligned to 2 MiB, MADV_HUGEPAGE, MADV_POPULATE_WRITE,
 *                cuMemHostRegister(PORTABLE)
 *   registerraw  mmap aligned, MADV_HUGEPAGE, cuMemHostRegister alone (the
 *                driver faults the pages in as it pins them)
 * The process's first pinned allocation (2 MiB, hostalloc) is timed apart:
 * it may carry a one-time cost.  One JSON line per way, size and round:
 * milliseconds to make (populate and register apart), to free, and for
 * 32 MiB the H2D rate from it (median of 9 copies between events).
 *   probe_pin_cost [ROUNDS] */
#include <cuda.h>
#include "../probe.h"

#include <stdint.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define HUGE ((size_t)2 << 20)

enum way { HOSTALLOC, REGISTER4K, REGISTERTHP, REGISTERRAW, NWAYS };
static const char *names[NWAYS] = {"hostalloc", "register4k", "registerthp", "registerraw"};

struct pinned {
    char *mem, *map;
    size_t maplen;
};

static char *map_aligned(size_t len, size_t *maplen, char **map) {
    *maplen = len + HUGE;
    *map = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*map == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return (char *)(((uintptr_t)*map + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
}

/* Makes len bytes pinned the way w; *pop_ms, *reg_ms: the two steps. */
static struct pinned make(enum way w, size_t len, double *pop_ms, double *reg_ms) {
    struct pinned p = {0};
    double t0 = probe_now(), t1 = t0;
    if (w == HOSTALLOC) {
        CK(cuMemHostAlloc((void **)&p.mem, len, CU_MEMHOSTALLOC_PORTABLE));
    } else {
        p.mem = map_aligned(len, &p.maplen, &p.map);
        madvise(p.mem, len, w == REGISTER4K ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
        if (w != REGISTERRAW && madvise(p.mem, len, MADV_POPULATE_WRITE))
            memset(p.mem, 0, len);
        t1 = probe_now();
        CK(cuMemHostRegister(p.mem, len, CU_MEMHOSTREGISTER_PORTABLE));
    }
    double t2 = probe_now();
    *pop_ms = (t1 - t0) * 1e3;
    *reg_ms = (t2 - t1) * 1e3;
    return p;
}

static void drop(enum way w, struct pinned *p) {
    if (w == HOSTALLOC) {
        CK(cuMemFreeHost(p->mem));
    } else {
        CK(cuMemHostUnregister(p->mem));
        munmap(p->map, p->maplen);
    }
}

static double h2d_gbps(CUdeviceptr d, const char *h, size_t len, CUstream st) {
    CUevent a, b;
    CK(cuEventCreate(&a, 0));
    CK(cuEventCreate(&b, 0));
    double v[9];
    for (int i = 0; i < 9; i++) {
        CK(cuEventRecord(a, st));
        CK(cuMemcpyHtoDAsync(d, h, len, st));
        CK(cuEventRecord(b, st));
        CK(cuEventSynchronize(b));
        float ms;
        CK(cuEventElapsedTime(&ms, a, b));
        v[i] = (double)len / (ms * 1e-3) / 1e9;
    }
    CK(cuEventDestroy(a));
    CK(cuEventDestroy(b));
    return probe_median(v, 9);
}

static void thp_setting(void) {
    char buf[128];
    printf("{\"probe\":\"pin_cost\",\"thp\":\"%s\"}\n",
           probe_first_line("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf));
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    thp_setting();
    probe_context();
    double pop, reg, t0 = probe_now();
    struct pinned first = make(HOSTALLOC, HUGE, &pop, &reg);
    printf("{\"probe\":\"pin_cost\",\"first\":\"hostalloc\",\"mib\":2,\"make_ms\":%.3f}\n", (probe_now() - t0) * 1e3);
    drop(HOSTALLOC, &first);
    static const size_t mibs[] = {2, 4, 8, 32, 128};
    CUdeviceptr d;
    CUstream st;
    CK(cuMemAlloc(&d, (size_t)32 << 20));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    for (int r = 0; r < rounds; r++)
        for (unsigned s = 0; s < sizeof mibs / sizeof mibs[0]; s++)
            for (int w = 0; w < NWAYS; w++) {
                size_t len = mibs[s] << 20;
                struct pinned p = make((enum way)w, len, &pop, &reg);
                double gbps = mibs[s] == 32 ? h2d_gbps(d, p.mem, len, st) : 0;
                double t1 = probe_now();
                drop((enum way)w, &p);
                double free_ms = (probe_now() - t1) * 1e3;
                printf("{\"probe\":\"pin_cost\",\"round\":%d,\"way\":\"%s\",\"mib\":%zu,\"make_ms\":%.3f,"
                       "\"populate_ms\":%.3f,\"register_ms\":%.3f,\"free_ms\":%.3f,\"ms_per_mib\":%.4f",
                       r + 1, names[w], mibs[s], pop + reg, pop, reg, free_ms, (pop + reg) / (double)mibs[s]);
                if (gbps)
                    printf(",\"h2d_gbps\":%.2f", gbps);
                printf("}\n");
                fflush(stdout);
            }
    return 0;
}
