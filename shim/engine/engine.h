/* The staging engine: pageable<->device copies through pinned slots, cut
 * into chunks whose host copies (worker threads) overlap their DMA. */
#ifndef PINFAST_ENGINE_H
#define PINFAST_ENGINE_H

#include "../driver/cuda_api.h"
#include "../base/types.h"

struct pf_xfer {
    enum pf_dir dir;    /* PF_DIR_H2D or PF_DIR_D2H */
    CUdeviceptr dev;
    void *host;         /* pageable */
    size_t bytes;
    CUstream stream;    /* explicit: CU_STREAM_LEGACY or CU_STREAM_PER_THREAD for 0 */
    int async;          /* the *Async form: no stream synchronisation before an H2D */
};

/* Stages a copy pf_route_linear (route.h) found worth staging, or copies
 * it through a registration of the host range (registered.c), and returns
 * the path it took (PF_PATH_STAGED, PF_PATH_REGISTERED) with the call's result in *result and, for a Chrome trace, its chunks'
 * times in *chunks (this thread's until its next copy; else NULL), or
 * returns 0 having done nothing,
 * when the copy must pass through after all (pf_route_confirm said so: a
 * capture, a pointer the driver would reject; or no pinned memory). */
int pf_engine_copy(const struct pf_xfer *x, CUresult *result, const struct pf_timeline **chunks);

void pf_engine_stats(struct pf_engine_stats *out);

/* The copy through a registration of its host range (memory/register.h),
 * as host-synchronous as the plain pageable copy; 0 when the range is not
 * registered (the copy is staged). */
int pf_registered_copy(const struct pf_xfer *x, CUresult *result);

/* The context was destroyed: its slots went with it. */
void pf_engine_context_gone(CUcontext ctx);

/* In a forked child: no usable CUDA state (its contexts and their slots). */
void pf_engine_forked(void);

#endif
