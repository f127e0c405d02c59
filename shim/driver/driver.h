/* The real driver: libcuda's own functions, found lazily and thread-safely. */
#ifndef PINFAST_DRIVER_H
#define PINFAST_DRIVER_H

#include "cuda_api.h"
#include "symbols.h"

/* glibc's dlsym, never the shim's own (which would recurse). */
typedef void *(*pf_dlsym_t)(void *, const char *);
pf_dlsym_t pf_dlsym_fn(void);
void *pf_real_dlsym(void *handle, const char *name);

/* Real function of each symbol, NULL when the driver lacks it. */
extern void *pf_real_table[PF_NSYMBOLS];

/* Resolves the table once; returns 0 when no driver could be found. */
extern int pf_driver_loaded;
int pf_driver_load_once(void);
static inline int pf_driver_load(void) {
    return __builtin_expect(__atomic_load_n(&pf_driver_loaded, __ATOMIC_ACQUIRE), 1) || pf_driver_load_once();
}

/* Calls the real function of symbol `sym`, typed like the function `proto`
 * (the legacy form of a per-thread-stream symbol, say); answers
 * CUDA_ERROR_NOT_FOUND when the driver lacks it. */
#define PF_PASS(sym, proto, ...) \
    (pf_real_table[sym] ? ((__typeof__(&proto))pf_real_table[sym])(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)

/* Calls the real function of a driver symbol by name. */
#define PF_CALL(name, ...) PF_PASS(PF_S_##name, name, __VA_ARGS__)

/* The calling thread's context and its unique id (never reused, unlike the
 * handle); 0 when there is none. */
int pf_current_context(CUcontext *ctx, unsigned long long *id);

/* A context's unique id; a driver without cuCtxGetId (before 12.0) gives
 * the handle, which pinfast forgets when the context is destroyed. */
int pf_context_id(CUcontext ctx, unsigned long long *id);

#endif
