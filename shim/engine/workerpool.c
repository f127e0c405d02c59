/* The size of the worker pool: threads started as contexts come to stage,
 * and how many may be awake at once, the CPUs shared out with the other
 * processes staging on this machine (staging_processes.c) and, where a launcher
 * started several ranks on this node, among those ranks. */
#include "workers.h"
#include "staging_processes.h"
#include "../base/cpu_quota.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../base/signals.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int sharing = 1; /* the processes the budget was shared among */
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static int sized_for; /* contexts the pool was last sized for */
static int sized;     /* the threads wanted for them */
static int gave_up;   /* a thread failed to start: no more tries, no more warnings */
static int boosts;    /* copies under way that every thread may serve */

static int cpus_of(pid_t who) {
    cpu_set_t set;
    if (sched_getaffinity(who, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    return 0;
}

static int available_cpus(void) {
    int n = cpus_of(0);
    if (n > 0)
        return n;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

/* The ranks a launcher started on this node, from the first of these set:
 * torchrun; Open MPI; MPICH and Intel MPI (Hydra); MVAPICH2; srun (the
 * step's tasks per node, "4" or "4(x2)" or "4,3": the largest; not
 * SLURM_NTASKS_PER_NODE, which a batch script's single process inherits
 * from the allocation).  A value that is no count is ignored, the next one
 * looked at, with one warning per process. */
static const char *const local_size_vars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                              "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE"};

/* A count of 1 to 99999; -1 for anything else. */
static long count_of(const char *s, const char **end) {
    size_t n = strspn(s, "0123456789");
    if (!n || n > 5)
        return -1;
    long v = strtol(s, NULL, 10);
    *end = s + n;
    return v >= 1 ? v : -1;
}

/* Slurm's list of tasks per node, "2(x3),1": its largest count, or -1. */
static long slurm_largest(const char *s) {
    long most = -1;
    for (;;) {
        long n = count_of(s, &s);
        if (n < 0)
            return -1;
        if (*s == '(') {
            if (s[1] != 'x' || count_of(s + 2, &s) < 0 || *s != ')')
                return -1;
            s++;
        }
        most = n > most ? n : most;
        if (!*s)
            return most;
        if (*s++ != ',')
            return -1;
    }
}

static struct {
    int local;       /* ranks on this node (1: no launcher said more) */
    const char *var; /* the variable that said so */
    int cpus;        /* CPUs this process may run on */
    int quota;       /* its cgroup's CPU quota, CPUs (0: none) */
    int node;        /* CPUs the node's ranks share */
    int share;       /* this process's share: the pool's rule counts these */
} node;
static pthread_once_t node_once = PTHREAD_ONCE_INIT;

/* This process's CPUs among the ranks of its node.  Ranks a launcher left
 * unbound (torchrun) each see every CPU: each gets CPUs / ranks.  Ranks it
 * bound (mpirun's default) see their own; their parent, the launcher's
 * daemon, sees the node's: a rank takes the smaller of its own CPUs and the
 * node's divided among the ranks, so a binding is not divided twice.  A
 * CPU quota binds the process and, its cgroup's, the launcher and its
 * ranks alike: no more CPUs than it allows count, for either. */
static void node_decide(void) {
    static int warned;
    node.quota = pf_cpu_quota();
    node.cpus = node.node = node.share = pf_cpus_within(available_cpus(), node.quota);
    node.local = 1;
    for (size_t i = 0; i < sizeof local_size_vars / sizeof local_size_vars[0]; i++) {
        const char *v = getenv(local_size_vars[i]), *end = "";
        if (!v)
            continue;
        long n = i == 4 ? slurm_largest(v) : count_of(v, &end);
        if (n < 0 || *end) {
            pf_msg_once(warned, PF_WARNING,
                        "%s=%s is not a number of ranks: ignored, staging "
                        "threads are not shared out by it",
                        local_size_vars[i], v);
            continue;
        }
        node.local = (int)n;
        node.var = local_size_vars[i];
        break;
    }
    if (node.local < 2)
        return;
    int parent = pf_cpus_within(cpus_of(getppid()), node.quota);
    node.node = parent > node.cpus ? parent : node.cpus;
    int share = node.node / node.local;
    node.share = share < 1 ? 1 : share > node.cpus ? node.cpus : share;
}

static int share_cpus(void) {
    pthread_once(&node_once, node_decide);
    return node.share;
}

/* The pool's size for this many contexts staging: three of four CPUs, at
 * most 16 per context; past that, threads only contend for memory
 * (docs/tuning.md#the-worker-pools-size-wanted).  A second GPU's copies
 * get workers of their own, CPUs allowing.
 * The CPUs are this process's share of its node's (node_decide).  On a few
 * CPUs, two are left to the others: the caller polls beside the workers,
 * and the registrar and the program's own threads need one, or a block's
 * registration waits while its copies are staged (docs/options.md). */
static int wanted(int contexts) {
    int n = pf_options()->threads;
    if (n)
        return n > PF_MAX_WORKERS ? PF_MAX_WORKERS : n;
    int cpus = share_cpus(), most = cpus * 3 / 4 < cpus - 2 ? cpus * 3 / 4 : cpus - 2, per = most > 16 ? 16 : most;
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
        pf_msg(PF_WARNING, "started %d of %d staging threads; callers copy the rest themselves", n, want);
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

/* The debug log's account of the pool's size. */
static void tell(int want, int contexts) {
    if (pf_log_level() < PF_DEBUG)
        return;
    if (pf_options()->threads) {
        pf_msg(PF_DEBUG, "staging threads: %d for %d context(s), PINFAST_THREADS=%d", want, contexts,
               pf_options()->threads);
    } else if (node.local > 1) {
        pf_msg(PF_DEBUG,
               "staging threads: %d for %d context(s), 3 of 4 of this process's share "
               "of the node's CPUs leaving 2 at least, at most 16 a context: %s=%d ranks on this node share %d "
               "CPUs, %d each (this one may run on %d%s)",
               want, contexts, node.var, node.local, node.node, node.share, node.cpus,
               node.quota && node.quota == node.cpus ? ", its CPU quota" : "");
    } else {
        pf_msg(PF_DEBUG,
               "staging threads: %d for %d context(s), 3 of 4 of the %d CPUs this "
               "process may run on%s leaving 2 at least, at most 16 a context (no launcher's ranks per node)",
               want, contexts, node.cpus, node.quota && node.quota == node.cpus ? " (its CPU quota)" : "");
    }
}

int pf_workers_start(int contexts) {
    if (contexts > __atomic_load_n(&sized_for, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&grow_lock);
        if (contexts > sized_for) {
            int want = wanted(contexts);
            if (!gave_up)
                grow(want);
            tell(want, contexts);
            __atomic_store_n(&sized, want, __ATOMIC_RELAXED);
            __atomic_store_n(&sized_for, contexts, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&grow_lock);
    }
    set_budget(pf_staging_processes_now());
    return __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE);
}

int pf_workers_boost(int delta) {
    if (pf_options()->threads) /* the user's number holds */
        return 0;
    if (delta > 0) {
        int cpus = share_cpus(), all = cpus > PF_MAX_WORKERS ? PF_MAX_WORKERS : cpus;
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
