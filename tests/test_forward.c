/* test_forward: every wrapped family, reached through each resolution way
 * (cuGetProcAddress like cudart, direct binding, dlsym) and both stream
 * flavours, lands on the right real variant: the fake counts calls per
 * exported name.  Copies use pinned memory and small sizes, which pinfast
 * passes through.  Pinned-host allocations may be served from pinfast's pool,
 * so under pinfast their real call count may be 0. */
#define _GNU_SOURCE
#include "t.h"

#include <stdio.h>
#include <string.h>

static struct drv *d;
static CUstream S;
static CUdeviceptr DEV, DEV2;
static unsigned char *PIN, *PIN2;
#define N 4096

static const struct drv_entry *entry(const char *field)
{
    for (int i = 0; i < drv_nentries; i++)
        if (strcmp(drv_entries[i].field, field) == 0)
            return &drv_entries[i];
    fail_msg("no entry %s", field);
    return NULL;
}

/* call fn once and check the flavour's export got exactly one call and the
 * other flavour's export none */
#define FORWARD(field, lenient, call)                                                 \
    do {                                                                              \
        const struct drv_entry *e_ = entry(#field);                                   \
        const char *want_ = d->ptds ? e_->per_thread : e_->legacy;                    \
        const char *other_ = d->ptds ? e_->legacy : e_->per_thread;                   \
        unsigned long w0_ = fake_calls(want_), o0_ = fake_calls(other_);              \
        CK(call);                                                                     \
        CK(D.CtxSynchronize()); /* no two copies race on the shared buffers */        \
        unsigned long w_ = fake_calls(want_) - w0_, o_ = fake_calls(other_) - o0_;    \
        if (strcmp(want_, other_) != 0 && o_ != 0)                                    \
            fail_msg("%s via %s/%s: reached %s %lu times", #field,                    \
                     drv_path_name(d->path), d->ptds ? "ptds" : "legacy", other_, o_); \
        if (!((lenient) && t_pinfast() ? w_ <= 1 : w_ == 1))                          \
            fail_msg("%s via %s/%s: %s called %lu times, expected 1", #field,         \
                     drv_path_name(d->path), d->ptds ? "ptds" : "legacy", want_, w_); \
    } while (0)

static void run_all(void)
{
    CUDA_MEMCPY2D c2 = { 0 };
    c2.srcMemoryType = CU_MEMORYTYPE_HOST; c2.srcHost = PIN; c2.srcPitch = 64;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE; c2.dstDevice = DEV; c2.dstPitch = 128;
    c2.WidthInBytes = 64; c2.Height = 8;
    CUDA_MEMCPY3D c3 = { 0 };
    c3.srcMemoryType = CU_MEMORYTYPE_DEVICE; c3.srcDevice = DEV; c3.srcPitch = 64; c3.srcHeight = 4;
    c3.dstMemoryType = CU_MEMORYTYPE_HOST; c3.dstHost = PIN2; c3.dstPitch = 64; c3.dstHeight = 4;
    c3.WidthInBytes = 64; c3.Height = 4; c3.Depth = 4;
    CUdeviceptr dsts[2] = { DEV, DEV + 64 }, srcs[2] = { (CUdeviceptr)(uintptr_t)PIN, (CUdeviceptr)(uintptr_t)PIN + 64 };
    size_t sz[2] = { 64, 64 }, idx = 0, fi;
    CUmemcpyAttributes at = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM };
    CUDA_MEMCPY3D_BATCH_OP op = { 0 };
    op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)PIN;
    op.dst.op.ptr.ptr = DEV;
    op.extent.width = 64; op.extent.height = 2; op.extent.depth = 2;
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;

    FORWARD(MemcpyHtoD, 0, d->MemcpyHtoD(DEV, PIN, N));
    FORWARD(MemcpyHtoDAsync, 0, d->MemcpyHtoDAsync(DEV, PIN, N, S));
    FORWARD(MemcpyDtoH, 0, d->MemcpyDtoH(PIN2, DEV, N));
    FORWARD(MemcpyDtoHAsync, 0, d->MemcpyDtoHAsync(PIN2, DEV, N, S));
    FORWARD(MemcpyDtoD, 0, d->MemcpyDtoD(DEV2, DEV, N));
    FORWARD(MemcpyDtoDAsync, 0, d->MemcpyDtoDAsync(DEV2, DEV, N, S));
    FORWARD(Memcpy, 0, d->Memcpy(DEV, (CUdeviceptr)(uintptr_t)PIN, N));
    FORWARD(MemcpyAsync, 0, d->MemcpyAsync((CUdeviceptr)(uintptr_t)PIN2, DEV, N, S));
    FORWARD(MemcpyPeer, 0, d->MemcpyPeer(DEV2, T_CTX, DEV, T_CTX, N));
    FORWARD(MemcpyPeerAsync, 0, d->MemcpyPeerAsync(DEV2, T_CTX, DEV, T_CTX, N, S));
    FORWARD(Memcpy2D, 0, d->Memcpy2D(&c2));
    FORWARD(Memcpy2DUnaligned, 0, d->Memcpy2DUnaligned(&c2));
    FORWARD(Memcpy2DAsync, 0, d->Memcpy2DAsync(&c2, S));
    FORWARD(Memcpy3D, 0, d->Memcpy3D(&c3));
    FORWARD(Memcpy3DAsync, 0, d->Memcpy3DAsync(&c3, S));
    FORWARD(MemcpyBatchAsync, 0, d->MemcpyBatchAsync(dsts, srcs, sz, 2, &at, &idx, 1, S));
    FORWARD(MemcpyBatchAsync12, 0, d->MemcpyBatchAsync12(dsts, srcs, sz, 2, &at, &idx, 1, &fi, S));
    FORWARD(Memcpy3DBatchAsync, 0, d->Memcpy3DBatchAsync(1, &op, 0, S));
    FORWARD(Memcpy3DBatchAsync12, 0, d->Memcpy3DBatchAsync12(1, &op, &fi, 0, S));
    CK(d->StreamSynchronize(S));

    void *p;
    FORWARD(MemHostAlloc, 1, d->MemHostAlloc(&p, 8192, 0));
    FORWARD(MemFreeHost, 1, d->MemFreeHost(p));
    FORWARD(MemAllocHost, 1, d->MemAllocHost(&p, 8192));
    FORWARD(MemFreeHost, 1, d->MemFreeHost(p));
    static unsigned char reg[1 << 16] __attribute__((aligned(4096)));
    FORWARD(MemHostRegister, 0, d->MemHostRegister(reg, sizeof reg, 0));
    FORWARD(MemHostUnregister, 0, d->MemHostUnregister(reg));
    CUdeviceptr x;
    FORWARD(MemAlloc, 0, d->MemAlloc(&x, 8192));
    FORWARD(MemFree, 0, d->MemFree(x));
    FORWARD(MemAllocAsync, 0, d->MemAllocAsync(&x, 8192, S));
    FORWARD(MemFreeAsync, 0, d->MemFreeAsync(x, S));
    FORWARD(MemAllocManaged, 0, d->MemAllocManaged(&x, 8192, CU_MEM_ATTACH_GLOBAL));
    FORWARD(MemFree, 0, d->MemFree(x));
    FORWARD(StreamSynchronize, 0, d->StreamSynchronize(S));
    FORWARD(LaunchHostFunc, 0, d->LaunchHostFunc(S, (CUhostFn)(void (*)(void *))free, NULL));
    CK(d->StreamSynchronize(S));
}

