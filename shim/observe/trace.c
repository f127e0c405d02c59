/* Each thread appends lines to its own buffer and writes it out whole with
 * one write(2) when it fills (O_APPEND: lines of several threads never mix
 * within a line).  Buffers live on a list so that the exit flush finds the
 * lines of threads still running; a thread's buffer is reused after it ends. */
#include "trace.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/options.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BUFSIZE 16384
#define LINE 192 /* the longest line */

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
                pf_msg(PF_WARNING, "writing the trace failed (%s); tracing stops",
                       strerror(w < 0 ? errno : ENOSPC));
            break;
        }
        off += (size_t)w;
    }
    b->len = 0;
}

static void thread_ends(void *p) {
    struct buf *b = p;
    take(b);
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
    static const char head[] =
        "# pinfast trace: start_seconds thread api direction memory bytes seconds path result\n";
    ssize_t w = write(fd, head, sizeof head - 1);
    (void)w;
}

/* This thread's buffer: a free one from the list, or a new one. */
static struct buf *claim(void) {
    struct buf *b;
    pthread_mutex_lock(&list_lock);
    for (b = bufs; b && b->owned; b = b->next)
        ;
    if (!b && (b = calloc(1, sizeof *b))) {
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

void pf_trace(const char *api, const char *dir, const char *mem, const char *path, size_t bytes,
              uint64_t start_ns, uint64_t ns, int result) {
    if (!pf_options()->trace)
        return;
    pthread_once(&once, open_trace);
    if (fd < 0 || __atomic_load_n(&failed, __ATOMIC_RELAXED) || (!mine && !(mine = claim())))
        return;
    struct buf *b = mine;
    take(b);
    if (b->len + LINE > BUFSIZE)
        drain(b);
    int n = snprintf(b->data + b->len, LINE, "%.9f %ld %s %s %s %zu %.9f %s %d\n",
                     (double)(start_ns - origin) * 1e-9, (long)syscall(SYS_gettid), api, dir, mem,
                     bytes, (double)ns * 1e-9, path, result);
    if (n > 0)
        b->len += (size_t)n < LINE ? (size_t)n : LINE - 1;
    drop(b);
}

void pf_trace_flush(void) {
    if (fd < 0)
        return;
    pthread_mutex_lock(&list_lock);
    for (struct buf *b = bufs; b; b = b->next) {
        take(b);
        drain(b);
        drop(b);
    }
    pthread_mutex_unlock(&list_lock);
}

void pf_trace_forked(void) {
    if (fd >= 0)
        close(fd);
    fd = -1;
    failed = 0;
    bufs = NULL; /* the parent's lines are the parent's to write */
    mine = NULL;
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
    pthread_mutex_init(&list_lock, NULL);
}
