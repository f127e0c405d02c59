/* The driver's questions about host memory, made from the table
 * (PF_QUERY_ENTRIES).  A block pinfast registered (memory/register.h) is
 * still the program's pageable memory, and a pinned block the program freed
 * into the pool (memory/pool.h) memory the driver no longer knows: asked
 * about either, the driver answers as it does for memory it does not know,
 * which is what it is asked instead (a page pinfast never registers), so
 * that a framework's is_pinned() or cudaHostGetFlags does not change.  The
 * program's own registration answered from pinfast's gets the flags the
 * program gave. */
#include "entry.h"
#include "../memory/pool.h"
#include "../memory/register.h"

static char unknown[64]; /* pageable, never registered */

/* The address to ask the driver about in place of p. */
static inline CUdeviceptr asked(CUdeviceptr p) {
    return (pf_register_near((const void *)p, 1) && pf_register_owns(p)) || pf_pool_idle_at(p) ? (CUdeviceptr)unknown
                                                                                               : p;
}

#define WRAP_POINTER_ATTRIBUTE(family, ptds, sym) \
    PF_API CUresult sym(void *data, CUpointer_attribute a, CUdeviceptr p) { return PF_CALL(sym, data, a, asked(p)); }
#define WRAP_POINTER_ATTRIBUTES(family, ptds, sym) \
    PF_API CUresult sym(unsigned int n, CUpointer_attribute *a, void **data, CUdeviceptr p) { \
        return PF_CALL(sym, n, a, data, asked(p)); \
    }
#define WRAP_HOST_FLAGS(family, ptds, sym) \
    PF_API CUresult sym(unsigned int *flags, void *p) { \
        if (flags && pf_register_near(p, 1) && pf_register_handed_flags((uintptr_t)p, flags)) \
            return CUDA_SUCCESS; \
        return PF_CALL(sym, flags, (void *)asked((CUdeviceptr)p)); \
    }
#define WRAP_HOST_DEVICE_POINTER(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr *d, void *p, unsigned int flags) { \
        return PF_CALL(sym, d, (void *)asked((CUdeviceptr)p), flags); \
    }

PF_QUERY_ENTRIES(PF_WRAP)
