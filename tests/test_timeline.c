/* test_timeline: the debug log's per-chunk timeline of a staged copy.  A
 * child (this binary in "copy" mode) stages one H2D and one D2H of a random
 * size with small chunks and PINFAST_LOG=debug; for each staged copy the
 * chunk lines must tile the copy exactly, and their times must follow the
 * order the engine works in: a D2H chunk lands after its DMA and is copied
 * out after it lands; an H2D chunk is copied in before its DMA; every task
 * runs inside its chunk's copy, by the caller (w0) or one of the workers.
 * In "sizes" mode, with the default chunks, the log shows how each copy was
 * cut and copied: a D2H ends on chunks under 1 MiB (halved from 2 MiB), the
 * copy routine follows the auto rules (H2D streaming below 128 MiB, D2H
 * from 64 MiB), and an H2D with streaming stores from 32 MiB fills at most
 * four chunks at once, in three tasks each, and has at most five chunks
 * taken and not seen through their DMA; and a D2H of 8 MiB or more into a
 * mapping never touched has it faulted in ahead, in pieces, where no copy
 * into memory already touched has anything faulted in ahead; one of 3-8
 * MiB has each chunk made of a piece of each lane, one per 2 MiB region of
 * the mapping, no piece crossing from one into the next. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define THREADS 8 /* more than three chunks of two tasks could use */
#define STR(x) #x
#define XSTR(x) STR(x)
#define MAX_CHUNKS 24 /* the log details this many chunks of a copy */
#define FRESH_AHEAD_FROM ((size_t)8 << 20) /* shim/engine/staging.h */
#define FRESH_LANES_FROM ((size_t)3 << 20)
#define REGION ((size_t)2 << 20) /* a page table's reach */

/* An H2D then a D2H of n bytes, checked, staged; with `fresh`, then a D2H
 * into a mapping never touched, checked. */
static int round_trip(size_t n, int fresh)
{
    unsigned char *h = t_map(n), *o = t_map(n);
    CUdeviceptr d;
    if (!h || !o || D.MemAlloc(&d, n))
        return 31;
    int rc = t_round_trip(h, o, d, n);
    if (rc)
        return rc;
    unsigned char *f = fresh ? t_map(n) : NULL;
    if (fresh && (!f || D.MemcpyDtoH(f, d, n) || memcmp(f, o, n)))
        return 34;
    D.MemFree(d);
    t_unmap(h, n);
    t_unmap(o, n);
    if (f)
        t_unmap(f, n);
    printf("copied %zu at %zu\n", n, (size_t)((uintptr_t)f % REGION));
    return 0;
}

static int child(const char *mode)
{
    if (t_setup(NULL))
        return 30;
    if (!strcmp(mode, "copy"))
        return round_trip(t_rand_range(1200 * KiB, 3000 * KiB), 0);
    /* a mid size, then one past each auto threshold */
    size_t sizes[] = {t_rand_range(4200 * KiB, 8000 * KiB), (64 << 20) + t_rand_range(1, 4096),
                      (128 << 20) + t_rand_range(1, 4096)};
    for (int i = 0; i < 3; i++) {
        int rc = round_trip(sizes[i], 1);
        if (rc)
            return rc;
    }
    return 0;
}

#define MAX_TASKS 16 /* a chunk's, at most: PF_MAX_SPLIT */

struct chunk {
    size_t off, len;
    int slot, ntasks, ncaller;
    double taken, dma, dma_end, landed, first, last, retired;
    double caller[MAX_TASKS]; /* when the caller's tasks started */
};

