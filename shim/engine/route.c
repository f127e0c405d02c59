/* The checks that ask the driver, made only for copies pf_route_linear
 * found worth staging or bouncing, before anything is touched: a copy the driver would
 * reject reaches the driver and gets its own error. */
#include "route.h"
#include "staging.h"
#include "../driver/capture.h"
#include "../driver/driver.h"

/* Mappings a device range may be made of (cuMemCreate + cuMemMap:
 * PyTorch's expandable segments map 2 or 20 MiB at a time).  A step is four
 * driver calls against at least 2 MiB (the mapping granularity) of copy. */
#define MAX_MAPPINGS 1024

/* A mapping of cuMemMap: the driver's copies run on from one into the next,
 * where it refuses one running past an allocation of cuMemAlloc. */
static int mapped(CUdeviceptr p) {
    CUmemGenericAllocationHandle h;
    if (PF_CALL(cuMemRetainAllocationHandle, &h, (void *)p) != CUDA_SUCCESS)
        return 0;
    PF_CALL(cuMemRelease, h);
    return 1;
}

/* The device side [dev, dev + span) lies in device memory of one device:
 * one allocation, or mappings laid end to end, each asked on its own
 * (cuMemGetAddressRange answers a mapping's own range).  Managed and mapped
 * host memory are not device memory: the host reads them the moment the
 * plain call returns. */
static int device_range(CUdeviceptr dev, size_t span) {
    CUdeviceptr at = dev, end;
    if (__builtin_add_overflow(dev, span, &end))
        return 0;
    int first = -1;
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        unsigned type = 0;
        int managed = 0, ordinal = -1;
        CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
        void *vals[3] = {&type, &managed, &ordinal};
        CUdeviceptr base;
        size_t size;
        if (PF_CALL(cuPointerGetAttributes, 3, attrs, vals, at) != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE ||
            managed || (i && ordinal != first) || PF_CALL(cuMemGetAddressRange_v2, &base, &size, at) != CUDA_SUCCESS ||
            at - base >= size)
            return 0;
        first = ordinal;
        if (end - base <= size && !i) /* one allocation */
            return 1;
        if (!mapped(at))
            return 0;
        if (end - base <= size)
            return 1;
        at = base + size;
    }
    return 0;
}

int pf_route_device_range(CUdeviceptr dev, size_t span) { return device_range(dev, span); }

/* While any capture runs, pinfast's queries and waits could invalidate it
 * (tests/gpu/probes/capture_modes.c), and the driver's own copies are
 * allowed: everything passes through.  The device side must be device
 * memory (device_range), unless it is an array the shape checked. */
int pf_route_confirm(const struct pf_xfer *x, int debug, uint64_t mark[2]) {
    if (!x->bytes || !x->host || pf_capturing())
        return 0;
    mark[0] = pf_stamp(debug);
    CUstreamCaptureStatus cs;
    if (PF_CALL(cuStreamIsCapturing, x->stream, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    mark[1] = pf_stamp(debug);
    if (x->shape && x->shape->array)
        return 1;
    return device_range(x->dev, x->shape ? x->shape->dev_span : x->bytes);
}
