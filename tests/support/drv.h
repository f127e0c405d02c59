/* drv.h - the driver entry points of a test, filled one of three ways:
 *   DRV_GPA    like cudart: dlopen("libcuda.so.1"), dlsym "cuGetProcAddress_v2",
 *              ask it for "cuGetProcAddress" (11030 and 12000), resolve every
 *              entry by base name, version and flags (0, or 2 = per-thread);
 *              falls back to the v1 cuGetProcAddress on an old driver;
 *   DRV_DIRECT the addresses of the exported symbols the binary links against
 *              (a program built with -lcuda);
 *   DRV_DLSYM  dlsym(libcuda handle, "cuMemcpyHtoD_v2") etc. (PyTorch, CuPy).
 */
#ifndef PFT_DRV_H
#define PFT_DRV_H
#include <cuda.h>
#include <cudaTypedefs.h>
#include "drv_list.h"

enum drv_path { DRV_GPA, DRV_DIRECT, DRV_DLSYM };

struct drv {
    enum drv_path path;
    int ptds;
    int have_gpa_v2;          /* the driver exports cuGetProcAddress_v2 */
#define X(f, base, ver, T, leg, pt) T f;
    DRV_LIST(X)
#undef X
};

/* one row per entry, for tests that walk them all */
struct drv_entry { const char *field, *base; int version; const char *legacy, *per_thread; };
extern const struct drv_entry drv_entries[];
extern const int drv_nentries;

/* returns 0, or -1 with a message on stderr */
int drv_load(struct drv *d, enum drv_path path, int ptds);
/* the loader used by the direct way (drv_direct.c) */
int drv_load_direct(struct drv *d, int ptds);
void *drv_libcuda(void);      /* dlopen("libcuda.so.1") handle */
const char *drv_path_name(enum drv_path p);
/* from the environment: PFT_PATH=gpa|direct|dlsym, PFT_FLAVOUR=legacy|ptds */
int drv_load_from_env(struct drv *d);
/* cuInit, then device 0's primary context made current; 0 on success. */
int drv_context0(const struct drv *d, CUcontext *ctx);

unsigned long fake_calls(const char *exported);
void fake_reset(void);
/* The fake's registrations of the program's memory (pinfast's registration
 * cache among them; not pinfast's own pinned memory, the only memory
 * registered with MADV_DONTFORK advised, engine/pinned.c): how many it
 * holds; and whether p lies in any registration (void *: a t_await
 * predicate). */
long fake_registered(void);
int fake_registered_at(void *p);
/* Those of memory advised MADV_DONTFORK: pinfast's own (slots, bounce areas). */
long fake_registered_dontfork(void);
/* Each cuMemHostRegister of the fake sleeps `us` first (0: none). */
void fake_register_delay(unsigned us);
#endif
