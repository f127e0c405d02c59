/* Memory whose lifetime the program (or the C library) controls, copied
 * again and again, then changed behind any wrapper's back; and operations
 * made while a kernel waits for the host.  Run plain and under pinfast:
 * every line must read the same (times aside).
 *   ownership_check data PLUGIN.so   thread stacks reused, dlclose/dlopen at
 *                                    one address, shared and private file
 *                                    mappings, raw-syscall madvise/munmap,
 *                                    heap blocks changed, the program's own
 *                                    registrations, the pinned pool
 *   ownership_check waits            each operation under a kernel spinning
 *                                    on a host flag set right after it
 *   ownership_check readonly heap|mmap   a D2H into memory made read-only:
 *                                    killed by SIGSEGV, plain and pinfast
 * Build: cc -O2 -I/usr/local/cuda/include -o ownership_check ownership_check.c -lcuda -ldl -lpthread */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "%s:%d: %s: error %d\n", __FILE__, __LINE__, #x, (int)r_); \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

#define MIB ((size_t)1 << 20)
static CUdeviceptr dev;
static unsigned char *check; /* pinned by hand: what the device holds */
static size_t cap = 64 * MIB;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

/* The device holds what p held when copied: 1, else 0. */
static int device_is(const unsigned char *want, size_t n) {
    CK(cuMemcpyDtoH(check, dev, n));
    return !memcmp(check, want, n);
}

/* Copies p up several times, a registration's worth of sightings, with a
 * pause for a registrar. */
static void upload_often(const unsigned char *p, size_t n) {
    for (int i = 0; i < 4; i++) {
        CK(cuMemcpyHtoD(dev, p, n));
        usleep(20000);
    }
}

static void verdict(const char *what, int bad, int all) {
    printf("%-44s %s (%d of %d copies wrong)\n", what, bad ? "WRONG DATA" : "ok", bad, all);
}

/* ---- thread stacks, reused by the next thread ----------------------------------- */
struct stack_arg { size_t n; unsigned seed; int bad; CUcontext ctx; };
static void *on_stack(void *v) {
    struct stack_arg *a = v;
    CK(cuCtxSetCurrent(a->ctx));
    unsigned char *buf = alloca(a->n);
    fill(buf, a->n, a->seed);
    upload_often(buf, a->n);
    fill(buf, a->n, a->seed + 1000); /* the thread's last data */
    CK(cuMemcpyHtoD(dev, buf, a->n));
    a->bad = !device_is(buf, a->n);
    return NULL;
}
static void stacks(size_t stack, size_t n, int threads, const char *what) {
    CUcontext ctx;
    CK(cuCtxGetCurrent(&ctx));
    int bad = 0;
    for (int t = 0; t < threads; t++) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        if (stack)
            pthread_attr_setstacksize(&at, stack);
        struct stack_arg a = {n, (unsigned)t * 7 + 1, 0, ctx};
        pthread_t th;
        pthread_create(&th, &at, (void *(*)(void *))(void *)on_stack, &a);
        pthread_join(th, NULL);
        bad += a.bad;
    }
    verdict(what, bad, threads);
}

/* ---- a library's data, unloaded and loaded again ---------------------------------- */
static void plugin(const char *path) {
    int bad = 0, all = 6;
    for (int i = 0; i < all; i++) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        unsigned char *data = h ? dlsym(h, "pf_plugin_data") : NULL;
        size_t *size = h ? dlsym(h, "pf_plugin_size") : NULL;
        if (!data || !size) {
            printf("dlopen %s: %s\n", path, dlerror());
            return;
        }
        fill(data, *size, (unsigned)i + 50);
        upload_often(data, *size);
        fill(data, *size, (unsigned)i + 90);
        CK(cuMemcpyHtoD(dev, data, *size));
        bad += !device_is(data, *size);
        dlclose(h);
    }
    verdict("dlclose/dlopen, the library's data", bad, all);
}

