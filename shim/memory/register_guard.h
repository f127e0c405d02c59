/* What passes the registration cache by (register_guard.c): copies handed
 * to the driver as they are over memory a registration of pinfast's may
 * hold, and the program's changes under one. */
#ifndef PINFAST_REGISTER_GUARD_H
#define PINFAST_REGISTER_GUARD_H

#include "register.h"

#include <stddef.h>
#include <stdint.h>

/* 1 when no registration of pinfast's (due, being made, live or retired)
 * meets [p, p+n): passed to the driver, a copy of it needs nothing of the
 * cache (pf_register_guard would answer 0 and change nothing). */
int pf_register_quiet(const void *p, size_t n);
/* A copy of [p, p+n) goes to the driver as it is: 1 when a registration of
 * pinfast's holds some of it (the driver takes that for pinned memory: an
 * asynchronous copy must then be waited for, as the pageable one would
 * be); one due is cancelled. */
int pf_register_guard_meeting(const void *p, size_t n);
static inline int pf_register_guard(const void *p, size_t n) {
    return n && pf_register_watching() && pf_register_guard_meeting(p, n);
}

/* The program changes the memory of [lo, hi) (munmap, madvise, mprotect,
 * mremap, a fixed mmap): registrations over it are retired, no copy uses
 * them again; undone at the next settle. */
void pf_register_changed(uintptr_t lo, uintptr_t hi);

#endif
