/* cpus.c - sched_getaffinity as pinfast sees it: how the tests give pinfast a
 * machine of many CPUs on a runner of two.  For pinfast's own calls,
 * PFT_CPUS=n answers that this process may run on CPUs 0..n-1, and
 * PFT_PARENT_CPUS=m that another process (its parent: a launcher's daemon)
 * may run on m (PFT_CPUS when unset); every other caller, and pinfast when
 * they are unset, get the real answer.  Linked into test_node, which
 * exports it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*affinity_fn)(pid_t, size_t, cpu_set_t *);

static int from_pinfast(const void *ret) {
    Dl_info info;
    return dladdr(ret, &info) && info.dli_fname && strstr(info.dli_fname, "libpinfast");
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
    static affinity_fn real;
    affinity_fn f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (affinity_fn)dlsym(RTLD_NEXT, "sched_getaffinity");
        __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    }
    return f(pid, size, set);
}
