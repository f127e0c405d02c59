/* test_report: pinfast's exit report and options, observed from outside.
 * The binary re-executes itself as a child ("child" mode) that does a known
 * set of copies and allocations; the parent checks the JSON report row by
 * row, PINFAST_DISABLE=1 pass-through (no report, fake call counts identical
 * to a run without the shim), and the one-line warning for a bad option. */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MiB (1u << 20)

/* ---- the child's workload ------------------------------------------------------ */
static const char *counted[] = {
    "cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuMemAlloc_v2",
    "cuMemHostAlloc", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2",
    "cuStreamSynchronize", "cuMemcpyDtoD_v2", "cuMemFreeHost", "cuMemFree_v2",
};

static int child(void)
{
    struct drv d;
    CUcontext ctx;
    if (drv_load(&d, DRV_GPA, 0))
        return 10;
    if (drv_context0(&d, &ctx))
        return 11;
    CUdeviceptr a, b;
    void *pin;
    unsigned char *h = malloc(8 * MiB);
    memset(h, 1, 8 * MiB);
    if (d.MemAlloc(&a, 8 * MiB) || d.MemAlloc(&b, 8 * MiB) || d.MemHostAlloc(&pin, MiB, 0))
        return 12;
    for (int i = 0; i < 3; i++)
        if (d.MemcpyHtoD(a, h, 8 * MiB))
            return 13;
    for (int i = 0; i < 2; i++)
        if (d.MemcpyDtoH(h, a, 4 * MiB))
            return 14;
    if (d.MemcpyHtoD(a, pin, MiB) || d.MemcpyHtoDAsync(a, h, 1000, NULL) || d.StreamSynchronize(NULL) ||
        d.MemcpyDtoD(b, a, 4096))
        return 15;
    if (d.MemcpyHtoD(a + 8 * MiB - 10, h, 100) != CUDA_ERROR_INVALID_VALUE)
        return 16;
    if (d.CtxSynchronize() || d.MemFreeHost(pin) || d.MemFree(a) || d.MemFree(b))
        return 17;
    free(h);
    const char *cf = getenv("PFT_COUNTS_FILE");
    if (cf) {
        FILE *f = fopen(cf, "w");
        if (!f)
            return 18;
        for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++)
            fprintf(f, "%s %lu\n", counted[i], fake_calls(counted[i]));
        fprintf(f, "# cuGetProcAddress %lu cuGetProcAddress_v2 %lu\n", fake_calls("cuGetProcAddress"),
                fake_calls("cuGetProcAddress_v2"));
        fclose(f);
    }
    return 0;
}

/* ---- threads copying at once ("threads" mode) ----------------------------------- */
#define COPIERS 8
#define COPIES 16       /* each, of MiB: 128 MiB in all, past the advice's 64 */

static struct drv td;
static CUcontext tctx;
static CUdeviceptr tdev;
static pthread_barrier_t ready, go;
static double tend[COPIERS];

static void *copier(void *arg)
{
    int k = (int)(long)arg;
    unsigned char *h = malloc(MiB);
    memset(h, k, MiB);
    if (td.CtxSetCurrent(tctx))
        return (void *)1;
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    for (int i = 0; i < COPIES; i++)
        if (td.MemcpyHtoD(tdev + (CUdeviceptr)k * MiB, h, MiB))
            return (void *)1;
    tend[k] = t_now();
    free(h);
    return NULL;
}

/* COPIERS threads make synchronous 1 MiB H2D copies at once, the fake's
 * slow; writes the wall time from their start to the last one's end to
 * $PFT_SPAN_FILE. */
static int threads(void)
{
    pthread_t t[COPIERS];
    if (drv_load(&td, DRV_GPA, 0) || drv_context0(&td, &tctx) || td.MemAlloc(&tdev, COPIERS * MiB))
        return 20;
    pthread_barrier_init(&ready, NULL, COPIERS + 1);
    pthread_barrier_init(&go, NULL, COPIERS + 1);
    for (long k = 0; k < COPIERS; k++)
        if (pthread_create(&t[k], NULL, copier, (void *)k))
            return 21;
    /* every copier ready, none started: no copy begins before t0 */
    pthread_barrier_wait(&ready);
    double t0 = t_now(), last = 0;
    pthread_barrier_wait(&go);
    void *r;
    for (int k = 0; k < COPIERS; k++) {
        if (pthread_join(t[k], &r) || r)
            return 22;
        last = tend[k] > last ? tend[k] : last;
    }
    FILE *f = fopen(getenv("PFT_SPAN_FILE"), "w");
    if (!f)
        return 23;
    fprintf(f, "%.9f\n", last - t0);
    return fclose(f) ? 24 : 0;
}

