#include "classify.h"
#include "register.h"
#include "../driver/driver.h"

/* The last answers of this thread, each for the interval around its address
 * that is sure to get the same one: a program copies from the same buffers
 * over and over, and asking the driver costs more than a small copy can
 * spare (docs/tuning.md#a-per-thread-cache-of-pointer-answers-cached-region). */
#define CACHED 8
#define REGION ((uintptr_t)2 << 20) /* what one driver answer covers */
static __thread struct {
    uintptr_t lo, hi;
    unsigned generation;
    enum pf_mem kind;
} cache[CACHED];
static __thread unsigned victim;

static enum pf_mem ask(uintptr_t p, struct pf_range *r);

/* Memory a registration of pinfast's holds is what the driver would answer
 * of it (host memory, pinfast's: the program's pageable memory) without a
 * driver call, which costs 2-3 us once the caches have gone cold. */
enum pf_mem pf_classify_uncached(uintptr_t p) {
    struct pf_range r;
    if (pf_hostmap_find((const void *)p, &r))
        return r.kind;
    return pf_register_owns(p) ? PF_MEM_PAGEABLE : ask(p, &r);
}

enum pf_mem pf_classify(uintptr_t p) {
    unsigned g = pf_hostmap_generation();
    for (int i = 0; i < CACHED; i++)
        if (p - cache[i].lo < cache[i].hi - cache[i].lo && cache[i].generation == g)
            return cache[i].kind;
    struct pf_range r;
    int mapped = pf_hostmap_find((const void *)p, &r);
    enum pf_mem kind = mapped ? r.kind : ask(p, &r);
    /* driver answers hold for a whole region only for what UVA keeps apart:
     * device memory, and host memory the driver does not know */
    if (mapped || kind == PF_MEM_PAGEABLE || kind == PF_MEM_DEVICE) {
        unsigned k = victim++ % CACHED;
        cache[k].lo = r.base;
        cache[k].hi = r.end;
        cache[k].generation = g;
        cache[k].kind = kind;
    }
    return kind;
}

/* The driver's answer for an address in no range of the map; narrows r
 * (the gap) to the region around p. */
static enum pf_mem ask(uintptr_t p, struct pf_range *r) {
    uintptr_t lo = p & ~(REGION - 1);
    if (r->base < lo)
        r->base = lo;
    if (r->end - lo > REGION)
        r->end = lo + REGION;
    /* ~130 ns for pageable memory on the H100 (driver probe log); unlike
     * cuPointerGetAttribute it answers zeros, not an error, for memory the
     * driver does not know, which is what pageable memory is */
    unsigned type = 0;
    int managed = 0;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *vals[2] = {&type, &managed};
    if (PF_CALL(cuPointerGetAttributes, 2, attrs, vals, (CUdeviceptr)p) != CUDA_SUCCESS)
        return PF_MEM_UNKNOWN;
    if (managed)
        return PF_MEM_MANAGED;
    switch (type) {
    case 0: return PF_MEM_PAGEABLE;
    /* pinfast's own registrations stay pageable memory of the program's */
    case CU_MEMORYTYPE_HOST: return pf_register_owns(p) ? PF_MEM_PAGEABLE : PF_MEM_PINNED;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_ARRAY: return PF_MEM_DEVICE;
    default: return PF_MEM_UNKNOWN;
    }
}
