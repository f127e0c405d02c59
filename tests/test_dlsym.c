/* test_dlsym: dlsym(RTLD_NEXT, ...) called from the program means "after the
 * program".  Under LD_PRELOAD pinfast is the first object after the main
 * program, so RTLD_NEXT must find pinfast's exported wrapper, the same
 * function RTLD_DEFAULT finds.  glibc finds "the caller" from the return
 * address: if pinfast's dlsym hook called the real dlsym in a way that made
 * pinfast the caller, the lookup would start after pinfast and return the
 * driver's own function.  Without pinfast both lookups find the (fake)
 * driver's function, trivially.  The calls are made from this file (the
 * main program), not from a library. */
#define _GNU_SOURCE
#include "t.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {
    "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpy",
    "cuGetProcAddress_v2", "cuMemHostAlloc",
    "cuInit",              /* not wrapped: the driver's own in both lookups */
};

static void test_rtld_next(void **s)
{
    (void)s;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *next = dlsym(RTLD_NEXT, names[i]);
        void *dflt = dlsym(RTLD_DEFAULT, names[i]);
        void *drv = dlsym(drv_libcuda(), names[i]);
        Dl_info a, b;
        const char *na = dladdr(next, &a) && a.dli_fname ? a.dli_fname : "?";
        const char *nb = dladdr(dflt, &b) && b.dli_fname ? b.dli_fname : "?";
        printf("[ dlsym    ] %-26s RTLD_NEXT %p (%s), RTLD_DEFAULT %p (%s)\n", names[i], next, na, dflt, nb);
        assert_non_null(next);
        if (next != dflt)
            fail_msg("%s: dlsym(RTLD_NEXT) = %p in %s, dlsym(RTLD_DEFAULT) = %p in %s", names[i], next, na,
                     dflt, nb);
        if (!t_pinfast() && next != drv)
            fail_msg("%s: without pinfast RTLD_NEXT should find the driver's function", names[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rtld_next),
    };
    return cmocka_run_group_tests(tests, t_setup, NULL);
}
