/* Pitched and array copies as staged transfers: their rows are packed into
 * the slots (whole rows a chunk, never across a slice), and each chunk's DMA
 * is one 3D copy of depth 1 between its slot and the device side, moved to
 * the chunk's first row and slice.  A 2D copy is the 3D copy of one slice
 * with heights of 0, as the driver reads one.
 * The plan (plan.c) cuts them as any copy; the tasks pack and unpack the
 * rows (workers.h). */
#include "shape.h"
#include "hostcopy.h"
#include "staging.h"
#include "../base/options.h"
#include "../driver/driver.h"

#include <limits.h>

/* Pitches the driver takes (CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2^31 - 1 on the
 * GPUs we know: tests/gpu/probes/shapes_errors.c prints it): larger ones
 * pass through, and the driver refuses them itself. */
#define MAX_PITCH ((size_t)INT_MAX)

/* A copy of several slices is staged only when a slice is at least this
 * share of a chunk (PINFAST_CHUNK): a chunk never crosses a slice, and
 * chunks far smaller than the engine's are all fixed costs, a DMA, a fence
 * and the tasks' hand-off each (docs/tuning.md#3d-copies-of-short-slices-pass-through-slice_min_share).
 * Shorter slices go through a registration (one DMA) or pass through. */
#define SLICE_MIN_SHARE 16

/* One side of a 2D or 3D copy. */
struct side {
    CUmemorytype type;
    uintptr_t ptr; /* host or device address (0 for an array) */
    CUarray array;
    size_t x, y, z, pitch, height;
};

/* The extent: rows of width bytes, h a slice, d slices. */
struct extent {
    size_t width, h, d;
};

/* The side's rows fit the address space from ptr: *first is the first
 * byte's offset, *span the bytes they cover.  Past the first slice, slices
 * lie height rows apart.  Rows past the height (y + rows over it: the
 * driver refuses them, one slice or several) or past the pitch (x + width
 * over it) pass through: the driver answers them. */
static int rows_fit(const struct side *s, struct extent e, size_t *first, size_t *span) {
    size_t end;
    if (!s->ptr || s->pitch < e.width || s->pitch > MAX_PITCH || s->x > s->pitch - e.width || s->height < e.h ||
        s->y > s->height - e.h)
        return 0;
    return !__builtin_mul_overflow(s->z, s->height, first) && !__builtin_add_overflow(*first, s->y, first) &&
           !__builtin_mul_overflow(*first, s->pitch, first) && !__builtin_add_overflow(*first, s->x, first) &&
           !__builtin_mul_overflow(e.d - 1, s->height, span) && !__builtin_add_overflow(*span, e.h - 1, span) &&
           !__builtin_mul_overflow(*span, s->pitch, span) && !__builtin_add_overflow(*span, e.width, span) &&
           !__builtin_add_overflow(*first, *span, &end) && !__builtin_add_overflow(s->ptr, end, &end);
}

/* Bytes of an element of the formats a plain array may have; 0: one pinfast
 * does not know (it passes through). */
static size_t format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* One slice of rows of width bytes from (x, y) lies inside a plain (not
 * layered, not 3D) array, on whole elements; *elem is an element's size,
 * *one_d whether the array has a single row. */
static int array_fits(const struct side *s, struct extent e, size_t *elem, int *one_d) {
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (!s->array || e.d != 1 || s->z || PF_CALL(cuArray3DGetDescriptor_v2, &d, s->array) != CUDA_SUCCESS || d.Depth ||
        d.Flags || (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4))
        return 0;
    *elem = format_bytes(d.Format) * d.NumChannels;
    *one_d = d.Height == 0;
    size_t w, h = d.Height ? d.Height : 1;
    return *elem && s->x % *elem == 0 && e.width % *elem == 0 && !__builtin_mul_overflow(d.Width, *elem, &w) &&
           s->x <= w && e.width <= w - s->x && s->y <= h && e.h <= h - s->y;
}

/* The device side d of the extent, staged against a pageable host side
 * whose rows lie hpitch apart (its slices hslice apart; contiguous: no gaps
 * at all): fills x and s (the DMA's template: the device side as the
 * program gave it, the slot's side set per chunk). */
