#include "workers.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../memory/first_touch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { QUEUED, DONE };

/* An idle worker polls this long before sleeping, while no copy is under
 * way, so that the next copy finds it awake; longer, a dozen polling threads
 * slow the rest of the program (docs/tuning.md#idle-workers-poll-before-sleeping-spin_ns-active_spin_ns). */
#define SPIN_NS 50000u
/* While a copy is under way, an idle worker polls this long past the last
 * task queued, then sleeps: a copy waiting behind a long kernel must not
 * keep a dozen cores busy (tests/gpu/checks/contract.cu cpu).  A chunk's
 * DMA takes ~40 us, so a copy moving data queues tasks well within it. */
#define ACTIVE_SPIN_NS 200000u

/* The queue is guarded by a spin lock: a dozen workers pounce on a batch at
 * once, and a sleeping mutex turns that into a convoy of futex waits costing
 * tens of microseconds (seen on 1 MiB copies).  Sleeping has its own mutex. */
static int qlock;
static struct pf_task *head, *tail;
/* A worker polling idle keeps a box open, on a cache line of its own: a
 * caller puts a task straight into it, so that a chunk's tasks start together
 * rather than one after the other off the queue
 * (docs/tuning.md#tasks-handed-straight-to-polling-workers-boxes).  A box is
 * EMPTY (open: its worker will look), CLOSED (its worker copies from the
 * queue, sleeps or never started) or holds the task its worker runs next.
 * Only a caller fills an EMPTY box; only its worker changes it otherwise. */
#define CLOSED ((struct pf_task *)0)
#define EMPTY ((struct pf_task *)1)
static struct box {
    struct pf_task *task;
    uint64_t since;                                       /* when it was filled, near enough */
} __attribute__((aligned(64))) boxes[PF_MAX_WORKERS + 1]; /* by worker number, from 1 */
/* A task boxed this long ago is taken back by a waiting caller: its worker
 * is not running (preempted, or its CPU taken by the hypervisor). */
#define STALE_NS 10000u
static unsigned next_box;
static int queued; /* tasks in the queue, readable without the lock */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int sleepers;            /* workers waiting on `wake` */
int pf_workers_started_;        /* workers running */
static int active;              /* copies under way: workers keep polling */
static uint64_t last_end_ns;    /* when the last copy ended: workers poll SPIN_NS past it */
static uint64_t last_submit_ns; /* when tasks were last queued */
/* Workers awake at once (polling or copying): all of them, divided among
 * the processes staging on this machine at the time (workerpool.c). */
int pf_workers_budget_ = PF_MAX_WORKERS;
static uint64_t busy_ns;
static uint64_t helped_ns; /* of busy_ns, the tasks callers ran */

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

static __thread int self; /* this worker's number from 1; 0 in callers */