static int setup(void **s)
{
    if (t_setup(s) || D.StreamCreate(&S, 0) || D.MemAlloc(&DEV, 2 * N) || D.MemAlloc(&DEV2, 2 * N) ||
        D.MemHostAlloc((void **)&PIN, 2 * N, 0) || D.MemHostAlloc((void **)&PIN2, 2 * N, 0))
        return -1;
    return 0;
}

static void forward(enum drv_path path, int ptds)
{
    static struct drv local;
    assert_int_equal(drv_load(&local, path, ptds), 0);
    d = &local;
    run_all();
}

static void test_gpa_legacy(void **s) { (void)s; forward(DRV_GPA, 0); }
static void test_gpa_ptds(void **s) { (void)s; forward(DRV_GPA, 1); }
static void test_direct_legacy(void **s) { (void)s; forward(DRV_DIRECT, 0); }
static void test_direct_ptds(void **s) { (void)s; forward(DRV_DIRECT, 1); }
static void test_dlsym_legacy(void **s) { (void)s; forward(DRV_DLSYM, 0); }
static void test_dlsym_ptds(void **s) { (void)s; forward(DRV_DLSYM, 1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpa_legacy),
        cmocka_unit_test(test_gpa_ptds),
        cmocka_unit_test(test_direct_legacy),
        cmocka_unit_test(test_direct_ptds),
        cmocka_unit_test(test_dlsym_legacy),
        cmocka_unit_test(test_dlsym_ptds),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