static int by_offset(const void *a, const void *b)
{
    const struct chunk *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* Checks one chunk's tasks line against its chunk; returns the next line. */
static const char *check_tasks(const char *p, struct chunk *c, const char *dirn)
{
    if (strncmp(p, "pinfast: debug:     tasks", 25))
        fail_msg("%s chunk %zu: no tasks line: \"%.60s\"", dirn, c->off, p);
    const char *end = strchr(p, '\n');
    int ntasks = 0;
    for (const char *q = strstr(p, " w"); q && q < end; q = strstr(q + 1, " w")) {
        int by;
        double start, stop;
        if (sscanf(q, " w%d:%lf-%lf", &by, &start, &stop) != 3)
            fail_msg("%s chunk %zu: unreadable task \"%.30s\"", dirn, c->off, q);
        if (by < 0 || by > THREADS)
            fail_msg("%s chunk %zu: task run by w%d, with %d workers", dirn, c->off, by, THREADS);
        if (by == 0 && c->ncaller < MAX_TASKS)
            c->caller[c->ncaller++] = start;
        if (start > stop || start < c->first || stop > c->last)
            fail_msg("%s chunk %zu: task %.1f-%.1f outside the chunk's copy %.1f-%.1f", dirn,
                     c->off, start, stop, c->first, c->last);
        ntasks++;
    }
    if (ntasks == 0)
        fail_msg("%s chunk %zu: no task", dirn, c->off);
    c->ntasks = ntasks;
    return end + 1;
}

/* Checks the timeline after the "staged" line at p: each chunk's times, and
 * that the chunks tile the copy when all are shown.  Returns the chunk lines
 * (sorted by offset in c, room for MAX_CHUNKS); *nchunks gets the copy's. */
static int check_copy(const char *p, size_t n, int h2d, struct chunk *c, int *nchunks_out)
{
    const char *dirn = h2d ? "H2D" : "D2H";
    int nchunks;
    const char *q = strstr(p, " B (");
    if (!q || sscanf(strstr(q, "): ") + 3, "%d chunks", &nchunks) != 1)
        fail_msg("%s: unreadable debug line \"%.80s\"", dirn, p);
    int k = 0;
    p = strchr(p, '\n') + 1;
    while (!strncmp(p, "pinfast: debug:   chunk ", 24)) {
        if (k == MAX_CHUNKS)
            fail_msg("%s: more than %d chunk lines", dirn, MAX_CHUNKS);
        struct chunk *x = &c[k++];
        x->ncaller = 0;
        if (sscanf(p + 24, "%zu+%zu slot %d us: taken %lf dma %lf-%lf landed %lf copy %lf-%lf retired %lf",
                   &x->off, &x->len, &x->slot, &x->taken, &x->dma, &x->dma_end, &x->landed,
                   &x->first, &x->last, &x->retired) != 10)
            fail_msg("%s: unreadable chunk line \"%.80s\"", dirn, p);
        if (x->taken < 0 || x->taken > x->first || x->taken > x->dma || x->first > x->last ||
            x->last > x->retired || x->dma > x->dma_end)
            fail_msg("%s chunk %zu: taken %.1f copy %.1f-%.1f retired %.1f dma %.1f-%.1f out of order",
                     dirn, x->off, x->taken, x->first, x->last, x->retired, x->dma, x->dma_end);
        /* an H2D chunk's DMA is seen done after it retired, or not in the call */
        if (h2d ? (x->landed != -1.0 && x->landed < x->retired) || x->dma < x->last ||
                      x->dma_end > x->retired
                : x->landed < x->dma_end || x->first < x->landed)
            fail_msg("%s chunk %zu: dma %.1f landed %.1f copy %.1f-%.1f out of order", dirn,
                     x->off, x->dma, x->landed, x->first, x->last);
        p = check_tasks(strchr(p, '\n') + 1, x, dirn);
    }
    if (k != (nchunks < MAX_CHUNKS ? nchunks : MAX_CHUNKS))
        fail_msg("%s: %d chunk lines for %d chunks", dirn, k, nchunks);
    qsort(c, (size_t)k, sizeof c[0], by_offset);
    *nchunks_out = nchunks;
    if (k < nchunks)
        return k;
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        if (c[i].off != at || !c[i].len)
            fail_msg("%s: chunk at %zu, expected one at %zu", dirn, c[i].off, at);
        at += c[i].len;
    }
    if (at != n)
        fail_msg("%s: chunks cover %zu bytes of %zu", dirn, at, n);
    return k;
}

/* The child's stdout and stderr, run in `mode` with the debug log and set. */
static void run_child(const char *mode, const char *const *set, char **o, char **e)
{
    char out[300], err[300];
    snprintf(out, sizeof out, "%s/out-%s", sp_dir, mode);
    snprintf(err, sizeof err, "%s/err-%s", sp_dir, mode);
    char *argv[] = { "test_timeline", (char *)mode, NULL };
    int rc = sp_run(argv, t_pinfast(), set, out, err, 120, NULL);
    *o = sp_slurp(out, NULL);
    *e = sp_slurp(err, NULL);
    if (rc != 0)
        fail_msg("child %s: status %d\n%s", mode, rc, *e ? *e : "");
}

