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

/* An event of c's for one copy: a spare one, or made (in c, made current). */
static CUresult take_event(struct pf_context *c, CUevent *ev) {
    *ev = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->nspare)
        *ev = c->spare[--c->nspare];
    pthread_mutex_unlock(&c->lock);
    if (*ev)
        return CUDA_SUCCESS;
    int pushed = pf_context_enter(c->handle);
    CUresult r = PF_CALL(cuEventCreate, ev, CU_EVENT_DISABLE_TIMING);
    pf_context_leave(pushed);
    return r;
}

/* Keeps ev for the next copy, if there is room and it did not fail. */
static void give_event(struct pf_context *c, CUevent ev, CUresult r) {
    pthread_mutex_lock(&c->lock);
    if (r == CUDA_SUCCESS && c->nspare < SPARE_EVENTS) {
        c->spare[c->nspare++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (ev)
        PF_CALL(cuEventDestroy_v2, ev);
}

/* x's DMAs, one per registration holding its bytes, between its host
 * memory and dev, on s. */
static CUresult dmas(const struct pf_xfer *x, const struct pf_hold *h, CUdeviceptr dev, CUstream s) {
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < h->n && r == CUDA_SUCCESS; i++) {
        size_t off = h->piece[i].off, len = h->piece[i].len;
        r = x->dir == PF_DIR_H2D ? PF_CALL(cuMemcpyHtoDAsync_v2, dev + off, (const char *)x->host + off, len, s)
                                 : PF_CALL(cuMemcpyDtoHAsync_v2, (char *)x->host + off, dev + off, len, s);
    }
    return r;
}

/* The DMAs and the wait for them, with an event of the stream's context. */
static CUresult direct(const struct pf_xfer *x, const struct pf_hold *h, struct pf_context *c) {
    CUevent ev;
    CUresult r = take_event(c, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    r = dmas(x, h, x->dev, x->stream);
    if (r == CUDA_SUCCESS && (r = PF_CALL(cuEventRecord, ev, x->stream)) == CUDA_SUCCESS)
        r = pf_event_await(ev);
    give_event(c, ev, r);
    return r;
}

int pf_registered_copy(const struct pf_xfer *x, int wait, CUresult *result) {
    if (x->shape) /* its host rows are pitched: staged */
        return 0;
    struct pf_context *c = pf_context_of(x->stream, 0);
    int busy = 0;
    struct pf_hold h;
    int held = !c ? 0 : wait ? pf_register_await(x->host, x->bytes, &h) : pf_register_use(x->host, x->bytes, &busy, &h);
    if (!held) /* being registered: staged, even a copy too small to stage */
        return busy ? -1 : 0;
    /* an asynchronous pageable H2D the driver buffers returns before earlier
     * work on its stream ends; waiting for the registered copy would wait
     * for that work too: such a copy is staged unless the stream is idle.
     * One that cannot be staged (`wait`) goes direct all the same: passed
     * through, it would undo the registration, which waits for every
     * stream, where this waits for its own, as the driver's would. */
    if (!wait && x->dir == PF_DIR_H2D && x->async && PF_CALL(cuStreamQuery, x->stream) != CUDA_SUCCESS) {
        pf_register_done(&h, 0);
        return -1;
    }
    *result = direct(x, &h, c);
    pf_register_done(&h, *result == CUDA_SUCCESS ? x->bytes : 0);
    return 1;
}
