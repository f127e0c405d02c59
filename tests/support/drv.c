#define _GNU_SOURCE
#include "drv.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct drv_entry drv_entries[] = {
#define X(f, base, ver, T, leg, pt) { #f, #base, ver, #leg, #pt },
    DRV_LIST(X)
#undef X
};
#define NENTRIES (sizeof drv_entries / sizeof drv_entries[0])
const int drv_nentries = NENTRIES;

void *drv_libcuda(void)
{
    static void *h;
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        fprintf(stderr, "drv: dlopen libcuda.so.1: %s\n", dlerror());
    return h;
}

const char *drv_path_name(enum drv_path p)
{
    return p == DRV_GPA ? "gpa" : p == DRV_DIRECT ? "direct" : "dlsym";
}

/* sets d's entry points from p, which holds them in DRV_LIST order */
static void set_entries(struct drv *d, void *const *p)
{
    int i = 0;
#define X(f, base, ver, T, l, pt) d->f = (T)p[i++];
    DRV_LIST(X)
#undef X
}

static int load_gpa(struct drv *d, void *h)
{
    PFN_cuGetProcAddress_v12000 gpa2 = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    PFN_cuGetProcAddress_v11030 gpa1 = NULL;
    CUdriverProcAddressQueryResult st;
    d->have_gpa_v2 = gpa2 != NULL;
    if (gpa2) {
        /* what cudart does: ask the v2 entry for "cuGetProcAddress" itself */
        void *p1 = NULL, *p2 = NULL;
        if (gpa2("cuGetProcAddress", &p1, 11030, 0, &st) || !p1 ||
            gpa2("cuGetProcAddress", &p2, 12000, 0, &st) || !p2) {
            fprintf(stderr, "drv: cuGetProcAddress_v2(\"cuGetProcAddress\") failed\n");
            return -1;
        }
        gpa1 = (PFN_cuGetProcAddress_v11030)p1;
        gpa2 = (PFN_cuGetProcAddress_v12000)p2;
    } else {
        gpa1 = (PFN_cuGetProcAddress_v11030)dlsym(h, "cuGetProcAddress");
        if (!gpa1) {
            fprintf(stderr, "drv: no cuGetProcAddress in libcuda.so.1\n");
            return -1;
        }
    }
    cuuint64_t flags = d->ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
    void *p[NENTRIES] = { NULL };
    int bad = 0;
    for (size_t i = 0; i < NENTRIES; i++) {
        const struct drv_entry *e = &drv_entries[i];
        CUresult r = gpa2 ? gpa2(e->base, &p[i], e->version, flags, &st)
                          : gpa1(e->base, &p[i], e->version, flags);
        if (r || !p[i]) {
            fprintf(stderr, "drv: cuGetProcAddress(%s, %d, %llu) = %d\n", e->base, e->version,
                    (unsigned long long)flags, (int)r);
            bad = 1;
        }
    }
    set_entries(d, p);
    return bad ? -1 : 0;
}

static int load_dlsym(struct drv *d, void *h)
{
    void *p[NENTRIES];
    int bad = 0;
    d->have_gpa_v2 = dlsym(h, "cuGetProcAddress_v2") != NULL;
    for (size_t i = 0; i < NENTRIES; i++) {
        const char *name = d->ptds ? drv_entries[i].per_thread : drv_entries[i].legacy;
        p[i] = dlsym(h, name);
        if (!p[i]) {
            fprintf(stderr, "drv: dlsym(%s) failed\n", name);
            bad = 1;
        }
    }
    set_entries(d, p);
    return bad ? -1 : 0;
}

int drv_load(struct drv *d, enum drv_path path, int ptds)
{
    memset(d, 0, sizeof *d);
    d->path = path;
    d->ptds = ptds;
    void *h = drv_libcuda();
    if (!h)
        return -1;
    switch (path) {
    case DRV_GPA:    return load_gpa(d, h);
    case DRV_DLSYM:  return load_dlsym(d, h);
    case DRV_DIRECT:
        d->have_gpa_v2 = dlsym(h, "cuGetProcAddress_v2") != NULL;
        return drv_load_direct(d, ptds);
    }
    return -1;
}

int drv_load_from_env(struct drv *d)
{
    const char *p = getenv("PFT_PATH"), *f = getenv("PFT_FLAVOUR");
    enum drv_path path = DRV_GPA;
    if (p && strcmp(p, "direct") == 0)
        path = DRV_DIRECT;
    else if (p && strcmp(p, "dlsym") == 0)
        path = DRV_DLSYM;
    int ptds = f && strcmp(f, "ptds") == 0;
    printf("[ drv      ] resolution %s, %s flavour\n", drv_path_name(path), ptds ? "per-thread" : "legacy");
    return drv_load(d, path, ptds);
}

unsigned long fake_calls(const char *exported)
{
    static unsigned long (*fn)(const char *);
    if (!fn)
        *(void **)&fn = dlsym(drv_libcuda(), "fakecuda_calls");
    return fn ? fn(exported) : 0;
}

/* A function the fake exports for its tests; abort without it. */
static void *fake_fn(const char *name)
{
    void *f = dlsym(drv_libcuda(), name);
    if (!f) {
        fprintf(stderr, "the fake driver has no %s\n", name);
        abort();
    }
    return f;
}

long fake_registered_dontfork(void)
{
    static long (*fn)(void);
    if (!fn)
        *(void **)&fn = fake_fn("fakecuda_registered_dontfork");
    return fn();
}

long fake_registered(void)
{
    static long (*fn)(void);
    if (!fn)
        *(void **)&fn = fake_fn("fakecuda_registered");
    return fn() - fake_registered_dontfork();
}

void fake_register_delay(unsigned us)
{
    static void (*fn)(unsigned);
    if (!fn)
        *(void **)&fn = fake_fn("fakecuda_register_delay");
    fn(us);
}

int fake_registered_at(void *p)
{
    static int (*fn)(const void *);
    if (!fn)
        *(void **)&fn = fake_fn("fakecuda_registered_at");
    return fn(p);
}

void fake_reset(void)
{
    static void (*fn)(void);
    if (!fn)
        *(void **)&fn = dlsym(drv_libcuda(), "fakecuda_reset_calls");
    if (fn)
        fn();
}

int drv_load_direct_table(void **legacy, void **per_thread, int n);

int drv_load_direct(struct drv *d, int ptds)
{
    void *leg[256], *pt[256];
    int n = drv_load_direct_table(leg, pt, 256);
    if (n != drv_nentries || n > 256)
        return -1;
    set_entries(d, ptds ? pt : leg);
    return 0;
}

int drv_context0(const struct drv *d, CUcontext *ctx)
{
    CUdevice dev;
    return d->Init(0) || d->DeviceGet(&dev, 0) || d->DevicePrimaryCtxRetain(ctx, dev) ||
           d->CtxSetCurrent(*ctx);
}
