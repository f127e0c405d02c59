#include "options.h"
#include "message.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum kind { K_BOOL, K_ENUM, K_INT, K_SIZE, K_STRING };

struct option {
    const char *name;
    enum kind kind;
    size_t offset;
    const char *def;
    long long min, max;       /* K_INT, K_SIZE */
    const char *const *names; /* K_ENUM, NULL-terminated; index is the value */
    const char *help;
};

static const char *const stats_names[] = {"off", "text", "json", NULL};
static const char *const trace_format_names[] = {"lines", "chrome", NULL};
static const char *const log_names[] = {"error", "warning", "info", "debug", NULL};
static const char *const host_copy_names[] = {"memcpy", "stream", "auto", NULL};

#define KiB 1024LL
#define MiB (1024LL * KiB)
#define GiB (1024LL * MiB)
#define F(field) offsetof(struct pf_options, field)

/* The defaults of the engine come from the sweep in docs/results (see docs/options.md). */
static const struct option table[] = {
    {"PINFAST_HELP", K_BOOL, F(help), "0", 0, 1, NULL, "1: print this table when the library is loaded"},
    {"PINFAST_DISABLE", K_BOOL, F(disable), "0", 0, 1, NULL,
     "1: pass every call through untouched, count nothing, print nothing"},
    {"PINFAST_STATS", K_ENUM, F(stats), "text", 0, 0, stats_names,
     "exit report: off, text (a table) or json; unset: json into a PINFAST_STATS_FILE named *.json"},
    {"PINFAST_STATS_FILE", K_STRING, F(stats_file), "", 0, 0, NULL,
     "write the exit report here instead of stderr; %p: pid, %r: rank, %h: host"},
    {"PINFAST_TRACE", K_STRING, F(trace), "", 0, 0, NULL,
     "write one line per intercepted call to this file; %p, %r, %h as above"},
    {"PINFAST_TRACE_FORMAT", K_ENUM, F(trace_format), "lines", 0, 0, trace_format_names,
     "the trace: lines, or chrome (a JSON timeline for ui.perfetto.dev, with staged chunks)"},
    {"PINFAST_LOG", K_ENUM, F(log), "warning", 0, 0, log_names, "messages printed: error, warning, info or debug"},
    {"PINFAST_STAGE", K_BOOL, F(stage), "1", 0, 1, NULL, "0: never stage pageable copies (count them only)"},
    {"PINFAST_HUGEPAGES", K_BOOL, F(hugepages), "1", 0, 1, NULL,
     "advise huge pages for a D2H destination never touched (THP in madvise mode)"},
    {"PINFAST_THREADS", K_INT, F(threads), "0", 0, 64, NULL,
     "staging worker threads; 0: 16 per context staging, at most 3 of 4 CPUs"},
    {"PINFAST_CHUNK", K_SIZE, F(chunk), "2M", 64 * KiB, 256 * MiB, NULL, "largest piece a staged copy is cut into"},
    {"PINFAST_MIN_SIZE", K_SIZE, F(min_size), "512K", 0, 1LL << 40, NULL,
     "pageable copies smaller than this pass through to the driver"},
    {"PINFAST_STAGING", K_SIZE, F(staging), "128M", 0, 16 * GiB, NULL,
     "the most pinned staging memory per CUDA context, pinned as copies need it; 0 disables staging"},
    {"PINFAST_BOUNCE", K_SIZE, F(bounce), "16M", 0, 1 * GiB, NULL,
     "pinned bounce area per CUDA context for asynchronous pageable H2D under PINFAST_MIN_SIZE; 0: none"},
    {"PINFAST_ASYNC_D2H", K_BOOL, F(async_d2h), "0", 0, 1, NULL,
     "1: a pageable cuMemcpyDtoHAsync returns before its data lands (see docs/options.md)"},
    {"PINFAST_POOL", K_SIZE, F(pool_idle), "1G", 0, 1LL << 40, NULL,
     "freed pinned memory kept for reuse by later allocations; 0: no cache"},
    {"PINFAST_COPY_H2D", K_ENUM, F(copy_h2d), "auto", 0, 0, host_copy_names,
     "how workers fill slots: memcpy, stream (non-temporal stores), auto (stream below 128M)"},
    {"PINFAST_COPY_D2H", K_ENUM, F(copy_d2h), "auto", 0, 0, host_copy_names,
     "how workers empty slots into the program's memory: memcpy, stream, auto (stream from 64M)"},
    {"PINFAST_CALLSITES", K_INT, F(callsites), "256", 0, 1 << 20, NULL,
     "report call sites: walk the stack of 1 in N small copies (1: every copy; 0: off)"},
    {"PINFAST_NVTX", K_BOOL, F(nvtx), "1", 0, 1, NULL,
     "NVTX ranges around staged copies, seen when a profiler (Nsight Systems) is attached"},
    {"PINFAST_REGISTER", K_BOOL, F(reg), "1", 0, 1, NULL,
     "serve large heap blocks from pinfast's heap, register those copied again and again (docs/options.md)"},
    {"PINFAST_REGISTER_MAX", K_SIZE, F(reg_max), "0", 0, 1LL << 50, NULL,
     "registered memory at most; 0: RLIMIT_MEMLOCK when finite, at most a quarter of RAM"},
    {"PINFAST_REGISTER_MIN", K_SIZE, F(reg_min), "1M", 4 * KiB, 1LL << 50, NULL,
     "smaller heap blocks are the real allocator's; smaller copies never register a block"},
    {"PINFAST_REGISTER_AFTER", K_INT, F(reg_after), "2", 1, 1000, NULL,
     "a block is registered after its Nth copy, by a background thread"},
    {"PINFAST_HEAP_KEEP", K_SIZE, F(heap_keep), "0", 0, 1LL << 50, NULL,
     "freed large blocks kept warm (unregistered) for reuse; 0: an eighth of RAM, at most 8G"},
};

