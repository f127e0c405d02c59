/* probe_unpack: how fast one thread moves a chunk the DMA has just written
 * into pinned memory out to the program's touched memory, with pinfast's
 * own routine (shim/engine/hostcopy.c, pf_copy_rows) in tasks as a staged
 * D2H cuts them: memcpy or streaming stores, the rows packed in the slot
 * and `pitch` bytes apart in the program's memory (pitch = row: linear).
 * Per shape and way, the median of the chunk's CPU time over the rounds as
 * GB/s; each round DMAs the chunk afresh and takes the ways in turn.
 * Usage: probe_unpack [ROW:PITCH ...] (default 15360:15616 15360:15360
 * 4096:4352 256:512)
 * Build: cc -O2 -I/usr/local/cuda/include -o probe_unpack probe_unpack.c
 *        shim/engine/hostcopy.c -lcuda */
#include <cuda.h>
#include "../probe.h"
#include "../../../shim/engine/hostcopy.h"

#define CHUNK ((size_t)2 << 20) /* a staging slot */
#define TASK ((size_t)256 << 10) /* a task of a 2 MiB chunk (MAX_TASK) */
#define ROUNDS 41

static const struct {
    const char *name;
    enum pf_host_copy kind;
} ways[] = {{"memcpy", PF_HOST_COPY_MEMCPY}, {"stream", PF_HOST_COPY_STREAM}};
enum { NWAYS = sizeof ways / sizeof ways[0] };

/* The chunk's whole rows out of the slot into dst, task by task as
 * pf_host_tasks_cut cuts them (a task rounded up to whole rows); seconds. */
static double unpack(enum pf_host_copy kind, char *dst, const char *slot, size_t row, size_t pitch, size_t len) {
    size_t task = (TASK + row - 1) / row * row;
    double t0 = probe_now();
    for (size_t done = 0; done < len; done += task)
        pf_copy_rows(kind, dst + done / row * pitch, pitch, slot + done, row, row,
                     len - done < task ? len - done : task);
    return probe_now() - t0;
}

int main(int argc, char **argv) {
    static const char *defaults[] = {"15360:15616", "15360:15360", "4096:4352", "256:512"};
    const char **shapes = argc > 1 ? (const char **)argv + 1 : defaults;
    int nshapes = argc > 1 ? argc - 1 : 4;
    probe_context();
    CUdeviceptr dev;
    char *slot;
    CK(cuMemAlloc(&dev, CHUNK));
    CK(cuMemHostAlloc((void **)&slot, CHUNK, 0));
    memset(slot, 0x5a, CHUNK);
    CK(cuMemcpyHtoD(dev, slot, CHUNK));
    for (int s = 0; s < nshapes; s++) {
        size_t row = 0, pitch = 0;
        if (sscanf(shapes[s], "%zu:%zu", &row, &pitch) != 2 || !row || pitch < row) {
            fprintf(stderr, "probe_unpack: %s is not ROW:PITCH with PITCH >= ROW > 0\n", shapes[s]);
            return 2;
        }
        size_t len = CHUNK / row * row, bytes = len / row * pitch;
        char *dst = malloc(bytes);
        if (!dst)
            return 2;
        memset(dst, 1, bytes);
        double sec[NWAYS][ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            for (int i = 0; i < NWAYS; i++) {
                int w = (i + r) % NWAYS;
                CK(cuMemcpyDtoH(slot, dev, len));
                sec[w][r] = unpack(ways[w].kind, dst, slot, row, pitch, len);
                if (dst[bytes - pitch] != 0x5a)
                    return fprintf(stderr, "probe_unpack: the last row did not land\n"), 1;
            }
        for (int w = 0; w < NWAYS; w++)
            printf("{\"probe\":\"unpack\",\"row\":%zu,\"pitch\":%zu,\"bytes\":%zu,\"way\":\"%s\",\"gbps\":%.2f}\n", row,
                   pitch, len, ways[w].name, (double)len / probe_median(sec[w], ROUNDS) / 1e9);
        free(dst);
    }
    CK(cuMemFreeHost(slot));
    CK(cuMemFree(dev));
    return 0;
}
