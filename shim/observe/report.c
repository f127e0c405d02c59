/* The exit report: where it goes, the buffer it is written through, and
 * what both renderers share (who this process is, its call pf_sites). */
#include "report.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/options.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void flush(struct pf_out *o) {
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

void pf_put(struct pf_out *o, const char *fmt, ...) {
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

struct pf_site pf_sites[PF_CALLSITE_MAX];

static int desc(uint64_t x, uint64_t y) { return (x < y) - (x > y); }
int pf_sites_by_bytes(const void *a, const void *b) {
    const struct pf_site *x = a, *y = b;
    return desc(x->bytes, y->bytes) ? desc(x->bytes, y->bytes) : desc(x->ns, y->ns);
}
int pf_sites_by_time(const void *a, const void *b) {
    const struct pf_site *x = a, *y = b;
    return desc(x->ns, y->ns) ? desc(x->ns, y->ns) : desc(x->bytes, y->bytes);
}

/* The launcher's rank ("x": none given) and the short host name, as %r and
 * %h give them in file names, so that a report says which file it is. */
void pf_whoami(struct pf_whoami *w) {
    /* each fits: a rank has at most 9 digits, a host name is cut at 71 bytes */
    pf_options_file("%r", w->rank, sizeof w->rank);
    pf_options_file("%h", w->host, sizeof w->host);
}


static int is_json_name(const char *path) {
    size_t n = strlen(path);
    return n >= 5 && !strcasecmp(path + n - 5, ".json");
}

void pf_stats_report(const struct pf_engine_stats *staging, const struct pf_pool_stats *pool) {
    const struct pf_options *opt = pf_options();
    if (!__atomic_load_n(&pf_stats_used, __ATOMIC_RELAXED) || opt->disable ||
        opt->stats == PF_STATS_OFF)
        return;
    static struct pf_out o; /* 8 KiB: not on the stack of an exiting thread */
    o.fd = STDERR_FILENO;
    o.failed = 0;
    o.len = 0;
    char path[4096];
    int json = opt->stats == PF_STATS_JSON;
    if (opt->stats_file) {
        if (pf_options_file(opt->stats_file, path, sizeof path)) {
            pf_msg(PF_WARNING, "PINFAST_STATS_FILE is too long; report goes to stderr");
        } else {
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) {
                pf_msg(PF_WARNING, "cannot write the report to %s (%s); report goes to stderr",
                       path, strerror(errno));
            } else {
                o.fd = fd;
                /* a file named *.json holds JSON unless PINFAST_STATS chose:
                 * `pinfast report` and `diff` read only that */
                json |= !pf_options_given("PINFAST_STATS") && is_json_name(path);
            }
        }
    }
    double wall = (double)(pf_now_ns() - pf_counters_start_ns()) * 1e-9;
    pf_summary_gather();
    if (json)
        pf_report_json(&o, wall, staging, pool);
    else
        pf_report_text(&o, wall, staging, pool);
    flush(&o);
    if (o.failed)
        pf_msg(PF_WARNING, "writing the report failed (%s)", strerror(o.failed));
    if (o.fd != STDERR_FILENO)
        close(o.fd);
}
