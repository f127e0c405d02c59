/* fake_ctx.c - contexts: primary contexts, created contexts, the per-thread
 * context stack.  Context structs are never freed (a destroyed context is
 * only marked dead) so that a stale handle is detected, not dereferenced
 * after free.  Like the real driver, a primary context is destroyed at its
 * last release or by a reset, and the next retain makes a new one, with a
 * new id.  A destroyed context takes its streams, events and memory with it
 * (pinned memory included: its pointers become invalid). */
#define _GNU_SOURCE
#include "fake.h"

#include <stdlib.h>

#define MAX_DEV 16
#define STACK_DEPTH 32

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_ctx **all_ctx;   /* every context ever made, dead ones too */
static int n_ctx, cap_ctx;
static pthread_mutex_t prim_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_ctx *primary[MAX_DEV];    /* under prim_lock */
static unsigned primary_flags[MAX_DEV];      /* under prim_lock */
static unsigned long long next_id = 1;

static __thread struct fake_ctx *stack[STACK_DEPTH];
static __thread int depth;

static struct fake_ctx *ctx_new(int dev, int is_primary, unsigned flags)
{
    struct fake_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->magic = FAKE_CTX_MAGIC;
    c->dev = dev;
    c->primary = is_primary;
    c->flags = flags;
    atomic_store(&c->alive, 1);
    pthread_mutex_lock(&ctx_lock);
    if (n_ctx == cap_ctx) {
        int cap = cap_ctx ? 2 * cap_ctx : 64;
        struct fake_ctx **t = realloc(all_ctx, (size_t)cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&ctx_lock);
            free(c);
            return NULL;
        }
        all_ctx = t;
        cap_ctx = cap;
    }
    c->id = next_id++;
    all_ctx[n_ctx++] = c;
    pthread_mutex_unlock(&ctx_lock);
    c->legacy = fake_stream_new(c, STREAM_LEGACY, 0, 0);
    return c;
}

int fake_ctx_valid(struct fake_ctx *c)
{
    int ok = 0;
    pthread_mutex_lock(&ctx_lock);
    for (int i = 0; i < n_ctx; i++)
        if (all_ctx[i] == c)
            ok = atomic_load(&c->alive);
    pthread_mutex_unlock(&ctx_lock);
    return ok;
}

struct fake_ctx *fake_ctx_current(void)
{
    return depth > 0 ? stack[depth - 1] : NULL;
}

CUresult fake_ctx_require(struct fake_ctx **out)
{
    FAKE_CHECK_INIT();
    struct fake_ctx *c = fake_ctx_current();
    if (!c || !atomic_load(&c->alive))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

static int check_dev(CUdevice dev)
{
    return dev >= 0 && dev < fake_ndevices() && dev < MAX_DEV;
}

/* dead first, so that no new work reaches it, then its queued work runs
 * before what it owns goes */
static void ctx_end(struct fake_ctx *c)
{
    atomic_store(&c->alive, 0);
    fake_ctx_sync(c);
    fake_stream_ctx_destroyed(c);
    fake_mem_ctx_destroyed(c);
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&prim_lock);
    if (!primary[dev])
        primary[dev] = ctx_new(dev, 1, primary_flags[dev]);
    struct fake_ctx *c = primary[dev];
    if (c)
        c->refs++;
    pthread_mutex_unlock(&prim_lock);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

/* The last release destroys the primary context (the real driver's
 * "primary active 0 after the last release"). */
static CUresult primary_release(CUdevice dev)
{
    FAKE_CHECK_INIT();
    if (!check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&prim_lock);
    struct fake_ctx *c = primary[dev];
    int last = c && --c->refs == 0;
    if (last) {
        primary[dev] = NULL;
        primary_flags[dev] = 0;
    }
    pthread_mutex_unlock(&prim_lock);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (last)
        ctx_end(c);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    FAKE_ENTER();
    return primary_release(dev);
}

FAKE_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    FAKE_ENTER();
    return primary_release(dev);
}

/* destroys the primary context now, whatever its retain count */
static CUresult primary_reset(CUdevice dev)
{
    FAKE_CHECK_INIT();
    if (!check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&prim_lock);
    struct fake_ctx *c = primary[dev];
    primary[dev] = NULL;
    primary_flags[dev] = 0;
    pthread_mutex_unlock(&prim_lock);
    if (c)
        ctx_end(c);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    FAKE_ENTER();
    return primary_reset(dev);
}

