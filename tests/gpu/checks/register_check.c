/* The registration cache against the real driver (docs/design.md, "The
 * registration cache").  Linked with -lcuda; run with and without
 * LD_PRELOAD=libpinfast.so (tests/gpu/checks/register.sh):
 *   register_check check [MiB]   a range copied three times (registered
 *       under pinfast), then freed, unmapped, moved, advised away, mapped
 *       over, detached, reallocated, replaced by a file mapping, and
 *       ranges registered as one (growing prefixes, neighbours); a small copy
 *       across the end of a block's used start; new random
 *       bytes at the same address, copied both ways and compared: one line
 *       per case, "ok" or "STALE"; asynchronous copies through a
 *       registration keep the pageable copies' host semantics; the
 *       program's own cuMemHostRegister/Unregister get the driver's answers,
 *       and copies of every form running past its registration's end, a
 *       batch's too.
 *       Exit 1 on any wrong byte.
 *   register_check fork [MiB]    copy-on-write of registered pages: the
 *       program registers a malloc'd range itself, forks; the child reads
 *       and writes it, the parent writes it then copies it H2D.  Prints
 *       what the child saw and whether the device got the parent's bytes.
 *   register_check bench [reps]  the same buffer copied reps times (64 MiB
 *       and 1 GiB, H2D and D2H): GB/s of the first, the second, and the
 *       median from the third on; and pinned memory by hand. */
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../probe.h"
#include "../../support/batch_ops.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static size_t n;
static CUdeviceptr dev;
static unsigned char *pinned;
static int failures;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static void fill(unsigned char *p, size_t len) {
    for (size_t i = 0; i + 8 <= len; i += 8) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        memcpy(p + i, &rng, 8);
    }
}

/* An H2D from r and a D2H into it, each compared through pinned memory;
 * returns the wrong bytes. */
static size_t round_trip(unsigned char *r) {
    size_t bad = 0;
    fill(r, n);
    CK(cuMemcpyHtoD(dev, r, n));
    memset(pinned, 0xA5, n);
    CK(cuMemcpyDtoH(pinned, dev, n));
    for (size_t i = 0; i < n; i++)
        bad += pinned[i] != r[i];
    fill(pinned, n);
    CK(cuMemcpyHtoD(dev, pinned, n));
    memset(r, 0x5A, n);
    CK(cuMemcpyDtoH(r, dev, n));
    for (size_t i = 0; i < n; i++)
        bad += pinned[i] != r[i];
    return bad;
}

static void repeat(unsigned char *r) {
    for (int i = 0; i < 3; i++)
        if (round_trip(r)) {
            printf("setup: wrong bytes before the memory changed owner\n");
            failures++;
        }
}

static void verdict(const char *what, unsigned char *r) {
    size_t bad = round_trip(r);
    printf("%-28s %s", what, bad ? "STALE" : "ok");
    if (bad)
        printf(" (%zu wrong bytes)", bad);
    printf("\n");
    failures += bad != 0;
}

static void CUDA_CB nap_20ms(void *arg) {
    (void)arg;
    usleep(20000);
}

