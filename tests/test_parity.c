/* test_parity: the error parity table.  For every wrapped copy entry point
 * (legacy and per-thread flavour, each direction where the API has several)
 * and every bad-argument case, at a small size (passes through) and a large
 * one (pinfast's staged path), the code returned with pinfast must equal the
 * code returned by the driver alone.
 *
 * The expected codes are not written down here: a child without pinfast
 * computes them from the fake driver, and a child with pinfast must return
 * the same.  Each child runs the cases in order and logs "B i" before and
 * "E i <code>" after each; a child that dies inside a case (a crash) is
 * restarted after it, and the case is recorded as "crash".
 *
 * Bogus host pointers: the fake returns CUDA_ERROR_INVALID_VALUE for a
 * non-canonical host address, where the real driver (which copies from
 * pageable memory on the CPU) crashes.  pinfast promises no better than the
 * real driver, so for that case alone a crash under pinfast is accepted.
 *
 * PFT_PARITY_TABLE=<file> writes the table as markdown (docs/errors.md holds
 * a copy).  Internal: test_parity run <first case> <log file>. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SMALL ((size_t)64)
#define LARGE (((size_t)1 << 20) + 3)
#define DEVSIZE (LARGE + 4096)
/* a host address no process can map (non-canonical): the fake refuses it */
#define BOGUS_HOST ((uintptr_t)0xdead000000000000ULL)
/* an address in the fake's device range that no allocation covers */
#define BOGUS_DEV ((uintptr_t)0x1000000000001000ULL)

/* ---- the table's rows: entry point x direction ----------------------------------- */
enum fam { F_HTOD, F_DTOH, F_DTOD, F_MEMCPY, F_PEER, F_2D, F_2DU, F_3D,
           F_HTOD_A, F_DTOH_A, F_DTOD_A, F_MEMCPY_A, F_PEER_A, F_2D_A, F_3D_A,
           F_BATCH, F_BATCH12, F_BATCH3D, F_BATCH3D12 };