struct pf_options pf_options_parsed;
int pf_options_ready;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Each setting as the environment gave it: whether it did, and if its value
 * was refused, why and the value, for pf_options_warn (kept: the program
 * may change its environment in between). */
static struct {
    int given;
    const char *why;
    char value[64];
} from_env[sizeof table / sizeof table[0]];

static int parse_size(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    long long mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = KiB;
        end++;
        break;
    case 'm':
    case 'M':
        mul = MiB;
        end++;
        break;
    case 'g':
    case 'G':
        mul = GiB;
        end++;
        break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end || v > LLONG_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

static int parse_bool(const char *s) {
    static const char *const yes[] = {"1", "yes", "on", "true"};
    static const char *const no[] = {"0", "no", "off", "false"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i]))
            return 1;
        if (!strcasecmp(s, no[i]))
            return 0;
    }
    return -1;
}

static int parse_enum(const char *s, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (!strcasecmp(s, names[i]))
            return i;
    return -1;
}

/* Returns 0 and stores the value, or -1 with why filled in. */
static int apply(const struct option *o, const char *s, const char **why) {
    char *field = (char *)&pf_options_parsed + o->offset;
    long long v;
    switch (o->kind) {
    case K_BOOL:
        if ((v = parse_bool(s)) < 0)
            return *why = "not a boolean (0/1)", -1;
        *(int *)field = (int)v;
        return 0;
    case K_ENUM:
        if ((v = parse_enum(s, o->names)) < 0)
            return *why = "not one of the allowed words", -1;
        *(int *)field = (int)v;
        return 0;
    case K_INT:
    case K_SIZE:
        if (o->kind == K_INT) {
            char *end;
            errno = 0;
            v = strtoll(s, &end, 10);
            if (errno || end == s || *end)
                return *why = "not an integer", -1;
        } else if (parse_size(s, &v)) {
            return *why = "not a size (bytes, or with K/M/G)", -1;
        }
        if (v < o->min || v > o->max)
            return *why = "out of range", -1;
        if (o->kind == K_INT)
            *(int *)field = (int)v;
        else
            *(size_t *)field = (size_t)v;
        return 0;
    case K_STRING: *(const char **)field = *s ? s : NULL; return 0;
    }
    return -1;
}

