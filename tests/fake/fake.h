/* fake.h - shared internals of the fake CUDA driver (tests/fake/libcuda.so.1).
 *
 * The fake implements, in host memory, the subset of the CUDA driver API that
 * pinfast touches, with the real driver's exported names and ABIs.  It is
 * built with __CUDA_API_VERSION_INTERNAL so that cuda.h declares every
 * versioned export (cuMemcpyHtoD, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, ...)
 * and the compiler checks each of our definitions against its prototype.
 *
 * One concern per file: fake_core.c (init, devices, call counters, error
 * strings), fake_ctx.c (contexts), fake_mem.c (allocation table, memory API),
 * fake_stream.c (stream workers, events, capture, graphs, host functions),
 * fake_copy.c (every memcpy flavour), fake_gpa.c (cuGetProcAddress), fake_vmm.c
 * (virtual memory management: reservations, handles, mappings), fake_array.c
 * (CUDA arrays).
 */
#ifndef PINFAST_FAKE_H
#define PINFAST_FAKE_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_API __attribute__((visibility("default")))

/* ---- call counters (fakecuda_calls) ------------------------------------- */
struct fake_counter {
    const char *name;
    atomic_ulong n;
    atomic_int registered;
    struct fake_counter *next;
};
void fake_count(struct fake_counter *c);
/* First statement of every exported API function: counts the call under the
 * exported name (__func__ is the symbol name, so no table to keep in sync). */
#define FAKE_ENTER()                                                      \
    static struct fake_counter fake_counter_ = { .name = __func__ };      \
    fake_count(&fake_counter_)

extern atomic_int fake_initialized;
#define FAKE_CHECK_INIT()                                                 \
    do { if (!atomic_load(&fake_initialized)) return CUDA_ERROR_NOT_INITIALIZED; } while (0)

int fake_ndevices(void);
unsigned fake_delay_us(void);   /* FAKECUDA_DELAY_US */

/* ---- contexts ----------------------------------------------------------- */
struct fake_stream;
struct fake_ctx {
    uint32_t magic;
    int dev;
    unsigned long long id;
    int primary;
    int refs;                    /* primary context retain count */
    unsigned flags;              /* its CU_CTX_* flags, as made or set */
    atomic_int alive;
    struct fake_stream *legacy;  /* the context's legacy default stream */
};
#define FAKE_CTX_MAGIC 0xC7C7C7C7u
struct fake_ctx *fake_ctx_current(void);
CUresult fake_ctx_require(struct fake_ctx **out);  /* init + current context */
int fake_ctx_valid(struct fake_ctx *c);
void fake_ctx_sync(struct fake_ctx *c);            /* NULL: every context */
/* The end of a context (cuCtxDestroy, primary reset or last release), after
 * its work has run: its streams, events and captures go (fake_stream.c), and
 * so does the memory allocated in it (fake_mem.c). */
void fake_stream_ctx_destroyed(struct fake_ctx *c);
void fake_mem_ctx_destroyed(struct fake_ctx *c);

/* ---- streams ------------------------------------------------------------ */
/* One global lock and condition variable guard every stream, event and graph
 * structure: the fake favours obviously-correct over fast. */
extern pthread_mutex_t fake_lock;
extern pthread_cond_t fake_cv;

enum fake_op_kind { OP_NOOP, OP_COPY, OP_HOSTFN, OP_FREE, OP_EVENT };

/* A (up to) 3-D copy between two plain host addresses: every copy flavour is
 * translated into this before it is queued. */
struct fake_copy {
    char *dst;
    const char *src;
    size_t width, height, depth;
    size_t dpitch, dheight, spitch, sheight;
};

struct fake_dep { struct fake_stream *s; uint64_t seq; };
struct fake_event;

struct fake_op {
    struct fake_op *next;
    enum fake_op_kind kind;
    struct fake_copy cp;      /* OP_COPY */
    CUhostFn fn;              /* OP_HOSTFN */
    void *user;
    void *owned;              /* freed after the op ran (snapshots, OP_FREE) */
    struct fake_event *ev;    /* OP_EVENT */
    size_t staged;            /* a pageable async H2D's bytes in the driver's staging */
    int staged_large;         /* ... and it is one of FAKE_STAGING_LARGE */
    struct fake_dep *deps;    /* waited for before the op runs */
    size_t ndeps;
    uint64_t seq;
};

enum fake_stream_kind { STREAM_LEGACY, STREAM_PER_THREAD, STREAM_USER };
struct fake_graph;
struct fake_stream {
    uint32_t magic;
    enum fake_stream_kind kind;
    struct fake_ctx *ctx;
    unsigned flags;
    int priority;
    int refs;
    int destroyed;
    uint64_t enqueued, completed;
    struct fake_op *head, *tail;
    pthread_t thread;
    unsigned rng;
    struct fake_graph *capture;    /* non-NULL while capturing */
    unsigned long long capture_id;
    CUstreamCaptureMode capture_mode;
    pthread_t capture_thread;      /* the thread that began the capture */
    int capture_invalid;           /* CU_STREAM_CAPTURE_STATUS_INVALIDATED */
    unsigned long copies;          /* copy ops queued or captured (fakecuda_stream_copies) */
    size_t staged;                 /* bytes of its queued ops' `staged` */
    int staged_large;              /* its queued ops' `staged_large` */
    struct fake_stream *next;      /* global list of live streams, then of dead ones */
};
#define FAKE_STREAM_MAGIC 0x5757A3A3u

