/* Pitched and array copies made into transfers the engine stages: a 2D or
 * 3D copy with one side pageable host memory and the other device memory or
 * an array, and the array copies cuMemcpyHtoA/AtoH.  Each checks the whole
 * descriptor first: anything it cannot vouch for (pitch < width, extents
 * that overflow, unknown array formats, layered arrays) passes through, so
 * that the driver answers it with its own error. */
#ifndef PINFAST_SHAPE_H
#define PINFAST_SHAPE_H

#include "engine.h"
#include "route.h"

/* A 2D or 3D copy routed rt (pf_route_of its sides: pageable H2D or D2H):
 * 1 with x ready to stage (x->shape = s, or NULL when both sides are
 * contiguous: a linear copy; x->held_only when its slices are too short to
 * stage), 0 to pass it through. */
int pf_shape_2d(const CUDA_MEMCPY2D *p, struct pf_route rt, struct pf_xfer *x, struct pf_shape *s);
int pf_shape_3d(const CUDA_MEMCPY3D *p, struct pf_route rt, struct pf_xfer *x, struct pf_shape *s);

/* n bytes between pageable host memory and a 1D array at byte `offset`
 * (cuMemcpyHtoA/AtoH): 1 with x ready, 0 to pass it through. */
int pf_shape_array(CUarray a, size_t offset, void *host, size_t n, enum pf_dir dir, struct pf_xfer *x,
                   struct pf_shape *s);

#endif