/* The next "staged" line of the direction from *at on, for a copy of n bytes. */
static const char *next_staged(const char **at, int h2d, size_t n)
{
    char want[80];
    snprintf(want, sizeof want, "pinfast: debug: staged %s %zu B", h2d ? "H2D" : "D2H", n);
    const char *p = *at ? strstr(*at, want) : NULL;
    if (!p)
        fail_msg("no debug line \"%s\"", want);
    *at = p + 1;
    return p;
}

/* The staged copy's line says some pieces were faulted in ahead (`want`),
 * or none. */
static void expect_ahead(const char *line, int h2d, size_t n, int want)
{
    const char *at = strstr(line, "slots, ");
    int pieces = -1;
    if (at && (at = strchr(at + 7, ',')))
        sscanf(at, ", %d pieces faulted in ahead;", &pieces);
    if (pieces < 0 || (pieces > 0) != want)
        fail_msg("%s of %zu bytes: %d pieces faulted in ahead, %s wanted, in \"%.200s\"", h2d ? "H2D" : "D2H", n,
                 pieces, want ? "some" : "none", line);
}

/* The staged copy's line says how many lanes its chunks were taken from:
 * with `want`, one per 2 MiB region of the destination, which starts `at`
 * bytes into one; else none. */
static int expect_lanes(const char *line, size_t n, size_t at, int want)
{
    const char *p = strstr(line, " pieces faulted in ahead, ");
    int lanes = -1, regions = (int)((at + n - 1) / REGION + 1);
    if (p)
        sscanf(p, " pieces faulted in ahead, %d lanes;", &lanes);
    if (lanes != (want ? regions : 0))
        fail_msg("D2H of %zu bytes %zu into a 2 MiB region: %d lanes, %d wanted, in \"%.200s\"", n, at, lanes,
                 want ? regions : 0, line);
    return lanes;
}

/* A copy with lanes: no chunk line (a piece) crosses from one 2 MiB
 * region of the destination (at bytes into one) into the next; the first
 * chunk taken (its lines: one time, one slot) holds a piece of each of the
 * `regions`, each in its own; and the caller started a task only once every
 * chunk taken before had landed. */
static void check_lanes(const struct chunk *c, int k, size_t n, size_t at, int regions)
{
    int first = 0;
    for (int j = 0; j < k; j++)
        first = c[j].taken < c[first].taken ? j : first;
    unsigned long seen = 0;
    int pieces = 0;
    for (int j = 0; j < k; j++)
        if (c[j].taken == c[first].taken && c[j].slot == c[first].slot) {
            seen |= 1ul << ((at + c[j].off) / REGION % 64);
            pieces++;
        }
    if (pieces != regions || __builtin_popcountl(seen) != regions)
        fail_msg("D2H of %zu bytes: the first chunk taken has %d pieces in %d of the %d regions (at %zu)", n,
                 pieces, __builtin_popcountl(seen), regions, at);
    for (int j = 0; j < k; j++) {
        for (int i = 0; i < k; i++)
            for (int t = 0; t < c[i].ncaller; t++)
                if (c[j].taken < c[i].caller[t] && c[j].landed > c[i].caller[t])
                    fail_msg("D2H of %zu bytes: the caller started a task at %.1f us, chunk %zu, taken at %.1f, "
                             "not landed until %.1f", n, c[i].caller[t], c[j].off, c[j].taken, c[j].landed);
        if ((at + c[j].off) / REGION != (at + c[j].off + c[j].len - 1) / REGION)
            fail_msg("D2H of %zu bytes: chunk %zu+%zu crosses a 2 MiB region (at %zu)", n, c[j].off, c[j].len, at);
    }
}

static void test_timeline(void **s)
{
    (void)s;
    const char *set[] = { "PINFAST_MIN_SIZE=0", "PINFAST_STATS=off", "PINFAST_LOG=debug",
                          "PINFAST_THREADS=" XSTR(THREADS), "PINFAST_CHUNK=256K", NULL };
    char *o, *e;
    run_child("copy", set, &o, &e);
    size_t n = 0;
    const char *copied = o ? strstr(o, "copied ") : NULL;
    if (!copied || sscanf(copied, "copied %zu", &n) != 1)
        fail_msg("child printed no size");
    if (t_pinfast()) {
        struct chunk c[MAX_CHUNKS], d[MAX_CHUNKS];
        int nh, nd;
        const char *at = e;
        int kh = check_copy(next_staged(&at, 1, n), n, 1, c, &nh);
        at = e;
        int kd = check_copy(next_staged(&at, 0, n), n, 0, d, &nd);
        if (kh != nh || kd != nd)
            fail_msg("%zu bytes in %d and %d chunks: not all shown", n, nh, nd);
        print_message("%zu bytes: %d H2D chunks, %d D2H chunks\n", n, kh, kd);
    }
    free(o);
    free(e);
}

