/* Staging what pinfast can of a batch of copies, whatever its ABI: every
 * copy checked first, the ones pinfast does not take passed to the driver
 * as one smaller batch, then the others staged or bounced. */
#include "batch.h"
#include "../driver/capture.h"
#include "../engine/engine.h"
#include "../memory/register.h"
#include "../base/libc.h"

#include <stdint.h>
#include <stdlib.h>

int pf_batch_guard_all(const struct batch_abi *b, size_t n, int valid) {
    int held = 0;
    for (size_t i = 0; valid && pf_register_watching() && i < n; i++)
        held |= b->guard(b->args, i);
    return held;
}

/* The driver's call for idx[0..k): its failIdx mapped back to the batch's. */
static CUresult batch_driver(const struct batch_abi *b, void *scratch, const size_t *idx, size_t k, size_t *fail) {
    size_t f = fail ? *fail : 0;
    int held = 0;
    for (size_t j = 0; j < k && pf_register_watching(); j++)
        held |= b->guard(b->args, idx[j]);
    CUresult r = b->part(b->args, scratch, idx, k, fail ? &f : NULL);
    if (held)
        r = pf_held_await(r, b->stream, 1);
    if (fail)
        *fail = r && f < k ? idx[f] : f;
    return r;
}

int pf_batch_refused(struct pf_copy_seen *c, const struct batch_abi *b, size_t n, size_t *fail, int v1) {
    size_t at = 0;
    CUstreamCaptureStatus cs;
    if (!b->overrun || !pf_register_watching() || b->stream == CU_STREAM_LEGACY || (v1 && !fail))
        return 0;
    while (at < n && !b->overrun(b->args, at))
        at++;
    for (size_t i = 0; at < n && b->checked && i < n; i++)
        if (!b->checked(b->args, i))
            return 0;
    if (at == n || pf_capturing() || PF_CALL(cuStreamIsCapturing, b->stream, &cs) != CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    size_t *idx = pf_libc_malloc((at + 1) * sizeof *idx);
    void *scratch = pf_libc_malloc((at + 1) * b->scratch_bytes);
    int done = idx && scratch;
    if (done) {
        for (size_t i = 0; i < at; i++)
            idx[i] = i;
        c->result = at ? batch_driver(b, scratch, idx, at, fail) : CUDA_SUCCESS;
        if (c->result == CUDA_SUCCESS) {
            c->result = CUDA_ERROR_INVALID_VALUE;
            if (fail)
                *fail = b->checked ? SIZE_MAX : at;
        }
    }
    pf_libc_free(idx);
    pf_libc_free(scratch);
    return done;
}

int pf_batch_stage(struct pf_copy_seen *c, struct batch_abi *b, size_t n, size_t *fail, int v1) {
    CUstreamCaptureStatus cs;
    if (!pf_options()->stage || b->stream == CU_STREAM_LEGACY || (v1 && !fail) || pf_capturing() ||
        PF_CALL(cuStreamIsCapturing, b->stream, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    struct batch_copy *bc = pf_libc_calloc(n, sizeof *bc);
    size_t *idx = pf_libc_malloc(2 * n * sizeof *idx);
    void *scratch = pf_libc_malloc(n * b->scratch_bytes);
    size_t nd = 0, ns = 0, small = 0;
    int valid = 1;
    for (size_t i = 0; bc && idx && scratch && valid && i < n; i++) {
        uint64_t mark[2];
        bc[i].x.stream = b->stream;
        bc[i].x.async = 1;
        int k = b->stageable(b->args, i, &bc[i]);
        valid = k != COPY_INVALID;
        if (k == COPY_TAKE && pf_route_confirm(&bc[i].x, 0, mark)) {
            small = ns++ && bc[small].x.bytes <= bc[i].x.bytes ? small : i;
        } else {
            bc[i].to = TO_DRIVER;
            idx[nd++] = i;
        }
    }
    int took = bc && idx && scratch && valid && ns;
    if (took) {
        if (v1 && !nd) {
            bc[small].to = TO_DRIVER;
            idx[nd++] = small;
        }
        c->result = nd ? batch_driver(b, scratch, idx, nd, fail) : CUDA_SUCCESS;
        size_t *declined = idx + n, nk = 0;
        for (size_t i = 0; i < n && !c->result; i++) {
            CUresult r = CUDA_SUCCESS;
            const struct pf_timeline *chunks;
            if (bc[i].to == TO_DRIVER)
                continue;
            int path = bc[i].to == TO_BOUNCE ? (pf_engine_bounce(&bc[i].x, &r) ? PF_PATH_BOUNCED : 0)
                                             : pf_engine_copy(&bc[i].x, &r, &chunks);
            if (!path) {
                declined[nk++] = i;
                continue;
            }
            if (c->path != PF_PATH_STAGED) /* staged if any copy was, else the last copy's way */
                c->path = (enum pf_path)path;
            c->result = r;
            if (r && fail) /* a staging error is the copy's */
                *fail = i;
        }
        if (!c->result && nk)
            c->result = batch_driver(b, scratch, declined, nk, fail);
    }
    pf_libc_free(bc);
    pf_libc_free(idx);
    pf_libc_free(scratch);
    return took;
}