static unsigned char *map(void *at) {
    void *p = mmap(at, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (p == MAP_FAILED || (at && p != at)) {
        printf("mmap at %p failed\n", at);
        exit(2);
    }
    return p;
}

static void check(void) {
    unsigned char *r, *q;
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    r = malloc(n), repeat(r), free(r);
    q = malloc(n), verdict(q == r ? "free (same address)" : "free (elsewhere)", q), free(q);

    r = map(NULL), repeat(r), munmap(r, n);
    verdict("munmap", map(r)), munmap(r, n);

    r = map(NULL), q = map(NULL), repeat(r);
    mremap(r, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, q);
    verdict("mremap (moved)", map(r)), verdict("mremap (the moved pages)", q), munmap(r, n), munmap(q, n);

    r = map(NULL), repeat(r), madvise(r, n, MADV_DONTNEED);
    verdict("madvise(MADV_DONTNEED)", r), munmap(r, n);

    r = map(NULL), repeat(r);
    mmap(r, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    verdict("mmap(MAP_FIXED)", r), munmap(r, n);

    int id = shmget(IPC_PRIVATE, n, IPC_CREAT | 0600);
    r = shmat(id, NULL, 0), shmctl(id, IPC_RMID, NULL), repeat(r), shmdt(r);
    id = shmget(IPC_PRIVATE, n, IPC_CREAT | 0600);
    q = shmat(id, r, 0), shmctl(id, IPC_RMID, NULL);
    verdict(q == r ? "shmdt (same address)" : "shmdt (elsewhere)", q), shmdt(q);

    r = malloc(n), repeat(r);
    q = realloc(r, 2 * n);
    unsigned char *o = malloc(n);
    /* o may land at r's old address or not, as the allocator chooses: the
     * label does not say, so that runs with and without pinfast compare */
    verdict("realloc (new block)", q), verdict("realloc, then malloc", o);
    free(o), free(q);

    /* a block used at its start only, copied again and again, then a small
     * copy (passed to the driver) across where the used part ended: a
     * registration of the used part alone would make the driver refuse it */
    r = malloc(2 * n), repeat(r), usleep(50000);
    {
        size_t k = 64 * 1024;
        unsigned char *at = r + n - k / 2;
        fill(at, k);
        CUresult up = cuMemcpyHtoD(dev, at, k);
        memset(pinned, 0xA5, k);
        CUresult down = cuMemcpyDtoH(pinned, dev, k);
        int ok = up == CUDA_SUCCESS && down == CUDA_SUCCESS && !memcmp(pinned, at, k);
        printf("%-28s %s", "across the used start's end", ok ? "ok" : "FAILED");
        if (!ok)
            printf(" (H2D %d, D2H %d)", (int)up, (int)down);
        printf("\n");
        failures += !ok;
    }
    free(r);

    /* growing prefixes (registered as one), unmapped and mapped again */
    size_t whole = n;
    r = map(NULL);
    for (n = whole / 4; n <= whole; n += whole / 4)
        repeat(r);
    n = whole, repeat(r), munmap(r, n);
    verdict("merged prefixes, munmap", map(r)), munmap(r, n);
    /* two neighbours (registered as one), one of them unmapped and mapped again */
    r = map(NULL);
    n = whole / 2, repeat(r), repeat(r + n);
    n = whole, repeat(r);
    n = whole / 2, munmap(r + n, n);
    verdict("merged neighbours, munmap", map(r + n)), verdict("merged neighbours, the other", r);
    n = whole, munmap(r, n);

    /* unmapped, and a file mapped at the same address */
    char path[] = "/tmp/register_check-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    unsigned char *tmp = malloc(n);
    fill(tmp, n);
    if (fd < 0 || write(fd, tmp, n) != (ssize_t)n) {
        printf("cannot write %s\n", path);
        exit(2);
    }
    r = map(NULL), repeat(r), munmap(r, n);
    q = mmap(r, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
    memset(pinned, 0xA5, n);
    CK(cuMemcpyHtoD(dev, q, n));
    CK(cuMemcpyDtoH(pinned, dev, n));
    printf("%-28s %s\n", "munmap, then a file there", memcmp(pinned, tmp, n) ? "STALE" : "ok");
    failures += memcmp(pinned, tmp, n) != 0;
    verdict("the file mapping", q), munmap(q, n);
    /* a shared file mapping copied again and again: registered or refused */
    q = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    repeat(q), verdict("a shared file mapping", q), munmap(q, n);
    close(fd), free(tmp);

    /* host semantics of the asynchronous copies through a registration */
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    r = malloc(n), repeat(r);
    size_t late = 0, early = 0;
    for (int k = 0; k < 8; k++) {
        fill(r, n);
        memcpy(pinned, r, n);
        CK(cuMemcpyHtoDAsync(dev, r, n, s));
        memset(r, 0x33, n); /* the source may be reused once the call returns */
        CK(cuStreamSynchronize(s));
        unsigned char *back = malloc(n);
        CK(cuMemcpyDtoH(back, dev, n));
        for (size_t i = 0; i < n; i++)
            late += back[i] != pinned[i];
        free(back);
        fill(pinned, n);
        CK(cuMemcpyHtoD(dev, pinned, n));
        memset(r, 0x44, n);
        CK(cuMemcpyDtoHAsync(r, dev, n, s)); /* read at once, no synchronisation */
        for (size_t i = 0; i < n; i++)
            early += r[i] != pinned[i];
    }
    /* behind work on its stream (read ahead under pinfast): lands after
     * that work, and has read its source when it returns */
    size_t behind = 0;
    for (int k = 0; k < 8; k++) {
        fill(r, n);
        memcpy(pinned, r, n);
        CK(cuLaunchHostFunc(s, nap_20ms, NULL));
        CK(cuMemsetD8Async(dev, 0x77, n, s));
        CK(cuMemcpyHtoDAsync(dev, r, n, s));
        memset(r, 0x33, n);
        CK(cuStreamSynchronize(s));
        CK(cuMemcpyDtoH(r, dev, n));
        for (size_t i = 0; i < n; i++)
            behind += r[i] != pinned[i];
    }
    printf("%-28s %s\n", "async H2D behind its stream", behind ? "WRONG" : "ok");
    failures += behind != 0;
    printf("%-28s %s\n", "async H2D source reused", late ? "WRONG" : "ok");
    printf("%-28s %s\n", "async D2H read at return", early ? "WRONG" : "ok");
    failures += (late != 0) + (early != 0);

    /* the program's own registrations: the driver's answers */
    printf("own register inside ours: %d\n", (int)cuMemHostRegister(r + 4096, 8192, 0));
    {   /* copies from its second page on, running a page past its end */
        unsigned char *at = r + 8192;
        CUresult e[10];
        e[0] = cuMemcpyHtoD(dev, at, 8192);
        e[1] = cuMemcpyDtoH(at, dev, 8192);
        e[2] = cuMemcpyHtoDAsync(dev, at, 8192, s);
        e[3] = cuMemcpyDtoHAsync(at, dev, 8192, s);
        CK(cuStreamSynchronize(s));
        for (int k = 0; k < 3; k++) { /* 2D, two rows of a page: H2D, D2H, H2D async */
            CUDA_MEMCPY2D m = {.WidthInBytes = 4096, .Height = 2, .srcPitch = 4096, .dstPitch = 4096};
            m.srcMemoryType = k == 1 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
            m.dstMemoryType = k == 1 ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            m.srcHost = m.dstHost = at;
            m.srcDevice = m.dstDevice = dev;
            e[4 + k] = k == 2 ? cuMemcpy2DAsync(&m, s) : cuMemcpy2D(&m);
        }
        CUDA_MEMCPY3D v = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = at, .srcPitch = 4096, .srcHeight = 1,
                           .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = 4096,
                           .dstHeight = 1, .WidthInBytes = 4096, .Height = 1, .Depth = 2};
        e[7] = cuMemcpy3D(&v);
        CUarray a;
        CUDA_ARRAY_DESCRIPTOR ad = {.Width = 16384, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
        CK(cuArrayCreate(&a, &ad));
        e[8] = cuMemcpyHtoA(a, 0, at, 8192);
        e[9] = cuMemcpyAtoH(at, a, 0, 8192);
        CK(cuArrayDestroy(a));
        CK(cuStreamSynchronize(s));
        printf("past its end: H2D %d, D2H %d, async H2D %d, async D2H %d, 2D H2D %d, 2D D2H %d, 2D async H2D %d, "
               "3D H2D %d, to an array %d, from an array %d\n",
               (int)e[0], (int)e[1], (int)e[2], (int)e[3], (int)e[4], (int)e[5], (int)e[6], (int)e[7], (int)e[8],
               (int)e[9]);
        /* the same span as the middle H2D of a batch of three, linear and
         * 3D (13.0 ABI), the others a page each from pinned memory: the
         * result, and which of the others moved */
        for (int three = 0; three < 2; three++) {
            CUdeviceptr side = dev + 4 * 4096, d[3], src[3];
            size_t z[3] = {4096, 8192, 4096}, ai = 0;
            CUmemcpyAttributes attr = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
            memset(pinned, 0xC3, 3 * 4096);
            CK(cuMemsetD8(side, 0, 3 * 4096));
            for (int i = 0; i < 3; i++) {
                d[i] = i == 1 ? dev : side + (size_t)i * 4096;
                src[i] = (CUdeviceptr)(uintptr_t)(i == 1 ? at : pinned + (size_t)i * 4096);
            }
            CUresult b;
            if (three) {
                CUDA_MEMCPY3D_BATCH_OP op[3];
                pft_batch_ops(op, d, src, z, 3);
                b = cuMemcpy3DBatchAsync(3, op, 0, s);
            } else {
                b = cuMemcpyBatchAsync(d, src, z, 3, &attr, &ai, 1, s);
            }
            CK(cuStreamSynchronize(s));
            unsigned char got[2];
            CK(cuMemcpyDtoH(&got[0], side, 1));
            CK(cuMemcpyDtoH(&got[1], side + 2 * 4096, 1));
            printf("past its end, a %s batch's middle copy: %d, the first made %d, the third %d\n",
                   three ? "3D" : "linear", (int)b, got[0] == 0xC3, got[1] == 0xC3);
        }
    }
    printf("own unregister of it: %d\n", (int)cuMemHostUnregister(r + 4096));
    printf("own unregister of ours: %d (want %d)\n", (int)cuMemHostUnregister(r), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    verdict("after the program's own", r);
    printf("own register of the range: %d\n", (int)cuMemHostRegister(r, n, CU_MEMHOSTREGISTER_PORTABLE));
    verdict("registered by the program", r);
    printf("own unregister: %d\n", (int)cuMemHostUnregister(r));
    free(r);
    cuStreamDestroy(s);
}

/* Copy-on-write of pages the program registered: the child's view, and
 * whether the device reads what the parent wrote after the fork. */
static void fork_probe(void) {
    unsigned char *r = malloc(n), *want = malloc(n);
    fill(r, n);
    CK(cuMemHostRegister(r, n, CU_MEMHOSTREGISTER_PORTABLE));
    CK(cuMemcpyHtoD(dev, r, n));
    int pipefd[2];
    if (pipe(pipefd))
        exit(2);
    pid_t pid = fork();
    if (!pid) {
        unsigned sum = 0;
        for (size_t i = 0; i < n; i += 4096)
            sum += r[i];
        memset(r, 0x77, n);
        if (write(pipefd[1], &sum, sizeof sum) != sizeof sum)
            _exit(3);
        _exit(0);
    }
    close(pipefd[1]);
    unsigned sum;
    int status;
    ssize_t got = read(pipefd[0], &sum, sizeof sum);
    waitpid(pid, &status, 0);
    printf("child: %s\n", got == sizeof sum ? "read and wrote the range (no MADV_DONTFORK)"
                                            : WIFSIGNALED(status) ? "killed by a signal touching it (MADV_DONTFORK)"
                                                                  : "did not report");
    fill(r, n); /* the parent writes after the fork: copy-on-write breaks here, if anywhere */
    memcpy(want, r, n);
    CK(cuMemcpyHtoD(dev, r, n));
    memset(pinned, 0, n);
    CK(cuMemcpyDtoH(pinned, dev, n));
    printf("parent's H2D after fork: %s\n", memcmp(pinned, want, n) ? "STALE (the device reads the old pages)" : "ok");
    CK(cuMemHostUnregister(r));
    free(r), free(want);
}

static double rate(double s, size_t bytes) { return bytes / s / 1e9; }

static void bench(int reps) {
    static const size_t sizes[] = {64 << 20, (size_t)1 << 30};
    for (int k = 0; k < 2; k++) {
        size_t len = sizes[k];
        CUdeviceptr d;
        unsigned char *h = malloc(len), *p;
        CK(cuMemAlloc(&d, len));
        CK(cuMemHostAlloc((void **)&p, len, 0));
        memset(h, 1, len), memset(p, 1, len);
        for (int dir = 0; dir < 2; dir++) {
            double t[64], pin[64];
            for (int i = 0; i < reps && i < 64; i++) {
                double t0 = probe_now();
                CK(dir ? cuMemcpyDtoH(h, d, len) : cuMemcpyHtoD(d, h, len));
                t[i] = probe_now() - t0;
                t0 = probe_now();
                CK(dir ? cuMemcpyDtoH(p, d, len) : cuMemcpyHtoD(d, p, len));
                pin[i] = probe_now() - t0;
            }
            double first = rate(t[0], len), second = rate(t[1], len);
            printf("%s %zu MiB: first %.1f second %.1f third-on %.1f GB/s; pinned %.1f\n", dir ? "D2H" : "H2D",
                   len >> 20, first, second, rate(probe_median(t + 2, reps - 2), len),
                   rate(probe_median(pin, reps), len));
        }
        CK(cuMemFree(d));
        CK(cuMemFreeHost(p));
        free(h);
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "check";
    probe_context();
    if (!strcmp(mode, "bench")) {
        int reps = argc > 2 ? atoi(argv[2]) : 10;
        bench(reps < 3 ? 3 : reps > 64 ? 64 : reps);
        return 0;
    }
    n = (argc > 2 ? (size_t)atoi(argv[2]) : 64) << 20;
    CK(cuMemAlloc(&dev, 2 * n));
    CK(cuMemHostAlloc((void **)&pinned, n, 0));
    if (!strcmp(mode, "fork"))
        fork_probe();
    else
        check();
    printf("%s\n", failures ? "FAILED" : "all ok");
    return failures != 0;
}
