/* Pitched and array copies as staged transfers: their rows are packed into
 * the slots (whole rows a chunk), and each chunk's DMA is one 3D copy
 * between its slot and the device side, moved down by the chunk's first
 * row.  The plan (plan.c) cuts them as any copy; the tasks pack and unpack
 * the rows (workers.h). */
#include "shape.h"
#include "staging.h"
#include "../driver/driver.h"

#include <limits.h>

/* Pitches the driver takes (CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2^31 - 1 on the
 * GPUs we know: tests/gpu/probes/shapes_errors.c prints it): larger ones
 * pass through, and the driver refuses them itself. */
#define MAX_PITCH ((size_t)INT_MAX)

/* One side of a 2D copy. */
struct side {
    CUmemorytype type;
    uintptr_t ptr;  /* host or device address (0 for an array) */
    CUarray array;
    size_t x, y, pitch;
};

/* rows of width bytes from (x, y) at pitch fit the address space from ptr:
 * *first is their first byte's offset, *span the bytes they cover. */
static int rows_fit(const struct side *d, size_t width, size_t rows, size_t *first, size_t *span) {
    size_t end;
    if (!d->ptr || (rows > 1 && (d->pitch < width || d->pitch > MAX_PITCH)))
        return 0;
    return !__builtin_mul_overflow(d->y, d->pitch, first) && !__builtin_add_overflow(*first, d->x, first) &&
           !__builtin_mul_overflow(rows - 1, d->pitch, span) && !__builtin_add_overflow(*span, width, span) &&
           !__builtin_add_overflow(*first, *span, &end) && !__builtin_add_overflow(d->ptr, end, &end);
}

/* Bytes of an element of the formats a plain array may have; 0: one pinfast
 * does not know (it passes through). */
static size_t format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* rows of width bytes from (x, y) lie inside a plain (not layered, not 3D)
 * array, on whole elements; *elem is an element's size, *one_d whether the
 * array has a single row. */
static int array_fits(CUarray a, size_t x, size_t y, size_t width, size_t rows, size_t *elem, int *one_d) {
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (!a || PF_CALL(cuArray3DGetDescriptor_v2, &d, a) != CUDA_SUCCESS || d.Depth || d.Flags ||
        (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4))
        return 0;
    *elem = format_bytes(d.Format) * d.NumChannels;
    *one_d = d.Height == 0;
    size_t w, h = d.Height ? d.Height : 1;
    return *elem && x % *elem == 0 && width % *elem == 0 && !__builtin_mul_overflow(d.Width, *elem, &w) &&
           x <= w && width <= w - x && y <= h && rows <= h - y;
}

/* The device side d of rows of width bytes, staged against a pageable host
 * range [host, host + bytes) whose rows lie hpitch apart: fills x and s
 * (the DMA's template: the device side as the program gave it, the slot's
 * side set per chunk). */
static int device_side(const struct side *d, size_t width, size_t rows, size_t hpitch, enum pf_dir dir,
                       struct pf_xfer *x, struct pf_shape *s) {
    size_t first = 0, span = 0, elem = 0;
    int one_d = 0;
    *s = (struct pf_shape){.width = width, .rows = rows, .hpitch = hpitch};
    if (d->type == CU_MEMORYTYPE_ARRAY) {
        if (!array_fits(d->array, d->x, d->y, width, rows, &elem, &one_d))
            return 0;
        s->array = 1;
        /* a single row of a 1D array: its elements are the rows, so that
         * chunks cut it along x */
        if (one_d && rows == 1 && hpitch == width)
            *s = (struct pf_shape){.width = elem, .rows = width / elem, .hpitch = elem, .array = 1, .along_x = 1};
    } else if (d->type == CU_MEMORYTYPE_DEVICE || d->type == CU_MEMORYTYPE_UNIFIED) {
        if (!rows_fit(d, width, rows, &first, &span))
            return 0;
        if (rows == 1 || (hpitch == width && d->pitch == width)) {
            x->dev = d->ptr + first; /* contiguous on both sides: a linear copy */
            x->shape = NULL;
            return 1;
        }
        x->dev = d->ptr + first;
        s->dev_span = span;
    } else {
        return 0;
    }
    CUDA_MEMCPY3D m = {.WidthInBytes = width, .Depth = 1};
    size_t height = d->y + rows; /* the device rows the copy may reach */
    if (dir == PF_DIR_H2D) {
        m.srcMemoryType = CU_MEMORYTYPE_HOST;
        m.dstMemoryType = d->type, m.dstDevice = d->ptr, m.dstArray = d->array;
        m.dstXInBytes = d->x, m.dstY = d->y, m.dstPitch = d->pitch, m.dstHeight = height;
    } else {
        m.dstMemoryType = CU_MEMORYTYPE_HOST;
        m.srcMemoryType = d->type, m.srcDevice = d->ptr, m.srcArray = d->array;
        m.srcXInBytes = d->x, m.srcY = d->y, m.srcPitch = d->pitch, m.srcHeight = height;
    }
    s->dma = m;
    x->shape = s;
    return 1;
}

