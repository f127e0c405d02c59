/* The timeline of a staged copy (PINFAST_LOG=debug, or the Chrome trace):
 * per chunk, when it was taken, its DMA issued and seen done, its tasks run
 * and by whom. */
#include "staging.h"
#include "../base/message.h"
#include "../base/libc.h"

#include <stdio.h>
#include <stdlib.h>

/* On the heap, as the chunks in hand are (contexts.c): ~14 KB. */
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread struct pf_timeline *mine;

static void key_create(void) { pthread_key_create(&key, pf_libc_free); }

struct pf_timeline *pf_timeline_mine(void) {
    if (!mine && (mine = pf_libc_malloc(sizeof *mine))) {
        pthread_once(&once, key_create);
        pthread_setspecific(key, mine);
    }
    return mine;
}

/* What the timeline tells of one piece of a retired chunk, [off, off +
 * len) of the copy, and the tasks that copied it. */
static void account_piece(struct pf_plan *p, struct pf_chunk *h, size_t off, size_t len, uint64_t seen) {
    struct pf_chunk_log l = {.off = off,
                             .len = len,
                             .slot = (int)(h->s - p->slots),
                             .taken = h->taken_ns,
                             .dma = h->dma_ns,
                             .dma_end = h->dma_end_ns,
                             .landed = h->landed_ns,
                             .seen = seen};
    const char *lo = (const char *)p->x->host + off;
    for (int i = 0; i < h->ntasks; i++) {
        const struct pf_task *t = &h->tasks[i];
        if (h->npieces && ((const char *)t->dst < lo || (const char *)t->dst >= lo + len))
            continue;
        if (!l.first || t->started_ns < l.first)
            l.first = t->started_ns;
        if (t->ended_ns > l.last)
            l.last = t->ended_ns;
        l.tasks[l.ntasks++] = (__typeof__(l.tasks[0])){t->started_ns, t->ended_ns, t->len, t->by};
    }
    if (!p->first_task_ns || l.first < p->first_task_ns)
        p->first_task_ns = l.first;
    if (p->log && p->nlog < PF_TIMELINE) {
        p->log[p->nlog++] = l;
        h->logged = p->nlog;
    }
}

/* What the timeline tells of a retired chunk: a line for each piece. */
void pf_timeline_account(struct pf_plan *p, struct pf_chunk *h) {
    uint64_t seen = pf_now_ns();
    if (!h->npieces)
        account_piece(p, h, h->off, h->len, seen);
    for (int i = 0; i < h->npieces; i++)
        account_piece(p, h, h->piece[i].off, h->piece[i].len, seen);
    for (int i = 0; i < h->ntasks; i++)
        p->helped += !h->tasks[i].by;
    p->ntasks += h->ntasks;
}

static double us_from_start(const struct pf_plan *p, uint64_t t) { return t ? (t - p->t0) / 1e3 : -1.0; }

void pf_timeline_print(const struct pf_plan *p) {
    for (int i = 0; i < p->nlog; i++) {
        const struct pf_chunk_log *l = &p->log[i];
        pf_msg(PF_DEBUG, "  chunk %zu+%zu slot %d us: taken %.1f dma %.1f-%.1f landed %.1f copy %.1f-%.1f retired %.1f",
               l->off, l->len, l->slot, us_from_start(p, l->taken), us_from_start(p, l->dma),
               us_from_start(p, l->dma_end), us_from_start(p, l->landed), us_from_start(p, l->first),
               us_from_start(p, l->last), us_from_start(p, l->seen));
        char line[PF_MAX_SPLIT * 24], *at = line;
        for (int k = 0; k < l->ntasks && at < line + sizeof line - 1; k++)
            at += snprintf(at, sizeof line - (size_t)(at - line), " w%d:%.1f-%.1f", l->tasks[k].by,
                           us_from_start(p, l->tasks[k].start), us_from_start(p, l->tasks[k].end));
        pf_msg(PF_DEBUG, "    tasks%s", line);
    }
}
