/* The entry points that destroy contexts: what pinfast holds in a context
 * (staging slots, pooled blocks, their host-map entries, registrations)
 * goes with it, so that its table never fills with dead contexts and new
 * memory at a freed address is never taken for pinfast's.  And the one
 * where the program waits for its whole context: there, and only there
 * during the run, pinfast gives back what needs a device-wide wait
 * (registrations, pooled pinned blocks).  Made from the table
 * (PF_CONTEXT_ENTRIES). */
#include "entry.h"
#include "../engine/engine.h"
#include "../memory/pool.h"
#include "../memory/register.h"
#include "../driver/capture.h"

/* By handle: a destroyed context's handle may be passed again by mistake,
 * and asking the driver about it can crash; a live context's handle is
 * unique, and pinfast forgets each one as it is destroyed. */
static void gone(CUcontext ctx) {
    pf_engine_context_gone(ctx);
    pf_pool_context_gone(ctx);
    pf_register_context_gone(ctx);
}

static int primary_active(CUdevice dev) {
    unsigned flags;
    int active = 0;
    return PF_CALL(cuDevicePrimaryCtxGetState, dev, &flags, &active) == CUDA_SUCCESS && active;
}

/* dev's primary context, if it exists: retained and released again, which
 * leaves its count as it was. */
static int primary_handle(CUdevice dev, CUcontext *p) {
    if (!primary_active(dev) || PF_CALL(cuDevicePrimaryCtxRetain, p, dev) != CUDA_SUCCESS)
        return 0;
    PF_CALL(cuDevicePrimaryCtxRelease_v2, dev);
    return 1;
}

/* A release destroys the primary context only when it drops the last hold. */
static CUresult primary(enum pf_symbol sym, CUdevice dev, int reset) {
    CUcontext p;
    if (!pf_enter() || !primary_handle(dev, &p))
        return PF_PASS(sym, cuDevicePrimaryCtxRelease_v2, dev);
    CUresult r = PF_PASS(sym, cuDevicePrimaryCtxRelease_v2, dev);
    if (r == CUDA_SUCCESS && (reset || !primary_active(dev)))
        gone(p);
    return r;
}

static CUresult destroy(enum pf_symbol sym, CUcontext ctx) {
    if (!pf_enter() || !ctx)
        return PF_PASS(sym, cuCtxDestroy_v2, ctx);
    CUresult r = PF_PASS(sym, cuCtxDestroy_v2, ctx);
    if (r == CUDA_SUCCESS)
        gone(ctx);
    return r;
}

/* After the program's own wait: undoing a registration or freeing a pinned
 * block waits for the device, which the program has just done; not during
 * a capture (the wait itself invalidates it, and pinfast adds nothing). */
static CUresult synchronize(enum pf_symbol sym) {
    CUresult r = PF_PASS(sym, cuCtxSynchronize);
    if (r == CUDA_SUCCESS && pf_enter() && !pf_capturing()) {
        pf_register_settle();
        pf_pool_settle();
    }
    return r;
}

#define WRAP_CTX_SYNC(family, ptds, sym) \
    PF_API CUresult sym(void) { return synchronize(PF_S_##sym); }
#define WRAP_PRIMARY_RELEASE(family, ptds, sym) \
    PF_API CUresult sym(CUdevice dev) { return primary(PF_S_##sym, dev, 0); }
#define WRAP_PRIMARY_RESET(family, ptds, sym) \
    PF_API CUresult sym(CUdevice dev) { return primary(PF_S_##sym, dev, 1); }
#define WRAP_CTX_DESTROY(family, ptds, sym) \
    PF_API CUresult sym(CUcontext ctx) { return destroy(PF_S_##sym, ctx); }

PF_CONTEXT_ENTRIES(PF_WRAP)
