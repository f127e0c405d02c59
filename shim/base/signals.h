/* The signal mask of pinfast's own threads (staging workers, the
 * registrar). */
#ifndef PINFAST_SIGNALS_H
#define PINFAST_SIGNALS_H

#include <pthread.h>
#include <signal.h>

/* Blocks every signal but the faults the thread itself causes, saving the
 * mask in *old: the program's handlers run on its own threads, but a fault
 * must reach the program's handler (a program that write-protects memory
 * pinfast copies into, as a GC's write barrier does), since a blocked
 * SIGSEGV kills the process. */
static inline void pf_signals_block(sigset_t *old) {
    sigset_t s;
    sigfillset(&s);
    sigdelset(&s, SIGSEGV);
    sigdelset(&s, SIGBUS);
    sigdelset(&s, SIGFPE);
    sigdelset(&s, SIGILL);
    pthread_sigmask(SIG_SETMASK, &s, old);
}

#endif
