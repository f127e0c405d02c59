#include "driver.h"
#include "../base/message.h"
#include "../base/options.h"

#include <dlfcn.h>
#include <pthread.h>

void *pf_real_table[PF_NSYMBOLS];

#define PF_NAME_(name) #name,
#define PF_NAME_WRAPPED_(family, opens, shape, ptds, name) #name,
static const char *const names[PF_NSYMBOLS] = {PF_WRAPPED(PF_NAME_WRAPPED_)[PF_NWRAPPED] = PF_INTERNAL(PF_NAME_)};

static void *no_dlsym(void *handle, const char *name) {
    (void)handle, (void)name;
    return NULL;
}

__attribute__((no_sanitize("address", "thread", "undefined"))) pf_dlsym_t pf_dlsym_fn(void) {
    static pf_dlsym_t real;
    pf_dlsym_t f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!f) {
        /* glibc 2.34 moved dlsym into libc; older ones have only 2.2.5 */
        f = (pf_dlsym_t)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f)
            f = (pf_dlsym_t)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        if (!f)
            f = no_dlsym;
        __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    }
    return f;
}

__attribute__((no_sanitize("address", "thread", "undefined"))) void *pf_real_dlsym(void *handle, const char *name) {
    return pf_dlsym_fn()(handle, name);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
int pf_driver_loaded;

static void load(void) {
    /* the first CUDA call: the one moment a bad setting is worth a word */
    pf_options_warn();
    /* The program has normally loaded the driver already (its call is what
     * brought us here); otherwise load it privately. */
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        pf_msg(PF_WARNING, "no CUDA driver (libcuda.so.1) found; stepping aside");
        return;
    }
    for (int i = 0; i < PF_NSYMBOLS; i++)
        if (names[i])
            pf_real_table[i] = pf_real_dlsym(h, names[i]);
    __atomic_store_n(&pf_driver_loaded, 1, __ATOMIC_RELEASE);
}

int pf_driver_load_once(void) {
    pthread_once(&once, load);
    return __atomic_load_n(&pf_driver_loaded, __ATOMIC_ACQUIRE);
}

static int warned_id;

int pf_context_id(CUcontext ctx, unsigned long long *id) {
    if (pf_real_table[PF_S_cuCtxGetId])
        return PF_CALL(cuCtxGetId, ctx, id) == CUDA_SUCCESS;
    pf_msg_once(warned_id, PF_INFO, "the driver has no cuCtxGetId: contexts are told apart by handle");
    *id = (uintptr_t)ctx;
    return 1;
}

int pf_current_context(CUcontext *ctx, unsigned long long *id) {
    *ctx = NULL;
    return PF_CALL(cuCtxGetCurrent, ctx) == CUDA_SUCCESS && *ctx && pf_context_id(*ctx, id);
}