static struct pf_task *try_pop(size_t max_len) {
    if (!__atomic_load_n(&queued, __ATOMIC_RELAXED))
        return NULL;
    /* a worker tries once and goes back to polling: workers queueing on the
     * lock hold up the callers' tasks behind them; a caller waits its turn
     * (docs/tuning.md#workers-try-the-queue-lock-once) */
    if (!self)
        qlock_take();
    else if (__atomic_load_n(&qlock, __ATOMIC_RELAXED) || __atomic_exchange_n(&qlock, 1, __ATOMIC_ACQUIRE))
        return NULL;
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

static void run_task(struct pf_task *t) {
    uint64_t t0 = pf_now_ns();
    t->started_ns = t0;
    t->by = self;
    size_t dpitch = t->pitched_dst ? t->pitch : t->row, spitch = t->pitched_dst ? t->row : t->pitch;
    if (t->src)
        pf_copy_rows(t->kind, t->dst, dpitch, t->src, spitch, t->row, t->len);
    else
        pf_first_touch_populate(t->dst, t->len);
    t->ended_ns = pf_now_ns();
    __atomic_fetch_add(&busy_ns, t->ended_ns - t0, __ATOMIC_RELAXED);
    if (!self)
        __atomic_fetch_add(&helped_ns, t->ended_ns - t0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->state, DONE, __ATOMIC_RELEASE);
}

/* Puts tasks into open boxes, from a different worker each time so that
 * the work spreads; returns how many. */
static int box(struct pf_task *tasks, int n) {
    int workers = __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE), boxed = 0;
    unsigned from = __atomic_fetch_add(&next_box, 1, __ATOMIC_RELAXED);
    uint64_t now = 0; /* read at the first open box: often there is none */
    for (int k = 0; k < workers && boxed < n; k++) {
        struct box *b = &boxes[1 + (from + (unsigned)k) % (unsigned)workers];
        struct pf_task *open = EMPTY;
        if (__atomic_load_n(&b->task, __ATOMIC_RELAXED) != EMPTY)
            continue;
        if (!now)
            now = pf_now_ns();
        /* before the task: a stealer must not see it with an old time */
        __atomic_store_n(&b->since, now, __ATOMIC_RELAXED);
        if (__atomic_compare_exchange_n(&b->task, &open, &tasks[boxed], 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            boxed++;
    }
    return boxed;
}

/* A task boxed STALE_NS ago and not yet taken, now the caller's. */
static struct pf_task *steal(void) {
    int workers = __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE);
    uint64_t now = 0;
    for (int w = 1; w <= workers; w++) {
        struct box *b = &boxes[w];
        struct pf_task *t = __atomic_load_n(&b->task, __ATOMIC_ACQUIRE);
        if (t == EMPTY || t == CLOSED)
            continue;
        if (!now)
            now = pf_now_ns();
        /* boxed after our clock read, or not long enough ago */
        uint64_t since = __atomic_load_n(&b->since, __ATOMIC_RELAXED);
        if (since > now || now - since < STALE_NS)
            continue;
        /* the box stays open: its worker, back, finds it empty */
        if (__atomic_compare_exchange_n(&b->task, &t, EMPTY, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return t;
    }
    return NULL;
}

void pf_task_submit(struct pf_task *tasks, int n) {
    for (int i = 0; i < n; i++)
        tasks[i].state = QUEUED;
    __atomic_store_n(&last_submit_ns, pf_now_ns(), __ATOMIC_RELAXED);
    int boxed = box(tasks, n);
    tasks += boxed;
    n -= boxed;
    if (!n)
        return;
    for (int i = 0; i < n; i++)
        tasks[i].next = i + 1 < n ? &tasks[i + 1] : NULL;
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
     * signalling on every submit would queue behind the sleepers' mutex
     * before copying anything (docs/tuning.md#sleepers-are-woken-in-a-tree) */
    if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST) == __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE))
        pf_workers_wake(1);
}

int pf_task_done(const struct pf_task *t) { return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == DONE; }

void pf_task_wait(struct pf_task *t) {
    while (!pf_task_done(t)) {
        struct pf_task *other = try_pop((size_t)-1);
        if (!other)
            other = steal();
        if (other)
            run_task(other);
        else
            pf_relax();
    }
}

static int awake(void) {
    return __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE) - __atomic_load_n(&sleepers, __ATOMIC_SEQ_CST);
}

/* Wakes up to n sleepers, the budget permitting.  A worker holding a task
 * does not wait for the sleepers' mutex (`wait` 0): blocked there, its task
 * starts late and no caller can take it back; a wake-up skipped is covered by
 * the callers, who run tasks themselves (docs/tuning.md#nobody-with-work-waits-for-the-sleepers-mutex). */
static void wake_some(int n, int wait) {
    if (!__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST))
        return;
    int room = __atomic_load_n(&pf_workers_budget_, __ATOMIC_RELAXED) - awake();
    if (n > room)
        n = room;
    if (n <= 0)
        return;
    if (wait ? pthread_mutex_lock(&sleep_lock) : pthread_mutex_trylock(&sleep_lock))
        return;
    while (n--)
        pthread_cond_signal(&wake);
    pthread_mutex_unlock(&sleep_lock);
}

void pf_workers_active(int delta) {
    if (delta < 0)
        __atomic_store_n(&last_end_ns, pf_now_ns(), __ATOMIC_RELAXED);
    __atomic_fetch_add(&active, delta, __ATOMIC_RELAXED);
}

/* Idle, a worker polls while a copy is under way and ACTIVE_SPIN_NS past
 * its last tasks, and SPIN_NS past both the moment it ran out of work and
 * the end of the last copy: a program copying in a loop then finds the
 * workers awake at its next copy, where counted from the first alone they
 * had all gone to sleep (docs/tuning.md#idle-workers-poll-before-sleeping-spin_ns-active_spin_ns).
 * Past the budget, it sleeps. */
