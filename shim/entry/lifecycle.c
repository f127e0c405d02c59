/* Process events: exit writes the trace out and prints the report, fork
 * gives the child a clean slate.  Every module's hooks are in one list. */
#include "../base/message.h"
#include "../base/options.h"
#include "../driver/capture.h"
#include "../driver/driver.h"
#include "../engine/staging_processes.h"
#include "../engine/engine.h"
#include "../engine/workers.h"
#include "../memory/heap.h"
#include "../memory/hostmap.h"
#include "../memory/pending_writes.h"
#include "../memory/pool.h"
#include "../memory/register.h"
#include "../observe/callsite.h"
#include "../observe/pin_after_copy.h"
#include "../observe/observe.h"
#include "../observe/trace.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void report(void);

/* Each module's hooks.  Around fork(): `prepare` (in the parent, before; in
 * list order) takes the locks a child must not inherit half-held, `parent`
 * (after, in reverse order) gives them back, `child` (in the child, in list
 * order) gives it a clean slate: it has none of the parent's threads and
 * may not use its CUDA state.  `exit` runs in list order when the process
 * exits (the driver may be gone: no CUDA there). */
static const struct hooks {
    void (*prepare)(void), (*parent)(void), (*child)(void), (*exit)(void);
} modules[] = {
    /* the map is kept: the parent's pinned blocks are only pageable memory
     * in the child, and a copy from one passes through */
    {pf_hostmap_fork_prepare, pf_hostmap_fork_done, pf_hostmap_forked, NULL},
    {pf_counters_fork_prepare, pf_counters_fork_done, pf_counters_forked, NULL},
    {NULL, NULL, pf_engine_forked, NULL},
    {NULL, NULL, pf_capture_forked, NULL},
    {NULL, NULL, pf_pending_forked, NULL},
    {NULL, NULL, pf_workers_forked, NULL},
    {NULL, NULL, pf_workerpool_forked, NULL},
    {NULL, NULL, pf_staging_processes_forked, pf_staging_processes_exit},
    {NULL, NULL, pf_pool_forked, NULL},
    /* the heap's lock is held across fork; the child keeps every block (the
     * kernel copies registered pages for it) and no registration.
     * Registrations are undone at exit by an atexit handler, before the
     * driver's own teardown (the destructor that runs `exit` here may come
     * after it) */
    {pf_heap_fork_prepare, pf_heap_fork_done, pf_heap_fork_done, NULL},
    {pf_register_fork_prepare, pf_register_fork_done, pf_register_forked, NULL},
    {NULL, NULL, pf_callsite_reset, NULL},
    {NULL, NULL, pf_pin_after_copy_reset, NULL},
    {NULL, NULL, pf_trace_forked, pf_trace_flush},
    {NULL, NULL, NULL, report}, /* last: after the trace is out */
};
#define NMODULES (int)(sizeof modules / sizeof modules[0])

static void prepare(void) {
    for (int i = 0; i < NMODULES; i++)
        if (modules[i].prepare)
            modules[i].prepare();
}
static void parent(void) {
    for (int i = NMODULES - 1; i >= 0; i--)
        if (modules[i].parent)
            modules[i].parent();
}
static void child(void) {
    for (int i = 0; i < NMODULES; i++)
        if (modules[i].child)
            modules[i].child();
}

/* Everything else waits for the first CUDA call: a process that makes none
 * (a shell, a compiler under LD_PRELOAD) must not pay for pinfast. */
__attribute__((constructor)) static void start(void) {
    pthread_atfork(prepare, parent, child);
    pf_heap_start(); /* the program's large blocks from now on */
    if (getenv("PINFAST_HELP") && pf_options()->help)
        pf_options_describe(STDERR_FILENO);
}

/* The report, with what the engine and the pool did. */
static void report(void) {
    struct pf_engine_stats staging;
    struct pf_pool_stats pool;
    pf_engine_stats(&staging);
    pf_pool_stats(&pool);
    pf_stats_report(&staging, &pool);
}

/* Runs after main returns or exit(). */
__attribute__((destructor)) static void stop(void) {
    /* a program whose CUDA runtime found no driver never calls pinfast */
    if (!__atomic_load_n(&pf_driver_loaded, __ATOMIC_ACQUIRE) && getenv("PINFAST_LOG") && pf_options() &&
        pf_log_level() >= PF_INFO && !dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD))
        pf_msg(PF_INFO, "no CUDA driver (libcuda.so.1) was loaded in this process: nothing to do");
    for (int i = 0; i < NMODULES; i++)
        if (modules[i].exit)
            modules[i].exit();
}
