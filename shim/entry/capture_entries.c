/* The capture entry points, wrapped only to count the captures under way:
 * pinfast passes every copy and pinned free through while one runs. */
#include "entry.h"
#include "../driver/capture.h"

#define BEGIN(sym, proto, ...)                                                  \
    do {                                                                       \
        if (!pf_driver_load())                                                 \
            return PF_PASS(sym, proto, __VA_ARGS__);                           \
        return pf_capture_begun(PF_PASS(sym, proto, __VA_ARGS__));             \
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
    int was = pf_capture_under_way(s, ptsz);
    CUresult r = PF_PASS(sym, cuStreamEndCapture, s, g);
    if (was && !pf_capture_under_way(s, ptsz))
        pf_capture_ended();
    return r;
}

PF_API CUresult cuStreamEndCapture(CUstream s, CUgraph *g) { return end(PF_S_cuStreamEndCapture, 0, s, g); }
PF_API CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) {
    return end(PF_S_cuStreamEndCapture_ptsz, 1, s, g);
}