/* ---- spawning ------------------------------------------------------------------- */
static char tmpdir[256];

/* run argv (ourselves in child mode when NULL) with env overrides ("K=V"
 * sets, names in drop remove); stderr to errfile if given; returns the exit
 * status and pid */
static int spawn_argv(char *const *argv, const char **set, int nset, const char **drop, int ndrop,
                      const char *errfile, pid_t *pid_out)
{
    char **env = calloc(1024, sizeof *env);
    int n = 0;
    for (char **e = environ; *e && n < 1000; e++) {
        int skip = 0;
        for (int i = 0; i < nset; i++)
            if (strncmp(*e, set[i], strcspn(set[i], "=") + 1) == 0)
                skip = 1;
        for (int i = 0; i < ndrop; i++)
            if (strncmp(*e, drop[i], strlen(drop[i])) == 0 && (*e)[strlen(drop[i])] == '=')
                skip = 1;
        if (!skip)
            env[n++] = *e;
    }
    for (int i = 0; i < nset; i++)
        env[n++] = (char *)set[i];
    env[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (errfile && !freopen(errfile, "w", stderr))
            _exit(126);
        char *self[] = { "test_report", "child", NULL };
        execve(argv ? argv[0] : "/proc/self/exe", argv ? argv : self, env);
        _exit(127);
    }
    free(env);
    int st = 0;
    waitpid(pid, &st, 0);
    if (pid_out)
        *pid_out = pid;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int spawn(const char **set, int nset, const char **drop, int ndrop, const char *errfile, pid_t *pid_out)
{
    return spawn_argv(NULL, set, nset, drop, ndrop, errfile, pid_out);
}

static int count_files(const char *prefix)
{
    DIR *dir = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while (dir && (e = readdir(dir)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    if (dir)
        closedir(dir);
    return n;
}

static int setup(void **s)
{
    (void)s;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pft-report-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **s)
{
    (void)s;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- checks ----------------------------------------------------------------------- */
/* A rate only where the time inside the calls is the transfer's: the one
 * asynchronous copy here is a 1000-byte copy passed through, queued and
 * gone. */
static void check_rate(const struct rep_row *t)
{
    int async = strstr(t->api, "Async") != NULL;
    if (async && strcmp(t->path, "staged")) {
        if (t->gbps != -1 || t->busy_seconds != -1)
            fail_msg("%s %s: gbps %g, busy %g s where the report has no rate (null)", t->api, t->path,
                     t->gbps, t->busy_seconds);
        return;
    }
    /* one thread: its copies one after another, busy as long as inside them */
    if (t->busy_seconds < 0 || t->busy_seconds > t->seconds + 1e-9 ||
        t->busy_seconds < 0.999 * t->seconds - 1e-6)
        fail_msg("%s %s: busy %g s, %g s inside the calls", t->api, t->path, t->busy_seconds,
                 t->seconds);
    double want = t->busy_seconds > 0 ? (double)t->bytes / t->busy_seconds / 1e9 : 0;
    double off = t->gbps > want ? t->gbps - want : want - t->gbps;
    if (t->gbps < 0 || off > 0.0005 + 1e-6 * want)
        fail_msg("%s %s: gbps %g, bytes/busy_seconds give %g", t->api, t->path, t->gbps, want);
}

struct want { const char *api, *direction, *memory; long calls, errors; long long bytes; };

static void test_report_exact(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char file[320];
    snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/r-%%p.json", tmpdir);
    const char *set[] = { "PINFAST_STATS=json", file, "PINFAST_DISABLE=0" };
    pid_t pid;
    assert_int_equal(spawn(set, 3, NULL, 0, NULL, &pid), 0);
    char path[320];
    snprintf(path, sizeof path, "%s/r-%d.json", tmpdir, (int)pid);
    struct report *r = calloc(1, sizeof *r);
    if (report_read(path, r))
        fail_msg("report %s: %s", path, r->err);
    assert_int_equal(r->pid, pid);
    assert_true(r->wall_seconds >= 0);

    static const struct want want[] = {
        { "cuMemcpyHtoD", "H2D", "pageable", 4, 1, 24LL * MiB },
        { "cuMemcpyDtoH", "D2H", "pageable", 2, 0, 8LL * MiB },
        { "cuMemcpyHtoD", "H2D", "pinned", 1, 0, MiB },
        { "cuMemcpyHtoDAsync", "H2D", "pageable", 1, 0, 1000 },
        { "cuMemcpyDtoD", "D2D", "device", 1, 0, 4096 },
    };
    int used[128] = { 0 };
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        long calls = 0, errors = 0;
        long long bytes = 0;
        for (int i = 0; i < r->nt; i++) {
            struct rep_row *t = &r->t[i];
            if (strcmp(t->api, want[w].api) || strcmp(t->direction, want[w].direction) ||
                strcmp(t->memory, want[w].memory))
                continue;
            used[i] = 1;
            calls += t->calls;
            errors += t->errors;
            bytes += t->bytes;
            if (strcmp(t->path, "staged") && strcmp(t->path, "passthrough") && strcmp(t->path, "bounced") &&
                strcmp(t->path, "registered"))
                fail_msg("row %d: path \"%s\"", i, t->path);
            if (t->calls == 0)
                fail_msg("row %d (%s): a row with zero calls", i, t->api);
            if (strcmp(want[w].memory, "pageable") && strcmp(t->path, "passthrough"))
                fail_msg("row %d (%s %s): staged although not pageable", i, t->api, t->memory);
            /* the driver stages it without waiting on an idle stream */
            if (!strcmp(t->api, "cuMemcpyHtoDAsync") && strcmp(t->path, "passthrough"))
                fail_msg("row %d: a small asynchronous pageable H2D on an idle stream %s, not passed through", i,
                         t->path);
            check_rate(t);
        }
        if (calls != want[w].calls || errors != want[w].errors || bytes != want[w].bytes)
            fail_msg("%s %s %s: calls %ld errors %ld bytes %lld; expected %ld %ld %lld", want[w].api,
                     want[w].direction, want[w].memory, calls, errors, bytes, want[w].calls,
                     want[w].errors, want[w].bytes);
    }
    for (int i = 0; i < r->nt; i++)
        if (!used[i])
            fail_msg("unexpected transfer row %d: %s %s %s %s calls %ld", i, r->t[i].api,
                     r->t[i].direction, r->t[i].memory, r->t[i].path, r->t[i].calls);

    static const struct { const char *api; long calls; long long bytes; } wa[] = {
        { "cuMemAlloc", 2, 16LL * MiB }, { "cuMemHostAlloc", 1, MiB },
        { "cuMemFreeHost", 1, -1 }, { "cuMemFree", 2, -1 },
    };
    assert_int_equal(r->na, (int)(sizeof wa / sizeof wa[0]));
    for (size_t w = 0; w < sizeof wa / sizeof wa[0]; w++) {
        int found = 0;
        for (int i = 0; i < r->na; i++) {
            if (strcmp(r->a[i].api, wa[w].api))
                continue;
            found = 1;
            if (r->a[i].calls != wa[w].calls || r->a[i].errors != 0 ||
                (wa[w].bytes >= 0 && r->a[i].bytes != wa[w].bytes))
                fail_msg("%s: calls %ld errors %ld bytes %lld", wa[w].api, r->a[i].calls,
                         r->a[i].errors, r->a[i].bytes);
        }
        if (!found)
            fail_msg("no allocation row for %s", wa[w].api);
    }
    /* the staged copies' CPU time: the callers' is part of it (their
     * polling is wall time, which a preempted thread exceeds) */
    const struct rep_staging *g = &r->staging;
    if (!(g->caller_seconds > 0 && g->cpu_seconds >= g->caller_seconds - 1e-6 && g->wait_seconds >= 0))
        fail_msg("staging CPU: %g s in all, %g s of callers', %g s polling", g->cpu_seconds,
                 g->caller_seconds, g->wait_seconds);
    free(r);
}

static void read_counts(const char *file, char *buf, size_t n)
{
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    size_t k = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && k + strlen(line) < n) {
            strcpy(buf + k, line);
            k += strlen(line);
        }
    buf[k] = 0;
    fclose(f);
}

static void test_disable_is_passthrough(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char file[320], c1[320], c2[320];
    snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/d-%%p.json", tmpdir);
    snprintf(c1, sizeof c1, "PFT_COUNTS_FILE=%s/counts-disabled", tmpdir);
    snprintf(c2, sizeof c2, "PFT_COUNTS_FILE=%s/counts-plain", tmpdir);
    const char *set1[] = { "PINFAST_DISABLE=1", "PINFAST_STATS=json", file, c1 };
    assert_int_equal(spawn(set1, 4, NULL, 0, NULL, NULL), 0);
    assert_int_equal(count_files("d-"), 0);
    const char *set2[] = { c2, "PFT_PINFAST=0" };
    const char *drop[] = { "LD_PRELOAD", "PINFAST_DISABLE" };
    assert_int_equal(spawn(set2, 2, drop, 2, NULL, NULL), 0);
    char a[4096], b[4096];
    read_counts(c1 + strlen("PFT_COUNTS_FILE="), a, sizeof a);
    read_counts(c2 + strlen("PFT_COUNTS_FILE="), b, sizeof b);
    if (strcmp(a, b))
        fail_msg("fake call counts differ with PINFAST_DISABLE=1:\n%s--- without pinfast:\n%s", a, b);
}

static void test_bad_option_warns_once(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char err[320];
    snprintf(err, sizeof err, "%s/stderr-bogus", tmpdir);
    const char *set[] = { "PINFAST_STATS=bogus" };
    assert_int_equal(spawn(set, 1, NULL, 0, err, NULL), 0);
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    char line[1024];
    int warnings = 0, named = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "pinfast: warning:", 17) == 0) {
            warnings++;
            named += strstr(line, "PINFAST_STATS") != NULL;
        }
    fclose(f);
    assert_int_equal(warnings, 1);
    assert_int_equal(named, 1);
}

