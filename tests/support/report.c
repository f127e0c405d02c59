#define _GNU_SOURCE
#include "report.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct p { const char *s, *start; struct report *r; };

static int fail(struct p *p, const char *fmt, ...)
{
    if (!p->r->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        int n = snprintf(p->r->err, sizeof p->r->err, "offset %ld: ", (long)(p->s - p->start));
        vsnprintf(p->r->err + n, sizeof p->r->err - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void ws(struct p *p) { while (isspace((unsigned char)*p->s)) p->s++; }

static int lit(struct p *p, char c)
{
    ws(p);
    if (*p->s != c)
        return fail(p, "expected '%c'", c);
    p->s++;
    return 0;
}

static int str(struct p *p, char *out, size_t n)
{
    ws(p);
    if (*p->s != '"')
        return fail(p, "expected a string");
    p->s++;
    size_t i = 0;
    while (*p->s && *p->s != '"') {
        if (*p->s == '\\' && p->s[1])
            p->s++;
        if (i + 1 < n)
            out[i++] = *p->s;
        p->s++;
    }
    if (*p->s != '"')
        return fail(p, "unterminated string");
    p->s++;
    out[i] = 0;
    return 0;
}

static int num(struct p *p, double *out)
{
    ws(p);
    char *end;
    *out = strtod(p->s, &end);
    if (end == p->s)
        return fail(p, "expected a number");
    p->s = end;
    return 0;
}

static int key(struct p *p, const char *want)
{
    char k[64];
    if (str(p, k, sizeof k) || lit(p, ':'))
        return -1;
    if (strcmp(k, want) != 0)
        return fail(p, "key \"%s\" where \"%s\" was expected", k, want);
    return 0;
}

/* a row object must start its own line */
static int row_start(struct p *p)
{
    ws(p);
    const char *q = p->s;
    while (q > p->start && (q[-1] == ' ' || q[-1] == '\t'))
        q--;
    if (q > p->start && q[-1] != '\n')
        return fail(p, "row does not start a line");
    return lit(p, '{');
}

/* A number, or null (-1) */
static int num_or_null(struct p *p, double *out)
{
    ws(p);
    if (!strncmp(p->s, "null", 4)) {
        p->s += 4;
        *out = -1;
        return 0;
    }
    return num(p, out);
}

static int transfer(struct p *p, struct rep_row *w)
{
    double d;
    w->busy_seconds = -1;
    if (row_start(p) || key(p, "api") || str(p, w->api, sizeof w->api) || lit(p, ',') ||
        key(p, "direction") || str(p, w->direction, sizeof w->direction) || lit(p, ',') ||
        key(p, "memory") || str(p, w->memory, sizeof w->memory) || lit(p, ',') ||
        key(p, "path") || str(p, w->path, sizeof w->path) || lit(p, ','))
        return -1;
    if (key(p, "calls") || num(p, &d)) return -1;
    w->calls = (long)d;
    if (lit(p, ',') || key(p, "errors") || num(p, &d)) return -1;
    w->errors = (long)d;
    if (lit(p, ',') || key(p, "bytes") || num(p, &d)) return -1;
    w->bytes = (long long)d;
    if (lit(p, ',') || key(p, "seconds") || num(p, &w->seconds)) return -1;
    if (lit(p, ',') || key(p, "gbps") || num_or_null(p, &w->gbps)) return -1;
    if (strcmp(p->r->schema, "pinfast-report/1.4") >= 0 &&
        (lit(p, ',') || key(p, "busy_seconds") || num_or_null(p, &w->busy_seconds)))
        return -1;
    return lit(p, '}');
}

static int allocation(struct p *p, struct rep_alloc *w)
{
    double d;
    if (row_start(p) || key(p, "api") || str(p, w->api, sizeof w->api) || lit(p, ','))
        return -1;
    if (key(p, "calls") || num(p, &d)) return -1;
    w->calls = (long)d;
    if (lit(p, ',') || key(p, "errors") || num(p, &d)) return -1;
    w->errors = (long)d;
    if (lit(p, ',') || key(p, "bytes") || num(p, &d)) return -1;
    w->bytes = (long long)d;
    if (lit(p, ',') || key(p, "seconds") || num(p, &w->seconds)) return -1;
    return lit(p, '}');
}

/* an integer counter: a number with no fraction or exponent */
static int count(struct p *p, const char *name, long long *out)
{
    double d;
    if (key(p, name))
        return -1;
    ws(p);
    const char *at = p->s;
    if (num(p, &d))
        return -1;
    for (const char *q = at; q < p->s; q++)
        if (!isdigit((unsigned char)*q))
            return fail(p, "\"%s\" is not a non-negative integer", name);
    *out = (long long)d;
    return 0;
}

/* "staging":{copies, bytes, pinned_bytes, contexts, threads, copy_cpu_seconds,
 * cpu_seconds_per_gib, and from 1.3 caller_cpu_seconds, staged_cpu_seconds,
 * staged_cpu_seconds_per_gib, wait_cpu_seconds}: the counters are kept, the
 * CPU times checked to be numbers */
static int staging(struct p *p, struct rep_staging *w)
{
    double d;
    if (key(p, "staging") || lit(p, '{') ||
        count(p, "copies", &w->copies) || lit(p, ',') ||
        count(p, "bytes", &w->bytes) || lit(p, ',') ||
        count(p, "pinned_bytes", &w->pinned_bytes) || lit(p, ',') ||
        count(p, "contexts", &w->contexts) || lit(p, ',') ||
        count(p, "threads", &w->threads) || lit(p, ',') ||
        key(p, "copy_cpu_seconds") || num(p, &d) || lit(p, ',') ||
        key(p, "cpu_seconds_per_gib") || num(p, &d))
        return -1;
    if (strcmp(p->r->schema, "pinfast-report/1.3") >= 0 &&
        (lit(p, ',') || key(p, "caller_cpu_seconds") || num(p, &w->caller_seconds) || lit(p, ',') ||
         key(p, "staged_cpu_seconds") || num(p, &w->cpu_seconds) || lit(p, ',') ||
         key(p, "staged_cpu_seconds_per_gib") || num(p, &d) || lit(p, ',') ||
         key(p, "wait_cpu_seconds") || num(p, &w->wait_seconds)))
        return -1;
    return lit(p, '}');
}

static int pool(struct p *p, struct rep_pool *w)
{
    if (key(p, "pool") || lit(p, '{') ||
        count(p, "hits", &w->hits) || lit(p, ',') ||
        count(p, "misses", &w->misses) || lit(p, ',') ||
        count(p, "idle_bytes", &w->idle_bytes) || lit(p, ',') ||
        count(p, "peak_idle_bytes", &w->peak_idle_bytes) || lit(p, ',') ||
        count(p, "trimmed", &w->trimmed) || lit(p, ',') ||
        key(p, "saved_seconds") || num(p, &w->saved_seconds) || lit(p, ',') ||
        key(p, "sync_seconds") || num(p, &w->sync_seconds))
        return -1;
    return lit(p, '}');
}

/* the "registrations" object after its key */
static int registrations(struct p *p, struct rep_registrations *w)
{
    w->present = 1;
    return lit(p, '{') ||
        count(p, "registered", &w->registered) || lit(p, ',') ||
        count(p, "refused", &w->refused) || lit(p, ',') ||
        count(p, "retired", &w->retired) || lit(p, ',') ||
        count(p, "undone", &w->undone) || lit(p, ',') ||
        count(p, "guarded", &w->guarded) || lit(p, ',') ||
        count(p, "handed", &w->handed) || lit(p, ',') ||
        count(p, "over_cap", &w->over_cap) || lit(p, ',') ||
        count(p, "copies", &w->copies) || lit(p, ',') ||
        count(p, "bytes", &w->bytes) || lit(p, ',') ||
        count(p, "live", &w->live) || lit(p, ',') ||
        count(p, "live_bytes", &w->live_bytes) || lit(p, ',') ||
        count(p, "peak_bytes", &w->peak_bytes) || lit(p, ',') ||
        key(p, "register_seconds") || num(p, &w->register_seconds) || lit(p, ',') ||
        count(p, "heap_blocks", &w->heap_blocks) || lit(p, ',') ||
        count(p, "heap_reused", &w->heap_reused) || lit(p, ',') ||
        count(p, "heap_released", &w->heap_released) || lit(p, ',') ||
        count(p, "kept_bytes", &w->kept_bytes) || lit(p, ',') ||
        count(p, "peak_kept_bytes", &w->peak_kept_bytes) || lit(p, ',') ||
        count(p, "forks", &w->forks) || lit(p, ',') ||
        key(p, "fork_seconds") || num(p, &w->fork_seconds) || lit(p, ',') ||
        count(p, "fork_registered_bytes", &w->fork_registered_bytes) || lit(p, ',') ||
        key(p, "saved_seconds") || num_or_null(p, &w->saved_seconds) || lit(p, ',') ||
        key(p, "saved_cpu_seconds") || num_or_null(p, &w->saved_cpu_seconds) ||
        (strcmp(p->r->schema, "pinfast-report/1.5") >= 0 &&
         (lit(p, ',') || count(p, "untouched", &w->untouched))) || lit(p, '}') ? -1 : 0;
}

/* Skips one JSON value: sections that later versions add after the pool. */
static int skip(struct p *p)
{
    ws(p);
    if (*p->s == '"') {
        char tmp[256];
        return str(p, tmp, sizeof tmp);
    }
    if (*p->s == '{' || *p->s == '[') {
        char close = *p->s == '{' ? '}' : ']';
        p->s++;
        ws(p);
        if (*p->s == close)
            return p->s++, 0;
        do {
            if (close == '}') {
                char k[256];
                if (str(p, k, sizeof k) || lit(p, ':'))
                    return -1;
            }
            if (skip(p))
                return -1;
            ws(p);
        } while (*p->s == ',' && p->s++);
        return lit(p, close);
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++)
        if (!strncmp(p->s, words[i], strlen(words[i])))
            return p->s += strlen(words[i]), 0;
    double d;
    return num(p, &d);
}

typedef int (*row_fn)(struct p *, void *);
static int transfer_row(struct p *p, void *w) { return transfer(p, w); }
static int allocation_row(struct p *p, void *w) { return allocation(p, w); }
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The rows of an array up to its ']': at most max of them, each `size` bytes. */
static int rows(struct p *p, const char *what, void *out, size_t size, int max, int *n, row_fn row)
{
    ws(p);
    if (*p->s == ']')
        return 0;
    do {
        if (*n == max)
            return fail(p, "too many %s rows", what);
        if (row(p, (char *)out + size * (size_t)(*n)++))
            return -1;
        ws(p);
    } while (*p->s == ',' && p->s++);
    return 0;
}

int report_parse(const char *text, struct report *r)
{
    memset(r, 0, sizeof *r);
    struct p p = { text, text, r };
    double d;
    if (lit(&p, '{') || key(&p, "schema") || str(&p, r->schema, sizeof r->schema) || lit(&p, ','))
        return -1;
    /* 1.x: keys added at the end of schema 1 */
    if (strcmp(r->schema, "pinfast-report/1") && strncmp(r->schema, "pinfast-report/1.", 17))
        return fail(&p, "schema \"%s\"", r->schema);
    if (key(&p, "pid") || num(&p, &d)) return -1;
    r->pid = (long)d;
    if (lit(&p, ',') || key(&p, "wall_seconds") || num(&p, &r->wall_seconds) || lit(&p, ','))
        return -1;
    if (key(&p, "transfers") || lit(&p, '['))
        return -1;
    if (rows(&p, "transfer", r->t, sizeof r->t[0], COUNT(r->t), &r->nt, transfer_row) ||
        lit(&p, ']') || lit(&p, ',') || key(&p, "allocations") || lit(&p, '[') ||
        rows(&p, "allocation", r->a, sizeof r->a[0], COUNT(r->a), &r->na, allocation_row) ||
        lit(&p, ']') || lit(&p, ',') || staging(&p, &r->staging) || lit(&p, ',') || pool(&p, &r->pool))
        return -1;
    ws(&p);
    while (*p.s == ',') { /* further sections: "summary", "histogram", "advice", ... */
        char k[64];
        p.s++;
        if (str(&p, k, sizeof k) || lit(&p, ':') ||
            (!strcmp(k, "registrations") ? registrations(&p, &r->reg) : skip(&p)))
            return -1;
        ws(&p);
    }
    if (lit(&p, '}'))
        return -1;
    ws(&p);
    if (*p.s)
        return fail(&p, "trailing text");
    return 0;
}

int report_read(const char *file, struct report *r)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        memset(r, 0, sizeof *r);
        snprintf(r->err, sizeof r->err, "cannot open %s", file);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return -1;
    }
    buf[n] = 0;
    int rc = report_parse(buf, r);
    free(buf);
    return rc;
}
