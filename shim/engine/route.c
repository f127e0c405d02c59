/* The checks that ask the driver, made only for copies pf_route_linear
 * found worth staging or bouncing, before anything is touched: a copy the driver would
 * reject reaches the driver and gets its own error. */
#include "route.h"
#include "staging.h"
#include "../driver/capture.h"
#include "../driver/driver.h"

/* While any capture runs, pinfast's queries and waits could invalidate it
 * (tests/gpu/probes/capture_modes.c), and the driver's own copies are
 * allowed: everything passes through.  The device side must be device
 * memory: managed and mapped host memory
 * are read by the host the moment the plain call returns.  The copy must
 * lie inside its device allocation. */
int pf_route_confirm(const struct pf_xfer *x, int debug, uint64_t mark[2]) {
    if (!x->bytes || !x->host || pf_capturing())
        return 0;
    mark[0] = pf_stamp(debug);
    CUstreamCaptureStatus cs;
    if (PF_CALL(cuStreamIsCapturing, x->stream, &cs) != CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    mark[1] = pf_stamp(debug);
    unsigned type = 0;
    int managed = 0;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *vals[2] = {&type, &managed};
    CUdeviceptr base;
    size_t size;
    if (PF_CALL(cuPointerGetAttributes, 2, attrs, vals, x->dev) != CUDA_SUCCESS ||
        type != CU_MEMORYTYPE_DEVICE || managed ||
        PF_CALL(cuMemGetAddressRange_v2, &base, &size, x->dev) != CUDA_SUCCESS)
        return 0;
    return x->dev - base <= size && x->bytes <= size - (x->dev - base);
}