static int keep_polling(uint64_t idle_until) {
    if (__atomic_load_n(&queued, __ATOMIC_RELAXED))
        return 0;
    if (awake() > __atomic_load_n(&pf_workers_budget_, __ATOMIC_RELAXED))
        return 0;
    uint64_t now = pf_now_ns();
    if (__atomic_load_n(&active, __ATOMIC_RELAXED) &&
        now < __atomic_load_n(&last_submit_ns, __ATOMIC_RELAXED) + ACTIVE_SPIN_NS)
        return 1;
    return now < idle_until || now < __atomic_load_n(&last_end_ns, __ATOMIC_RELAXED) + SPIN_NS;
}

/* Wakes one sleeper, which wakes two more, and so on (see worker): a
 * broadcast to a dozen threads holds the caller too long, a chain one at a
 * time wakes them too slowly (docs/tuning.md#sleepers-are-woken-in-a-tree). */
void pf_workers_wake(int wait) { wake_some(1, wait); }

int pf_task_help(size_t max_len) {
    struct pf_task *t = try_pop(max_len);
    if (!t)
        t = steal(); /* whatever its size: it waits for nobody else */
    if (t)
        run_task(t);
    return t != NULL;
}

/* Polls with its box open until a task is boxed (returned), work is queued
 * or it is time to sleep (NULL); the box is closed again on return. */
static struct pf_task *poll_open(struct box *b) {
    __atomic_store_n(&b->task, EMPTY, __ATOMIC_RELEASE);
    uint64_t until = pf_now_ns() + SPIN_NS;
    for (;;) {
        struct pf_task *t = __atomic_load_n(&b->task, __ATOMIC_ACQUIRE);
        if (t != EMPTY) { /* boxed: ours, unless a caller took it back first */
            if (__atomic_compare_exchange_n(&b->task, &t, CLOSED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return t;
        } else if (!keep_polling(until)) {
            if (__atomic_compare_exchange_n(&b->task, &t, CLOSED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return NULL;
        } else {
            pf_relax();
        }
    }
}

/* Woken (by work or by pf_workers_wake), a worker polls again before it
 * sleeps, so a wake-up ahead of the work is not wasted. */
void *pf_worker_main(void *arg) {
    self = (int)(intptr_t)arg;
    struct box *b = &boxes[self];
    for (;;) {
        struct pf_task *t = try_pop((size_t)-1);
        if (!t)
            t = poll_open(b);
        if (t) {
            if (__atomic_load_n(&queued, __ATOMIC_RELAXED))
                wake_some(1, 0); /* more work than hands: one more, in parallel with the others */
            run_task(t);
            continue;
        }
        /* work came: take it without touching the sleepers' mutex, on which
         * a dozen workers would queue before copying anything
         * (docs/tuning.md#nobody-with-work-waits-for-the-sleepers-mutex) */
        if (__atomic_load_n(&queued, __ATOMIC_RELAXED)) {
            pf_relax();
            continue;
        }
        pthread_mutex_lock(&sleep_lock);
        __atomic_fetch_add(&sleepers, 1, __ATOMIC_SEQ_CST);
        int slept = !__atomic_load_n(&queued, __ATOMIC_SEQ_CST);
        if (slept)
            pthread_cond_wait(&wake, &sleep_lock);
        __atomic_fetch_sub(&sleepers, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&sleep_lock);
        if (slept) /* pass the wake-up on */
            wake_some(2, 1);
    }
    return NULL;
}

void pf_workers_forked(void) {
    pthread_mutex_init(&sleep_lock, NULL);
    pthread_cond_init(&wake, NULL);
    head = tail = NULL;
    memset(boxes, 0, sizeof boxes); /* CLOSED */
    next_box = 0;
    qlock = queued = sleepers = pf_workers_started_ = active = 0;
    pf_workers_budget_ = PF_MAX_WORKERS;
    last_end_ns = last_submit_ns = busy_ns = helped_ns = 0;
}

int pf_workers_sleeping(void) { return __atomic_load_n(&sleepers, __ATOMIC_RELAXED); }

int pf_workers_count(void) { return __atomic_load_n(&pf_workers_started_, __ATOMIC_ACQUIRE); }

double pf_workers_cpu_seconds(void) { return (double)__atomic_load_n(&busy_ns, __ATOMIC_RELAXED) * 1e-9; }

double pf_workers_helped_seconds(void) { return (double)__atomic_load_n(&helped_ns, __ATOMIC_RELAXED) * 1e-9; }
