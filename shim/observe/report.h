/* Inside the report: the counters summed, the figures drawn from them,
 * the advice, and the output buffer both renderers write to.  Shared by
 * summary.c, advice.c, report.c, report_out.c, report_text.c and
 * report_json.c. */
#ifndef PINFAST_REPORT_H
#define PINFAST_REPORT_H

#include "callsite.h"
#include "counters.h"
#include "names.h"
#include "../memory/pool.h"

#include <stddef.h>

/* A counter as reported: summed over the threads, time in ns; busy: the
 * wall time a copy row's copies were under way (pf_busy), 0 for others. */
struct pf_cell {
    uint64_t calls, errors, bytes, ns, busy;
};

/* The copy counters of all blocks, summed once for the report. */
struct pf_summary {
    struct pf_cell copies[PF_COPY_API_COUNT][PF_DIR_COUNT][PF_MEM_COUNT][PF_PATH_COUNT];
    struct pf_cell sizes[PF_DIR_COUNT][PF_SIZE_BUCKETS];
    struct pf_cell trips;
};
extern struct pf_summary pf_sum;

/* Sums every block into `sum`, time converted to ns. */
void pf_summary_gather(void);
/* One counter as reported. */
struct pf_cell pf_cell_of(const struct pf_counter *c);
/* GB/s over the busy time where there is one, else over the time in the calls. */
double pf_gbps(const struct pf_cell *c);
double pf_per_gib(double seconds, unsigned long long bytes);
/* Whether row (api a, direction d, path p) has a transfer rate, and its
 * text: fmt for a number, `none` where it has none. */
int pf_has_rate(int a, int d, int p);
const char *pf_rate_text(char *buf, size_t size, const char *fmt, const char *none, int a, int d, int p,
                         const struct pf_cell *c);
/* Its busy seconds (what the rate is over), likewise. */
const char *pf_busy_text(char *buf, size_t size, const char *fmt, const char *none, int a, int d, int p,
                         const struct pf_cell *c);
/* Sum of the copy rows that `keep` selects (with rated, only those with a
 * rate), and selectors. */
struct pf_cell pf_total(int (*keep)(int a, int d, int m, int p), int rated);
int pf_any_copy(int a, int d, int m, int p);
int pf_sync_copy(int a, int d, int m, int p);
int pf_driver_pageable(int a, int d, int m, int p);
int pf_staged_rows(int a, int d, int m, int p);
/* What the copies through registrations saved against staging them, at
 * this run's own staging speed (rows with a rate, per direction) and CPU
 * per GiB staged: 0 when no direction had both. */
int pf_register_saved(const struct pf_engine_stats *e, double *seconds, double *cpu_seconds);
/* " at X GB/s" over the rows of a total that have a rate (their busy times
 * summed: rows under way at once count their overlap twice); "" when none has. */
const char *pf_at_rate(char *buf, size_t size, struct pf_cell c);

/* A bounded buffer flushed with write(2): no stdio state, no allocation. */
struct pf_out {
    int fd, failed;
    size_t len;
    char buf[8192];
};
/* report_out.c: a line into the buffer (flushed when full), and the buffer out. */
void pf_put(struct pf_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pf_out_flush(struct pf_out *o);

struct pf_advice {
    const char *kind;
    char text[320];
};
/* What the program should change; returns how many (at most 9). */
int pf_advise(struct pf_advice *adv, double wall, const struct pf_engine_stats *e, const struct pf_pool_stats *pl);

/* Call pf_sites, collected for a renderer (64 KiB: not on the stack), and
 * their orders. */
extern struct pf_site pf_sites[PF_CALLSITE_MAX];
int pf_sites_by_bytes(const void *a, const void *b);
int pf_sites_by_time(const void *a, const void *b);

struct pf_whoami {
    char rank[72], host[72];
};
void pf_whoami(struct pf_whoami *w);

/* The two renderers. */
void pf_report_json(struct pf_out *o, double wall, const struct pf_engine_stats *e, const struct pf_pool_stats *pl);
void pf_report_text(struct pf_out *o, double wall, const struct pf_engine_stats *e, const struct pf_pool_stats *pl);

#endif
