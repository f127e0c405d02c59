/* The counters summed for the report, and the figures drawn from them. */
#include "report.h"
#include "../base/clock.h"
#include "../base/options.h"

#include <stdio.h>
#include <string.h>

/* Copies still in flight on other threads at exit keep counting. */
static void sum_into(struct pf_cell *s, const struct pf_counter *c) {
    s->calls += __atomic_load_n(&c->calls, __ATOMIC_RELAXED);
    s->errors += __atomic_load_n(&c->errors, __ATOMIC_RELAXED);
    s->bytes += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    s->ns += __atomic_load_n(&c->ticks, __ATOMIC_RELAXED);
}

struct pf_cell pf_cell_of(const struct pf_counter *c) {
    struct pf_cell s = {0};
    sum_into(&s, c);
    s.ns = pf_ticks_to_ns(s.ns);
    return s;
}

struct pf_summary pf_sum;

static void sum_block(const struct pf_thread_counters *b) {
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++)
                    sum_into(&pf_sum.copies[a][d][m][p], &b->copies[a][d][m][p]);
    for (int d = 0; d < PF_DIR_COUNT; d++)
        for (int k = 0; k < PF_SIZE_BUCKETS; k++)
            sum_into(&pf_sum.sizes[d][k], &b->sizes[d][k]);
    sum_into(&pf_sum.trips, &b->trips);
}

/* Ticks summed first, converted once per cell. */
void pf_summary_gather(void) {
    memset(&pf_sum, 0, sizeof pf_sum);
    pf_counters_each(sum_block);
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++) {
                    struct pf_cell *c = &pf_sum.copies[a][d][m][p];
                    c->ns = pf_ticks_to_ns(c->ns);
                    c->busy = pf_ticks_to_ns(pf_busy_ticks(&pf_busy[a][d][m][p]));
                }
    for (int d = 0; d < PF_DIR_COUNT; d++)
        for (int k = 0; k < PF_SIZE_BUCKETS; k++)
            pf_sum.sizes[d][k].ns = pf_ticks_to_ns(pf_sum.sizes[d][k].ns);
}

double pf_gbps(const struct pf_cell *c) {
    uint64_t ns = c->busy ? c->busy : c->ns;
    return ns ? (double)c->bytes / (double)ns : 0.0;
}

double pf_per_gib(double seconds, unsigned long long bytes) {
    return bytes ? seconds / ((double)bytes / (1 << 30)) : 0.0;
}

static int is_sync(int a) {
    return a == PF_API_cuMemcpy || a == PF_API_cuMemcpyHtoD || a == PF_API_cuMemcpyDtoH || a == PF_API_cuMemcpyDtoD ||
           a == PF_API_cuMemcpyPeer || a == PF_API_cuMemcpy2D || a == PF_API_cuMemcpy2DUnaligned ||
           a == PF_API_cuMemcpy3D;
}

/* Whether a row's time inside the calls is its transfer's: a synchronous
 * copy, one through a registration (waited for), or one pinfast staged and
 * finished before returning (all but an asynchronous D2H under
 * PINFAST_ASYNC_D2H).  An asynchronous pass-through
 * copy returns once queued: its bytes over that time are no transfer rate. */
int pf_has_rate(int a, int d, int p) {
    if (is_sync(a))
        return 1;
    return p == PF_PATH_REGISTERED || (p == PF_PATH_STAGED && !(d == PF_DIR_D2H && pf_options()->async_d2h));
}

/* A row's GB/s as printed: fmt for a number, or `none` where it has no rate. */
const char *pf_rate_text(char *buf, size_t size, const char *fmt, const char *none, int a, int d, int p,
                         const struct pf_cell *c) {
    if (!pf_has_rate(a, d, p))
        return none;
    snprintf(buf, size, fmt, pf_gbps(c));
    return buf;
}

/* A row's busy seconds as printed, likewise. */
const char *pf_busy_text(char *buf, size_t size, const char *fmt, const char *none, int a, int d, int p,
                         const struct pf_cell *c) {
    if (!pf_has_rate(a, d, p))
        return none;
    snprintf(buf, size, fmt, (double)c->busy * 1e-9);
    return buf;
}

/* Sum of the copy rows that `keep` selects; with rated, only rows that have
 * a transfer rate. */
struct pf_cell pf_total(int (*keep)(int a, int d, int m, int p), int rated) {
    struct pf_cell t = {0};
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++)
                    if (keep(a, d, m, p) && (!rated || pf_has_rate(a, d, p))) {
                        const struct pf_cell c = pf_sum.copies[a][d][m][p];
                        t.calls += c.calls, t.errors += c.errors, t.bytes += c.bytes, t.ns += c.ns;
                        t.busy += c.busy;
                    }
    return t;
}

int pf_any_copy(int a, int d, int m, int p) { return (void)a, (void)d, (void)m, (void)p, 1; }
int pf_sync_copy(int a, int d, int m, int p) { return (void)d, (void)m, (void)p, is_sync(a); }
int pf_driver_pageable(int a, int d, int m, int p) {
    return (void)a, m == PF_MEM_PAGEABLE && p == PF_PATH_PASSTHROUGH && d != PF_DIR_H2H;
}
int pf_staged_rows(int a, int d, int m, int p) { return (void)a, (void)d, (void)m, p == PF_PATH_STAGED; }

int pf_register_saved(const struct pf_engine_stats *e, double *seconds, double *cpu_seconds) {
    int any = 0;
    double per_gib = pf_per_gib(e->cpu_seconds, e->bytes);
    *seconds = *cpu_seconds = 0;
    for (int d = PF_DIR_H2D; d <= PF_DIR_D2H; d++) {
        struct pf_cell st = {0}, rg = {0}, *into[2] = {&st, &rg};
        const int paths[2] = {PF_PATH_STAGED, PF_PATH_REGISTERED};
        for (int a = 0; a < PF_COPY_API_COUNT; a++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int k = 0; k < 2; k++)
                    if (pf_has_rate(a, d, paths[k])) {
                        into[k]->bytes += pf_sum.copies[a][d][m][paths[k]].bytes;
                        into[k]->ns += pf_sum.copies[a][d][m][paths[k]].ns;
                    }
        if (!st.bytes || !st.ns || !rg.bytes)
            continue;
        any = 1;
        *seconds += ((double)rg.bytes * (double)st.ns / (double)st.bytes - (double)rg.ns) * 1e-9;
        *cpu_seconds += per_gib * (double)rg.bytes / (double)(1ull << 30);
    }
    return any;
}

/* " at X GB/s" over the rows of a total that have a rate; "" when none has. */
const char *pf_at_rate(char *buf, size_t size, struct pf_cell c) {
    if (!c.ns)
        return "";
    snprintf(buf, size, " at %.2f GB/s", pf_gbps(&c));
    return buf;
}
