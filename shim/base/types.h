/* The types every layer speaks in: what kind of memory a side of a copy is,
 * which way a copy goes, which path pinfast gave it, how host bytes are
 * moved.  No code: a header every folder may include. */
#ifndef PINFAST_TYPES_H
#define PINFAST_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum pf_mem {
    PF_MEM_PAGEABLE, /* ordinary host memory */
    PF_MEM_PINNED,   /* pinned or registered by the program */
    PF_MEM_PINFAST,  /* pinned by pinfast */
    PF_MEM_MANAGED,  /* unified (managed) memory */
    PF_MEM_DEVICE,   /* device memory */
    PF_MEM_MIXED,    /* a batch of several kinds */
    PF_MEM_UNKNOWN,  /* the driver could not say */
    PF_MEM_COUNT
};

enum pf_dir { PF_DIR_H2D, PF_DIR_D2H, PF_DIR_D2D, PF_DIR_H2H, PF_DIR_MIXED, PF_DIR_COUNT };
enum pf_path { PF_PATH_PASSTHROUGH, PF_PATH_STAGED, PF_PATH_BOUNCED, PF_PATH_REGISTERED, PF_PATH_COUNT };

/* How a host-side copy moves its bytes (PINFAST_COPY_H2D/D2H). */
enum pf_host_copy { PF_HOST_COPY_MEMCPY, PF_HOST_COPY_STREAM, PF_HOST_COPY_AUTO };

/* What the registration cache and pinfast's heap did (memory/register.c,
 * memory/heap.c), for the report. */
struct pf_register_stats {
    unsigned long long registered, refused; /* registrations made, refused by the driver */
    unsigned long long retired;             /* retired as the program changed their memory */
    unsigned long long undone;              /* unregistered: at settles, at exit, for the program's own */
    unsigned long long guarded;             /* copies passed to the driver over one, waited for */
    unsigned long long handed;              /* the program's registrations answered from one */
    unsigned long long over_cap;            /* blocks staged as registering them would pass the cap */
    unsigned long long untouched;           /* blocks due found not touched whole: left unregistered */
    unsigned long long copies, bytes;       /* through them */
    unsigned long long live, live_bytes, peak_bytes;
    unsigned long long heap_blocks, heap_reused, heap_released; /* blocks served new, reused, given back */
    unsigned long long kept_bytes, peak_kept_bytes;             /* freed blocks kept for reuse */
    unsigned long long forks, fork_registered_bytes; /* fork() calls, and the bytes registered at each, summed */
    double fork_seconds;     /* fork()'s time in the parent: the kernel copies registered pages for the child */
    double register_seconds; /* spent in cuMemHostRegister/Unregister */
};

/* What the staging engine did, for the report. */
struct pf_engine_stats {
    unsigned long long copies, bytes, pinned_bytes;
    int contexts, threads;
    double worker_seconds;        /* CPU time spent copying host memory (workers and helping callers) */
    double caller_seconds;        /* callers' CPU time inside staged copies (CLOCK_THREAD_CPUTIME_ID) */
    double cpu_seconds;           /* staging's CPU time: workers' copies and callers' caller_seconds */
    double wait_seconds;          /* callers' polling for a DMA before the driver's blocking wait */
    struct pf_register_stats reg; /* copies through registrations */
};

#define PF_MAX_SPLIT 16 /* tasks per staged chunk */
#define PF_TIMELINE 24  /* chunks of a staged copy the timeline details */

/* A staged chunk's times (pf_now_ns; 0: not seen): taken, DMA issued, the
 * call issuing it returned, its end seen, the host copy's first task
 * started and last task ended, the chunk retired; and its tasks. */
struct pf_chunk_log {
    size_t off, len;
    int slot;
    uint64_t taken, dma, dma_end, landed, first, last, seen;
    int ntasks;
    struct {
        uint64_t start, end;
        size_t len;
        int by;
    } tasks[PF_MAX_SPLIT];
};

/* The first PF_TIMELINE chunks of a staged copy: the engine fills it for
 * the debug log and the Chrome trace, the trace writes it. */
struct pf_timeline {
    int n;
    struct pf_chunk_log chunk[PF_TIMELINE];
};

/* Direction of a copy from the kinds of its two sides. */
static inline enum pf_dir pf_dir_of(enum pf_mem src, enum pf_mem dst) {
    int sd = src == PF_MEM_DEVICE, dd = dst == PF_MEM_DEVICE;
    return sd ? (dd ? PF_DIR_D2D : PF_DIR_D2H) : (dd ? PF_DIR_H2D : PF_DIR_H2H);
}

#endif
