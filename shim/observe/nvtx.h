/* NVTX ranges around the copies pinfast stages, so that a profiler (Nsight
 * Systems) shows them beside the program's own ranges. */
#ifndef PINFAST_NVTX_H
#define PINFAST_NVTX_H

#include "../base/types.h"

#include <stddef.h>

/* Pushes "pinfast <what> <dir> <size>" in the domain "pinfast" on the
 * calling thread when a tool is attached and PINFAST_NVTX allows; returns
 * whether it did, for pf_nvtx_pop. */
int pf_nvtx_push(const char *what, enum pf_dir dir, size_t bytes);
void pf_nvtx_pop_pushed(void);
static inline void pf_nvtx_pop(int pushed) {
    if (pushed)
        pf_nvtx_pop_pushed();
}

#endif