/* Threads copying at once: the row's rate is over the wall time its copies
 * were under way, not over their seconds summed (COPIERS times as long), and
 * the advice quotes the same figure. */
static void test_concurrent_rate(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char file[320], span_file[320], path[320];
    snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/c-%%p.json", tmpdir);
    snprintf(span_file, sizeof span_file, "PFT_SPAN_FILE=%s/span", tmpdir);
    /* pass-through (never staged or registered), each call ~1 ms in the fake */
    const char *set[] = { "PINFAST_STATS=json", file, span_file, "PINFAST_STAGE=0",
                          "PINFAST_REGISTER=0", "FAKECUDA_DELAY_US=2000" };
    char self[] = "/proc/self/exe", mode[] = "threads";
    char *argv[] = { self, mode, NULL };
    pid_t pid;
    assert_int_equal(spawn_argv(argv, set, 6, NULL, 0, NULL, &pid), 0);
    double span = 0;
    FILE *f = fopen(span_file + strlen("PFT_SPAN_FILE="), "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lf", &span), 1);
    fclose(f);
    snprintf(path, sizeof path, "%s/c-%d.json", tmpdir, (int)pid);
    struct report *r = calloc(1, sizeof *r);
    if (report_read(path, r))
        fail_msg("report %s: %s", path, r->err);
    const struct rep_row *row = NULL;
    for (int i = 0; i < r->nt; i++)
        if (!strcmp(r->t[i].api, "cuMemcpyHtoD"))
            row = &r->t[i];
    assert_non_null(row);
    assert_string_equal(row->path, "passthrough");
    assert_int_equal(row->bytes, (long long)COPIERS * COPIES * MiB);
    /* the copies overlapped: far more seconds inside the calls than wall time */
    if (row->seconds < 2 * span)
        fail_msg("%g s inside the calls in %g s: the copies did not overlap", row->seconds, span);
    /* Within the span, less the moments no copy was under way (the copiers
     * waking, the first calls' setup: up to 7% on two busy CPUs), and
     * pinfast's clock, converted, 0.1% from the child's at most.  Seconds
     * summed would be COPIERS times as long. */
    if (row->busy_seconds < 0.8 * span || row->busy_seconds > span * 1.001 + 0.0001)
        fail_msg("busy %g s; the copies were under way for %g s", row->busy_seconds, span);
    /* to the report's three decimals */
    double want = (double)row->bytes / span / 1e9;
    if (row->gbps < want - 0.0005 || row->gbps > want / 0.8 + 0.0005)
        fail_msg("%g GB/s; %lld bytes in %g s are %g", row->gbps, row->bytes, span, want);
    /* the advice's figure, to its two decimals */
    char *text = sp_slurp(path, NULL);
    assert_non_null(text);
    const char *at = strstr(text, "through the driver's own path at ");
    double said = -1;
    if (!at || sscanf(at, "through the driver's own path at %lf GB/s", &said) != 1 ||
        said < row->gbps - 0.0051 || said > row->gbps + 0.0051)
        fail_msg("the advice gives %g GB/s, the row %g:\n%s", said, row->gbps, text);
    free(text);
    free(r);
}

