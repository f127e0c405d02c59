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
int pf_driver_load(void);

/* Typed pointer to the real function of a driver symbol. */
#define PF_REAL(name) ((__typeof__(&name))pf_real_table[PF_S_##name])

/* Calls the real function; CUDA_ERROR_NOT_FOUND when the driver lacks it. */
#define PF_CALL(name, ...)                                                     \
    (PF_REAL(name) ? PF_REAL(name)(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)

/* Exported name of a symbol, for messages. */
const char *pf_symbol_name(int sym);

#endif
