/* The report as JSON (schema pinfast-report/1.5, docs/report.md). */
#include "report.h"
#include "../base/options.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void report_extras_json(struct pf_out *o, double wall, const struct pf_engine_stats *e,
                               const struct pf_pool_stats *pl) {
    struct pf_cell all = pf_total(pf_any_copy, 0), rt = pf_sum.trips;
    pf_put(o,
           "\"summary\":{\"copy_seconds\":%.6f,\"share_of_wall\":%.4f,\"round_trips\":%llu,"
           "\"round_trip_bytes\":%llu},\n\"histogram\":{",
           (double)all.ns * 1e-9, wall > 0 ? (double)all.ns * 1e-9 / wall : 0.0, (unsigned long long)rt.calls,
           (unsigned long long)rt.bytes);
    const char *dsep = "";
    for (int d = 0; d < PF_DIR_COUNT; d++) {
        const char *sep = "";
        int any = 0;
        for (int k = 0; k < PF_SIZE_BUCKETS; k++) {
            const struct pf_cell c = pf_sum.sizes[d][k];
            if (!c.calls)
                continue;
            if (!any++)
                pf_put(o, "%s\n\"%s\":[", dsep, pf_dir_names[d]), dsep = ",";
            pf_put(o, "%s{\"from\":%llu,\"calls\":%llu,\"bytes\":%llu,\"seconds\":%.9f}", sep, k ? 1ull << k : 0ull,
                   (unsigned long long)c.calls, (unsigned long long)c.bytes, (double)c.ns * 1e-9);
            sep = ",";
        }
        if (any)
            pf_put(o, "]");
    }
    pf_put(o, "},\n\"advice\":[");
    struct pf_advice adv[9];
    int n = pf_advise(adv, wall, e, pl);
    for (int i = 0; i < n; i++)
        pf_put(o, "%s\n{\"kind\":\"%s\",\"text\":\"%s\"}", i ? "," : "", adv[i].kind, adv[i].text);
    pf_put(o, "\n]");
}

static void callsites_json(struct pf_out *o) {
    struct pf_site rest;
    int n = pf_callsite_collect(pf_sites, PF_CALLSITE_MAX, &rest);
    qsort(pf_sites, (size_t)n, sizeof *pf_sites, pf_sites_by_bytes);
    pf_put(o, ",\n\"callsites\":{\"sampling\":%d,\"sites\":[", pf_options()->callsites);
    for (int i = 0; i < n; i++) {
        const struct pf_site *s = &pf_sites[i];
        pf_put(o,
               "%s\n{\"library\":\"%s\",\"symbol\":\"%s\",\"offset\":%llu,\"address\":\"0x%llx\","
               "\"calls\":%llu,\"bytes\":%llu,\"seconds\":%.9f,\"samples\":%llu,\"estimated\":%s}",
               i ? "," : "", s->library, s->symbol, (unsigned long long)s->offset, (unsigned long long)s->address,
               (unsigned long long)s->calls, (unsigned long long)s->bytes, (double)s->ns * 1e-9,
               (unsigned long long)s->samples, s->estimated ? "true" : "false");
    }
    pf_put(o,
           "\n],\n\"other\":{\"calls\":%llu,\"bytes\":%llu,\"seconds\":%.9f,\"samples\":%llu,"
           "\"estimated\":%s}}",
           (unsigned long long)rest.calls, (unsigned long long)rest.bytes, (double)rest.ns * 1e-9,
           (unsigned long long)rest.samples, rest.estimated ? "true" : "false");
}

