#include "pending_writes.h"

#include <pthread.h>
#include <stdint.h>

/* Few copies are in flight at once; a copy that finds the table full is
 * done synchronously instead. */
#define MAX_RANGES 64

static struct {
    uintptr_t lo, hi;
    int holds; /* 0: free */
} ranges[MAX_RANGES];
int pf_pending_used;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t landed = PTHREAD_COND_INITIALIZER;

int pf_pending_begin(void *p, size_t n) {
    int found = -1;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_RANGES && found < 0; i++)
        if (!ranges[i].holds) {
            ranges[i].lo = (uintptr_t)p;
            ranges[i].hi = (uintptr_t)p + n;
            ranges[i].holds = 1;
            __atomic_fetch_add(&pf_pending_used, 1, __ATOMIC_RELEASE);
            found = i;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

void pf_pending_hold(int range) {
    pthread_mutex_lock(&lock);
    ranges[range].holds++;
    pthread_mutex_unlock(&lock);
}

void pf_pending_release(int range) {
    pthread_mutex_lock(&lock);
    if (--ranges[range].holds == 0) {
        __atomic_fetch_sub(&pf_pending_used, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&landed);
    }
    pthread_mutex_unlock(&lock);
}

static int overlapping(uintptr_t lo, uintptr_t hi) {
    for (int i = 0; i < MAX_RANGES; i++)
        if (ranges[i].holds && ranges[i].lo < hi && lo < ranges[i].hi)
            return 1;
    return 0;
}

void pf_pending_wait_held(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p, hi = n > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + n;
    int cancel; /* cancelled in the wait, the thread would keep the lock */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    pthread_mutex_lock(&lock);
    while (overlapping(lo, hi))
        pthread_cond_wait(&landed, &lock);
    pthread_mutex_unlock(&lock);
    pthread_setcancelstate(cancel, NULL);
}

void pf_pending_forked(void) {
    for (int i = 0; i < MAX_RANGES; i++)
        ranges[i].holds = 0;
    pf_pending_used = 0;
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&landed, NULL);
}
