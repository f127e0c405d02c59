/* Each thread appends lines to its own buffer and writes it out whole with
 * one write(2) when it fills (O_APPEND: lines of several threads never mix
 * within a line).  Buffers live on a list so that the exit flush finds the
 * lines of threads still running; a thread's buffer is reused after it ends.
 * A Chrome trace is a JSON array of one event a line, each after a comma,
 * so that the header's first event needs none and the exit flush closes it. */
#include "trace.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../base/types.h"
#include "../base/libc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BUFSIZE 16384
#define LINE 320 /* the longest line */
/* Chrome trace threads of pinfast's own, above any Linux thread id: the
 * DMAs of each direction, and worker n's tasks */
#define TRACK_DMA (1 << 23)
#define TRACK_WORKER (TRACK_DMA + 16)

struct buf {
    struct buf *next;
    int lock;  /* the owner appends, the exit flush drains */
    int owned; /* a running thread writes into it */
    size_t len;
    char data[BUFSIZE];
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf *bufs;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int fd = -1;
static int failed; /* a write failed: tracing stops, said once */
static int closed; /* the exit flush ran: nothing more is recorded */
static int chrome, pid;
static uint64_t named; /* the workers whose track has its name */
static uint64_t origin;
static __thread struct buf *mine;

/* Times are from the library's load, like the report's wall_seconds. */
__attribute__((constructor)) static void trace_origin(void) { origin = pf_now_ns(); }

static void take(struct buf *b) {
    while (__atomic_exchange_n(&b->lock, 1, __ATOMIC_ACQUIRE))
        ;
}
static void drop(struct buf *b) { __atomic_store_n(&b->lock, 0, __ATOMIC_RELEASE); }

/* With b taken. */
static void drain(struct buf *b) {
    size_t off = 0;
    while (off < b->len && !__atomic_load_n(&failed, __ATOMIC_RELAXED)) {
        ssize_t w = write(fd, b->data + off, b->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!__atomic_exchange_n(&failed, 1, __ATOMIC_RELAXED))
                pf_msg(PF_WARNING, "writing the trace failed (%s); tracing stops", strerror(w < 0 ? errno : ENOSPC));
            break;
        }
        off += (size_t)w;
    }
    b->len = 0;
}

static void thread_ends(void *p) {
    struct buf *b = p;
    take(b);
    if (!__atomic_load_n(&closed, __ATOMIC_ACQUIRE))
        drain(b);
    b->owned = 0;
    drop(b);
}

static void open_trace(void) {
    char path[4096];
    const char *pattern = pf_options()->trace;
    if (pf_options_file(pattern, path, sizeof path)) {
        pf_msg(PF_WARNING, "PINFAST_TRACE is too long; no trace");
        return;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        pf_msg(PF_WARNING, "cannot write the trace to %s (%s); no trace", path, strerror(errno));
        return;
    }
    pthread_key_create(&key, thread_ends);
    char head[LINE];
    chrome = pf_options()->trace_format == PF_TRACE_CHROME;
    pid = (int)getpid();
    int n =
        chrome ? snprintf(
                     head, sizeof head,
                     "[{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"DMA H2D\"}},\n"
                     "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"DMA D2H\"}}",
                     pid, TRACK_DMA, pid, TRACK_DMA + 1)
               : snprintf(head, sizeof head,
                          "# pinfast trace: start_seconds thread api direction memory bytes seconds path result\n");
    ssize_t w = write(fd, head, (size_t)n);
    (void)w;
}

/* This thread's buffer: a free one from the list, or a new one. */
static struct buf *claim(void) {
    struct buf *b;
    pthread_mutex_lock(&list_lock);
    for (b = bufs; b && b->owned; b = b->next)
        ;
    if (!b && (b = pf_libc_calloc(1, sizeof *b))) {
        b->next = bufs;
        bufs = b;
    }
    if (b)
        b->owned = 1;
    pthread_mutex_unlock(&list_lock);
    if (b)
        pthread_setspecific(key, b);
    return b;
}

/* Appends one line to b (taken). */
__attribute__((format(printf, 2, 3))) static void put(struct buf *b, const char *fmt, ...) {
    if (b->len + LINE > BUFSIZE)
        drain(b);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->data + b->len, LINE, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n < LINE ? (size_t)n : LINE - 1;
}

