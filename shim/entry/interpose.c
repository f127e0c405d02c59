/* How programs reach pinfast: cudart and the frameworks find the driver
 * through dlsym and cuGetProcAddress, so both hand out pinfast's wrappers in
 * place of the driver's functions they recognise; programs linked with -lcuda
 * bind the wrappers' exported names directly. */
#include "entry.h"

#include <dlfcn.h>

#define PF_ADDR_(family, opens, shape, ptds, name) (void *)&name,
static void *const wrappers[PF_NWRAPPED] = {PF_WRAPPED(PF_ADDR_)};
#undef PF_ADDR_

/* The wrapper of a real driver function, else the function itself.  Matching
 * by address is exact: the driver hands out its exported functions (see
 * docs/results/2026-11-22-h100-driver-probe/driver-probe.log), and an ABI pinfast does not
 * implement (say the 32-bit cuMemcpyHtoD) is no entry of the table. */
static void *swap(void *p) {
    if (!p || !pf_driver_load() || pf_options()->disable)
        return p;
    for (int i = 0; i < PF_NWRAPPED; i++)
        if (pf_real_table[i] == p)
            return wrappers[i];
    return p;
}

/* Not instrumented: sanitizer runtimes call dlsym while they start, before
 * their own state exists.  RTLD_NEXT means "after the caller", and glibc finds
 * the caller from the return address: those lookups must reach it as a tail
 * call (checked by the test suite), and are never swapped. */
PF_API __attribute__((no_sanitize("address", "thread", "undefined"))) void *dlsym(void *restrict handle,
                                                                                  const char *restrict name) {
    if (handle == RTLD_NEXT)
        return pf_dlsym_fn()(handle, name);
    void *p = pf_real_dlsym(handle, name);
    /* driver names only: "cu" and a capital, never cuDNN's or cuBLAS's */
    if (p && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z')
        return swap(p);
    return p;
}

/* What the real cuGetProcAddress answered, with pinfast's wrapper in place
 * of a real function it recognises. */
static CUresult handed_out(CUresult r, void **pfn) {
    if (r == CUDA_SUCCESS && pfn)
        *pfn = swap(*pfn);
    return r;
}

#define WRAP_LOOKUP(family, ptds, sym) \
    PF_API CUresult sym(const char *symbol, void **pfn, int version, cuuint64_t flags) { \
        if (!pf_driver_load()) \
            return CUDA_ERROR_NOT_INITIALIZED; \
        return handed_out(PF_CALL(sym, symbol, pfn, version, flags), pfn); \
    }
#define WRAP_LOOKUP_V2(family, ptds, sym) \
    PF_API CUresult sym(const char *symbol, void **pfn, int version, cuuint64_t flags, \
                        CUdriverProcAddressQueryResult *status) { \
        if (!pf_driver_load()) \
            return CUDA_ERROR_NOT_INITIALIZED; \
        return handed_out(PF_CALL(sym, symbol, pfn, version, flags, status), pfn); \
    }

PF_LOOKUP_ENTRIES(PF_WRAP)
