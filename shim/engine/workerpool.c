/* The size of the worker pool: threads started as contexts come to stage,
 * and how many may be awake at once, the CPUs shared out with the other
 * processes staging on this machine (cpushare.c). */
#include "workers.h"
#include "cpushare.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../base/signals.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

static int sharing = 1;    /* the processes the budget was shared among */
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static int sized_for;  /* contexts the pool was last sized for */
static int sized;      /* the threads wanted for them */
static int gave_up;    /* a thread failed to start: no more tries, no more warnings */
static int boosts;     /* copies under way that every thread may serve */

static int available_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The pool's size for this many contexts staging: three of four CPUs, at
 * most 16 per context.  12 of 16 CPUs moved the most on the H100 machine
 * (engine sweep in docs/results); past that, threads only contend for
 * memory.  A second GPU's copies get workers of their own, CPUs allowing. */
static int wanted(int contexts) {
    int n = pf_options()->threads;
    if (n)
        return n > PF_MAX_WORKERS ? PF_MAX_WORKERS : n;
    int most = available_cpus() * 3 / 4, per = most > 16 ? 16 : most;
    n = per * (contexts > 1 ? contexts : 1);
    if (n > most)
        n = most;
    if (n < 1)
        n = 1;
    return n > PF_MAX_WORKERS ? PF_MAX_WORKERS : n;
}

/* Under grow_lock: starts workers until `want` run. */
static void grow(int want) {
    int n = __atomic_load_n(&pf_workers_started_, __ATOMIC_RELAXED);
    sigset_t old;
    pf_signals_block(&old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (; n < want; n++) {
        pthread_t th;
        if (pthread_create(&th, &attr, pf_worker_main, (void *)(intptr_t)(n + 1)))
            break;
        __atomic_store_n(&pf_workers_started_, n + 1, __ATOMIC_RELEASE);
        char name[16]; /* a thread's name has 15 bytes; n < PF_MAX_WORKERS, two digits */
        snprintf(name, sizeof name, "pinfast-w%u", (unsigned)n % 100u);
        pthread_setname_np(th, name);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (n < want) {
        gave_up = 1;
        pf_msg(PF_WARNING, "started %d of %d staging threads; callers copy the rest themselves",
               n, want);
    }
}

/* Workers allowed awake: the pool's size for its contexts, or every
 * thread while a copy that gains from all of them runs, shared out among
 * the processes staging. */
static void set_budget(int processes) {
    int n = __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE), want = __atomic_load_n(&sized, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&boosts, __ATOMIC_RELAXED) && want && want < n)
        n = want;
    int b = (n + processes - 1) / processes;
    __atomic_store_n(&pf_workers_budget_, b < 2 ? 2 : b, __ATOMIC_RELAXED);
    __atomic_store_n(&sharing, processes, __ATOMIC_RELAXED);
}

int pf_workers_start(int contexts) {
    if (contexts > __atomic_load_n(&sized_for, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&grow_lock);
        if (contexts > sized_for) {
            int want = wanted(contexts);
            if (!gave_up)
                grow(want);
            __atomic_store_n(&sized, want, __ATOMIC_RELAXED);
            __atomic_store_n(&sized_for, contexts, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&grow_lock);
    }
    set_budget(pf_cpushare_staging());
    return __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE);
}

int pf_workers_boost(int delta) {
    if (pf_options()->threads) /* the user's number holds */
        return 0;
    if (delta > 0) {
        int all = available_cpus() > PF_MAX_WORKERS ? PF_MAX_WORKERS : available_cpus();
        pthread_mutex_lock(&grow_lock);
        if (!gave_up && all > __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE))
            grow(all);
        pthread_mutex_unlock(&grow_lock);
    }
    __atomic_fetch_add(&boosts, delta, __ATOMIC_RELAXED);
    set_budget(__atomic_load_n(&sharing, __ATOMIC_RELAXED));
    return 1;
}

int pf_workers_budget(int *processes) {
    *processes = __atomic_load_n(&sharing, __ATOMIC_RELAXED);
    return __atomic_load_n(&pf_workers_budget_, __ATOMIC_RELAXED);
}

void pf_workerpool_forked(void) {
    pthread_mutex_init(&grow_lock, NULL);
    sized_for = sized = gave_up = boosts = 0;
    sharing = 1;
}
