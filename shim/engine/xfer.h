/* A copy as the engine takes it: its direction, sides and size, and for a
 * pitched one, the shape of its rows.  Built by entry/ (shape.c for the
 * pitched ones), read by every file of the engine. */
#ifndef PINFAST_XFER_H
#define PINFAST_XFER_H

#include "../driver/cuda_api.h"
#include "../base/types.h"

#include <stddef.h>

/* A pitched copy (2D, 3D, or with an array as its device side): `rows`
 * rows of `width` bytes, x->bytes in all, in slices of `slice_rows` rows,
 * staged in chunks of whole rows of one slice packed in the slot.  The host
 * rows lie `hpitch` apart from x->host, its slices `hslice` apart; the
 * device side is `dma`'s, whose other side each chunk's DMA points at its
 * slot. */
struct pf_shape {
    size_t width, rows, hpitch;
    size_t slice_rows, hslice;
    size_t dev_span; /* bytes from x->dev the device rows cover (device memory) */
    int array;       /* the device side is an array, checked by shape.c */
    int along_x;     /* a 1D array: a chunk's "rows" are elements along x */
    CUDA_MEMCPY3D dma;
};

/* Where packed row r of a shape lies on the host side, from x->host. */
static inline size_t pf_shape_at(const struct pf_shape *s, size_t r) {
    return r / s->slice_rows * s->hslice + r % s->slice_rows * s->hpitch;
}

struct pf_xfer {
    enum pf_dir dir; /* PF_DIR_H2D or PF_DIR_D2H */
    CUdeviceptr dev;
    void *host; /* pageable */
    size_t bytes;
    CUstream stream;              /* explicit: CU_STREAM_LEGACY or CU_STREAM_PER_THREAD for 0 */
    int async;                    /* the *Async form: no stream synchronisation before an H2D */
    const struct pf_shape *shape; /* NULL: a linear copy */
    int held_only; /* too small (or its slices too short) to stage: taken only if a registration holds it */
};

#endif
