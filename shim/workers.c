#include "workers.h"
#include "clock.h"
#include "message.h"
#include "options.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { QUEUED, DONE };

#define MAX_WORKERS 64
/* An idle worker polls this long before sleeping, while no copy is under
 * way: the next chunk of a copy, or a copy right behind the last, then finds
 * it awake instead of paying a wake-up (tens of microseconds).  Longer, a
 * dozen polling threads slow everything else the program does: small
 * cudaMemcpy calls ran 2-4x slower with 500 us (bench, H100 VM). */
#define SPIN_NS 50000u

/* The queue is guarded by a spin lock: a dozen workers pounce on a batch at
 * once, and a sleeping mutex turns that into a convoy of futex waits costing
 * tens of microseconds (seen on 1 MiB copies).  Sleeping has its own mutex. */
static int qlock;
static struct pf_task *head, *tail;
static int queued;   /* tasks in the queue, readable without the lock */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int sleepers; /* workers waiting on `wake` */
static int started;  /* workers running */
static int active;   /* copies under way: workers keep polling */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t busy_ns;

void pf_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    sched_yield();
#endif
}

static void qlock_take(void) {
    while (__atomic_exchange_n(&qlock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&qlock, __ATOMIC_RELAXED))
            pf_relax();
}

static void qlock_drop(void) { __atomic_store_n(&qlock, 0, __ATOMIC_RELEASE); }

static struct pf_task *try_pop(size_t max_len) {
    if (!__atomic_load_n(&queued, __ATOMIC_RELAXED))
        return NULL;
    qlock_take();
    struct pf_task *t = head;
    if (t && t->len <= max_len) {
        head = t->next;
        if (!head)
            tail = NULL;
        __atomic_fetch_sub(&queued, 1, __ATOMIC_RELAXED);
    } else {
        t = NULL;
    }
    qlock_drop();
    return t;
}

static void run(struct pf_task *t, int helped) {
    uint64_t t0 = pf_now_ns();
    t->started_ns = t0;
    t->helped = helped;
    pf_copy(t->kind, t->dst, t->src, t->len);
    __atomic_fetch_add(&busy_ns, pf_now_ns() - t0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->state, DONE, __ATOMIC_RELEASE);
}

void pf_task_submit(struct pf_task *tasks, int n) {
    for (int i = 0; i < n; i++) {
        tasks[i].state = QUEUED;
        tasks[i].next = i + 1 < n ? &tasks[i + 1] : NULL;
    }
    qlock_take();
    if (tail)
        tail->next = &tasks[0];
    else
        head = &tasks[0];
    tail = &tasks[n - 1];
    /* queued, then sleepers; a worker goes to sleep in the opposite order:
     * with both sequentially consistent, one of the two sees the other */
    __atomic_fetch_add(&queued, n, __ATOMIC_SEQ_CST);
    qlock_drop();
    /* a worker awake wakes the next one itself (see worker): a caller
     * signalling on every submit queued behind the sleepers' mutex for tens
     * of microseconds before copying anything (engine trace, 64 MiB) */
    if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST) == __atomic_load_n(&started, __ATOMIC_ACQUIRE))
        pf_workers_wake();
}

int pf_task_done(const struct pf_task *t) {
    return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == DONE;
}

void pf_task_wait(struct pf_task *t) {
    while (!pf_task_done(t)) {
        struct pf_task *other = try_pop((size_t)-1);
        if (other)
            run(other, 1);
        else
            pf_relax();
    }
}

static void wake_some(int n) {
    if (!__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&sleep_lock);
    while (n--)
        pthread_cond_signal(&wake);
    pthread_mutex_unlock(&sleep_lock);
}

void pf_workers_active(int delta) { __atomic_fetch_add(&active, delta, __ATOMIC_RELAXED); }

/* Wakes one sleeper, which wakes two more, and so on (see worker): a
 * broadcast to a dozen threads costs the caller ~20 us (engine trace on the
 * H100), a chain one at a time too long. */
void pf_workers_wake(void) { wake_some(1); }

int pf_task_help(size_t max_len) {
    struct pf_task *t = try_pop(max_len);
    if (t)
        run(t, 1);
    return t != NULL;
}

/* Woken (by work or by pf_workers_wake), a worker polls again before it
 * sleeps, so a wake-up ahead of the work is not wasted. */
static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        struct pf_task *t = try_pop((size_t)-1);
        if (t) {
            if (__atomic_load_n(&queued, __ATOMIC_RELAXED))
                wake_some(1); /* more work than hands: one more, in parallel with the others */
            run(t, 0);
            continue;
        }
        uint64_t until = pf_now_ns() + SPIN_NS;
        while (!__atomic_load_n(&queued, __ATOMIC_RELAXED) &&
               (__atomic_load_n(&active, __ATOMIC_RELAXED) || pf_now_ns() < until))
            pf_relax();
        pthread_mutex_lock(&sleep_lock);
        __atomic_fetch_add(&sleepers, 1, __ATOMIC_SEQ_CST);
        int slept = !__atomic_load_n(&queued, __ATOMIC_SEQ_CST);
        if (slept)
            pthread_cond_wait(&wake, &sleep_lock);
        __atomic_fetch_sub(&sleepers, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&sleep_lock);
        if (slept) /* pass the wake-up on */
            wake_some(2);
    }
    return NULL;
}

static int available_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void start(void) {
    int want = pf_options()->threads;
    if (want == 0) {
        /* 12 of 16 CPUs moved the most on the H100 machine (engine sweep in
         * docs/results); past that, threads only contend for memory */
        want = available_cpus() * 3 / 4;
        if (want < 1)
            want = 1;
        if (want > 16)
            want = 16;
    }
    if (want > MAX_WORKERS)
        want = MAX_WORKERS;
    /* workers take no signals: the program's handlers run on its own threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int n = 0;
    for (; n < want; n++) {
        pthread_t th;
        if (pthread_create(&th, &attr, worker, NULL))
            break;
        char name[16];
        snprintf(name, sizeof name, "pinfast-w%d", n);
        pthread_setname_np(th, name);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (n < want)
        pf_msg(PF_WARNING, "started %d of %d staging threads; callers copy the rest themselves",
               n, want);
    __atomic_store_n(&started, n, __ATOMIC_RELEASE);
}

int pf_workers_start(void) {
    pthread_once(&once, start);
    return __atomic_load_n(&started, __ATOMIC_ACQUIRE);
}

void pf_workers_forked(void) {
    pthread_mutex_init(&sleep_lock, NULL);
    pthread_cond_init(&wake, NULL);
    head = tail = NULL;
    qlock = queued = sleepers = started = active = 0;
    busy_ns = 0;
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

int pf_workers_sleeping(void) { return __atomic_load_n(&sleepers, __ATOMIC_RELAXED); }

int pf_workers_count(void) { return __atomic_load_n(&started, __ATOMIC_ACQUIRE); }

double pf_workers_cpu_seconds(void) {
    return (double)__atomic_load_n(&busy_ns, __ATOMIC_RELAXED) * 1e-9;
}
