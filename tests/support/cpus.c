/* cpus.c - sched_getaffinity as pinfast sees it: how the tests give pinfast a
 * machine of many CPUs on a runner of two.  For pinfast's own calls,
 * PFT_CPUS=n answers that this process may run on CPUs 0..n-1, and
 * PFT_PARENT_CPUS=m that another process (its parent: a launcher's daemon)
 * may run on m (PFT_CPUS when unset); every other caller, and pinfast when
 * they are unset, get the real answer.  And open as pinfast sees it: with
 * PFT_CGROUP_ROOT=dir, pinfast's opens of /proc/self/cgroup and of files
 * under /sys/fs/cgroup open dir's copies of them (a CPU quota of the
 * test's, or none).  Linked into test_node, which exports both. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*affinity_fn)(pid_t, size_t, cpu_set_t *);

static int from_pinfast(const void *ret) {
    Dl_info info;
    return dladdr(ret, &info) && info.dli_fname && strstr(info.dli_fname, "libpinfast");
}

/* libc's own `name`, looked up once into *cache */
static void *next(const char *name, void **cache) {
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    }
    return f;
}

int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *set) {
    int self = pid == 0 || pid == getpid();
    const char *v = self ? NULL : getenv("PFT_PARENT_CPUS");
    if (!v || !*v)
        v = getenv("PFT_CPUS");
    if (v && *v && from_pinfast(__builtin_return_address(0))) {
        int n = atoi(v);
        CPU_ZERO_S(size, set);
        for (int i = 0; i < n && (size_t)i < 8 * size; i++)
            CPU_SET_S(i, size, set);
        return 0;
    }
    static void *real;
    return ((affinity_fn)next("sched_getaffinity", &real))(pid, size, set);
}

typedef int (*open_fn)(const char *, int, ...);

int open(const char *path, int flags, ...) {
    int mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
    }
    const char *root = getenv("PFT_CGROUP_ROOT");
    char moved[4096];
    if (root && *root && (!strcmp(path, "/proc/self/cgroup") || !strncmp(path, "/sys/fs/cgroup/", 15)) &&
        from_pinfast(__builtin_return_address(0)) && snprintf(moved, sizeof moved, "%s%s", root, path) < (int)sizeof moved)
        path = moved;
    static void *real;
    return ((open_fn)next("open", &real))(path, flags, mode);
}
