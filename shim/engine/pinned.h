/* Inside the engine: pinfast's own pinned memory (staging slots, bounce
 * rings), made in the current context by pinned.c. */
#ifndef PINFAST_PINNED_H
#define PINFAST_PINNED_H

#include <stddef.h>

struct pf_pinned {
    char *mem; /* NULL: none */
    size_t size;
    int mapped; /* a mapping of pinfast's, registered; else cuMemHostAlloc's */
};

/* Pins size bytes: a registered mapping, or where the driver will not
 * register one, cuMemHostAlloc.  0 when neither can be had. */
int pf_pinned_make(struct pf_pinned *p, size_t size);
/* Gives p back while its context lives (nothing may use it any more). */
void pf_pinned_free(struct pf_pinned *p);
/* Its context was destroyed, and the driver freed or unregistered p with
 * it: what is left of it, the mapping, goes. */
void pf_pinned_gone(struct pf_pinned *p);

#endif
