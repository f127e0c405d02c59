/* probe_dontfork.c - what registering does to a range's MADV_DONTFORK
 * advice, and what a forked child gets of the range: pinfast maps its own
 * pinned memory so advised (engine/pinned.c), and the fake driver, which
 * moves a registered range's pages to another mapping, must keep the
 * advice as the kernel does.  For a range of 8 MiB (mmap, huge pages
 * advised, written) with and without the advice: whether smaps shows it
 * ("dc") once registered and once unregistered, and in a child forked
 * while it is registered, whether the range is mapped and holds what was
 * written.  One JSON line per case.
 *   probe_dontfork */
#include <cuda.h>
#include "../probe.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define BYTES ((size_t)8 << 20)

/* Whether every mapping over [p, p+BYTES) shows "dc" (-1: none found). */
static int dontfork(const char *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, seen = 0, all = 1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = lo < (uintptr_t)p + BYTES && hi > (uintptr_t)p;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            seen = 1;
            all &= strstr(line, " dc") != NULL;
        }
    }
    if (f)
        fclose(f);
    return seen ? all : -1;
}

/* In a child: 2 when the range is mapped, plus 1 when it holds what was written. */
static int child_sees(const char *p) {
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char v[BYTES / 4096];
        int m = mincore((void *)p, BYTES, v) == 0;
        _exit(m ? 2 + probe_written_intact(p, BYTES) : 0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int main(void) {
    CUdevice d;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuCtxCreate(&ctx, NULL, 0, d));
    for (int advised = 0; advised < 2; advised++) {
        char *p = probe_written_range(BYTES);
        if (advised && madvise(p, BYTES, MADV_DONTFORK)) {
            perror("madvise");
            return 1;
        }
        CUresult reg = cuMemHostRegister(p, BYTES, CU_MEMHOSTREGISTER_PORTABLE);
        int dc_registered = dontfork(p);
        int child = child_sees(p);
        CUresult unreg = cuMemHostUnregister(p);
        printf("{\"probe\":\"dontfork\",\"advised\":%d,\"register\":%d,\"dc_registered\":%d,\"child_mapped\":%d,"
               "\"child_intact\":%d,\"unregister\":%d,\"dc_after\":%d,\"range_intact\":%d}\n",
               advised, (int)reg, dc_registered, child >= 2, child == 3, (int)unreg, dontfork(p), probe_written_intact(p, BYTES));
        fflush(stdout);
        munmap(p, BYTES);
    }
    CK(cuCtxDestroy(ctx));
    return 0;
}
