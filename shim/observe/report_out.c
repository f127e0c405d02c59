/* What both renderers of the report share: the buffer it is written
 * through, who this process is, and the call sites in their orders. */
#include "report.h"
#include "../base/options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void pf_out_flush(struct pf_out *o) {
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
        pf_out_flush(o);
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
