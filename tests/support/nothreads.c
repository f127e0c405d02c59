/* nothreads.c - pthread_create failing for pinfast's own threads: how the
 * tests make "thread creation fails" happen.  PFT_NO_THREADS=k lets the
 * first k threads pinfast asks for start and fails the rest with EAGAIN;
 * every other caller (the program, the driver) gets its threads as usual.
 * Linked into test_resources, which exports it, on the fake driver; built
 * as a library preloaded ahead of pinfast on the GPU (tests/gpu/safety.sh). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* The next pthread_create after this one: a sanitizer's, when its runtime
 * is loaded (a thread created behind ThreadSanitizer's back crashes it), else
 * libc's.  pinfast's dlsym passes RTLD_NEXT lookups on as the caller's. */
static create_fn real_create(void) {
    static create_fn real;
    create_fn f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    }
    return f;
}

static int from_pinfast(const void *ret) {
    Dl_info info;
    return dladdr(ret, &info) && info.dli_fname && strstr(info.dli_fname, "libpinfast");
}

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    static int granted;
    const char *limit = getenv("PFT_NO_THREADS");
    if (limit && *limit && from_pinfast(__builtin_return_address(0)) &&
        __atomic_fetch_add(&granted, 1, __ATOMIC_RELAXED) >= atoi(limit))
        return EAGAIN;
    return real_create()(th, attr, fn, arg);
}
