/* Process events: exit prints the report, fork gives the child a clean slate. */
#include "../driver/driver.h"
#include "../engine/engine.h"
#include "../memory/hostmap.h"
#include "../base/message.h"
#include "../memory/pool.h"
#include "../observe/trace.h"
#include "../observe/observe.h"

#include "../base/options.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void prepare(void) {
    pf_hostmap_fork_prepare();
    pf_stats_fork_prepare();
}
static void parent(void) {
    pf_stats_fork_done();
    pf_hostmap_fork_done();
}

/* The child has none of the parent's threads and may not use its CUDA state. */
static void child(void) {
    pf_hostmap_forked();
    pf_engine_forked();
    pf_pool_forked();
    pf_trace_forked();
    pf_stats_forked();
}

/* Everything else waits for the first CUDA call: a process that makes none
 * (a shell, a compiler under LD_PRELOAD) must not pay for pinfast. */
__attribute__((constructor)) static void start(void) {
    pthread_atfork(prepare, parent, child);
    if (getenv("PINFAST_HELP") && pf_options()->help)
        pf_options_describe(STDERR_FILENO);
}

/* Runs after main returns or exit(); the driver may be gone: no CUDA here. */
__attribute__((destructor)) static void stop(void) {
    /* a program whose CUDA runtime found no driver never calls pinfast */
    if (!__atomic_load_n(&pf_driver_loaded, __ATOMIC_ACQUIRE) && getenv("PINFAST_LOG") &&
        pf_options() && pf_log_level() >= PF_INFO && !dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD))
        pf_msg(PF_INFO, "no CUDA driver (libcuda.so.1) was loaded in this process: nothing to do");
    pf_trace_flush();
    struct pf_engine_stats staging;
    struct pf_pool_stats pool;
    pf_engine_stats(&staging);
    pf_pool_stats(&pool);
    pf_stats_report(&staging, &pool);
}
