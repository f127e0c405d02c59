/* The capture entry points, made from the table (PF_CAPTURE_ENTRIES) and
 * wrapped only to count the captures under way: pinfast passes every copy
 * and pinned free through while one runs. */
#include "entry.h"
#include "../driver/capture.h"

#define BEGUN(call) \
    do { \
        if (!pf_driver_load()) \
            return call; \
        return pf_capture_begun(call); \
    } while (0)

#define WRAP_BEGIN(family, ptds, sym) \
    PF_API CUresult sym(CUstream s) { BEGUN(PF_CALL(sym, s)); }
#define WRAP_BEGIN_V2(family, ptds, sym) \
    PF_API CUresult sym(CUstream s, CUstreamCaptureMode m) { BEGUN(PF_CALL(sym, s, m)); }
#define WRAP_BEGIN_TO_GRAPH(family, ptds, sym) \
    PF_API CUresult sym(CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data, size_t n, \
                        CUstreamCaptureMode m) { \
        BEGUN(PF_CALL(sym, s, g, deps, data, n, m)); \
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

#define WRAP_END(family, ptds, sym) \
    PF_API CUresult sym(CUstream s, CUgraph *g) { return end(PF_S_##sym, ptds, s, g); }

PF_CAPTURE_ENTRIES(PF_WRAP)
