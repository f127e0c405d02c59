/* vmm_range: what the real driver answers for addresses in device memory
 * made of several VMM mappings (cuMemAddressReserve, then cuMemCreate +
 * cuMemMap of each handle, as PyTorch's expandable segments do): for an
 * address in each of two adjacent mappings, and one in an unmapped part of
 * the reservation, cuMemGetAddressRange's base and size (relative to the
 * reservation) and cuPointerGetAttributes' memory type, managed flag,
 * device ordinal, context and range.  Then a copy spanning both mappings,
 * plain driver: its result and whether the bytes arrived; and whether
 * cuMemRetainAllocationHandle tells a mapping from cuMemAlloc memory.  The fake driver
 * (tests/fake/fake_vmm.c) answers per mapping, as pinfast's walk
 * (shim/engine/route.c) expects.  Plain driver only; no pinfast.
 * Build: gcc -O2 -I/usr/local/cuda/include -o vmm_range tests/gpu/probes/vmm_range.c -lcuda */
#include <cuda.h>

#include "../probe.h"

static void ask(const char *what, CUdeviceptr base, CUdeviceptr p) {
    CUdeviceptr b = 0, rs = 0;
    size_t s = 0, rz = 0;
    CUresult r = cuMemGetAddressRange(&b, &s, p);
    unsigned type = 0, managed = 0;
    int ordinal = -9;
    CUcontext ctx = (CUcontext)(uintptr_t)1;
    CUpointer_attribute a[6] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT,
                                CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *v[6] = {&type, &managed, &ordinal, &ctx, &rs, &rz};
    CUresult q = cuPointerGetAttributes(6, a, v, p);
    printf("%-28s at +%#llx: cuMemGetAddressRange %d base +%#llx size %#zx | cuPointerGetAttributes %d "
           "type %u managed %u ordinal %d context %s range +%#llx size %#zx\n",
           what, (unsigned long long)(p - base), r, (unsigned long long)(b - base), s, q, type, managed, ordinal,
           ctx ? "set" : "NULL", (unsigned long long)(rs - base), rz);
}

int main(void) {
    probe_context();
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t g;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    printf("granularity %#zx\n", g);
    CUdeviceptr base;
    CUmemGenericAllocationHandle h[2];
    CK(cuMemAddressReserve(&base, 3 * g, 0, 0, 0));
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (int i = 0; i < 2; i++) {
        CK(cuMemCreate(&h[i], g, &prop, 0));
        CK(cuMemMap(base + i * g, g, 0, h[i], 0));
    }
    CK(cuMemSetAccess(base, 2 * g, &acc, 1));
    ask("first mapping, start", base, base);
    ask("first mapping, last byte", base, base + g - 1);
    ask("second mapping, start", base, base + g);
    ask("second mapping, middle", base, base + g + g / 2);
    ask("reserved, not mapped", base, base + 2 * g + 16);
    /* what tells a mapping from an allocation (shim/engine/route.c asks it
     * before running a copy on into the next range) */
    CUmemGenericAllocationHandle rh;
    CUresult rr = cuMemRetainAllocationHandle(&rh, (void *)(uintptr_t)(base + g + 16));
    printf("cuMemRetainAllocationHandle, second mapping: %d (handle %s)\n", rr,
           rr ? "-" : rh == h[1] ? "the mapped one" : "another");
    if (!rr)
        CK(cuMemRelease(rh));
    CUdeviceptr plain;
    CK(cuMemAlloc(&plain, 1 << 20));
    printf("cuMemRetainAllocationHandle, cuMemAlloc memory: %d\n",
           cuMemRetainAllocationHandle(&rh, (void *)(uintptr_t)(plain + 16)));
    CK(cuMemFree(plain));
    /* a pageable copy across both mappings, and back */
    size_t n = g + g / 2, off = g / 2;
    unsigned char *src = malloc(n), *dst = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    memset(dst, 0, n);
    CUresult up = cuMemcpyHtoD(base + off, src, n), down = cuMemcpyDtoH(dst, base + off, n);
    printf("copy across the mappings (%zu bytes at +%#zx): HtoD %d DtoH %d bytes %s\n", n, off, up, down,
           memcmp(src, dst, n) ? "WRONG" : "equal");
    CK(cuMemUnmap(base, 2 * g));
    for (int i = 0; i < 2; i++)
        CK(cuMemRelease(h[i]));
    CK(cuMemAddressFree(base, 3 * g));
    return 0;
}
