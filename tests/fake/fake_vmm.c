/* fake_vmm.c - virtual memory management (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, ...), as PyTorch's expandable segments use it: a reservation is
 * host memory at a device address (FAKE_DEV_BIAS), and each mapping of a
 * handle into it is an entry of the allocation table of its own, so that
 * cuMemGetAddressRange and cuPointerGetAttributes answer per mapping as the
 * real driver does (tests/gpu/probes/vmm_range.c), while a copy may span
 * mappings laid end to end.  A handle's bytes are those of the reservation
 * where it is mapped: mapping one handle twice does not alias them.  A
 * handle is freed at its last cuMemRelease (cuMemRetainAllocationHandle
 * takes one more). */
#define _GNU_SOURCE
#include "fake.h"

#include <stdlib.h>

#define GRANULARITY ((size_t)2 << 20)

struct reservation { uintptr_t base; size_t size; char *host; struct reservation *next; };
struct handle { size_t size; int dev; atomic_int refs; };

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reservation *reservations;

static int granular(size_t n) { return n && n % GRANULARITY == 0; }

/* The reservation holding [ptr, ptr+size), or NULL (vmm_lock held). */
static struct reservation *reserved_locked(uintptr_t ptr, size_t size)
{
    for (struct reservation *r = reservations; r; r = r->next)
        if (ptr >= r->base && size <= r->size - (ptr - r->base))
            return r;
    return NULL;
}

FAKE_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                CUmemAllocationGranularity_flags option)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    (void)option;
    if (!granularity || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULARITY;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                      unsigned long long flags)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    (void)alignment;
    (void)addr; /* a hint */
    if (!ptr || !granular(size) || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct reservation *r = malloc(sizeof *r);
    char *host = r ? aligned_alloc(GRANULARITY, size) : NULL;
    if (!host) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *r = (struct reservation){ .base = (uintptr_t)host + FAKE_DEV_BIAS, .size = size, .host = host };
    pthread_mutex_lock(&vmm_lock);
    r->next = reservations;
    reservations = r;
    pthread_mutex_unlock(&vmm_lock);
    *ptr = r->base;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    pthread_mutex_lock(&vmm_lock);
    struct reservation **p = &reservations;
    while (*p && ((*p)->base != ptr || (*p)->size != size))
        p = &(*p)->next;
    struct reservation *r = *p;
    if (r)
        *p = r->next;
    pthread_mutex_unlock(&vmm_lock);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    fake_mem_unmap(r->base, r->size);
    free(r->host);
    free(r);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                              unsigned long long flags)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!handle || !prop || !granular(size) || flags || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= fake_ndevices())
        return CUDA_ERROR_INVALID_VALUE;
    struct handle *h = malloc(sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *h = (struct handle){ .size = size, .dev = prop->location.id, .refs = 1 };
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    struct handle *h = (struct handle *)(uintptr_t)handle;
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    if (atomic_fetch_sub(&h->refs, 1) == 1)
        free(h);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    struct handle *h = (struct handle *)fake_mem_handle((uintptr_t)addr);
    if (!handle || !h)
        return CUDA_ERROR_INVALID_VALUE;
    atomic_fetch_add(&h->refs, 1);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                           unsigned long long flags)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    const struct handle *h = (const struct handle *)(uintptr_t)handle;
    if (!h || offset || flags || size != h->size || (ptr - FAKE_DEV_BIAS) % GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    struct reservation *r = reserved_locked(ptr, size);
    char *host = r ? r->host + (ptr - r->base) : NULL;
    pthread_mutex_unlock(&vmm_lock);
    return host ? fake_mem_map(ptr, size, host, h->dev, (uintptr_t)h) : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    fake_ctx_sync(NULL); /* the real unmap waits for the work using the range */
    return fake_mem_unmap(ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    pthread_mutex_lock(&vmm_lock);
    int ok = reserved_locked(ptr, size) != NULL;
    pthread_mutex_unlock(&vmm_lock);
    return ok && desc && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
