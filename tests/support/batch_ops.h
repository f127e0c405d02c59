/* batch_ops.h - linear copies as the ops of a 3D batch (pointer operands,
 * an extent of {bytes, 1, 1}, stream order), for the tests, checks and
 * probes that make the same copies as a linear batch and as a 3D one. */
#ifndef PFT_BATCH_OPS_H
#define PFT_BATCH_OPS_H

#include <cuda.h>
#include <stddef.h>

static inline void pft_batch_ops(CUDA_MEMCPY3D_BATCH_OP *op, const CUdeviceptr *dst, const CUdeviceptr *src,
                                 const size_t *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        op[i] = (CUDA_MEMCPY3D_BATCH_OP){.src = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER},
                                         .dst = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER},
                                         .extent = {bytes[i], 1, 1},
                                         .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
        op[i].src.op.ptr.ptr = src[i];
        op[i].dst.op.ptr.ptr = dst[i];
    }
}

#endif
