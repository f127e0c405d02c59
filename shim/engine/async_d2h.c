/* Landings: asynchronous pageable D2H chunks copied out in stream callbacks. */
#include "staging.h"
#include "../driver/driver.h"
#include "../memory/pending_writes.h"
#include "../base/libc.h"

#include <stdlib.h>

/* An asynchronous pageable D2H (PINFAST_ASYNC_D2H): each chunk lands in a
 * slot on the caller's stream, and a stream callback moves it into the
 * program's memory when the stream gets there, so the call returns at once,
 * as it does for pinned memory.  cuStreamAddCallback, not cuLaunchHostFunc:
 * its callback runs even after a device error, so the slot always comes back. */
struct landing {
    struct pf_context *c;
    struct pf_slot *s;
    int range; /* the pending host range */
    char *dst;
    size_t len;
    enum pf_host_copy kind;
    struct pf_task tasks[PF_MAX_SPLIT];
};

static void CUDA_CB landed(CUstream stream, CUresult status, void *arg) {
    (void)stream;
    struct landing *l = arg;
    if (status == CUDA_SUCCESS) {
        int n = pf_host_tasks_cut(l->tasks, l->dst, l->s->mem, l->len, l->kind, pf_task_size(l->len), NULL, 0);
        for (int i = 0; i < n; i++)
            pf_task_wait(&l->tasks[i]);
    }
    pf_pending_release(l->range);
    struct pf_context *c = l->c;
    pthread_mutex_lock(&c->lock);
    l->s->fenced = 0; /* whatever the fence waited for came before this DMA */
    l->s->busy = 0;
    c->landing--;
    pthread_mutex_unlock(&c->lock);
    pf_libc_free(l);
}

/* A free slot for a landing, if landings hold fewer than half the slots:
 * the other half stays for the copies of other streams, which must never
 * wait on this stream's progress. */
static struct pf_slot *take_landing_slot(struct pf_context *c, uintptr_t who) {
    struct pf_slot *s = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->landing < (c->nslots + 1) / 2 && (s = pf_slot_take(c, who)))
        c->landing++;
    pthread_mutex_unlock(&c->lock);
    return s;
}

static void drop_landing_slot(struct pf_context *c, struct pf_slot *s) {
    struct pf_chunk h = {.s = s};
    pthread_mutex_lock(&c->lock);
    c->landing--;
    pthread_mutex_unlock(&c->lock);
    pf_slots_release(c, &h, 1);
}

/* Issues landings for a prefix of the copy; returns its length.  The rest
 * (no slot free under the cap, the range table full, no memory) is staged
 * synchronously by the caller. */
size_t pf_async_d2h_land(const struct pf_xfer *x, struct pf_context *c, enum pf_host_copy kind, CUresult *err) {
    int range = pf_pending_begin(x->host, x->bytes);
    if (range < 0)
        return 0;
    size_t off = 0;
    while (off < x->bytes && !*err) {
        struct pf_slot *s = take_landing_slot(c, pf_fence_owner(x->stream));
        if (!s)
            break;
        struct landing *l = pf_libc_aligned_alloc(_Alignof(struct landing), sizeof *l);
        if (!l) {
            drop_landing_slot(c, s);
            break;
        }
        size_t len = x->bytes - off < c->slot_size ? x->bytes - off : c->slot_size;
        *l = (struct landing){.c = c, .s = s, .range = range, .dst = (char *)x->host + off, .len = len, .kind = kind};
        CUresult r = s->fenced ? PF_CALL(cuStreamWaitEvent, x->stream, s->ev, 0) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS)
            r = PF_CALL(cuMemcpyDtoHAsync_v2, s->mem, x->dev + off, len, x->stream);
        if (r != CUDA_SUCCESS) {
            *err = r;
        } else {
            pf_pending_hold(range);
            /* from here the callback owns l (and may have freed it already) */
            if (PF_CALL(cuStreamAddCallback, x->stream, landed, l, 0) == CUDA_SUCCESS) {
                off += len;
                continue;
            }
            /* no callback: let the DMA finish; the caller redoes this chunk */
            pf_pending_release(range);
            *err = PF_CALL(cuStreamSynchronize, x->stream);
        }
        pf_libc_free(l);
        drop_landing_slot(c, s);
        break;
    }
    pf_pending_release(range);
    return off;
}
