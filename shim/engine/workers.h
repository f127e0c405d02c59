/* Host-memory copy threads: persistent, created on the first staged copy,
 * shared by every caller.  A caller waiting for its tasks runs queued tasks
 * itself, so work completes even with no worker thread at all. */
#ifndef PINFAST_WORKERS_H
#define PINFAST_WORKERS_H

#include <stddef.h>
#include <stdint.h>

#include "hostcopy.h"

struct pf_task {
    void *dst;
    const void *src; /* NULL: fault dst in ahead of a copy (pf_first_touch_populate) */
    size_t len;
    /* rows of a pitched copy (row 0: one linear copy): rows of `row` bytes,
     * packed on one side, `pitch` apart on the other (the destination's
     * when pitched_dst) */
    uint32_t row, pitch;
    unsigned char kind; /* enum pf_host_copy */
    unsigned char pitched_dst;
    short by;                   /* the worker that ran it, 0 for a caller (debug log) */
    int state;                  /* queued, done */
    uint64_t started_ns;        /* debug log */
    uint64_t ended_ns;          /* debug log */
    struct pf_task *next;       /* queue link */
} __attribute__((aligned(64))); /* a line each: the workers running neighbours write both */
_Static_assert(sizeof(struct pf_task) == 64, "a task is one cache line");

/* Queues tasks whose dst, src, len, kind (and rows) are set, waking the workers. */
void pf_task_submit(struct pf_task *tasks, int n);

/* 1 once the task's copy is complete. */
int pf_task_done(const struct pf_task *t);

/* Returns when the task is done, running queued tasks meanwhile. */
void pf_task_wait(struct pf_task *t);

/* Runs the oldest queued task if it is no longer than max_len; returns 1 if it did. */
int pf_task_help(size_t max_len);

/* Wakes the sleeping workers ahead of work about to be queued; unless
 * `wait`, not if that means waiting for another thread waking or sleeping. */
void pf_workers_wake(int wait);

/* A copy starts (+1) or ends (-1): while one is under way, idle workers poll
 * rather than sleep. */
void pf_workers_active(int delta);

/* A short pause in a polling loop. */
void pf_relax(void);

/* Called as a copy is staged, with the number of contexts staging: starts
 * threads until the pool is the size for them (once a thread fails to
 * start, no more are tried), shares the pool's waking hours out with the
 * other processes staging on this machine, and returns how many run. */
int pf_workers_start(int contexts);

/* A copy that gains from every CPU starts (+1; returns 0 when
 * PINFAST_THREADS fixes the pool, and nothing changed) or ends (-1, only
 * after a start that returned 1): the pool grows to a thread per CPU (of
 * this process's share of its node's, where a launcher started several
 * ranks on it) on the first such copy, and all of them may wake while one
 * runs. */
int pf_workers_boost(int delta);

/* Between workers.c (the threads) and workerpool.c (how many): the most
 * threads, those running, those that may be awake at once, a thread's
 * body. */
#define PF_MAX_WORKERS 64
extern int pf_workers_started_;
extern int pf_workers_budget_;
void *pf_worker_main(void *arg);

/* In a forked child: the threads are gone; start afresh when needed (the
 * queue, workers.c; the pool's size, workerpool.c). */
void pf_workers_forked(void);
void pf_workerpool_forked(void);

/* Workers allowed awake at once, and the processes staging it was shared
 * among (debug log). */
int pf_workers_budget(int *processes);

/* Workers asleep now (debug log). */
int pf_workers_sleeping(void);

/* Threads running. */
int pf_workers_count(void);

/* CPU seconds spent copying by the workers and helping callers; of them,
 * by the callers. */
double pf_workers_cpu_seconds(void);
double pf_workers_helped_seconds(void);

#endif
