/* report.h - reader for pinfast's JSON exit report (schema pinfast-report/1 and 1.x).
 * Checks the format strictly: key names and their order in each row, one row
 * object per line, then the "staging" and "pool" sections with their keys in
 * order (both kept); of the sections after "pool", "registrations" is read
 * with its keys in order, the others skipped. */
#ifndef PFT_REPORT_H
#define PFT_REPORT_H
struct rep_row {
    char api[48], direction[16], memory[16], path[16];
    long calls, errors;
    long long bytes;
    double seconds, gbps; /* gbps -1: null, the row has no transfer rate */
    double busy_seconds;  /* 1.4: the wall time its copies were under way; -1: null */
};
struct rep_alloc {
    char api[48];
    long calls, errors;
    long long bytes;
    double seconds;
};
struct rep_staging {
    long long copies, bytes, pinned_bytes, contexts, threads;
    double caller_seconds, cpu_seconds, wait_seconds; /* 1.3 */
};
struct rep_pool {
    long long hits, misses, idle_bytes, peak_idle_bytes, trimmed;
    double saved_seconds, sync_seconds;
};
/* "registrations", after the pool, read when present (the saved figures
 * -1 when null: nothing to compare with) */
struct rep_registrations {
    int present;
    long long registered, refused, retired, undone, guarded, handed, over_cap, untouched, copies, bytes, live,
        live_bytes, peak_bytes;
    long long heap_blocks, heap_reused, heap_released, kept_bytes, peak_kept_bytes; /* pinfast's heap */
    long long forks, fork_registered_bytes; /* fork(), and the bytes registered at it */
    double fork_seconds;
    double register_seconds, saved_seconds, saved_cpu_seconds;
};
struct report {
    char schema[32];
    long pid;
    double wall_seconds;
    struct rep_row t[128];
    int nt;
    struct rep_alloc a[64];
    int na;
    struct rep_staging staging;
    struct rep_pool pool;
    struct rep_registrations reg;
    char err[160];
};
/* 0 on success; -1 with r->err set */
int report_read(const char *file, struct report *r);
int report_parse(const char *text, struct report *r);
#endif
