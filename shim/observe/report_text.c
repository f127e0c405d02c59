/* The report as text, one line per row, each prefixed "pinfast:". */
#include "report.h"
#include "../base/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void report_extras_text(struct pf_out *o, double wall, const struct pf_engine_stats *e,
                               const struct pf_pool_stats *pl) {
    struct pf_cell all = pf_total(pf_any_copy, 0);
    pf_put(o, "pinfast: %.3f s inside copy calls, %.1f%% of the run\n", (double)all.ns * 1e-9,
           wall > 0 ? 100 * (double)all.ns * 1e-9 / wall : 0.0);
    static const char *const unit[] = {"B", "K", "M", "G", "T"};
    for (int d = 0; d < PF_DIR_COUNT; d++) {
        char line[400];
        size_t len = 0;
        for (int k = 0; k < PF_SIZE_BUCKETS && len < sizeof line - 40; k++) {
            const struct pf_cell c = pf_sum.sizes[d][k];
            if (c.calls)
                len += (size_t)snprintf(line + len, sizeof line - len, " %llu%s:%llu", 1ull << (k % 10), unit[k / 10],
                                        (unsigned long long)c.calls);
        }
        if (len)
            pf_put(o, "pinfast: sizes %s (from, calls):%s\n", pf_dir_names[d], line);
    }
    struct pf_advice adv[9];
    int n = pf_advise(adv, wall, e, pl);
    for (int i = 0; i < n; i++)
        pf_put(o, "pinfast: advice: %s\n", adv[i].text);
}

#define TOP_SITES 10

static void callsites_text(struct pf_out *o) {
    struct pf_site rest;
    int n = pf_callsite_collect(pf_sites, PF_CALLSITE_MAX, &rest);
    for (int pass = 0; pass < 2 && n; pass++) {
        qsort(pf_sites, (size_t)n, sizeof *pf_sites, pass ? pf_sites_by_time : pf_sites_by_bytes);
        pf_put(o, "pinfast: where from, by %s (~: estimated from 1 in %d small copies):\n", pass ? "time" : "bytes",
               pf_options()->callsites);
        pf_put(o, "pinfast:  %14s %11s %10s  %s\n", "bytes", "seconds", "calls", "site");
        for (int i = 0; i < n && i < TOP_SITES; i++) {
            const struct pf_site *s = &pf_sites[i];
            pf_put(o, "pinfast: %c%14llu %11.6f %10llu  %s%s%s+0x%llx\n", s->estimated ? '~' : ' ',
                   (unsigned long long)s->bytes, (double)s->ns * 1e-9, (unsigned long long)s->calls, s->library,
                   s->symbol[0] ? " " : "", s->symbol, (unsigned long long)s->offset);
        }
    }
    if (rest.samples)
        pf_put(o, "pinfast: sites beyond the first %d: %llu calls, %llu bytes, %.6f s\n", PF_CALLSITE_MAX,
               (unsigned long long)rest.calls, (unsigned long long)rest.bytes, (double)rest.ns * 1e-9);
}