static void parse(void) {
    const size_t n = sizeof table / sizeof table[0];
    const char *why;
    for (size_t i = 0; i < n; i++) {
        int r = apply(&table[i], table[i].def, &why);
        (void)r; /* defaults are valid by construction (checked by a test) */
    }
    /* PINFAST_LOG first, so warnings about the others obey it */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const struct option *o = &table[i];
            if ((o->offset == F(log)) != (pass == 0))
                continue;
            const char *s = getenv(o->name);
            if (!s)
                continue;
            from_env[i].given = 1;
            if (apply(o, s, &why) == 0) {
                if (pass == 0)
                    pf_log_set_level(pf_options_parsed.log);
                continue;
            }
            from_env[i].why = why;
            snprintf(from_env[i].value, sizeof from_env[i].value, "%s", s);
            apply(o, o->def, &why);
        }
    }
    pf_options_parsed.time_every_call = pf_options_parsed.trace || pf_options_parsed.callsites == 1;
    __atomic_store_n(&pf_options_ready, 1, __ATOMIC_RELEASE);
}

const struct pf_options *pf_options_load(void) {
    pthread_once(&once, parse);
    return &pf_options_parsed;
}

void pf_options_warn(void) {
    /* PINFAST_DISABLE=1 prints nothing */
    if (pf_options()->disable)
        return;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (from_env[i].why)
            pf_msg(PF_WARNING, "%s=%s: %s; using the default %s", table[i].name, from_env[i].value, from_env[i].why,
                   *table[i].def ? table[i].def : "(none)");
}

int pf_options_given(const char *name) {
    pf_options();
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name))
            return from_env[i].given;
    return 0;
}

void pf_options_describe(int fd) {
    dprintf(fd, "%-20s %-8s %-26s %s\n", "variable", "default", "allowed", "meaning");
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const struct option *o = &table[i];
        char allowed[64] = "";
        switch (o->kind) {
        case K_BOOL: snprintf(allowed, sizeof allowed, "0 or 1"); break;
        case K_STRING: snprintf(allowed, sizeof allowed, "a path"); break;
        case K_INT: snprintf(allowed, sizeof allowed, "%lld..%lld", o->min, o->max); break;
        case K_SIZE: snprintf(allowed, sizeof allowed, "%lldK..%lldM", o->min / KiB, o->max / MiB); break;
        case K_ENUM:
            for (int k = 0; o->names[k]; k++) {
                strncat(allowed, k ? "|" : "", sizeof allowed - strlen(allowed) - 1);
                strncat(allowed, o->names[k], sizeof allowed - strlen(allowed) - 1);
            }
            break;
        }
        dprintf(fd, "%-20s %-8s %-26s %s\n", o->name, *o->def ? o->def : "-", allowed, o->help);
    }
}

/* The rank a launcher gave this process (torchrun, mpirun, srun, ...), as
 * digits; "x" when none is set or its value is no number. */
static void rank_text(char *out, size_t size) {
    static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    static int warned;
    snprintf(out, size, "x");
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v)
            continue;
        size_t n = strspn(v, "0123456789");
        if (n && n <= 9 && !v[n])
            snprintf(out, size, "%s", v);
        else
            pf_msg_once(warned, PF_WARNING,
                        "%s=%s is not a rank number: %%r becomes x and "
                        "the report's rank is null",
                        vars[i], v);
        return;
    }
}

/* The host name up to its first dot, as `hostname -s`. */
static void host_text(char *out, size_t size) {
    if (gethostname(out, size) || !*out)
        snprintf(out, size, "unknown");
    out[size - 1] = 0;
    out[strcspn(out, ".")] = 0;
}

int pf_options_file(const char *pattern, char *path, size_t size) {
    size_t n = 0;
    for (const char *s = pattern; *s; s++) {
        char tmp[72];
        if (s[0] == '%' && s[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%d", (int)getpid());
            s++;
        } else if (s[0] == '%' && s[1] == 'r') {
            rank_text(tmp, sizeof tmp);
            s++;
        } else if (s[0] == '%' && s[1] == 'h') {
            host_text(tmp, sizeof tmp);
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            tmp[0] = '%', tmp[1] = 0;
            s++;
        } else {
            tmp[0] = *s, tmp[1] = 0;
        }
        size_t k = strlen(tmp);
        if (n + k >= size)
            return -1;
        memcpy(path + n, tmp, k);
        n += k;
    }
    path[n] = 0;
    return 0;
}
