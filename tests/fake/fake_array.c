/* fake_array.c - CUDA arrays: plain host memory inside the fake, rows of
 * Width elements (format bytes x channels) packed one after another.  Only
 * the formats and channel counts of a plain array are known (the driver
 * answers CUDA_ERROR_INVALID_VALUE to the others: tests/gpu/probes/
 * shapes_errors.c prints its answers); flags other than 0 are refused. */
#define _GNU_SOURCE
#include "fake.h"

#include <stdlib.h>

#define FAKE_ARRAY_MAGIC 0xA77A7AA7u

struct fake_array {
    uint32_t magic;
    CUDA_ARRAY3D_DESCRIPTOR d;
    struct fake_array_shape s;
    struct fake_array *next;
};

static pthread_mutex_t array_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_array *arrays; /* live ones */

static size_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* the live array a, or NULL (array_lock held) */
static struct fake_array *find_locked(CUarray a)
{
    for (struct fake_array *p = arrays; p; p = p->next)
        if ((CUarray)p == a)
            return p;
    return NULL;
}

/* The H100's limits (its texture limits): 131072 wide, 65536 high; 16384
 * each way in 3D.  A 1D array of 200000 elements was refused there. */
static int too_large(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (d->Depth)
        return d->Width > 16384 || d->Height > 16384 || d->Depth > 16384;
    return d->Width > 131072 || d->Height > 65536;
}

static CUresult create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    size_t elem = d ? format_bytes(d->Format) * d->NumChannels : 0;
    if (!out || !elem || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) ||
        !d->Width || (d->Depth && !d->Height) || d->Flags || too_large(d))
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_array *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a->magic = FAKE_ARRAY_MAGIC;
    a->d = *d;
    a->s = (struct fake_array_shape){ .elem = elem, .row = d->Width * elem,
                                      .height = d->Height ? d->Height : 1, .depth = d->Depth ? d->Depth : 1 };
    a->s.mem = malloc(a->s.row * a->s.height * a->s.depth);
    if (!a->s.mem) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&array_lock);
    a->next = arrays;
    arrays = a;
    pthread_mutex_unlock(&array_lock);
    *out = (CUarray)a;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
    FAKE_ENTER();
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = p->Width, .Height = p->Height, .Format = p->Format,
                                  .NumChannels = p->NumChannels };
    return create(pHandle, &d);
}

FAKE_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
    FAKE_ENTER();
    return create(pHandle, p);
}

FAKE_API CUresult cuArrayDestroy(CUarray hArray)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    pthread_mutex_lock(&array_lock);
    struct fake_array **p = &arrays;
    while (*p && (CUarray)*p != hArray)
        p = &(*p)->next;
    struct fake_array *a = *p;
    if (a)
        *p = a->next;
    pthread_mutex_unlock(&array_lock);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    fake_ctx_sync(NULL); /* as the driver's, the destruction waits for copies using it */
    free(a->s.mem);
    free(a);
    return CUDA_SUCCESS;
}

static CUresult descriptor(CUarray h, CUDA_ARRAY3D_DESCRIPTOR *out)
{
    pthread_mutex_lock(&array_lock);
    struct fake_array *a = find_locked(h);
    if (a && out)
        *out = a->d;
    pthread_mutex_unlock(&array_lock);
    return !a ? CUDA_ERROR_INVALID_HANDLE : out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    return descriptor(hArray, pArrayDescriptor);
}

FAKE_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUresult r = descriptor(hArray, pArrayDescriptor ? &d : NULL);
    if (!r)
        *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){ .Width = d.Width, .Height = d.Height, .Format = d.Format,
                                                     .NumChannels = d.NumChannels };
    return r;
}

CUresult fake_array_get(CUarray h, struct fake_array_shape *out)
{
    pthread_mutex_lock(&array_lock);
    struct fake_array *a = find_locked(h);
    if (a)
        *out = a->s;
    pthread_mutex_unlock(&array_lock);
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
