/* probe_reg_parallel.c - whether the driver registers host memory for two
 * contexts at once: pinfast's registration cache registers a block per
 * context in parallel only if the driver does not make one cuMemHostRegister
 * wait for another.  Each round, 64 MiB regions (touched, 4 KiB pages, as
 * the program's memory usually is) are registered with pinfast's flags
 * (PORTABLE | DEVICEMAP):
 *   alone       one region, one thread (device 0)
 *   in_turn     one region per device, one thread, one after the other
 *   threads     one region per device, a thread each in its device's
 *               primary context, started together
 *   same_ctx    two regions, two threads in device 0's context
 * One JSON line per way and round: the wall time and each call's time, ms.
 *   probe_reg_parallel [ROUNDS] */
#include <cuda.h>
#include "../probe.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#define REGION ((size_t)64 << 20)
#define MAXDEV 8
#define FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP)

struct job {
    CUcontext ctx;
    char *mem;
    double ms;
    pthread_barrier_t *start;
};

static char *region(void) {
    char *p = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, REGION, MADV_NOHUGEPAGE);
    memset(p, 1, REGION);
    return p;
}

static void reg(struct job *j) {
    CK(cuCtxSetCurrent(j->ctx));
    double t0 = probe_now();
    CK(cuMemHostRegister(j->mem, REGION, FLAGS));
    j->ms = (probe_now() - t0) * 1e3;
}

static void *thread(void *arg) {
    struct job *j = arg;
    pthread_barrier_wait(j->start);
    reg(j);
    return NULL;
}

static void line(const char *way, int round, const struct job *j, int n, double wall_ms) {
    printf("{\"way\":\"%s\",\"round\":%d,\"regions\":%d,\"wall_ms\":%.2f,\"each_ms\":[", way, round, n, wall_ms);
    for (int i = 0; i < n; i++)
        printf("%s%.2f", i ? "," : "", j[i].ms);
    printf("]}\n");
    for (int i = 0; i < n; i++)
        CK(cuMemHostUnregister(j[i].mem));
}

static void run(const char *way, int round, struct job *j, int n, int threaded) {
    pthread_t t[MAXDEV];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    double t0 = 0;
    if (threaded) {
        for (int i = 0; i < n; i++) {
            j[i].start = &start;
            pthread_create(&t[i], NULL, thread, &j[i]);
        }
        pthread_barrier_wait(&start);
        t0 = probe_now();
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
    } else {
        t0 = probe_now();
        for (int i = 0; i < n; i++)
            reg(&j[i]);
    }
    line(way, round, j, n, (probe_now() - t0) * 1e3);
    pthread_barrier_destroy(&start);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5, ndev = 0;
    CK(cuInit(0));
    CK(cuDeviceGetCount(&ndev));
    ndev = ndev > MAXDEV ? MAXDEV : ndev;
    struct job j[MAXDEV];
    CUcontext ctx[MAXDEV];
    for (int i = 0; i < ndev; i++) {
        CUdevice d;
        CK(cuDeviceGet(&d, i));
        CK(cuDevicePrimaryCtxRetain(&ctx[i], d));
        j[i] = (struct job){.ctx = ctx[i], .mem = region()};
    }
    printf("{\"devices\":%d,\"region_mib\":%zu}\n", ndev, REGION >> 20);
    for (int r = 0; r < rounds; r++) {
        run("alone", r, j, 1, 0);
        if (ndev > 1) {
            run("in_turn", r, j, ndev, 0);
            run("threads", r, j, ndev, 1);
        }
        struct job same[2] = {{.ctx = ctx[0], .mem = j[0].mem}, {.ctx = ctx[0], .mem = j[ndev > 1 ? 1 : 0].mem}};
        if (ndev > 1)
            run("same_ctx", r, same, 2, 1);
    }
    return 0;
}
