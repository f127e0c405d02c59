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
/* An idle worker polls this long before sleeping: back-to-back copies then
 * find it awake instead of paying a wake-up each (tens of microseconds). */
#define SPIN_NS 500000u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct pf_task *head, *tail;
static int queued;   /* tasks in the queue, readable without the lock */
static int sleepers; /* workers waiting on `wake` */
static int started;  /* workers running */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t busy_ns;

void pf_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    sched_yield();
#endif
}

static struct pf_task *pop_locked(void) {
    struct pf_task *t = head;
    if (t) {
        head = t->next;
        if (!head)
            tail = NULL;
        __atomic_store_n(&queued, queued - 1, __ATOMIC_RELAXED);
    }
    return t;
}

static struct pf_task *try_pop(size_t max_len) {
    if (!__atomic_load_n(&queued, __ATOMIC_RELAXED))
        return NULL;
    pthread_mutex_lock(&lock);
    struct pf_task *t = head && head->len <= max_len ? pop_locked() : NULL;
    pthread_mutex_unlock(&lock);
    return t;
}

static void run(struct pf_task *t) {
    uint64_t t0 = pf_now_ns();
    memcpy(t->dst, t->src, t->len);
    __atomic_fetch_add(&busy_ns, pf_now_ns() - t0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->state, DONE, __ATOMIC_RELEASE);
}

void pf_task_submit(struct pf_task *tasks, int n) {
    for (int i = 0; i < n; i++) {
        tasks[i].state = QUEUED;
        tasks[i].next = i + 1 < n ? &tasks[i + 1] : NULL;
    }
    pthread_mutex_lock(&lock);
    if (tail)
        tail->next = &tasks[0];
    else
        head = &tasks[0];
    tail = &tasks[n - 1];
    __atomic_store_n(&queued, queued + n, __ATOMIC_RELAXED);
    /* one wake-up per batch, not per task: each costs a system call */
    if (sleepers)
        pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
}

int pf_task_done(const struct pf_task *t) {
    return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == DONE;
}

void pf_task_wait(struct pf_task *t) {
    while (!pf_task_done(t)) {
        struct pf_task *other = try_pop((size_t)-1);
        if (other)
            run(other);
        else
            pf_relax();
    }
}

void pf_workers_wake(void) {
    if (!__atomic_load_n(&sleepers, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&lock);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
}

int pf_task_help(size_t max_len) {
    struct pf_task *t = try_pop(max_len);
    if (t)
        run(t);
    return t != NULL;
}

/* Woken (by work or by pf_workers_wake), a worker polls again before it
 * sleeps, so a wake-up ahead of the work is not wasted. */
static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        struct pf_task *t = try_pop((size_t)-1);
        if (t) {
            run(t);
            continue;
        }
        uint64_t until = pf_now_ns() + SPIN_NS;
        while (!__atomic_load_n(&queued, __ATOMIC_RELAXED) && pf_now_ns() < until)
            pf_relax();
        pthread_mutex_lock(&lock);
        if (!queued) {
            sleepers++;
            pthread_cond_wait(&wake, &lock);
            sleepers--;
        }
        pthread_mutex_unlock(&lock);
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
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    head = tail = NULL;
    queued = sleepers = started = 0;
    busy_ns = 0;
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

double pf_workers_cpu_seconds(void) {
    return (double)__atomic_load_n(&busy_ns, __ATOMIC_RELAXED) * 1e-9;
}
