/* A table in /dev/shm/pinfast-<uid>: a slot per process that has staged
 * copies (its pid) and when it last did (CLOCK_MONOTONIC, milliseconds,
 * the same clock in every process).  Processes staging at once, each with
 * its own polling workers, would leave their callers no CPU: they share the
 * CPUs out (docs/tuning.md#processes-staging-at-once-share-the-cpus).  A process
 * that dies keeps its slot until another finds its pid gone; it stops
 * counting a second after its last copy. */
#include "staging_processes.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/libc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOTS 64
#define RECENT_MS 1000 /* staged this recently: counted */
#define REFRESH_MS 50  /* how long a count is reused */

struct table {
    int pid[SLOTS];
    uint64_t seen_ms[SLOTS];
};

enum { UNTRIED, JOINED, ALONE };
static int state; /* ALONE: no table, or no slot free in it */
static struct table *table;
static int mine; /* our slot */
static int pid;  /* whose slot it is (a forked child claims its own) */
static uint64_t counted_ms;
static int counted = 1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ms(void) { return pf_now_ns() / 1000000u; }

static struct table *open_table(void) {
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/pinfast-%u", (unsigned)getuid());
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return NULL;
    struct stat st;
    void *m = MAP_FAILED;
    /* only a table of our own: another user's file would let them starve us */
    if (fstat(fd, &st) == 0 && st.st_uid == getuid() && S_ISREG(st.st_mode) &&
        (st.st_size >= (off_t)sizeof(struct table) || ftruncate(fd, sizeof(struct table)) == 0))
        m = pf_libc_mmap(NULL, sizeof(struct table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return m == MAP_FAILED ? NULL : m;
}

static int gone(int p) { return p > 0 && kill(p, 0) < 0 && errno == ESRCH; }

/* A free slot, or one whose process is gone. */
static int claim(struct table *t, int me) {
    for (int i = 0; i < SLOTS; i++) {
        int p = __atomic_load_n(&t->pid[i], __ATOMIC_RELAXED);
        if ((p == 0 || gone(p)) &&
            __atomic_compare_exchange_n(&t->pid[i], &p, me, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return i;
    }
    return -1;
}

void pf_staging_processes_exit(void) {
    int me = pid; /* the exchange writes what it found here when it fails */
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == JOINED && me == getpid())
        __atomic_compare_exchange_n(&table->pid[mine], &me, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Under the lock: maps the table and claims a slot, once per process. */
static int join(void) {
    if (!table) {
        table = open_table(); /* the slot is given back at exit: pf_staging_processes_exit */
    }
    pid = getpid();
    mine = table ? claim(table, pid) : -1;
    if (mine < 0)
        pf_msg(PF_DEBUG,
               "no slot in /dev/shm/pinfast-%u: workers are not shared out with "
               "other processes",
               (unsigned)getuid());
    return mine < 0 ? ALONE : JOINED;
}

int pf_staging_processes_now(void) {
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == ALONE)
        return 1;
    uint64_t now = now_ms();
    if (s == JOINED && __atomic_load_n(&counted_ms, __ATOMIC_RELAXED) + REFRESH_MS > now)
        return __atomic_load_n(&counted, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    if (state == UNTRIED)
        __atomic_store_n(&state, join(), __ATOMIC_RELEASE);
    int n = 1;
    if (state == JOINED) {
        __atomic_store_n(&table->seen_ms[mine], now, __ATOMIC_RELAXED);
        for (int i = 0; i < SLOTS; i++)
            if (i != mine && __atomic_load_n(&table->pid[i], __ATOMIC_RELAXED) &&
                now - __atomic_load_n(&table->seen_ms[i], __ATOMIC_RELAXED) < RECENT_MS)
                n++;
    }
    __atomic_store_n(&counted, n, __ATOMIC_RELAXED);
    __atomic_store_n(&counted_ms, now, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return n;
}

void pf_staging_processes_forked(void) {
    pthread_mutex_init(&lock, NULL);
    state = UNTRIED; /* the table stays mapped; the slot is the parent's */
    counted = 1;
    counted_ms = 0;
}