static void test_default_cuts(void **s)
{
    (void)s;
    const char *set[] = { "PINFAST_STATS=off", "PINFAST_LOG=debug", "PINFAST_THREADS=" XSTR(THREADS), NULL };
    char *o, *e;
    run_child("sizes", set, &o, &e);
    const char *copied = o;
    for (int i = 0; i < 3; i++) {
        size_t n, fresh_at;
        copied = copied ? strstr(copied, "copied ") : NULL;
        if (!copied || sscanf(copied++, "copied %zu at %zu", &n, &fresh_at) != 2)
            fail_msg("child printed %d sizes of 3", i);
        if (!t_pinfast())
            continue;
        const char *at = e;
        for (int h2d = 1; h2d >= 0; h2d--) {
            const char *line = next_staged(&at, h2d, n);
            int stream = h2d ? n < (128 << 20) : n >= (64 << 20);
            const char *kind = stream ? "slots, streaming stores," : "slots, memcpy,";
            if (!strstr(line, kind) || strstr(line, kind) > strchr(line, '\n'))
                fail_msg("%s of %zu bytes: expected \"%s\" in \"%.200s\"", h2d ? "H2D" : "D2H", n,
                         kind, line);
            /* memory the copy reads, or the poisoned destination: nothing
             * faulted in ahead */
            expect_ahead(line, h2d, n, 0);
            expect_lanes(line, n, 0, 0);
            struct chunk c[MAX_CHUNKS];
            int nchunks, k = check_copy(line, n, h2d, c, &nchunks), most = 0;
            if (!h2d && k == nchunks) { /* all shown: the tail is in c */
                size_t largest = 0;
                for (int j = 0; j < k; j++)
                    largest = c[j].len > largest ? c[j].len : largest;
                if (largest > 2 << 20 || c[k - 1].len >= (1 << 20) + 4096)
                    fail_msg("D2H of %zu bytes: largest chunk %zu, last %zu (halving from 2 MiB)",
                             n, largest, c[k - 1].len);
            }
            if (h2d && stream && n >= (32 << 20)) /* paced */
                for (int j = 0; j < k; j++) {
                    int filling = 0, ahead = 0;
                    for (int m = 0; m < k; m++) {
                        filling += c[m].first <= c[j].first && c[j].first < c[m].last;
                        ahead += c[m].taken <= c[j].taken &&
                                 (c[m].landed < 0 || c[m].landed > c[j].taken);
                    }
                    if (c[j].ntasks > 3 || filling > 4 || ahead > 5)
                        fail_msg("H2D of %zu bytes: chunk %zu in %d tasks, %d chunks filled at "
                                 "once, %d taken and not seen through their DMA",
                                 n, c[j].off, c[j].ntasks, filling, ahead);
                    most = ahead > most ? ahead : most;
                }
            print_message("%s %zu bytes: %d chunks, %s\n", h2d ? "H2D" : "D2H", n, nchunks, kind);
            if (most)
                print_message("  at most %d chunks ahead of the DMA\n", most);
        }
        /* then into a mapping never touched: from 8 MiB faulted in ahead,
         * from 3 MiB below that taken round its 2 MiB regions */
        const char *line = next_staged(&at, 0, n);
        expect_ahead(line, 0, n, n >= FRESH_AHEAD_FROM);
        int lanes = expect_lanes(line, n, fresh_at, n >= FRESH_LANES_FROM && n < FRESH_AHEAD_FROM);
        if (lanes > 0) {
            struct chunk c[MAX_CHUNKS];
            int nchunks, k = check_copy(line, n, 0, c, &nchunks);
            check_lanes(c, k, n, fresh_at, lanes);
            print_message("D2H %zu bytes into fresh memory: %d pieces from %d lanes\n", n, nchunks, lanes);
        }
    }
    free(o);
    free(e);
}

int main(int argc, char **argv)
{
    if (argc == 2)
        return child(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeline),
        cmocka_unit_test(test_default_cuts),
    };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
