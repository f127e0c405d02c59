#include "stats.h"
#include "clock.h"
#include "message.h"
#include "engine.h"
#include "options.h"
#include "pool.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct cell {
    uint64_t calls, errors, bytes, ns;
};

static struct cell copies[PF_COPY_API_COUNT][PF_DIR_COUNT][PF_MEM_COUNT][PF_PATH_COUNT];
static struct cell allocs[PF_ALLOC_API_COUNT];
static int used;
static uint64_t start_ns;

#define PF_API_NAME_(id, name) name,
static const char *const copy_names[] = {PF_COPY_APIS(PF_API_NAME_)};
static const char *const alloc_names[] = {PF_ALLOC_APIS(PF_API_NAME_)};
#undef PF_API_NAME_
static const char *const dir_names[] = {"H2D", "D2H", "D2D", "H2H", "mixed"};
static const char *const mem_names[] = {"pageable", "pinned", "pinfast", "managed",
                                        "device", "mixed", "unknown"};
static const char *const path_names[] = {"passthrough", "staged"};

static void add(struct cell *c, size_t bytes, uint64_t ns, int result) {
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->ns, ns, __ATOMIC_RELAXED);
    if (result)
        __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
}

void pf_stats_copy(enum pf_copy_api api, enum pf_dir dir, enum pf_mem mem, enum pf_path path,
                   size_t bytes, uint64_t ns, int result) {
    add(&copies[api][dir][mem][path], bytes, ns, result);
}

void pf_stats_alloc(enum pf_alloc_api api, size_t bytes, uint64_t ns, int result) {
    add(&allocs[api], bytes, ns, result);
}

void pf_stats_touch(void) {
    if (!__atomic_load_n(&used, __ATOMIC_RELAXED))
        __atomic_store_n(&used, 1, __ATOMIC_RELAXED);
}

void pf_stats_reset(void) {
    memset(copies, 0, sizeof copies);
    memset(allocs, 0, sizeof allocs);
    used = 0;
    start_ns = pf_now_ns();
}

__attribute__((constructor)) static void stats_start(void) { start_ns = pf_now_ns(); }

enum pf_dir pf_dir_of(enum pf_mem src, enum pf_mem dst) {
    int sd = src == PF_MEM_DEVICE, dd = dst == PF_MEM_DEVICE;
    return sd ? (dd ? PF_DIR_D2D : PF_DIR_D2H) : (dd ? PF_DIR_H2D : PF_DIR_H2H);
}

/* A bounded buffer flushed with write(2): no stdio state, no allocation. */
struct out {
    int fd, failed;
    size_t len;
    char buf[8192];
};

static void flush(struct out *o) {
    size_t off = 0;
    while (off < o->len && !o->failed) {
        ssize_t w = write(o->fd, o->buf + off, o->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            o->failed = errno ? errno : EIO;
        else
            off += (size_t)w;
    }
    o->len = 0;
}

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    if (o->len + (size_t)n > sizeof o->buf)
        flush(o);
    memcpy(o->buf + o->len, line, (size_t)n);
    o->len += (size_t)n;
}

/* Copies still in flight on other threads at exit keep counting. */
static struct cell snap(const struct cell *c) {
    return (struct cell){__atomic_load_n(&c->calls, __ATOMIC_RELAXED),
                         __atomic_load_n(&c->errors, __ATOMIC_RELAXED),
                         __atomic_load_n(&c->bytes, __ATOMIC_RELAXED),
                         __atomic_load_n(&c->ns, __ATOMIC_RELAXED)};
}

static double gbps(const struct cell *c) { return c->ns ? (double)c->bytes / (double)c->ns : 0.0; }

static double per_gib(double seconds, unsigned long long bytes) {
    return bytes ? seconds / ((double)bytes / (1 << 30)) : 0.0;
}

static void report_json(struct out *o, double wall) {
    put(o, "{\"schema\":\"pinfast-report/1\",\"pid\":%d,\"wall_seconds\":%.6f,\n\"transfers\":[",
        (int)getpid(), wall);
    const char *sep = "\n";
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++) {
                    const struct cell s_ = snap(&copies[a][d][m][p]), *c = &s_;
                    if (!c->calls)
                        continue;
                    put(o,
                        "%s{\"api\":\"%s\",\"direction\":\"%s\",\"memory\":\"%s\",\"path\":\"%s\","
                        "\"calls\":%llu,\"errors\":%llu,\"bytes\":%llu,\"seconds\":%.9f,\"gbps\":%.3f}",
                        sep, copy_names[a], dir_names[d], mem_names[m], path_names[p],
                        (unsigned long long)c->calls, (unsigned long long)c->errors,
                        (unsigned long long)c->bytes, (double)c->ns * 1e-9, gbps(c));
                    sep = ",\n";
                }
    put(o, "\n],\n\"allocations\":[");
    sep = "\n";
    for (int a = 0; a < PF_ALLOC_API_COUNT; a++) {
        const struct cell s_ = snap(&allocs[a]), *c = &s_;
        if (!c->calls)
            continue;
        put(o, "%s{\"api\":\"%s\",\"calls\":%llu,\"errors\":%llu,\"bytes\":%llu,\"seconds\":%.9f}",
            sep, alloc_names[a], (unsigned long long)c->calls, (unsigned long long)c->errors,
            (unsigned long long)c->bytes, (double)c->ns * 1e-9);
        sep = ",\n";
    }
    struct pf_engine_stats e;
    struct pf_pool_stats pl;
    pf_engine_stats(&e);
    pf_pool_stats(&pl);
    put(o,
        "\n],\n\"staging\":{\"copies\":%llu,\"bytes\":%llu,\"pinned_bytes\":%llu,"
        "\"contexts\":%d,\"threads\":%d,\"copy_cpu_seconds\":%.6f,\"cpu_seconds_per_gib\":%.6f},\n",
        e.copies, e.bytes, e.pinned_bytes, e.contexts, e.threads, e.worker_seconds,
        per_gib(e.worker_seconds, e.bytes));
    put(o,
        "\"pool\":{\"hits\":%llu,\"misses\":%llu,\"idle_bytes\":%llu,\"peak_idle_bytes\":%llu,"
        "\"trimmed\":%llu,\"saved_seconds\":%.6f,\"sync_seconds\":%.6f}}\n",
        pl.hits, pl.misses, pl.idle_bytes, pl.peak_idle_bytes, pl.trimmed, pl.saved_seconds,
        pl.sync_seconds);
}

