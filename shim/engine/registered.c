/* A copy through a registration of its host range: one DMA of the driver's
 * straight from or into the program's memory, no CPU copy.  From registered
 * memory the driver's copy is truly asynchronous, where the plain pageable
 * copy is not: an H2D returns once its source has been read, a D2H once its
 * data has landed.  So the copy is followed by an event, waited for before
 * returning, as the staged copy waits for its last chunk. */
#include "engine.h"
#include "staging.h"
#include "../driver/driver.h"
#include "../memory/register.h"

/* The DMA and the wait for it, with an event of the stream's context. */
static CUresult direct(const struct pf_xfer *x, CUcontext ctx) {
    CUcontext cur = NULL;
    int pushed = PF_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur != ctx &&
                 PF_CALL(cuCtxPushCurrent_v2, ctx) == CUDA_SUCCESS;
    CUevent ev;
    CUresult r = PF_CALL(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING);
    if (pushed)
        PF_CALL(cuCtxPopCurrent_v2, &cur);
    if (r != CUDA_SUCCESS)
        return r;
    r = x->dir == PF_DIR_H2D ? PF_CALL(cuMemcpyHtoDAsync_v2, x->dev, x->host, x->bytes, x->stream)
                             : PF_CALL(cuMemcpyDtoHAsync_v2, x->host, x->dev, x->bytes, x->stream);
    if (r == CUDA_SUCCESS && (r = PF_CALL(cuEventRecord, ev, x->stream)) == CUDA_SUCCESS)
        r = pf_event_await(ev);
    PF_CALL(cuEventDestroy_v2, ev);
    return r;
}

int pf_registered_copy(const struct pf_xfer *x, CUresult *result) {
    if (x->shape) /* its host rows are pitched: staged */
        return 0;
    struct pf_context *c = pf_context_of(x->stream, 0);
    int busy = 0;
    struct pf_reg *g = c ? pf_register_use(x->host, x->bytes, &busy) : NULL;
    if (!g) /* being registered: staged, even a copy too small to stage */
        return busy ? -1 : 0;
    /* an asynchronous pageable H2D the driver buffers returns before earlier
     * work on its stream ends; waiting for the registered copy would wait
     * for that work too: such a copy is staged unless the stream is idle */
    if (x->dir == PF_DIR_H2D && x->async && PF_CALL(cuStreamQuery, x->stream) != CUDA_SUCCESS) {
        pf_register_done(g, 0);
        return -1;
    }
    *result = direct(x, c->handle);
    pf_register_done(g, *result == CUDA_SUCCESS ? x->bytes : 0);
    return 1;
}