void pf_report_text(struct pf_out *o, double wall, const struct pf_engine_stats *e, const struct pf_pool_stats *pl) {
    struct pf_whoami w;
    pf_whoami(&w);
    pf_put(o, "pinfast: transfer report, pid %d%s%s on %s, %.3f s since start\n", (int)getpid(),
           strcmp(w.rank, "x") ? ", rank " : "", strcmp(w.rank, "x") ? w.rank : "", w.host, wall);
    pf_put(o, "pinfast: %-20s %-5s %-9s %-11s %10s %6s %14s %11s %11s %9s\n", "api", "dir", "memory", "path", "calls",
           "errors", "bytes", "seconds", "busy s", "GB/s");
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++) {
                    const struct pf_cell *c = &pf_sum.copies[a][d][m][p];
                    char rate[32], busy[32];
                    if (!c->calls)
                        continue;
                    pf_put(o, "pinfast: %-20s %-5s %-9s %-11s %10llu %6llu %14llu %11.6f %11s %9s\n",
                           pf_copy_api_names[a], pf_dir_names[d], pf_mem_names[m], pf_path_names[p],
                           (unsigned long long)c->calls, (unsigned long long)c->errors, (unsigned long long)c->bytes,
                           (double)c->ns * 1e-9, pf_busy_text(busy, sizeof busy, "%.6f", "-", a, d, p, c),
                           pf_rate_text(rate, sizeof rate, "%.2f", "-", a, d, p, c));
                }
    for (int a = 0; a < PF_ALLOC_API_COUNT; a++) {
        const struct pf_cell s_ = pf_cell_of(&pf_alloc_counters[a]), *c = &s_;
        if (c->calls)
            pf_put(o, "pinfast: %-20s %-5s %-9s %-11s %10llu %6llu %14llu %11.6f\n", pf_alloc_api_names[a], "-", "-",
                   "-", (unsigned long long)c->calls, (unsigned long long)c->errors, (unsigned long long)c->bytes,
                   (double)c->ns * 1e-9);
    }
    if (e->copies) {
        pf_put(o,
               "pinfast: staging: %llu copies, %.1f MiB, %d threads, %.1f MiB pinned in %d "
               "context(s), %.3f s of copy CPU time (%.3f s per GiB)\n",
               e->copies, e->bytes / 1048576.0, e->threads, e->pinned_bytes / 1048576.0, e->contexts, e->worker_seconds,
               pf_per_gib(e->worker_seconds, e->bytes));
        pf_put(o,
               "pinfast: staging CPU: %.3f s (%.3f s per GiB): workers' copies and %.3f s of "
               "callers' inside staged copies, %.3f s of it polling for the GPU\n",
               e->cpu_seconds, pf_per_gib(e->cpu_seconds, e->bytes), e->caller_seconds, e->wait_seconds);
    }
    double saved, saved_cpu;
    if (e->reg.registered + e->reg.refused + e->reg.heap_blocks) {
        pf_put(o,
               "pinfast: heap: %llu large blocks served, %llu reused, %llu given back, %.1f MiB kept "
               "(peak %.1f); registrations: %llu made (%llu refused, %llu over the cap, %llu left as not "
               "touched whole), %llu retired as "
               "their memory changed, %llu undone, %llu copies passed through over one, %llu of the "
               "program's answered from one; %llu copies of %.1f MiB through them, %.1f MiB registered "
               "at most, %.3f s registering",
               e->reg.heap_blocks, e->reg.heap_reused, e->reg.heap_released, e->reg.kept_bytes / 1048576.0,
               e->reg.peak_kept_bytes / 1048576.0, e->reg.registered, e->reg.refused, e->reg.over_cap, e->reg.untouched,
               e->reg.retired, e->reg.undone, e->reg.guarded, e->reg.handed, e->reg.copies, e->reg.bytes / 1048576.0,
               e->reg.peak_bytes / 1048576.0, e->reg.register_seconds);
        if (pf_register_saved(e, &saved, &saved_cpu))
            pf_put(o, "; against this run's staging they saved %.3f s and %.3f s of CPU", saved, saved_cpu);
        if (e->reg.forks && e->reg.fork_registered_bytes)
            pf_put(o, "; %llu fork(s) took %.3f s with %.2f GiB registered (%.3f s per registered GiB at most)",
                   e->reg.forks, e->reg.fork_seconds, e->reg.fork_registered_bytes / 1073741824.0,
                   e->reg.fork_seconds / (e->reg.fork_registered_bytes / 1073741824.0));
        pf_put(o, "\n");
    }
    if (pl->hits + pl->misses)
        pf_put(o,
               "pinfast: pinned pool: %llu hits, %llu misses, %.1f MiB idle (peak %.1f), %llu "
               "trimmed, %.3f s of allocation saved, %.3f s synchronising at free\n",
               pl->hits, pl->misses, pl->idle_bytes / 1048576.0, pl->peak_idle_bytes / 1048576.0, pl->trimmed,
               pl->saved_seconds, pl->sync_seconds);
    report_extras_text(o, wall, e, pl);
    if (pf_options()->callsites)
        callsites_text(o);
}