void pf_report_json(struct pf_out *o, double wall, const struct pf_engine_stats *e, const struct pf_pool_stats *pl) {
    pf_put(o, "{\"schema\":\"pinfast-report/1.5\",\"pid\":%d,\"wall_seconds\":%.6f,\n\"transfers\":[", (int)getpid(),
           wall);
    const char *sep = "\n";
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++) {
                    const struct pf_cell *c = &pf_sum.copies[a][d][m][p];
                    if (!c->calls)
                        continue;
                    char rate[32], busy[32];
                    pf_put(o,
                           "%s{\"api\":\"%s\",\"direction\":\"%s\",\"memory\":\"%s\",\"path\":\"%s\","
                           "\"calls\":%llu,\"errors\":%llu,\"bytes\":%llu,\"seconds\":%.9f,\"gbps\":%s,"
                           "\"busy_seconds\":%s}",
                           sep, pf_copy_api_names[a], pf_dir_names[d], pf_mem_names[m], pf_path_names[p],
                           (unsigned long long)c->calls, (unsigned long long)c->errors, (unsigned long long)c->bytes,
                           (double)c->ns * 1e-9, pf_rate_text(rate, sizeof rate, "%.3f", "null", a, d, p, c),
                           pf_busy_text(busy, sizeof busy, "%.9f", "null", a, d, p, c));
                    sep = ",\n";
                }
    pf_put(o, "\n],\n\"allocations\":[");
    sep = "\n";
    for (int a = 0; a < PF_ALLOC_API_COUNT; a++) {
        const struct pf_cell s_ = pf_cell_of(&pf_alloc_counters[a]), *c = &s_;
        if (!c->calls)
            continue;
        pf_put(o, "%s{\"api\":\"%s\",\"calls\":%llu,\"errors\":%llu,\"bytes\":%llu,\"seconds\":%.9f}", sep,
               pf_alloc_api_names[a], (unsigned long long)c->calls, (unsigned long long)c->errors,
               (unsigned long long)c->bytes, (double)c->ns * 1e-9);
        sep = ",\n";
    }
    pf_put(o,
           "\n],\n\"staging\":{\"copies\":%llu,\"bytes\":%llu,\"pinned_bytes\":%llu,"
           "\"contexts\":%d,\"threads\":%d,\"copy_cpu_seconds\":%.6f,\"cpu_seconds_per_gib\":%.6f,"
           "\"caller_cpu_seconds\":%.6f,\"staged_cpu_seconds\":%.6f,\"staged_cpu_seconds_per_gib\":%.6f,"
           "\"wait_cpu_seconds\":%.6f},\n",
           e->copies, e->bytes, e->pinned_bytes, e->contexts, e->threads, e->worker_seconds,
           pf_per_gib(e->worker_seconds, e->bytes), e->caller_seconds, e->cpu_seconds,
           pf_per_gib(e->cpu_seconds, e->bytes), e->wait_seconds);
    pf_put(o,
           "\"pool\":{\"hits\":%llu,\"misses\":%llu,\"idle_bytes\":%llu,\"peak_idle_bytes\":%llu,"
           "\"trimmed\":%llu,\"saved_seconds\":%.6f,\"sync_seconds\":%.6f},\n",
           pl->hits, pl->misses, pl->idle_bytes, pl->peak_idle_bytes, pl->trimmed, pl->saved_seconds, pl->sync_seconds);
    pf_put(o,
           "\"registrations\":{\"registered\":%llu,\"refused\":%llu,\"retired\":%llu,\"undone\":%llu,"
           "\"guarded\":%llu,\"handed\":%llu,\"over_cap\":%llu,\"copies\":%llu,\"bytes\":%llu,\"live\":%llu,"
           "\"live_bytes\":%llu,\"peak_bytes\":%llu,\"register_seconds\":%.6f,\"heap_blocks\":%llu,"
           "\"heap_reused\":%llu,\"heap_released\":%llu,\"kept_bytes\":%llu,\"peak_kept_bytes\":%llu,"
           "\"forks\":%llu,\"fork_seconds\":%.6f,\"fork_registered_bytes\":%llu,",
           e->reg.registered, e->reg.refused, e->reg.retired, e->reg.undone, e->reg.guarded, e->reg.handed,
           e->reg.over_cap, e->reg.copies, e->reg.bytes, e->reg.live, e->reg.live_bytes, e->reg.peak_bytes,
           e->reg.register_seconds, e->reg.heap_blocks, e->reg.heap_reused, e->reg.heap_released, e->reg.kept_bytes,
           e->reg.peak_kept_bytes, e->reg.forks, e->reg.fork_seconds, e->reg.fork_registered_bytes);
    double saved, saved_cpu;
    if (pf_register_saved(e, &saved, &saved_cpu))
        pf_put(o, "\"saved_seconds\":%.6f,\"saved_cpu_seconds\":%.6f,", saved, saved_cpu);
    else
        pf_put(o, "\"saved_seconds\":null,\"saved_cpu_seconds\":null,");
    pf_put(o, "\"untouched\":%llu},\n", e->reg.untouched);
    report_extras_json(o, wall, e, pl);
    if (pf_options()->callsites)
        callsites_json(o);
    struct pf_whoami w;
    pf_whoami(&w);
    /* host names hold letters, digits and dashes only: no JSON escapes */
    pf_put(o, ",\n\"rank\":%s,\"host\":\"%s\"}\n", strcmp(w.rank, "x") ? w.rank : "null", w.host);
}