/* ---- file mappings ------------------------------------------------------------------ */
static int temp_file(size_t n) {
    char path[] = "/tmp/pf-ownership-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    if (fd < 0 || ftruncate(fd, (off_t)n))
        exit(2);
    return fd;
}
static void shared_file(size_t n) {
    int fd = temp_file(n), bad = 0;
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), *want = malloc(n), *got = malloc(n);
    fill(want, n, 1);
    CK(cuMemcpyHtoD(dev, want, n));
    for (int i = 0; i < 4; i++) {
        CK(cuMemcpyDtoH(m, dev, n));
        usleep(20000);
    }
    if (ftruncate(fd, 0) || ftruncate(fd, (off_t)n))
        exit(2);
    fill(want, n, 2);
    CK(cuMemcpyHtoD(dev, want, n));
    CK(cuMemcpyDtoH(m, dev, n)); /* must reach the file */
    msync(m, n, MS_SYNC);
    bad += pread(fd, got, n, 0) != (ssize_t)n || memcmp(got, want, n);
    fill(want, n, 3);
    if (pwrite(fd, want, n, 0) != (ssize_t)n)
        exit(2);
    CK(cuMemcpyHtoD(dev, m, n)); /* must read the file's new pages */
    bad += !device_is(want, n);
    verdict("MAP_SHARED file truncated and regrown", bad, 2);
    munmap(m, n);
    close(fd);
    free(want), free(got);
}
static void private_file(size_t n) {
    int fd = temp_file(n), bad = 0;
    unsigned char *want = malloc(n);
    fill(want, n, 4);
    if (pwrite(fd, want, n, 0) != (ssize_t)n)
        exit(2);
    unsigned char *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    upload_often(m, n);
    fill(want, n, 5);
    if (pwrite(fd, want, n, 0) != (ssize_t)n)
        exit(2);
    CK(cuMemcpyHtoD(dev, m, n)); /* never written here: it shows the file */
    bad += !device_is(want, n) || memcmp(m, want, n);
    verdict("MAP_PRIVATE file written after copies", bad, 1);
    munmap(m, n);
    close(fd);
    free(want);
}

