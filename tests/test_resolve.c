/* test_resolve: cuGetProcAddress answers like the real driver (names,
 * versions, per-thread flags, unknown names), the same address as the
 * exported symbol in plain runs, and under pinfast: wrapped families are
 * interposed while the 32-bit v1 ABI is handed out untouched.  Also run
 * against the fake without cuGetProcAddress_v2 (resolve.nov2.*). */
#define _GNU_SOURCE
#include "t.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void *H;
static PFN_cuGetProcAddress_v12000 gpa2;   /* NULL on an old driver */
static PFN_cuGetProcAddress_v11030 gpa1;

static int setup(void **s)
{
    if (t_setup(s))
        return -1;
    H = drv_libcuda();
    gpa2 = (PFN_cuGetProcAddress_v12000)dlsym(H, "cuGetProcAddress_v2");
    gpa1 = (PFN_cuGetProcAddress_v11030)dlsym(H, "cuGetProcAddress");
    printf("[ driver   ] cuGetProcAddress_v2 %s\n", gpa2 ? "present" : "absent");
    return gpa1 ? 0 : -1;
}

/* resolve through the v2 entry when there is one, else v1 */
static CUresult gpa(const char *name, void **p, int ver, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *st)
{
    *st = (CUdriverProcAddressQueryResult)-1;
    if (gpa2)
        return gpa2(name, p, ver, flags, st);
    return gpa1(name, p, ver, flags);
}

static const char *lib_of(void *p)
{
    Dl_info di;
    return p && dladdr(p, &di) && di.dli_fname ? di.dli_fname : "?";
}

static const char *sym_of(void *p)
{
    Dl_info di;
    return p && dladdr(p, &di) && di.dli_sname ? di.dli_sname : "?";
}

static int in_fake(void *p)
{
    return strstr(lib_of(p), "/tests/fake") != NULL;
}

static void *fake_export(const char *name)
{
    return dlsym(H, name);
}

static void expect_export(const char *base, int ver, cuuint64_t flags, const char *exported)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    CK(gpa(base, &p, ver, flags, &st));
    assert_non_null(p);
    if (gpa2)
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    if (!t_pinfast()) {
        /* plain: the very address of the export */
        assert_ptr_equal(p, fake_export(exported));
        assert_string_equal(sym_of(p), exported);
    }
}