static struct side side_of(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array, size_t x,
                           size_t y, size_t pitch) {
    return (struct side){.type = type, .ptr = type == CU_MEMORYTYPE_HOST ? (uintptr_t)host : dev,
                         .array = type == CU_MEMORYTYPE_ARRAY ? array : NULL, .x = x, .y = y, .pitch = pitch};
}

/* The host side is read or written directly by the plain call: its first
 * byte must be pageable now, not in a cached answer. */
static int pageable(const void *host) {
    return pf_classify_uncached((uintptr_t)host) == PF_MEM_PAGEABLE;
}

int pf_shape_2d(const CUDA_MEMCPY2D *p, struct pf_route rt, struct pf_xfer *x, struct pf_shape *s) {
    struct side src = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                              p->srcY, p->srcPitch);
    struct side dst = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes,
                              p->dstY, p->dstPitch);
    const struct side *h = rt.dir == PF_DIR_H2D ? &src : &dst, *d = rt.dir == PF_DIR_H2D ? &dst : &src;
    size_t width = p->WidthInBytes, rows = p->Height, first, span;
    if (!width || !rows || (h->type != CU_MEMORYTYPE_HOST && h->type != CU_MEMORYTYPE_UNIFIED) ||
        !rows_fit(h, width, rows, &first, &span) || __builtin_mul_overflow(width, rows, &x->bytes))
        return 0;
    x->dir = rt.dir;
    x->host = (char *)h->ptr + first;
    size_t hpitch = rows == 1 ? width : h->pitch;
    return pageable(x->host) && device_side(d, width, rows, hpitch, rt.dir, x, s);
}

int pf_shape_array(CUarray a, size_t offset, void *host, size_t n, enum pf_dir dir, struct pf_xfer *x,
                   struct pf_shape *s) {
    struct side d = {.type = CU_MEMORYTYPE_ARRAY, .array = a, .x = offset};
    size_t end;
    if (!n || !host || __builtin_add_overflow((uintptr_t)host, n, &end) || !pageable(host) ||
        !device_side(&d, n, 1, n, dir, x, s) || !s->along_x)
        return 0;
    x->dir = dir;
    x->host = host;
    x->bytes = n;
    return 1;
}

CUresult pf_shape_dma(const struct pf_xfer *x, void *slot, size_t off, size_t len) {
    const struct pf_shape *s = x->shape;
    CUDA_MEMCPY3D m = s->dma;
    int h2d = x->dir == PF_DIR_H2D;
    size_t rows = s->along_x ? 1 : len / s->width, width = s->along_x ? len : s->width;
    if (s->along_x)
        *(h2d ? &m.dstXInBytes : &m.srcXInBytes) += off;
    else
        *(h2d ? &m.dstY : &m.srcY) += off / s->width;
    m.WidthInBytes = width;
    m.Height = rows;
    if (h2d)
        m.srcHost = slot, m.srcPitch = width, m.srcHeight = rows;
    else
        m.dstHost = slot, m.dstPitch = width, m.dstHeight = rows;
    return PF_CALL(cuMemcpy3DAsync_v2, &m, x->stream);
}