struct fake_stream *fake_stream_new(struct fake_ctx *ctx, enum fake_stream_kind kind,
                                    unsigned flags, int prio);
/* Resolve a stream handle: 0 means the legacy stream for the legacy flavour and
 * the calling thread's per-thread stream for the _ptds/_ptsz flavour. */
CUresult fake_stream_get(CUstream h, int per_thread, struct fake_stream **out);
struct fake_op *fake_op_new(enum fake_op_kind kind);
void fake_op_free(struct fake_op *op);
/* Queue op on s (or record it into s's capture graph, or drop it when that
 * capture was invalidated); *seq = its sequence number, 0 when captured. */
void fake_enqueue(struct fake_stream *s, struct fake_op *op, uint64_t *seq);
void fake_stream_wait(struct fake_stream *s, uint64_t seq);
/* Returns once everything queued on s so far has run. */
void fake_stream_wait_queued(struct fake_stream *s);
/* A pageable asynchronous H2D of `bytes` about to be queued as op: the real
 * driver copies it into its own pinned staging memory and returns at once
 * while that lasts; beyond, it first waits for everything queued on the
 * stream.  Copies up to FAKE_STAGING_SMALL share FAKE_STAGING bytes of
 * staging not yet run on the stream, each taking whole pages of
 * FAKE_STAGING_PAGE; a larger one takes one of FAKE_STAGING_LARGE places,
 * and one over FAKE_STAGING always waits.  Behind busy work on the H200
 * (driver 580, tests/gpu/probes/probe_driver_staging.c `small`): 3 MiB of
 * copies of 4 KiB to 64 KiB returned at once, 4 MiB waited; 512 copies of
 * 1 KiB returned at once, 1024 waited, as did 2048 of 4 or 256 bytes; of
 * 96 KiB to 512 KiB, two returned at once and the third waited.  On the
 * H100 (tests/gpu/probes/bounce_line.c): one copy of 2 MiB or 256 of 4 KiB
 * returned at once, one of 4 MiB or 256 of 16 KiB waited. */
#define FAKE_STAGING (3u << 20)
#define FAKE_STAGING_PAGE 4096u
#define FAKE_STAGING_SMALL (64u << 10)
#define FAKE_STAGING_LARGE 2
void fake_stream_stage(struct fake_stream *s, struct fake_op *op, size_t bytes);
int fake_stream_capturing(struct fake_stream *s);
/* Capture modes: the check made by every call that the real driver deems
 * potentially unsafe during a capture (synchronizing, querying, pinned
 * allocation).  Returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, after
 * invalidating the captures that prohibit the call, or CUDA_SUCCESS.
 * synced: the context a cuCtxSynchronize waits for (any capture in it
 * prohibits the call, whatever the modes), else NULL. */
CUresult fake_capture_prohibit(struct fake_ctx *synced);
void fake_copy_run(const struct fake_copy *cp);

/* ---- memory ------------------------------------------------------------- */
enum fake_mem_kind { MEM_PAGEABLE = 0, MEM_DEVICE, MEM_MANAGED, MEM_PINNED, MEM_REGISTERED };
/* Device addresses are the host backing plus this bias: bit 60 makes them
 * non-canonical, so a shim that dereferences a device pointer faults. */
#define FAKE_DEV_BIAS (1ULL << 60)
/* Translate [addr, addr+len) to host memory.  need_alloc: the address must
 * belong to a known allocation (a device operand).  Returns INVALID_VALUE for
 * NULL, unknown device-space addresses and ranges past an allocation's end. */
CUresult fake_mem_translate(uintptr_t addr, size_t len, int need_alloc,
                            void **host, enum fake_mem_kind *kind);
/* fake_vmm.c's mappings in the allocation table: device memory of device
 * dev at [base, base+size) backed by host (owned by its reservation, not by
 * the table), of allocation handle `handle`; an overlap is INVALID_VALUE.
 * fake_mem_handle: the handle mapped at addr, 0 for none.  fake_mem_unmap
 * removes the mappings inside [base, base+size) and returns how many. */
CUresult fake_mem_map(uintptr_t base, size_t size, char *host, int dev, uintptr_t handle);
uintptr_t fake_mem_handle(uintptr_t addr);
int fake_mem_unmap(uintptr_t base, size_t size);

/* ---- arrays (fake_array.c) ------------------------------------------------ */
/* An array is host memory inside the fake, rows of Width elements of
 * format * channels bytes, packed: the element size, the bytes of a row,
 * rows per slice and slices (1 for missing dimensions). */
struct fake_array_shape { char *mem; size_t elem, row, height, depth; };
/* The shape of a live array; INVALID_VALUE for anything else. */
CUresult fake_array_get(CUarray a, struct fake_array_shape *out);

/* The length of the first piece of [addr, addr+len) that lies wholly inside
 * or outside the whole pages of a registration (len when none holds addr). */
size_t fake_mem_piece(uintptr_t addr, size_t len);
/* Writes to registered pages as they move wait for the move (fake_mem.c). */
void fake_mem_watch_moves(void);

#endif