static int device_side(const struct side *d, struct extent e, size_t hpitch, size_t hslice, int contiguous,
                       enum pf_dir dir, struct pf_xfer *x, struct pf_shape *s) {
    size_t first = 0, span = 0, elem = 0, rows = e.h * e.d;
    int one_d = 0;
    *s = (struct pf_shape){.width = e.width, .rows = rows, .hpitch = hpitch, .slice_rows = e.h, .hslice = hslice};
    if (d->type == CU_MEMORYTYPE_ARRAY) {
        if (!array_fits(d, e, &elem, &one_d))
            return 0;
        s->array = 1;
        /* a single row of a 1D array: its elements are the rows, so that
         * chunks cut it along x */
        if (one_d && rows == 1 && contiguous)
            *s = (struct pf_shape){.width = elem,
                                   .rows = e.width / elem,
                                   .hpitch = elem,
                                   .slice_rows = e.width / elem,
                                   .array = 1,
                                   .along_x = 1};
    } else if (d->type == CU_MEMORYTYPE_DEVICE || d->type == CU_MEMORYTYPE_UNIFIED) {
        if (!rows_fit(d, e, &first, &span))
            return 0;
        x->dev = d->ptr + first;
        if (rows == 1 || (contiguous && d->pitch == e.width && (e.d == 1 || d->height == e.h))) {
            x->shape = NULL; /* contiguous on both sides: a linear copy */
            return 1;
        }
        s->dev_span = span;
    } else {
        return 0;
    }
    /* the device rows a chunk may reach: past the first slice the
     * program's height places the slices; within it, any that holds them */
    size_t height = e.d > 1 || d->z ? d->height : d->y + e.h;
    CUDA_MEMCPY3D m = {.WidthInBytes = e.width, .Depth = 1};
    if (dir == PF_DIR_H2D) {
        m.srcMemoryType = CU_MEMORYTYPE_HOST;
        m.dstMemoryType = d->type, m.dstDevice = d->ptr, m.dstArray = d->array;
        m.dstXInBytes = d->x, m.dstY = d->y, m.dstZ = d->z, m.dstPitch = d->pitch, m.dstHeight = height;
    } else {
        m.dstMemoryType = CU_MEMORYTYPE_HOST;
        m.srcMemoryType = d->type, m.srcDevice = d->ptr, m.srcArray = d->array;
        m.srcXInBytes = d->x, m.srcY = d->y, m.srcZ = d->z, m.srcPitch = d->pitch, m.srcHeight = height;
    }
    s->dma = m;
    x->shape = s;
    return 1;
}

static struct side side_of(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array, size_t x, size_t y,
                           size_t z, size_t pitch, size_t height) {
    return (struct side){.type = type,
                         .ptr = type == CU_MEMORYTYPE_HOST ? (uintptr_t)host : dev,
                         .array = type == CU_MEMORYTYPE_ARRAY ? array : NULL,
                         .x = x,
                         .y = y,
                         .z = z,
                         .pitch = pitch,
                         .height = height};
}

/* The host side is read or written directly by the plain call: its first
 * byte must be pageable now, not in a cached answer. */
static int pageable(const void *host) { return pf_classify_uncached((uintptr_t)host) == PF_MEM_PAGEABLE; }

/* The row after h rows from y. */
static size_t rows_end(size_t y, size_t h) {
    size_t end;
    return __builtin_add_overflow(y, h, &end) ? SIZE_MAX : end;
}

int pf_shape_3d(const CUDA_MEMCPY3D *p, struct pf_route rt, struct pf_xfer *x, struct pf_shape *s) {
    struct side src = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ,
                              p->srcPitch, p->srcHeight);
    struct side dst = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, p->dstZ,
                              p->dstPitch, p->dstHeight);
    const struct side *h = rt.dir == PF_DIR_H2D ? &src : &dst, *d = rt.dir == PF_DIR_H2D ? &dst : &src;
    struct extent e = {p->WidthInBytes, p->Height, p->Depth};
    size_t first, span, rows;
    /* one slice with a height of 0 is a 2D copy to the driver: its rows
     * from any y, its slices y + rows apart (tests/gpu/probes/
     * shapes_errors.c, tests/gpu/checks/shapes.sh); the runtime's 2D
     * copies to and from arrays come so */
    if (e.d == 1) {
        if (!src.height)
            src.height = rows_end(src.y, e.h);
        if (!dst.height)
            dst.height = rows_end(dst.y, e.h);
    }
    if (p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1 || !e.width || !e.h || !e.d ||
        (h->type != CU_MEMORYTYPE_HOST && h->type != CU_MEMORYTYPE_UNIFIED) || !rows_fit(h, e, &first, &span) ||
        __builtin_mul_overflow(e.h, e.d, &rows) || __builtin_mul_overflow(e.width, rows, &x->bytes))
        return 0;
    x->dir = rt.dir;
    x->host = (char *)h->ptr + first;
    size_t hpitch = rows == 1 ? e.width : h->pitch;
    int contiguous = hpitch == e.width && (e.d == 1 || h->height == e.h);
    if (!pageable(x->host) || !device_side(d, e, hpitch, h->height * h->pitch, contiguous, rt.dir, x, s))
        return 0;
    /* a linear copy, or one slice, is cut as any copy; slices shorter than
     * that are taken through a registration only */
    x->held_only = x->shape && e.d > 1 && e.width * e.h < pf_options()->chunk / SLICE_MIN_SHARE;
    return 1;
}

