/* The count of captures under way, kept by the capture entry points
 * (entry/capture_entries.c), and pinfast's own calls made in relaxed mode. */
#include "capture.h"
#include "driver.h"

int pf_captures_;

int pf_capture_under_way(CUstream s, int ptsz) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = ptsz ? PF_CALL(cuStreamIsCapturing_ptsz, s, &st) : PF_CALL(cuStreamIsCapturing, s, &st);
    return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult pf_capture_begun(CUresult r) {
    if (r == CUDA_SUCCESS)
        __atomic_fetch_add(&pf_captures_, 1, __ATOMIC_RELEASE);
    return r;
}

void pf_capture_ended(void) { __atomic_fetch_sub(&pf_captures_, 1, __ATOMIC_RELEASE); }

CUstreamCaptureMode pf_capture_relax(void) {
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    PF_CALL(cuThreadExchangeStreamCaptureMode, &m);
    return m;
}

void pf_capture_restore(CUstreamCaptureMode mode) { PF_CALL(cuThreadExchangeStreamCaptureMode, &mode); }

void pf_capture_forked(void) { pf_captures_ = 0; }