/* ---- the program's own mappings changed by raw system calls ----------------------------- */
static void raw_syscalls(size_t n) {
    int bad = 0;
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fill(m, n, 6);
    upload_often(m, n);
    syscall(SYS_madvise, m, n, MADV_DONTNEED);
    fill(m, n, 7);
    CK(cuMemcpyHtoD(dev, m, n));
    bad += !device_is(m, n);
    syscall(SYS_munmap, m, n);
    unsigned char *again = mmap(m, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (again == MAP_FAILED)
        again = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fill(again, n, 8);
    CK(cuMemcpyHtoD(dev, again, n));
    bad += !device_is(again, n);
    /* D2H into the program's own mapping after a raw madvise */
    for (int i = 0; i < 4; i++)
        CK(cuMemcpyDtoH(again, dev, n));
    syscall(SYS_madvise, again, n, MADV_DONTNEED);
    fill(check, n, 9);
    CK(cuMemcpyHtoD(dev, check, n));
    CK(cuMemcpyDtoH(again, dev, n));
    bad += memcmp(again, check, n) != 0;
    verdict("raw madvise/munmap on the program's mmap", bad, 3);
    munmap(again, n);
}

/* ---- heap blocks: changed, freed, reused ---------------------------------------------- */
static void heap_blocks(size_t n) {
    int bad = 0, all = 0;
    for (unsigned round = 0; round < 6; round++, all += 3) {
        unsigned char *p = malloc(n);
        fill(p, n, 20 + round);
        upload_often(p, n);
        bad += !device_is(p, n);
        madvise((void *)(((uintptr_t)p + 4095) & ~(uintptr_t)4095), n / 2, MADV_DONTNEED);
        fill(p, n, 40 + round);
        CK(cuMemcpyHtoD(dev, p, n));
        bad += !device_is(p, n);
        fill(check, n, 60 + round);
        CK(cuMemcpyHtoD(dev, check, n));
        CK(cuMemcpyDtoH(p, dev, n));
        bad += memcmp(p, check, n) != 0;
        p = realloc(p, n + n / 2 + round * 4096);
        bad += memcmp(p, check, n) != 0;
        free(p);
    }
    verdict("heap blocks madvised, reallocated, reused", bad, all);
}

/* ---- the program's own registrations and the driver's answers ------------------------- */
static void answers(size_t n) {
    unsigned char *p = malloc(n);
    fill(p, n, 70);
    upload_often(p, n);
    unsigned flags = 99;
    CUdeviceptr d = 0;
    int type = -1;
    CUresult r1 = cuMemHostRegister(p, n, 0);
    CUresult r2 = cuMemHostGetFlags(&flags, p);
    CUresult r3 = cuMemHostGetDevicePointer(&d, p, 0);
    CUresult r4 = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p);
    CUresult r5 = cuMemHostRegister(p, n, 0);
    printf("program's register over a copied block: %d, flags %d %u, device pointer %d %s, type %d %d, again %d\n",
           (int)r1, (int)r2, flags, (int)r3, d == (CUdeviceptr)p ? "same" : "other", (int)r4, type, (int)r5);
    r1 = cuMemHostUnregister(p);
    r2 = cuMemHostUnregister(p);
    type = -1;
    r4 = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p);
    printf("program's unregister: %d, again %d, type after %d %d\n", (int)r1, (int)r2, (int)r4, type);
    for (unsigned f = 0; f < 4; f++) {
        flags = 99;
        r1 = cuMemHostRegister(p, n, f);
        r2 = cuMemHostGetFlags(&flags, p);
        r3 = cuMemHostUnregister(p);
        printf("register with flags %u: %d, flags %d %u, unregister %d\n", f, (int)r1, (int)r2, flags, (int)r3);
    }
    type = -1;
    r4 = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p);
    r3 = cuMemHostUnregister(p);
    printf("pageable after all: type %d %d, unregister %d\n", (int)r4, type, (int)r3);
    free(p);
    void *h;
    CK(cuMemAllocHost(&h, n));
    CK(cuMemFreeHost(h));
    type = -1;
    r4 = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h);
    r2 = cuMemHostGetFlags(&flags, h);
    printf("pinned block after its free: type %d %d, flags %d\n", (int)r4, type, (int)r2);
}

/* The program's registrations of parts of a copied block: two apart, one
 * sharing a page with one of them, one meeting its bytes; ten apart; an madvise of the
 * rest then a cuCtxSynchronize under one. */