int pf_shape_2d(const CUDA_MEMCPY2D *p, struct pf_route rt, struct pf_xfer *x, struct pf_shape *s) {
    CUDA_MEMCPY3D m = {
        .srcXInBytes = p->srcXInBytes,
        .srcY = p->srcY,
        .srcMemoryType = p->srcMemoryType,
        .srcHost = p->srcHost,
        .srcDevice = p->srcDevice,
        .srcArray = p->srcArray,
        .srcPitch = p->srcPitch,
        .dstXInBytes = p->dstXInBytes,
        .dstY = p->dstY,
        .dstMemoryType = p->dstMemoryType,
        .dstHost = p->dstHost,
        .dstDevice = p->dstDevice,
        .dstArray = p->dstArray,
        .dstPitch = p->dstPitch,
        .WidthInBytes = p->WidthInBytes,
        .Height = p->Height,
        .Depth = 1,
    };
    return pf_shape_3d(&m, rt, x, s);
}

int pf_shape_array(CUarray a, size_t offset, void *host, size_t n, enum pf_dir dir, struct pf_xfer *x,
                   struct pf_shape *s) {
    struct side d = {.type = CU_MEMORYTYPE_ARRAY, .array = a, .x = offset};
    size_t end;
    if (!n || !host || __builtin_add_overflow((uintptr_t)host, n, &end) || !pageable(host) ||
        !device_side(&d, (struct extent){n, 1, 1}, n, n, 1, dir, x, s) || !s->along_x)
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
    size_t row = off / s->width, rows = s->along_x ? 1 : len / s->width, width = s->along_x ? len : s->width;
    if (s->along_x) {
        *(h2d ? &m.dstXInBytes : &m.srcXInBytes) += off;
    } else {
        *(h2d ? &m.dstY : &m.srcY) += row % s->slice_rows;
        *(h2d ? &m.dstZ : &m.srcZ) += row / s->slice_rows;
    }
    m.WidthInBytes = width;
    m.Height = rows;
    if (h2d)
        m.srcHost = slot, m.srcPitch = width, m.srcHeight = rows;
    else
        m.dstHost = slot, m.dstPitch = width, m.dstHeight = rows;
    return PF_CALL(cuMemcpy3DAsync_v2, &m, x->stream);
}

size_t pf_shape_host_span(const struct pf_xfer *x) {
    const struct pf_shape *s = x->shape;
    return s->along_x ? x->bytes : pf_shape_at(s, s->rows - 1) + s->width;
}

/* The whole copy as one DMA of its program's shape between the device side
 * and `host`: the program's rows (hpitch apart, slices hslice apart) or,
 * `packed`, the rows end to end as pf_shape_pack leaves them. */
CUresult pf_shape_dma_whole(const struct pf_xfer *x, void *host, int packed) {
    const struct pf_shape *s = x->shape;
    CUDA_MEMCPY3D m = s->dma;
    /* a 1D array's "rows" are its elements: one run; else slices of
     * slice_rows rows, hslice apart on the host (a whole number of rows
     * for more than one slice: shape.c takes the program's height) */
    m.WidthInBytes = s->along_x ? x->bytes : s->width;
    m.Height = s->along_x ? 1 : s->slice_rows;
    m.Depth = s->along_x ? 1 : s->rows / s->slice_rows;
    size_t pitch = s->along_x ? x->bytes : packed ? s->width : s->hpitch;
    size_t height = m.Depth > 1 && !packed ? s->hslice / s->hpitch : m.Height;
    if (x->dir == PF_DIR_H2D)
        m.srcHost = host, m.srcPitch = pitch, m.srcHeight = height;
    else
        m.dstHost = host, m.dstPitch = pitch, m.dstHeight = height;
    return PF_CALL(cuMemcpy3DAsync_v2, &m, x->stream);
}

void pf_shape_pack(const struct pf_xfer *x, enum pf_host_copy kind, char *dst) {
    const struct pf_shape *s = x->shape;
    size_t slice = s->slice_rows * s->width;
    if (s->along_x) {
        pf_copy_bytes(kind, dst, x->host, x->bytes);
        return;
    }
    for (size_t z = 0; z < s->rows / s->slice_rows; z++)
        pf_copy_rows(kind, dst + z * slice, s->width, (const char *)x->host + z * s->hslice, s->hpitch, s->width,
                     slice);
}
