#include "classify.h"
#include "driver.h"

enum pf_mem pf_classify(uintptr_t p) {
    struct pf_range r;
    if (pf_hostmap_find((const void *)p, &r))
        return r.kind;
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
    case CU_MEMORYTYPE_HOST: return PF_MEM_PINNED;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_ARRAY: return PF_MEM_DEVICE;
    default: return PF_MEM_UNKNOWN;
    }
}