static void parts(size_t n) {
    const size_t pg = 4096;
    unsigned char *p = malloc(n);
    fill(p, n, 71);
    upload_often(p, n);
    CUresult a = cuMemHostRegister(p + pg, pg + 8, 0), b = cuMemHostRegister(p + 5 * pg, pg + 8, 1);
    CUresult c = cuMemHostRegister(p + 2 * pg + 100, 16, 0), d = cuMemHostRegister(p + 2 * pg, 16, 0);
    unsigned flags = 99;
    CUresult f = cuMemHostGetFlags(&flags, p + 5 * pg);
    upload_often(p, n);
    int bad = !device_is(p, n);
    CUresult ua = cuMemHostUnregister(p + pg), ub = cuMemHostUnregister(p + 5 * pg);
    CUresult uc = cuMemHostUnregister(p + 2 * pg + 100), ud = cuMemHostUnregister(p + pg);
    printf("program's two parts of a copied block: %d %d, a third sharing a page %d, one meeting its bytes %d, "
           "flags %d %u, data %s, unregister %d %d %d, again %d\n", (int)a, (int)b, (int)c, (int)d, (int)f, flags,
           bad ? "WRONG" : "right", (int)ua, (int)ub, (int)uc, (int)ud);
    int ok = 0, gone = 0;
    for (int i = 0; i < 10; i++)
        ok += cuMemHostRegister(p + (4 * i + 1) * pg, pg + 8, 0) == CUDA_SUCCESS;
    upload_often(p, n);
    bad = !device_is(p, n);
    for (int i = 0; i < 10; i++)
        gone += cuMemHostUnregister(p + (4 * i + 1) * pg) == CUDA_SUCCESS;
    printf("ten parts: %d registered, data %s, %d unregistered\n", ok, bad ? "WRONG" : "right", gone);
    a = cuMemHostRegister(p, n / 2, 0);
    int adv = madvise(p + n / 2 + pg - ((uintptr_t)p % pg), pg, MADV_DONTNEED);
    CUresult s1 = cuCtxSynchronize(), s2 = cuCtxSynchronize();
    ua = cuMemHostUnregister(p);
    printf("half registered %d, the rest advised away (%d), two synchronizes %d %d: unregister %d\n", (int)a, adv,
           (int)s1, (int)s2, (int)ua);
    free(p);
}

