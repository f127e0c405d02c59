/* PINFAST_TRACE: one line per intercepted call, or with
 * PINFAST_TRACE_FORMAT=chrome one Chrome trace event per call and per
 * staged chunk's DMA and task, written through a small buffer per thread,
 * so that tracing stays cheap enough to leave on. */
#ifndef PINFAST_TRACE_H
#define PINFAST_TRACE_H

#include <stddef.h>
#include <stdint.h>

struct pf_timeline;

/* Records a call that started at start_ns (pf_now_ns) and took ns, and a
 * staged copy's chunks (NULL: none). */
void pf_trace(const char *api, const char *dir, const char *mem, const char *path, size_t bytes, uint64_t start_ns,
              uint64_t ns, int result, const struct pf_timeline *chunks);

/* Writes out every thread's buffered lines, and closes the Chrome trace's
 * array (nothing is recorded after): at exit. */
void pf_trace_flush(void);

/* In a forked child: the parent's file and lines are not the child's. */
void pf_trace_forked(void);

#endif
