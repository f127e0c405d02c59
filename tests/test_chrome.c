/* test_chrome: PINFAST_TRACE_FORMAT=chrome.  A child (this binary in "copy"
 * mode) stages an H2D and a D2H of a random size with small chunks, and
 * passes through a small copy each way; the trace must be a JSON array
 * (python3's json module reads it) with one complete event per copy giving
 * its direction, bytes and path, and for each staged copy DMA events on its
 * direction's track and host-copy events of its direction, each set tiling
 * the copy's bytes. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define SMALL (4 * KiB)
#define TRACK_DMA (1 << 23) /* trace.c's DMA tracks: H2D, then D2H */
#define MAX_EVENTS 4096

static int child(const char *mode)
{
    if (strcmp(mode, "copy") || t_setup(NULL))
        return 30;
    size_t n = t_rand_range(1200 * KiB, 3000 * KiB);
    unsigned char *h = t_map(n), *o = t_map(n); /* staged, never registered */
    CUdeviceptr d;
    if (!h || !o || D.MemAlloc(&d, n))
        return 31;
    int rc = t_round_trip(h, o, d, n);
    if (!rc)
        rc = t_round_trip(h, o, d, SMALL);
    if (rc)
        return rc;
    D.MemFree(d);
    t_unmap(h, n);
    t_unmap(o, n);
    printf("copied %zu\n", n);
    return 0;
}

/* One event, as the python line below prints it. */
struct event {
    char ph[4], name[64], dir[8], path[16];
    long tid;
    long long bytes, off;
    double ts, dur;
};

/* The trace's events, read by python3's json module; *n gets their number. */
static struct event *load(const char *file, int *n)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys\n"
             "for e in json.load(open(sys.argv[1])):\n"
             "  a=e.get(\"args\",{})\n"
             "  print(e[\"ph\"],e[\"name\"].replace(\" \",\"_\"),e[\"tid\"],a.get(\"bytes\",-1),"
             "a.get(\"offset\",a.get(\"chunk\",-1)),a.get(\"direction\",\"-\"),a.get(\"path\",\"-\"),"
             "e.get(\"ts\",0),e.get(\"dur\",0))' %s",
             file);
    FILE *p = popen(cmd, "r");
    struct event *ev = calloc(MAX_EVENTS, sizeof *ev);
    if (!p || !ev)
        fail_msg("cannot run python3");
    int k = 0;
    while (k < MAX_EVENTS && fscanf(p, "%3s %63s %ld %lld %lld %7s %15s %lf %lf", ev[k].ph, ev[k].name,
                                    &ev[k].tid, &ev[k].bytes, &ev[k].off, ev[k].dir, ev[k].path,
                                    &ev[k].ts, &ev[k].dur) == 9)
        k++;
    if (pclose(p) != 0)
        fail_msg("the trace is not valid JSON (%d events read)", k);
    *n = k;
    return ev;
}

/* The one copy event of this direction and size. */
static const struct event *copy_event(const struct event *ev, int n, const char *dir, long long bytes)
{
    const struct event *found = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(ev[i].ph, "X") && !strcmp(ev[i].dir, dir) && ev[i].bytes == bytes &&
            strcmp(ev[i].name, "DMA") && strcmp(ev[i].name, "host_copy")) {
            if (found)
                fail_msg("two %s events of %lld bytes", dir, bytes);
            found = &ev[i];
        }
    if (!found)
        fail_msg("no %s event of %lld bytes", dir, bytes);
    return found;
}

static int by_offset(const void *a, const void *b)
{
    const struct event *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* The events of this name and c's direction, on track tid (0: any), must
 * tile the copy c: sorted by offset, a host copy's tasks cut into its
 * chunks.  (The test's one staged copy each way.) */
static int tiles(const struct event *ev, int n, const char *name, long tid, const struct event *c)
{
    struct event *m = calloc((size_t)n, sizeof *m);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(ev[i].ph, "X") && !strcmp(ev[i].name, name) && (!tid || ev[i].tid == tid) &&
            !strcmp(ev[i].dir, c->dir))
            m[k++] = ev[i];
    qsort(m, (size_t)k, sizeof *m, by_offset);
    long long at = 0, chunk = -1;
    for (int i = 0; i < k; i++) {
        if (m[i].bytes <= 0 || m[i].dur < 0)
            fail_msg("%s %s event of %lld bytes lasting %f us", c->dir, name, m[i].bytes, m[i].dur);
        if (tid) { /* a DMA: at its chunk's offset */
            if (m[i].off != at)
                fail_msg("%s DMA at %lld, expected one at %lld", c->dir, m[i].off, at);
        } else if (m[i].off != chunk) { /* a task: the first of the next chunk */
            if (m[i].off != at)
                fail_msg("%s tasks of a chunk at %lld, expected one at %lld", c->dir, m[i].off, at);
            chunk = m[i].off;
        }
        at += m[i].bytes;
    }
    if (at != c->bytes)
        fail_msg("%s: %d %s events cover %lld bytes of %lld", c->dir, k, name, at, c->bytes);
    free(m);
    return k;
}

static void test_chrome(void **s)
{
    (void)s;
    char trace[300], out[300], err[300];
    snprintf(trace, sizeof trace, "PINFAST_TRACE=%s/trace.json", sp_dir);
    snprintf(out, sizeof out, "%s/out", sp_dir);
    snprintf(err, sizeof err, "%s/err", sp_dir);
    const char *set[] = { trace, "PINFAST_TRACE_FORMAT=chrome", "PINFAST_MIN_SIZE=64K",
                          "PINFAST_STATS=off", "PINFAST_THREADS=4", "PINFAST_CHUNK=256K", NULL };
    char *argv[] = { "test_chrome", "copy", NULL };
    int rc = sp_run(argv, t_pinfast(), set, out, err, 120, NULL);
    char *o = sp_slurp(out, NULL), *e = sp_slurp(err, NULL);
    size_t n = 0;
    const char *copied = o ? strstr(o, "copied ") : NULL;
    if (rc != 0 || !copied || sscanf(copied, "copied %zu", &n) != 1)
        fail_msg("child: status %d\n%s", rc, e ? e : "");
    if (e && *e)
        fail_msg("the child printed \"%s\"", e);
    if (t_pinfast()) {
        int k;
        struct event *ev = load(trace + strlen("PINFAST_TRACE="), &k);
        const char *dirs[] = { "H2D", "D2H" };
        for (int i = 0; i < 2; i++) {
            const struct event *c = copy_event(ev, k, dirs[i], (long long)n);
            const struct event *p = copy_event(ev, k, dirs[i], SMALL);
            if (strcmp(c->path, "staged") || strcmp(p->path, "passthrough"))
                fail_msg("%s: %lld bytes %s, %lld bytes %s", dirs[i], c->bytes, c->path, p->bytes,
                         p->path);
            int dmas = tiles(ev, k, "DMA", TRACK_DMA + i, c);
            int tasks = tiles(ev, k, "host_copy", 0, c);
            print_message("%s of %zu bytes: %d DMAs, %d host-copy tasks\n", dirs[i], n, dmas, tasks);
        }
        free(ev);
    }
    free(o);
    free(e);
}

int main(int argc, char **argv)
{
    if (argc == 2)
        return child(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chrome),
    };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
