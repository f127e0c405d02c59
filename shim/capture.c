/* The capture entry points, wrapped only to count the captures under way:
 * pinfast passes every copy and pinned free through while one runs. */
#include "api.h"
#include "capture.h"

int pf_captures_;

/* The capture of stream s (0 as the per-thread flavour means that thread's
 * stream) is under way, or was invalidated and not yet ended. */
static int under_way(CUstream s, int ptsz) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = ptsz ? PF_CALL(cuStreamIsCapturing_ptsz, s, &st) : PF_CALL(cuStreamIsCapturing, s, &st);
    return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static CUresult begun(CUresult r) {
    if (r == CUDA_SUCCESS)
        __atomic_fetch_add(&pf_captures_, 1, __ATOMIC_RELEASE);
    return r;
}

#define BEGIN(sym, proto, ...)                                                  \
    do {                                                                       \
        if (!pf_driver_load())                                                 \
            return PF_PASS(sym, proto, __VA_ARGS__);                           \
        return begun(PF_PASS(sym, proto, __VA_ARGS__));                        \
    } while (0)

PF_API CUresult cuStreamBeginCapture(CUstream s) {
    BEGIN(PF_S_cuStreamBeginCapture, cuStreamBeginCapture, s);
}
PF_API CUresult cuStreamBeginCapture_ptsz(CUstream s) {
    BEGIN(PF_S_cuStreamBeginCapture_ptsz, cuStreamBeginCapture, s);
}
PF_API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m) {
    BEGIN(PF_S_cuStreamBeginCapture_v2, cuStreamBeginCapture_v2, s, m);
}
PF_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode m) {
    BEGIN(PF_S_cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2, s, m);
}
#define TO_GRAPH_PARAMS                                                        \
    (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data, size_t n, \
     CUstreamCaptureMode m)
PF_API CUresult cuStreamBeginCaptureToGraph TO_GRAPH_PARAMS {
    BEGIN(PF_S_cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, s, g, deps, data, n, m);
}
PF_API CUresult cuStreamBeginCaptureToGraph_ptsz TO_GRAPH_PARAMS {
    BEGIN(PF_S_cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, s, g, deps, data, n, m);
}

/* A capture ends whatever the call answers, if it was under way. */
static CUresult end(enum pf_symbol sym, int ptsz, CUstream s, CUgraph *g) {
    if (!pf_driver_load())
        return PF_PASS(sym, cuStreamEndCapture, s, g);
    int was = under_way(s, ptsz);
    CUresult r = PF_PASS(sym, cuStreamEndCapture, s, g);
    if (was && !under_way(s, ptsz))
        __atomic_fetch_sub(&pf_captures_, 1, __ATOMIC_RELEASE);
    return r;
}

PF_API CUresult cuStreamEndCapture(CUstream s, CUgraph *g) { return end(PF_S_cuStreamEndCapture, 0, s, g); }
PF_API CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) {
    return end(PF_S_cuStreamEndCapture_ptsz, 1, s, g);
}

CUstreamCaptureMode pf_capture_relax(void) {
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    PF_CALL(cuThreadExchangeStreamCaptureMode, &m);
    return m;
}

void pf_capture_restore(CUstreamCaptureMode mode) { PF_CALL(cuThreadExchangeStreamCaptureMode, &mode); }

void pf_capture_forked(void) { pf_captures_ = 0; }