#define ASYNC(f) ((f) >= F_HTOD_A)
enum { H2D, D2H, D2D };
struct api { enum fam f; int dir; const char *leg, *pt; };
static const struct api apis[] = {
    { F_HTOD, H2D, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds" },
    { F_HTOD_A, H2D, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz" },
    { F_DTOH, D2H, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds" },
    { F_DTOH_A, D2H, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz" },
    { F_DTOD, D2D, "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds" },
    { F_DTOD_A, D2D, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz" },
    { F_MEMCPY, H2D, "cuMemcpy", "cuMemcpy_ptds" },
    { F_MEMCPY, D2H, "cuMemcpy", "cuMemcpy_ptds" },
    { F_MEMCPY_A, H2D, "cuMemcpyAsync", "cuMemcpyAsync_ptsz" },
    { F_MEMCPY_A, D2H, "cuMemcpyAsync", "cuMemcpyAsync_ptsz" },
    { F_PEER, D2D, "cuMemcpyPeer", "cuMemcpyPeer_ptds" },
    { F_PEER_A, D2D, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz" },
    { F_2D, H2D, "cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds" },
    { F_2D, D2H, "cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds" },
    { F_2DU, H2D, "cuMemcpy2DUnaligned_v2", "cuMemcpy2DUnaligned_v2_ptds" },
    { F_2D_A, H2D, "cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz" },
    { F_2D_A, D2H, "cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz" },
    { F_3D, H2D, "cuMemcpy3D_v2", "cuMemcpy3D_v2_ptds" },
    { F_3D_A, D2H, "cuMemcpy3DAsync_v2", "cuMemcpy3DAsync_v2_ptsz" },
    { F_BATCH, H2D, "cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz" },
    { F_BATCH, D2H, "cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz" },
    { F_BATCH12, H2D, "cuMemcpyBatchAsync", "cuMemcpyBatchAsync_ptsz" },
    { F_BATCH3D, D2H, "cuMemcpy3DBatchAsync_v2", "cuMemcpy3DBatchAsync_v2_ptsz" },
    { F_BATCH3D12, H2D, "cuMemcpy3DBatchAsync", "cuMemcpy3DBatchAsync_ptsz" },
};
#define NAPIS (int)(sizeof apis / sizeof apis[0])
static const char *dirname_[] = { "H2D", "D2H", "D2D" };

/* ---- the columns: cases ------------------------------------------------------------ */
enum cs { C_OK, C_NULL_HOST, C_BOGUS_HOST, C_BOGUS_DEV, C_FREED_DEV, C_PAST_END, C_ZERO,
          C_ZERO_NULL, C_BAD_STREAM, C_DEAD_STREAM, C_LEGACY_STREAM, C_CAPTURING, C_NO_CTX,
          C_DEAD_CTX, C_DEAD_CTX_STREAM, NCASES };
static const char *cname[] = {
    "valid", "NULL host", "bogus host", "bogus device", "freed device", "past the end", "size 0",
    "size 0, NULL host", "bogus stream", "destroyed stream", "legacy stream", "capturing stream",
    "no context", "destroyed context", "stream of destroyed context",
};

static int applicable(const struct api *a, int c, int ptds)
{
    int has_host = a->dir != D2D;
    switch (c) {
    case C_NULL_HOST: case C_BOGUS_HOST: case C_ZERO_NULL: return has_host;
    case C_BAD_STREAM: case C_DEAD_STREAM: case C_LEGACY_STREAM: case C_DEAD_CTX_STREAM:
        return ASYNC(a->f);
    case C_CAPTURING: return ASYNC(a->f) || ptds;   /* sync: the per-thread stream captures */
    default: return 1;
    }
}

/* the flat list of cases: (api, flavour, case, size) */
struct cell { int api, ptds, c, large; };
static struct cell cells[NAPIS * 2 * NCASES * 2];
static int ncells;

static void enumerate(void)
{
    ncells = 0;
    for (int a = 0; a < NAPIS; a++)
        for (int pt = 0; pt < 2; pt++)
            for (int c = 0; c < NCASES; c++)
                if (applicable(&apis[a], c, pt))
                    for (int l = 0; l < 2; l++)
                        cells[ncells++] = (struct cell){ a, pt, c, l };
}

/* ---- the child ----------------------------------------------------------------------- */
static struct drv DT[2];
static CUcontext CTX, DEAD_CTX;
static CUdeviceptr DEV, DEV2, FREED;
static unsigned char *HOST;
static CUstream S, DEAD_STREAM, DEAD_CTX_STREAM;
static long junk_stream[64];

struct args { uintptr_t dst, src; size_t n; CUstream st; size_t fail_idx; };

static void set_side(CUmemorytype *t, const void **h, CUdeviceptr *d, uintptr_t p, int host)
{
    *t = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (host)
        *h = (const void *)p;
    else
        *d = p;
}

static CUresult call(const struct api *a, int ptds, struct args *x)
{
    const struct drv *d = &DT[ptds];
    size_t n = x->n;
    switch (a->f) {
    case F_HTOD: return d->MemcpyHtoD(x->dst, (const void *)x->src, n);
    case F_DTOH: return d->MemcpyDtoH((void *)x->dst, x->src, n);
    case F_DTOD: return d->MemcpyDtoD(x->dst, x->src, n);
    case F_MEMCPY: return d->Memcpy(x->dst, x->src, n);
    case F_PEER: return d->MemcpyPeer(x->dst, CTX, x->src, CTX, n);
    case F_HTOD_A: return d->MemcpyHtoDAsync(x->dst, (const void *)x->src, n, x->st);
    case F_DTOH_A: return d->MemcpyDtoHAsync((void *)x->dst, x->src, n, x->st);
    case F_DTOD_A: return d->MemcpyDtoDAsync(x->dst, x->src, n, x->st);
    case F_MEMCPY_A: return d->MemcpyAsync(x->dst, x->src, n, x->st);
    case F_PEER_A: return d->MemcpyPeerAsync(x->dst, CTX, x->src, CTX, n, x->st);
    case F_2D: case F_2DU: case F_2D_A: case F_3D: case F_3D_A: {
        /* n bytes as 4 rows (2 x 2 for 3D) of n/4, pitch n/4: the same span */
        size_t W = n / 4 ? n / 4 : n, rows = n / 4 ? 4 : (n ? 1 : 0);
        CUDA_MEMCPY3D m;
        memset(&m, 0, sizeof m);
        const void *dh = NULL;
        set_side(&m.srcMemoryType, &m.srcHost, &m.srcDevice, x->src, a->dir == H2D);
        set_side(&m.dstMemoryType, &dh, &m.dstDevice, x->dst, a->dir == D2H);
        m.dstHost = (void *)dh;
        m.WidthInBytes = W;
        m.srcPitch = m.dstPitch = W;
        if (a->f == F_3D || a->f == F_3D_A) {
            m.Height = rows > 1 ? 2 : rows;
            m.Depth = rows > 1 ? 2 : 1;
            m.srcHeight = m.dstHeight = m.Height;
            return a->f == F_3D ? d->Memcpy3D(&m) : d->Memcpy3DAsync(&m, x->st);
        }
        CUDA_MEMCPY2D c = {
            .srcMemoryType = m.srcMemoryType, .srcHost = m.srcHost, .srcDevice = m.srcDevice,
            .srcPitch = W, .dstMemoryType = m.dstMemoryType, .dstHost = m.dstHost,
            .dstDevice = m.dstDevice, .dstPitch = W, .WidthInBytes = W, .Height = rows,
        };
        return a->f == F_2D ? d->Memcpy2D(&c) : a->f == F_2DU ? d->Memcpy2DUnaligned(&c)
                                                              : d->Memcpy2DAsync(&c, x->st);
    }
    case F_BATCH: case F_BATCH12: {
        CUdeviceptr ds[1] = { x->dst }, ss[1] = { x->src };
        size_t sz[1] = { n }, idx = 0;
        CUmemcpyAttributes attr = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM };
        x->fail_idx = 777;
        if (a->f == F_BATCH)
            return d->MemcpyBatchAsync(ds, ss, sz, 1, &attr, &idx, 1, x->st);
        return d->MemcpyBatchAsync12(ds, ss, sz, 1, &attr, &idx, 1, &x->fail_idx, x->st);
    }
    case F_BATCH3D: case F_BATCH3D12: {
        CUDA_MEMCPY3D_BATCH_OP op;
        memset(&op, 0, sizeof op);
        op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.src.op.ptr.ptr = x->src;
        op.dst.op.ptr.ptr = x->dst;
        op.extent.width = n;
        op.extent.height = op.extent.depth = 1;
        op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        x->fail_idx = 777;
        if (a->f == F_BATCH3D)
            return d->Memcpy3DBatchAsync(1, &op, 0, x->st);
        return d->Memcpy3DBatchAsync12(1, &op, &x->fail_idx, 0, x->st);
    }
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

struct job { const struct api *a; int ptds; struct args x; CUcontext ctx; CUresult r; };

static void *in_thread(void *arg)
{
    struct job *j = arg;
    if (j->ctx)
        DT[0].CtxSetCurrent(j->ctx);
    j->r = call(j->a, j->ptds, &j->x);
    return NULL;
}

static CUresult run_cell(const struct cell *ce, size_t *fail_idx)
{
    const struct api *a = &apis[ce->api];
    const struct drv *d = &DT[ce->ptds];
    size_t n = ce->large ? LARGE : SMALL;
    struct args x = { 0, 0, n, S, 0 };
    uintptr_t dev = DEV, dev2 = DEV2, host = (uintptr_t)HOST;
    /* the pointers each side gets; a case replaces one */
    uintptr_t *hside = a->dir == H2D ? &x.src : &x.dst;
    uintptr_t *dside = a->dir == H2D ? &x.dst : a->dir == D2H ? &x.src : &x.src;
    if (a->dir == D2D) {
        x.dst = dev2;
        x.src = dev;
    } else {
        *hside = host;
        *dside = dev;
    }
    switch (ce->c) {
    case C_NULL_HOST: *hside = 0; break;
    case C_BOGUS_HOST: *hside = BOGUS_HOST; break;
    case C_BOGUS_DEV: *dside = BOGUS_DEV; break;
    case C_FREED_DEV: *dside = FREED; break;
    case C_PAST_END: {
        /* the copy's last byte is one past the allocation (2D/3D: n/4-byte rows) */
        int shaped = a->f == F_2D || a->f == F_2DU || a->f == F_2D_A || a->f == F_3D || a->f == F_3D_A;
        size_t span = shaped && n >= 4 ? n / 4 * 4 : n;
        *dside = dev + DEVSIZE - span + 1;
        break;
    }
    case C_ZERO: x.n = 0; break;
    case C_ZERO_NULL: x.n = 0; *hside = 0; break;
    case C_BAD_STREAM: x.st = (CUstream)junk_stream; break;
    case C_DEAD_STREAM: x.st = DEAD_STREAM; break;
    case C_LEGACY_STREAM: x.st = CU_STREAM_LEGACY; break;
    case C_DEAD_CTX_STREAM: x.st = DEAD_CTX_STREAM; break;
    default: break;
    }
    CUresult r;
    if (ce->c == C_NO_CTX || ce->c == C_DEAD_CTX) {
        struct job j = { a, ce->ptds, x, ce->c == C_DEAD_CTX ? DEAD_CTX : NULL, 0 };
        pthread_t th;
        if (pthread_create(&th, NULL, in_thread, &j))
            abort();
        pthread_join(th, NULL);
        *fail_idx = j.x.fail_idx;
        return j.r;
    }
    if (ce->c == C_CAPTURING) {
        CUstream cs = S;
        if (!ASYNC(a->f))
            cs = CU_STREAM_PER_THREAD;        /* where a per-thread sync copy runs */
        else
            x.st = cs;
        if (d->StreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED))
            return (CUresult)-1;
        r = call(a, ce->ptds, &x);
        CUgraph g;
        if (d->StreamEndCapture(cs, &g) == CUDA_SUCCESS)
            d->GraphDestroy(g);
    } else {
        r = call(a, ce->ptds, &x);
    }
    *fail_idx = x.fail_idx;
    /* nothing of one case may leak into the next */
    DT[0].CtxSynchronize();
    return r;
}

static int child_run(int first, const char *logfile)
{
    int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return 20;
    enumerate();
    if (drv_load(&DT[0], DRV_GPA, 0) || drv_load(&DT[1], DRV_GPA, 1))
        return 21;
    const struct drv *d = &DT[0];
    CUdevice dev;
    if (d->Init(0) || d->DeviceGet(&dev, 0) || d->DevicePrimaryCtxRetain(&CTX, dev) || d->CtxSetCurrent(CTX))
        return 22;
    /* a context created, given a stream, and destroyed: the current context
     * goes back to the primary one */
    if (d->CtxCreate(&DEAD_CTX, 0, dev) || d->StreamCreate(&DEAD_CTX_STREAM, 0) || d->CtxDestroy(DEAD_CTX) ||
        d->CtxSetCurrent(CTX))
        return 23;
    HOST = malloc(DEVSIZE);
    if (!HOST || d->MemAlloc(&DEV, DEVSIZE) || d->MemAlloc(&DEV2, DEVSIZE) || d->MemAlloc(&FREED, DEVSIZE) ||
        d->MemFree(FREED) || d->StreamCreate(&S, CU_STREAM_NON_BLOCKING) ||
        d->StreamCreate(&DEAD_STREAM, 0) || d->StreamDestroy(DEAD_STREAM))
        return 24;
    memset(HOST, 0x11, DEVSIZE);
    for (int i = first; i < ncells; i++) {
        char line[96];
        int len = snprintf(line, sizeof line, "B %d\n", i);
        if (write(fd, line, (size_t)len) != len)
            return 25;
        size_t fi = 0;
        alarm(20);                      /* a hang is recorded like a crash */
        CUresult r = run_cell(&cells[i], &fi);
        alarm(0);
        const struct api *a = &apis[cells[i].api];
        if (a->f == F_BATCH12 || a->f == F_BATCH3D12)
            len = snprintf(line, sizeof line, "E %d %d %zd\n", i, (int)r, fi == (size_t)-1 ? (ssize_t)-1 : (ssize_t)fi);
        else
            len = snprintf(line, sizeof line, "E %d %d\n", i, (int)r);
        if (write(fd, line, (size_t)len) != len)
            return 25;
    }
    if (write(fd, "DONE\n", 5) != 5)
        return 25;
    close(fd);
    return 0;
}

/* ---- the parent ------------------------------------------------------------------------- */
#define CRASH (-1000)
struct result { int code; long fail_idx; int has_fail; };
static struct result res[2][NAPIS * 2 * NCASES * 2];
static const char *dir;

static int run_variant(int v)
{
    char logf[300], errf[300];
    snprintf(logf, sizeof logf, "%s/%s.log", dir, v ? "pinfast" : "plain");
    snprintf(errf, sizeof errf, "%s/%s.err", dir, v ? "pinfast" : "plain");
    unlink(logf);
    for (int i = 0; i < ncells; i++)
        res[v][i].code = CRASH - 1;            /* not run */
    int first = 0, spawns = 0;
    while (first < ncells && spawns < 200) {
        char from[16];
        snprintf(from, sizeof from, "%d", first);
        char *argv[] = { "test_parity", "run", from, logf, NULL };
        const char *set[] = { "PINFAST_STATS=off", NULL };
        int rc = sp_run(argv, v, set, NULL, errf, 300, NULL);
        spawns++;
        char *s = sp_slurp(logf, NULL);
        if (!s)
            return -1;
        int open_case = -1, done = 0;
        for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
            int i, code;
            long fi;
            if (sscanf(line, "E %d %d %ld", &i, &code, &fi) == 3) {
                res[v][i] = (struct result){ code, fi, 1 };
                open_case = -1;
            } else if (sscanf(line, "E %d %d", &i, &code) == 2) {
                res[v][i] = (struct result){ code, 0, 0 };
                open_case = -1;
            } else if (sscanf(line, "B %d", &i) == 1) {
                open_case = i;
            } else if (strcmp(line, "DONE") == 0) {
                done = 1;
            }
        }
        free(s);
        if (done)
            break;
        if (open_case < 0) {
            printf("%s child exited with %d before any case started\n", v ? "pinfast" : "plain", rc);
            char *e = sp_slurp(errf, NULL);
            printf("%s\n", e ? e : "");
            free(e);
            return -1;
        }
        res[v][open_case].code = CRASH;
        first = open_case + 1;
    }
    return 0;
}

static const char *code_name(const struct result *r, char *buf, size_t n)
{
    const char *nm = NULL;
    if (r->code == CRASH)
        nm = "crash";
    else if (r->code < CRASH)
        nm = "not run";
    else if (D.GetErrorName((CUresult)r->code, &nm) || !nm)
        nm = NULL;
    if (!nm)
        snprintf(buf, n, "%d", r->code);
    else if (strncmp(nm, "CUDA_ERROR_", 11) == 0)
        snprintf(buf, n, "%s", nm + 11);
    else if (strcmp(nm, "CUDA_SUCCESS") == 0)
        snprintf(buf, n, "ok");
    else
        snprintf(buf, n, "%s", nm);
    if (r->has_fail && r->code != CRASH && r->code != CUDA_SUCCESS) {
        size_t l = strlen(buf);
        if (r->fail_idx < 0)
            snprintf(buf + l, n - l, " (failIdx none)");
        else
            snprintf(buf + l, n - l, " (failIdx %ld)", r->fail_idx);
    }
    return buf;
}

static int same(const struct result *a, const struct result *b)
{
    return a->code == b->code && a->has_fail == b->has_fail && (!a->has_fail || a->fail_idx == b->fail_idx);
}

/* pinfast may crash where the real driver would (see the file comment) */
static int allowed(const struct cell *ce, const struct result *plain, const struct result *pf)
{
    return ce->c == C_BOGUS_HOST && pf->code == CRASH && plain->code != CUDA_SUCCESS;
}

/* the cells are long enough for every code name; truncation would only
 * shorten the markdown */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* one cell of the table: the codes of both flavours and both sizes, folded
 * where they agree */
static void cell_text(int a, int c, char *out, size_t n)
{
    char txt[2][2][200];
    int have = 0;
    for (int i = 0; i < ncells; i++) {
        if (cells[i].api != a || cells[i].c != c)
            continue;
        char b[96], p[96];
        char *t = txt[cells[i].ptds][cells[i].large];
        code_name(&res[0][i], b, sizeof b);
        if (same(&res[0][i], &res[1][i]))
            snprintf(t, 200, "%s", b);
        else
            snprintf(t, 200, "%s, **pinfast: %s**", b, code_name(&res[1][i], p, sizeof p));
        have |= 1 << cells[i].ptds;
    }
    if (!have) {
        snprintf(out, n, "-");
        return;
    }
    int pt = have & 1 ? 0 : 1;   /* flavour shown when both agree */
    int flav_same = have == 3 && !strcmp(txt[0][0], txt[1][0]) && !strcmp(txt[0][1], txt[1][1]);
    if (have != 3 || flav_same) {
        if (!strcmp(txt[pt][0], txt[pt][1]))
            snprintf(out, n, "%s", txt[pt][0]);
        else
            snprintf(out, n, "64 B: %s; 1 MiB: %s", txt[pt][0], txt[pt][1]);
        if (have != 3)
            strncat(out, pt ? " (per-thread only)" : " (legacy only)", n - strlen(out) - 1);
        return;
    }
    snprintf(out, n, "legacy: %s / %s; per-thread: %s / %s", txt[0][0], txt[0][1], txt[1][0], txt[1][1]);
}

static void write_table(const char *file)
{
    FILE *f = fopen(file, "w");
    if (!f)
        return;
    fprintf(f, "| entry point (legacy; per-thread) | dir |");
    for (int c = 0; c < NCASES; c++)
        fprintf(f, " %s |", cname[c]);
    fprintf(f, "\n|---|---|");
    for (int c = 0; c < NCASES; c++)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (int a = 0; a < NAPIS; a++) {
        fprintf(f, "| %s; %s | %s |", apis[a].leg, apis[a].pt, dirname_[apis[a].dir]);
        for (int c = 0; c < NCASES; c++) {
            char t[600];
            cell_text(a, c, t, sizeof t);
            fprintf(f, " %s |", t);
        }
        fprintf(f, "\n");
    }
    fclose(f);
}

static void test_parity(void **s)
{
    (void)s;
    enumerate();
    dir = sp_tmpdir("parity");
    assert_non_null(dir);
    assert_int_equal(run_variant(0), 0);
    assert_int_equal(run_variant(1), 0);
    int bad = 0, crashes_plain = 0, accepted = 0;
    for (int i = 0; i < ncells; i++) {
        const struct cell *ce = &cells[i];
        char p[96], q[96];
        if (res[0][i].code == CRASH)
            crashes_plain++;
        if (same(&res[0][i], &res[1][i]))
            continue;
        if (allowed(ce, &res[0][i], &res[1][i])) {
            accepted++;
            continue;
        }
        bad++;
        printf("MISMATCH %s [%s] %s, %s, %zu bytes: without pinfast %s, with pinfast %s\n",
               ce->ptds ? apis[ce->api].pt : apis[ce->api].leg, dirname_[apis[ce->api].dir], cname[ce->c],
               ce->ptds ? "per-thread" : "legacy", ce->large ? LARGE : SMALL,
               code_name(&res[0][i], p, sizeof p), code_name(&res[1][i], q, sizeof q));
    }
    printf("[ parity   ] %d cases (%d entry points x flavours, %d kinds of bad argument, 2 sizes): "
           "%d differ, %d crashes without pinfast, %d accepted crashes under pinfast (bogus host pointer)\n",
           ncells, NAPIS * 2, NCASES, bad, crashes_plain, accepted);
    const char *tf = getenv("PFT_PARITY_TABLE");
    if (tf)
        write_table(tf);
    if (!bad)
        sp_rmdir(dir);
    else
        printf("logs kept in %s\n", dir);
    if (bad)
        fail_msg("%d cases return a different code under pinfast", bad);
}

static int setup(void **s)
{
    (void)s;
    /* only for the error names */
    return drv_load(&D, DRV_GPA, 0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "run") == 0)
        return child_run(atoi(argv[2]), argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