FAKE_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    FAKE_ENTER();
    return primary_reset(dev);
}

FAKE_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (!check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&prim_lock);
    *active = primary[dev] != NULL;     /* it exists only while retained */
    *flags = primary_flags[dev];
    pthread_mutex_unlock(&prim_lock);
    return CUDA_SUCCESS;
}

/* The primary context's flags, for the one to come and (as the real
 * driver does since CUDA 11) the one active now; they last while it does
 * (the real driver answers 0 again once it is gone:
 * tests/gpu/probes/probe_ctx_flags.c). */
static CUresult primary_set_flags(CUdevice dev, unsigned flags)
{
    FAKE_CHECK_INIT();
    if (!check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&prim_lock);
    primary_flags[dev] = flags;
    if (primary[dev])
        primary[dev]->flags = flags;
    pthread_mutex_unlock(&prim_lock);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    FAKE_ENTER();
    return primary_set_flags(dev, flags);
}

FAKE_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    FAKE_ENTER();
    return primary_set_flags(dev, flags);
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    FAKE_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!check_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (depth == STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fake_ctx *c = ctx_new(dev, 0, flags);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    stack[depth++] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FAKE_ENTER();
    return ctx_create(pctx, flags, dev);
}

FAKE_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                 unsigned int flags, CUdevice dev)
{
    FAKE_ENTER();
    (void)ctxCreateParams;
    return ctx_create(pctx, flags, dev);
}

/* The current context's flags; a primary context's with CU_CTX_MAP_HOST,
 * as the real driver answers (tests/gpu/probes/probe_ctx_flags.c). */
FAKE_API CUresult cuCtxGetFlags(unsigned int *flags)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = c->flags | (c->primary ? CU_CTX_MAP_HOST : 0);
    return CUDA_SUCCESS;
}

/* The current context's; a primary context's device keeps the flags
 * cuDevicePrimaryCtxGetState answers. */
FAKE_API CUresult cuCtxSetFlags(unsigned int flags)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    pthread_mutex_lock(&prim_lock);
    c->flags = flags;
    pthread_mutex_unlock(&prim_lock);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    struct fake_ctx *c = (struct fake_ctx *)ctx;
    if (!ctx || !fake_ctx_valid(c) || c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_end(c);
    /* pop it from the calling thread's stack, like the real driver */
    if (depth > 0 && stack[depth - 1] == c)
        depth--;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)fake_ctx_current();
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    struct fake_ctx *c = (struct fake_ctx *)ctx;
    if (!c) {                    /* unbind: drop the top of the stack */
        if (depth > 0)
            depth--;
        return CUDA_SUCCESS;
    }
    if (!fake_ctx_valid(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == 0)
        depth = 1;
    stack[depth - 1] = c;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    struct fake_ctx *c = (struct fake_ctx *)ctx;
    if (!c || !fake_ctx_valid(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    stack[depth++] = c;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fake_ctx *c = stack[--depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult ctx_get_device(CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    *device = c->dev;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *device)
{
    FAKE_ENTER();
    return ctx_get_device(device);
}

FAKE_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    FAKE_ENTER();
    if (!ctx)
        return ctx_get_device(device);
    FAKE_CHECK_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fake_ctx_valid((struct fake_ctx *)ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = ((struct fake_ctx *)ctx)->dev;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_ctx *c = (struct fake_ctx *)ctx;
    if (!c) {
        CUresult r = fake_ctx_require(&c);
        if (r)
            return r;
    } else if (!fake_ctx_valid(c)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *ctxId = c->id;
    return CUDA_SUCCESS;
}

/* prohibited, whatever the capture modes, while a capture is under way in c */
static CUresult ctx_sync(struct fake_ctx *c)
{
    CUresult r = fake_capture_prohibit(c);
    if (r)
        return r;
    fake_ctx_sync(c);
    return CUDA_SUCCESS;
}

static CUresult ctx_sync_current(void)
{
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    return r ? r : ctx_sync(c);
}

FAKE_API CUresult cuCtxSynchronize(void)
{
    FAKE_ENTER();
    return ctx_sync_current();
}

FAKE_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    FAKE_ENTER();
    if (!ctx)
        return ctx_sync_current();
    FAKE_CHECK_INIT();
    if (!fake_ctx_valid((struct fake_ctx *)ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return ctx_sync((struct fake_ctx *)ctx);
}