/* PINFAST_STATS_FILE=*.json without PINFAST_STATS: a JSON report, which
 * `pinfast report` reads; PINFAST_STATS given decides, and other names get
 * the default text. */
static void test_json_file_name(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    static const struct { const char *stats, *name; int json; } cases[] = {
        { NULL, "j-%d.json", 1 },
        { NULL, "j-%d.JSON", 1 },
        { "PINFAST_STATS=text", "j-%d.json", 0 },
        { "PINFAST_STATS=json", "j-%d.txt", 1 },
        { NULL, "j-%d.txt", 0 },
        { NULL, "j-%d.json.txt", 0 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char file[400], name[64], path[400];
        snprintf(name, sizeof name, cases[k].name, (int)k);
        snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/%s", tmpdir, name);
        const char *set[] = { file, cases[k].stats };
        const char *drop[] = { "PINFAST_STATS" };
        assert_int_equal(spawn(set, cases[k].stats ? 2 : 1, drop, 1, NULL, NULL), 0);
        snprintf(path, sizeof path, "%s/%s", tmpdir, name);
        char *text = sp_slurp(path, NULL);
        if (!text)
            fail_msg("%s: no report", name);
        int json = !strncmp(text, "{\"schema\":", 10);
        if (json != cases[k].json || (!json && strncmp(text, "pinfast: transfer report", 24)))
            fail_msg("%s with %s: %.60s...", name, cases[k].stats ? cases[k].stats : "no PINFAST_STATS",
                     text);
        free(text);
    }
}

/* The lines of file that start with prefix. */
static int count_lines(const char *file, const char *prefix)
{
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += !strncmp(line, prefix, strlen(prefix));
    fclose(f);
    return n;
}

/* A bad setting is warned about at the first CUDA call, never by a process
 * that makes none: a shell, a compiler or this binary's own children that
 * only exit, with the library preloaded (through a launcher's wrapper
 * scripts it used to be printed once a process). */
static void test_no_cuda_no_warning(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char err[320];
    snprintf(err, sizeof err, "%s/stderr-nocuda", tmpdir);
    const char *set[] = { "PINFAST_CHUNK=bogus", "PINFAST_THREADS=999", "PINFAST_STATS=off" };
    char *true_argv[] = { "/bin/true", NULL };
    assert_int_equal(spawn_argv(true_argv, set, 3, NULL, 0, err, NULL), 0);
    assert_int_equal(count_lines(err, "pinfast:"), 0);
    char self[] = "/proc/self/exe", mode[] = "nocuda";
    char *exit_argv[] = { self, mode, NULL };
    assert_int_equal(spawn_argv(exit_argv, set, 3, NULL, 0, err, NULL), 0);
    assert_int_equal(count_lines(err, "pinfast:"), 0);
    /* the same settings, with CUDA calls: one warning each; none when disabled */
    assert_int_equal(spawn(set, 3, NULL, 0, err, NULL), 0);
    assert_int_equal(count_lines(err, "pinfast: warning: PINFAST_CHUNK=bogus"), 1);
    assert_int_equal(count_lines(err, "pinfast: warning: PINFAST_THREADS=999"), 1);
    assert_int_equal(count_lines(err, "pinfast:"), 2);
    const char *disabled[] = { set[0], set[1], set[2], "PINFAST_DISABLE=1" };
    assert_int_equal(spawn(disabled, 4, NULL, 0, err, NULL), 0);
    assert_int_equal(count_lines(err, "pinfast:"), 0);
}

/* The text report's GB/s column: a dash for the asynchronous pass-through
 * row, a number for the synchronous and staged ones. */
static void test_text_rates(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char file[320], path[320];
    snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/t-%%p.txt", tmpdir);
    const char *set[] = { "PINFAST_STATS=text", file };
    pid_t pid;
    assert_int_equal(spawn(set, 2, NULL, 0, NULL, &pid), 0);
    snprintf(path, sizeof path, "%s/t-%d.txt", tmpdir, (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    int dashes = 0, rates = 0;
    while (fgets(line, sizeof line, f)) {
        char api[48], dir[8], mem[16], pth[16], busy[16], rate[16];
        unsigned long long calls, errors, bytes;
        double secs;
        if (sscanf(line, "pinfast: %47s %7s %15s %15s %llu %llu %llu %lf %15s %15s", api, dir, mem,
                   pth, &calls, &errors, &bytes, &secs, busy, rate) != 10 || !strcmp(dir, "-"))
            continue;
        if (!strcmp(api, "cuMemcpyHtoDAsync")) {
            assert_string_equal(busy, "-");
            assert_string_equal(rate, "-");
            dashes++;
        } else {
            char *end, *busy_end;
            strtod(rate, &end);
            strtod(busy, &busy_end);
            if (*end || *busy_end)
                fail_msg("%s %s: busy s \"%s\", GB/s \"%s\": not numbers", api, pth, busy, rate);
            rates++;
        }
    }
    fclose(f);
    assert_int_equal(dashes, 1);
    assert_true(rates >= 4);
}

static const char *rank_vars[] = { "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID" };

/* The report of a child run with the rank variables in set (others dropped)
 * and PINFAST_STATS_FILE=<tmpdir>/n-%r-%h-%p.json; its stderr in err. */
static void rank_report(const char **set, int nset, const char *expect_rank, const char *err)
{
    char file[320], host[256], path[800];
    snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/n-%%r-%%h-%%p.json", tmpdir);
    const char *all[8] = { "PINFAST_STATS=json", file };
    for (int i = 0; i < nset; i++)
        all[2 + i] = set[i];
    pid_t pid;
    assert_int_equal(spawn(all, 2 + nset, rank_vars, 4, err, &pid), 0);
    assert_int_equal(gethostname(host, sizeof host), 0);
    host[strcspn(host, ".")] = 0;
    snprintf(path, sizeof path, "%s/n-%s-%s-%d.json", tmpdir, expect_rank, host, (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("no report %s", path);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    char tail[400];
    snprintf(tail, sizeof tail, ",\n\"rank\":%s,\"host\":\"%s\"}\n",
             strcmp(expect_rank, "x") ? expect_rank : "null", host);
    if (n < strlen(tail) || strcmp(text + n - strlen(tail), tail))
        fail_msg("report %s does not end with %s", path, tail);
}

/* %r: the first of RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID set;
 * x when none is; %h: the host name up to its first dot. */
static void test_rank_and_host_in_names(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    const char *torchrun[] = { "RANK=3", "SLURM_PROCID=9" };
    rank_report(torchrun, 2, "3", NULL);
    const char *mpi[] = { "PMI_RANK=12", "SLURM_PROCID=9" };
    rank_report(mpi, 2, "12", NULL);
    const char *srun[] = { "SLURM_PROCID=0" };
    rank_report(srun, 1, "0", NULL);
    rank_report(NULL, 0, "x", NULL);
}

/* A rank that is no number: one warning naming it, x in the name, null in the report. */
static void test_bad_rank_warns_once(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char err[320];
    snprintf(err, sizeof err, "%s/stderr-rank", tmpdir);
    const char *set[] = { "OMPI_COMM_WORLD_RANK=node-1" };
    rank_report(set, 1, "x", err);
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    char line[1024];
    int lines = 0, named = 0;
    while (fgets(line, sizeof line, f)) {
        lines += !strncmp(line, "pinfast:", 8);
        named += !strncmp(line, "pinfast: warning: OMPI_COMM_WORLD_RANK=node-1 is not a rank number", 66);
    }
    fclose(f);
    assert_int_equal(lines, 1);
    assert_int_equal(named, 1);
}

/* without the shim no report appears, whatever PINFAST_* says */
static void test_plain_no_report(void **s)
{
    (void)s;
    char file[320];
    snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/p-%%p.json", tmpdir);
    const char *set[] = { "PINFAST_STATS=json", file };
    const char *drop[] = { "LD_PRELOAD" };
    assert_int_equal(spawn(set, 2, drop, 1, NULL, NULL), 0);
    assert_int_equal(count_files("p-"), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child();
    if (argc > 1 && strcmp(argv[1], "nocuda") == 0)
        return 0;
    if (argc > 1 && strcmp(argv[1], "threads") == 0)
        return threads();
    t_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_exact),
        cmocka_unit_test(test_disable_is_passthrough),
        cmocka_unit_test(test_bad_option_warns_once),
        cmocka_unit_test(test_no_cuda_no_warning),
        cmocka_unit_test(test_plain_no_report),
        cmocka_unit_test(test_text_rates),
        cmocka_unit_test(test_concurrent_rate),
        cmocka_unit_test(test_json_file_name),
        cmocka_unit_test(test_rank_and_host_in_names),
        cmocka_unit_test(test_bad_rank_warns_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