/* ---- waits: a kernel spins until the host sets a flag ------------------------------------ */
static const char spin_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry spin(.param .u64 flag, .param .u64 seen, .param .u64 limit)\n{\n"
    ".reg .u64 %rd<8>;\n.reg .u32 %r<3>;\n.reg .pred %p<3>;\n"
    "ld.param.u64 %rd1, [flag];\nld.param.u64 %rd2, [seen];\nld.param.u64 %rd3, [limit];\n"
    "mov.u64 %rd4, %globaltimer;\n"
    "LOOP:\nld.volatile.global.u32 %r1, [%rd1];\nsetp.ne.u32 %p1, %r1, 0;\n@%p1 bra DONE;\n"
    "mov.u64 %rd5, %globaltimer;\nsub.u64 %rd6, %rd5, %rd4;\nsetp.lt.u64 %p2, %rd6, %rd3;\n@%p2 bra LOOP;\n"
    "DONE:\nst.volatile.global.u32 [%rd2], %r1;\nret;\n}\n";

static CUfunction spin;
static volatile unsigned *flag;
static CUdeviceptr flag_dev, seen_dev;
static CUstream ks, other;

enum op { OP_FREE_COPY, OP_REALLOC, OP_MADVISE, OP_MUNMAP, OP_REGISTER, OP_UNREGISTER, OP_FORK, OP_COUNT };
static const char *const op_names[] = {"free, then a 4 KiB copy on another stream", "realloc", "madvise(DONTNEED)",
                                       "munmap", "cuMemHostRegister over the block", "cuMemHostUnregister of it",
                                       "fork"};

static void waits(size_t n) {
    CUmodule mod;
    CK(cuModuleLoadData(&mod, spin_ptx));
    CK(cuModuleGetFunction(&spin, mod, "spin"));
    CK(cuMemHostAlloc((void **)&flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CK(cuMemHostGetDevicePointer(&flag_dev, (void *)flag, 0));
    CK(cuMemAlloc(&seen_dev, 4096));
    CK(cuStreamCreate(&ks, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    unsigned char small[4096] = {0};
    /* what a first small copy sets up (a bounce area) is not the operation's */
    CK(cuMemcpyHtoDAsync(dev, small, sizeof small, other));
    CK(cuStreamSynchronize(other));
    for (int op = 0; op < OP_COUNT; op++) {
        unsigned char *p = op == OP_MUNMAP ? mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                           : malloc(n);
        fill(p, n, 80 + (unsigned)op);
        upload_often(p, n);
        if (op == OP_UNREGISTER)
            CK(cuMemHostRegister(p, n, 0));
        CK(cuCtxSynchronize()); /* nothing queued but the kernel from here */
        *flag = 0;
        unsigned zero = 0;
        CK(cuMemcpyHtoD(seen_dev, &zero, sizeof zero));
        uint64_t limit = 3000000000ull; /* 3 s */
        void *args[] = {&flag_dev, &seen_dev, &limit};
        CK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, ks, args, NULL));
        usleep(50000); /* the kernel is spinning */
        double t0 = now();
        CUresult r = CUDA_SUCCESS;
        switch (op) {
        case OP_FREE_COPY:
            free(p);
            r = cuMemcpyHtoDAsync(dev, small, sizeof small, other);
            if (r == CUDA_SUCCESS)
                r = cuStreamSynchronize(other);
            break;
        case OP_REALLOC: p = realloc(p, 2 * n); break;
        case OP_MADVISE: madvise(p, n, MADV_DONTNEED); break;
        case OP_MUNMAP: munmap(p, n); break;
        case OP_REGISTER: r = cuMemHostRegister(p, n, 0); break;
        case OP_UNREGISTER: r = cuMemHostUnregister(p); break;
        case OP_FORK: {
            pid_t pid = fork();
            if (!pid)
                _exit(0);
            waitpid(pid, NULL, 0);
            break;
        }
        }
        double took = now() - t0;
        *flag = 1;
        CK(cuStreamSynchronize(ks));
        unsigned seen = 0;
        CK(cuMemcpyDtoH(&seen, seen_dev, sizeof seen));
        printf("%-44s result %d, %s, the kernel %s its flag\n", op_names[op], (int)r,
               took < 0.010 ? "under 10 ms" : "10 ms OR MORE", seen ? "saw" : "did NOT see");
        fprintf(stderr, "%s: %.4f s\n", op_names[op], took);
        if (op == OP_REGISTER)
            cuMemHostUnregister(p);
        if (op == OP_REALLOC || op == OP_MADVISE || op == OP_REGISTER || op == OP_UNREGISTER || op == OP_FORK)
            free(p);
    }
}

/* ---- a D2H into memory made read-only ---------------------------------------------------- */
static void readonly(const char *kind) {
    size_t n = 8 * MIB;
    unsigned char *p = !strcmp(kind, "heap") ? malloc(n + 4096)
                                             : mmap(NULL, n + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *q = (unsigned char *)(((uintptr_t)p + 4095) & ~(uintptr_t)4095);
    for (int i = 0; i < 4; i++) {
        CK(cuMemcpyDtoH(q, dev, n));
        usleep(20000);
    }
    memset(q, 0x5a, n);
    mprotect(q, n, PROT_READ);
    CUresult r = cuMemcpyDtoH(q, dev, n);
    printf("D2H into read-only %s memory returned %d; first byte %s\n", kind, (int)r,
           q[0] == 0x5a ? "unchanged" : "WRITTEN");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s data PLUGIN.so | waits | readonly heap|mmap\n", argv[0]);
        return 2;
    }
    CUdevice d;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc(&dev, cap));
    CK(cuMemAllocHost((void **)&check, cap));
    if (!strcmp(argv[1], "data") && argc > 2) {
        stacks(0, 2 * MIB, 24, "default stacks, 2 MiB arrays");
        stacks(64 * MIB, 32 * MIB, 12, "64 MiB stacks, 32 MiB arrays");
        plugin(argv[2]);
        shared_file(16 * MIB);
        private_file(16 * MIB);
        raw_syscalls(16 * MIB);
        heap_blocks(16 * MIB);
        answers(16 * MIB);
        parts(16 * MIB);
    } else if (!strcmp(argv[1], "waits")) {
        waits(16 * MIB);
    } else if (!strcmp(argv[1], "readonly") && argc > 2) {
        readonly(argv[2]);
    } else {
        fprintf(stderr, "usage: %s data PLUGIN.so | waits | readonly heap|mmap\n", argv[0]);
        return 2;
    }
    return 0;
}