static void test_versions_and_flags(void **s)
{
    (void)s;
    expect_export("cuMemcpyHtoD", 3020, 0, "cuMemcpyHtoD_v2");
    expect_export("cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2");
    expect_export("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemcpyHtoD_v2");
    expect_export("cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyHtoD_v2_ptds");
    expect_export("cuMemcpyHtoDAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyHtoDAsync_v2_ptsz");
    expect_export("cuMemcpyBatchAsync", 12080, 0, "cuMemcpyBatchAsync");
    expect_export("cuMemcpyBatchAsync", 13000, 0, "cuMemcpyBatchAsync_v2");
    expect_export("cuMemcpyBatchAsync", 12080, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyBatchAsync_ptsz");
    expect_export("cuMemcpyBatchAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyBatchAsync_v2_ptsz");
    expect_export("cuMemcpy3DBatchAsync", 12080, 0, "cuMemcpy3DBatchAsync");
    expect_export("cuMemcpy3DBatchAsync", 13000, 0, "cuMemcpy3DBatchAsync_v2");
    expect_export("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAlloc_v2");
    expect_export("cuMemHostAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemHostAlloc");
    expect_export("cuStreamSynchronize", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuStreamSynchronize_ptsz");

    /* functions without a stream variant ignore flag 2 */
    void *a = NULL, *b = NULL;
    CUdriverProcAddressQueryResult st;
    CK(gpa("cuMemAlloc", &a, 13000, 0, &st));
    CK(gpa("cuMemAlloc", &b, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    assert_ptr_equal(a, b);
    /* the two batch ABIs are different functions, with or without pinfast */
    CK(gpa("cuMemcpyBatchAsync", &a, 12080, 0, &st));
    CK(gpa("cuMemcpyBatchAsync", &b, 13000, 0, &st));
    assert_ptr_not_equal(a, b);
    /* legacy and per-thread answers differ */
    CK(gpa("cuMemcpyDtoH", &a, 13000, 0, &st));
    CK(gpa("cuMemcpyDtoH", &b, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    assert_ptr_not_equal(a, b);
}

static void test_not_found(void **s)
{
    (void)s;
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st;
    CK_EQ(gpa("cuNoSuchFunction", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_null(p);
    if (gpa2)
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    p = (void *)1;
    CK_EQ(gpa("cuMemcpyHtoD", &p, 5000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
          CUDA_ERROR_NOT_FOUND);
    assert_null(p);
    if (gpa2)
        assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    p = (void *)1;
    CK_EQ(gpa("cuMemcpyBatchAsync", &p, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_null(p);
    if (gpa2)
        assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

/* the CUDA 2.0 32-bit-size ABI must be handed out untouched, both through
 * cuGetProcAddress and through dlsym */
static void test_v1_abi_untouched(void **s)
{
    (void)s;
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    CK(gpa("cuMemcpyHtoD", &p, 2000, 0, &st));
    assert_true(in_fake(p));
    assert_string_equal(sym_of(p), "cuMemcpyHtoD");
    void *q = dlsym(H, "cuMemcpyHtoD");
    assert_true(in_fake(q));
    assert_string_equal(sym_of(q), "cuMemcpyHtoD");
    q = dlsym(RTLD_DEFAULT, "cuMemcpyHtoD");
    assert_non_null(q);
    assert_string_equal(sym_of(q), "cuMemcpyHtoD");
    assert_true(in_fake(q));
}

/* what cudart does first: ask for "cuGetProcAddress" itself */
static void test_gpa_itself(void **s)
{
    (void)s;
    void *p1 = NULL, *p2 = NULL;
    CUdriverProcAddressQueryResult st;
    CK(gpa("cuGetProcAddress", &p1, 11030, 0, &st));
    CK(gpa("cuGetProcAddress", &p2, 12000, 0, &st));
    assert_non_null(p1);
    assert_non_null(p2);
    if (!t_pinfast()) {
        assert_ptr_equal(p1, fake_export("cuGetProcAddress"));
        assert_ptr_equal(p2, gpa2 ? fake_export("cuGetProcAddress_v2") : fake_export("cuGetProcAddress"));
    } else {
        /* pinfast hands out its own, for both signatures */
        assert_false(in_fake(p1));
        assert_false(in_fake(p2));
        if (gpa2)
            assert_false(in_fake((void *)gpa2));
    }
    /* the v1 answer works with 4 arguments, the v2 answer with 5 (or 4 on an old driver) */
    void *x = NULL;
    CK(((PFN_cuGetProcAddress_v11030)p1)("cuMemcpyDtoH", &x, 13000, 0));
    assert_non_null(x);
    x = NULL;
    if (gpa2) {
        CK(((PFN_cuGetProcAddress_v12000)p2)("cuMemcpyDtoH", &x, 13000, 0, &st));
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    } else {
        CK(((PFN_cuGetProcAddress_v11030)p2)("cuMemcpyDtoH", &x, 13000, 0));
    }
    assert_non_null(x);
}

/* under pinfast the copy families resolve to wrappers, not to the fake */
static void test_interposed(void **s)
{
    (void)s;
    static const char *wrapped[] = {
        "cuMemcpy", "cuMemcpyAsync", "cuMemcpyHtoD", "cuMemcpyHtoDAsync", "cuMemcpyDtoH",
        "cuMemcpyDtoHAsync", "cuMemcpyDtoD", "cuMemcpyDtoDAsync", "cuMemcpyPeer",
        "cuMemcpyPeerAsync", "cuMemcpy2D", "cuMemcpy2DUnaligned", "cuMemcpy2DAsync",
        "cuMemcpy3D", "cuMemcpy3DAsync", "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyHtoAAsync",
        "cuMemcpyAtoHAsync", "cuMemcpyBatchAsync", "cuMemcpy3DBatchAsync",
        "cuMemHostAlloc", "cuMemAllocHost", "cuMemFreeHost", "cuMemHostRegister",
        "cuMemHostUnregister", "cuMemAlloc", "cuMemFree", "cuMemAllocAsync", "cuMemFreeAsync",
        "cuMemAllocManaged",
    };
    if (!t_pinfast())
        skip();
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++)
        for (int f = 0; f < 2; f++) {
            void *p = NULL;
            CUdriverProcAddressQueryResult st;
            CK(gpa(wrapped[i], &p, 13000, f ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st));
            if (in_fake(p))
                fail_msg("%s (flags %d) resolves to the fake's %s: not interposed", wrapped[i],
                         f ? 2 : 0, sym_of(p));
        }
}

/* the same answers through every loader way */
static void test_loaders_agree(void **s)
{
    (void)s;
    for (int f = 0; f < 2; f++) {
        struct drv a, b;
        assert_int_equal(drv_load(&a, DRV_GPA, f), 0);
        assert_int_equal(drv_load(&b, DRV_DLSYM, f), 0);
        if (!t_pinfast()) {
            assert_ptr_equal((void *)a.MemcpyHtoD, (void *)b.MemcpyHtoD);
            assert_ptr_equal((void *)a.MemcpyBatchAsync12, (void *)b.MemcpyBatchAsync12);
            assert_ptr_equal((void *)a.StreamSynchronize, (void *)b.StreamSynchronize);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_flags),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_v1_abi_untouched),
        cmocka_unit_test(test_gpa_itself),
        cmocka_unit_test(test_interposed),
        cmocka_unit_test(test_loaders_agree),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