/* Microseconds since the library's load, the Chrome trace's unit. */
static double trace_us(uint64_t ns) { return (double)(ns - origin) * 1e-3; }

/* One complete event ("X") from start to end on thread tid. */
#define EVENT(b, name, tid, start, end, args, ...) \
    put(b, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%ld,\"ts\":%.3f,\"dur\":%.3f,\"args\":{" args "}}", \
        name, pid, (long)(tid), trace_us(start), (double)((end) - (start)) * 1e-3, __VA_ARGS__)

/* A staged copy's chunks: each DMA, from its issue to its end seen (or to
 * the issuing call's return, when the copy returned before), on its
 * direction's track; each host-copy task on the thread that ran it. */
static void chunks(struct buf *b, const struct pf_timeline *tl, const char *dir, long tid) {
    int d2h = !strcmp(dir, "D2H");
    for (int i = 0; i < tl->n; i++) {
        const struct pf_chunk_log *l = &tl->chunk[i];
        uint64_t end = l->landed > l->dma ? l->landed : l->dma_end;
        if (l->dma && end >= l->dma)
            EVENT(b, "DMA", TRACK_DMA + d2h, l->dma, end,
                  "\"direction\":\"%s\",\"offset\":%zu,\"bytes\":%zu,\"slot\":%d", dir, l->off, l->len, l->slot);
        for (int k = 0; k < l->ntasks; k++) {
            int by = l->tasks[k].by;
            if (by && by < 64 && !(__atomic_fetch_or(&named, 1ull << by, __ATOMIC_RELAXED) & 1ull << by))
                put(b,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"pinfast worker %d\"}}",
                    pid, TRACK_WORKER + by, by);
            EVENT(b, "host copy", by ? TRACK_WORKER + by : tid, l->tasks[k].start, l->tasks[k].end,
                  "\"direction\":\"%s\",\"chunk\":%zu,\"bytes\":%zu", dir, l->off, l->tasks[k].len);
        }
    }
}

void pf_trace(const char *api, const char *dir, const char *mem, const char *path, size_t bytes, uint64_t start_ns,
              uint64_t ns, int result, const struct pf_timeline *tl) {
    if (!pf_options()->trace)
        return;
    pthread_once(&once, open_trace);
    if (fd < 0 || __atomic_load_n(&failed, __ATOMIC_RELAXED) || (!mine && !(mine = claim())))
        return;
    struct buf *b = mine;
    long tid = (long)syscall(SYS_gettid);
    take(b);
    if (__atomic_load_n(&closed, __ATOMIC_ACQUIRE)) {
        /* after the exit flush: the file is complete */
    } else if (chrome) {
        EVENT(b, api, tid, start_ns, start_ns + ns,
              "\"direction\":\"%s\",\"memory\":\"%s\",\"bytes\":%zu,\"path\":\"%s\",\"result\":%d", dir, mem, bytes,
              path, result);
        if (tl)
            chunks(b, tl, dir, tid);
    } else {
        put(b, "%.9f %ld %s %s %s %zu %.9f %s %d\n", (double)(start_ns - origin) * 1e-9, tid, api, dir, mem, bytes,
            (double)ns * 1e-9, path, result);
    }
    drop(b);
}

void pf_trace_flush(void) {
    /* a buffer taken after this is left as it is; one taken before is
     * drained below once its owner drops it */
    if (fd < 0 || __atomic_exchange_n(&closed, 1, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_lock(&list_lock);
    for (struct buf *b = bufs; b; b = b->next) {
        take(b);
        drain(b);
        drop(b);
    }
    pthread_mutex_unlock(&list_lock);
    if (chrome && !__atomic_load_n(&failed, __ATOMIC_RELAXED)) {
        ssize_t w = write(fd, "\n]\n", 3);
        (void)w;
    }
}

void pf_trace_forked(void) {
    if (fd >= 0)
        close(fd);
    fd = -1;
    failed = closed = 0;
    named = 0;
    bufs = NULL; /* the parent's lines are the parent's to write */
    mine = NULL;
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
    pthread_mutex_init(&list_lock, NULL);
}
