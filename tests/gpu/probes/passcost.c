/* passcost [bytes]: what pinfast adds to a copy of `bytes` (default 4) it
 * passes through, measured inside one process.  The H100 VM's processes run in one of two speed
 * modes (a 4-byte async copy takes ~1.3 or ~2.0 us, by process), so runs
 * with and without pinfast cannot be compared to a few percent; here one
 * process alternates batches of calls through the program's symbol (pinfast's
 * wrapper when it is preloaded) and batches straight into libcuda (its own
 * entry point, found in its .dynsym), and reports the difference.  Without
 * pinfast both paths are the driver's: the difference is the method's noise.
 * cc -O2 -I$CUDA/include passcost.c -L$CUDA/lib64/stubs -lcuda */
#define _GNU_SOURCE
#include <cuda.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../probe.h"

typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t, CUstream);

struct found {
    const char *name;
    void *addr;
};

/* libcuda's own address of f->name, from the file's dynamic symbol table */
static int look(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct found *f = data;
    if (!strstr(info->dlpi_name, "libcuda.so"))
        return 0;
    int fd = open(info->dlpi_name, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st))
        return 0;
    const unsigned char *m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return 0;
    const Elf64_Ehdr *eh = (const void *)m;
    const Elf64_Shdr *sh = (const void *)(m + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const Elf64_Sym *sym = (const void *)(m + sh[i].sh_offset);
        const char *names = (const char *)(m + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++)
            if (sym[k].st_value && !strcmp(names + sym[k].st_name, f->name))
                f->addr = (void *)(info->dlpi_addr + sym[k].st_value);
    }
    munmap((void *)m, st.st_size);
    return f->addr != NULL;
}

static void *driver_own(const char *name) {
    struct found f = {name, NULL};
    dl_iterate_phdr(look, &f);
    if (!f.addr) {
        fprintf(stderr, "passcost: %s not found in libcuda's .dynsym\n", name);
        exit(2);
    }
    return f.addr;
}

#define ROUNDS 41

int main(int argc, char **argv) {
    CUstream st;
    CUdeviceptr d;
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 4;
    if (bytes < 4 || bytes % 4) {
        fprintf(stderr, "passcost: bytes must be a multiple of 4\n");
        return 2;
    }
    /* batches of ~8 MB of copies, at least 20 and at most 2000 of them */
    int batch = bytes >= 4000 ? 20 + (int)((8u << 20) / bytes) : 2000;
    batch = batch > 2000 ? 2000 : batch;
    probe_context();
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&d, bytes + 4096));
    unsigned *h = malloc(bytes + 4096), *back = malloc(bytes + 4096);
    for (size_t i = 0; i < (bytes + 4096) / 4; i++)
        h[i] = (unsigned)rand();
    htod_fn htod[2] = {cuMemcpyHtoDAsync, (htod_fn)driver_own("cuMemcpyHtoDAsync_v2")};
    dtoh_fn dtoh[2] = {cuMemcpyDtoHAsync, (dtoh_fn)driver_own("cuMemcpyDtoHAsync_v2")};
    /* per direction and path: ns per call of each round's batch */
    static double ns[2][2][ROUNDS];
    for (int r = -2; r < ROUNDS; r++) /* two rounds of warm-up */
        for (int dir = 0; dir < 2; dir++)
            for (int k = 0; k < 2; k++) {
                int path = (r + k) & 1; /* alternate which path goes first */
                double t0 = probe_now();
                for (int i = 0; i < batch; i++) {
                    int j = i & 1023;
                    if (dir == 0)
                        CK(htod[path](d + 4 * j, h + j, bytes, st));
                    else
                        CK(dtoh[path](back + j, d + 4 * j, bytes, st));
                }
                CK(cuStreamSynchronize(st));
                if (r >= 0)
                    ns[dir][path][r] = (probe_now() - t0) / batch * 1e9;
            }
    /* every copy maps word k of the device range to word k of h: the D2H
     * copies brought back words [0, last offset + bytes / 4) */
    for (size_t j = 0; j < (size_t)(batch < 1024 ? batch : 1024) - 1 + bytes / 4; j++)
        if (back[j] != h[j]) {
            fprintf(stderr, "passcost: word %zu came back wrong\n", j);
            return 1;
        }
    /* median of the per-round differences, and the medians of each path */
    printf("{");
    for (int dir = 0; dir < 2; dir++) {
        double diff[ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            diff[r] = ns[dir][0][r] - ns[dir][1][r];
        qsort(diff, ROUNDS, sizeof diff[0], probe_by_double);
        qsort(ns[dir][0], ROUNDS, sizeof(double), probe_by_double);
        qsort(ns[dir][1], ROUNDS, sizeof(double), probe_by_double);
        printf("%s\"%s\":{\"symbol_ns\":%.1f,\"driver_ns\":%.1f,\"added_ns\":%.1f,\"added_q1\":%.1f,\"added_q3\":%.1f}",
               dir ? "," : "", dir ? "d2h_async" : "h2d_async", ns[dir][0][ROUNDS / 2], ns[dir][1][ROUNDS / 2],
               diff[ROUNDS / 2], diff[ROUNDS / 4], diff[3 * ROUNDS / 4]);
    }
    printf(",\"bytes\":%zu,\"rounds\":%d,\"batch\":%d}\n", bytes, ROUNDS, batch);
    return 0;
}
