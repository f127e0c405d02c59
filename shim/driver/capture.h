/* Stream captures under way in the process, and pinfast's own driver calls
 * made safe beside them.  While a capture runs, the driver refuses a
 * "potentially unsafe" call (an event query, a synchronisation, a pinned
 * allocation) from a thread in the global capture mode, and the refusal
 * invalidates the capture (docs/design.md, the contract). */
#ifndef PINFAST_CAPTURE_H
#define PINFAST_CAPTURE_H

#include "cuda_api.h"

/* Captures begun and not yet ended, in any mode, on any thread. */
extern int pf_captures_;
static inline int pf_capturing(void) { return __atomic_load_n(&pf_captures_, __ATOMIC_ACQUIRE) != 0; }

/* The capture of stream s (0 as the per-thread flavour, ptsz, means that
 * thread's stream) is under way, or was invalidated and not yet ended. */
int pf_capture_under_way(CUstream s, int ptsz);

/* A capture was begun (counted when r is success; returns r), or ended. */
CUresult pf_capture_begun(CUresult r);
void pf_capture_ended(void);

/* Puts the calling thread in the relaxed capture mode, returning the mode to
 * restore: pinfast's own queries and waits then never invalidate a capture
 * that another thread begins meanwhile. */
CUstreamCaptureMode pf_capture_relax(void);
void pf_capture_restore(CUstreamCaptureMode mode);

/* In a forked child: the parent's captures are not the child's. */
void pf_capture_forked(void);

#endif