static void report_text(struct out *o, double wall) {
    put(o, "pinfast: transfer report, pid %d, %.3f s since start\n", (int)getpid(), wall);
    put(o, "pinfast: %-20s %-5s %-9s %-11s %10s %6s %14s %11s %9s\n", "api", "dir", "memory",
        "path", "calls", "errors", "bytes", "seconds", "GB/s");
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++) {
                    const struct cell s_ = snap(&copies[a][d][m][p]), *c = &s_;
                    if (c->calls)
                        put(o, "pinfast: %-20s %-5s %-9s %-11s %10llu %6llu %14llu %11.6f %9.2f\n",
                            copy_names[a], dir_names[d], mem_names[m], path_names[p],
                            (unsigned long long)c->calls, (unsigned long long)c->errors,
                            (unsigned long long)c->bytes, (double)c->ns * 1e-9, gbps(c));
                }
    for (int a = 0; a < PF_ALLOC_API_COUNT; a++) {
        const struct cell s_ = snap(&allocs[a]), *c = &s_;
        if (c->calls)
            put(o, "pinfast: %-20s %-5s %-9s %-11s %10llu %6llu %14llu %11.6f\n", alloc_names[a],
                "-", "-", "-", (unsigned long long)c->calls, (unsigned long long)c->errors,
                (unsigned long long)c->bytes, (double)c->ns * 1e-9);
    }
    struct pf_engine_stats e;
    struct pf_pool_stats pl;
    pf_engine_stats(&e);
    pf_pool_stats(&pl);
    if (e.copies)
        put(o, "pinfast: staging: %llu copies, %.1f MiB, %d threads, %.1f MiB pinned in %d "
               "context(s), %.3f s of copy CPU time (%.3f s per GiB)\n",
            e.copies, e.bytes / 1048576.0, e.threads, e.pinned_bytes / 1048576.0, e.contexts,
            e.worker_seconds, per_gib(e.worker_seconds, e.bytes));
    if (pl.hits + pl.misses)
        put(o, "pinfast: pinned pool: %llu hits, %llu misses, %.1f MiB idle (peak %.1f), %llu "
               "trimmed, %.3f s of allocation saved, %.3f s synchronising at free\n",
            pl.hits, pl.misses, pl.idle_bytes / 1048576.0, pl.peak_idle_bytes / 1048576.0,
            pl.trimmed, pl.saved_seconds, pl.sync_seconds);
}

/* The file name with %p replaced by the pid, %% by %. */
static int expand(const char *pattern, char *path, size_t size) {
    size_t n = 0;
    for (const char *s = pattern; *s; s++) {
        char tmp[24];
        const char *piece = tmp;
        if (s[0] == '%' && s[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%d", (int)getpid());
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            tmp[0] = '%', tmp[1] = 0;
            s++;
        } else {
            tmp[0] = *s, tmp[1] = 0;
        }
        size_t k = strlen(piece);
        if (n + k >= size)
            return -1;
        memcpy(path + n, piece, k);
        n += k;
    }
    path[n] = 0;
    return 0;
}

void pf_stats_report(void) {
    const struct pf_options *opt = pf_options();
    if (!__atomic_load_n(&used, __ATOMIC_RELAXED) || opt->disable || opt->stats == PF_STATS_OFF)
        return;
    static struct out o; /* 8 KiB: not on the stack of an exiting thread */
    o.fd = STDERR_FILENO;
    o.failed = 0;
    o.len = 0;
    char path[4096];
    if (opt->stats_file) {
        if (expand(opt->stats_file, path, sizeof path)) {
            pf_msg(PF_WARNING, "PINFAST_STATS_FILE is too long; report goes to stderr");
        } else {
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0)
                pf_msg(PF_WARNING, "cannot write the report to %s (%s); report goes to stderr",
                       path, strerror(errno));
            else
                o.fd = fd;
        }
    }
    double wall = (double)(pf_now_ns() - start_ns) * 1e-9;
    if (opt->stats == PF_STATS_JSON)
        report_json(&o, wall);
    else
        report_text(&o, wall);
    flush(&o);
    if (o.failed)
        pf_msg(PF_WARNING, "writing the report failed (%s)", strerror(o.failed));
    if (o.fd != STDERR_FILENO)
        close(o.fd);
}
