/* Every PINFAST_* setting, parsed once from the environment. */
#ifndef PINFAST_OPTIONS_H
#define PINFAST_OPTIONS_H

#include <stddef.h>

enum pf_stats_mode { PF_STATS_OFF, PF_STATS_TEXT, PF_STATS_JSON };
enum pf_trace_format { PF_TRACE_LINES, PF_TRACE_CHROME };

struct pf_options {
    int help;               /* print the table at load */
    int disable;            /* pure pass-through */
    int stats;              /* enum pf_stats_mode */
    const char *stats_file; /* NULL: stderr */
    const char *trace;      /* one line per intercepted call to this file; NULL: none */
    int trace_format;       /* enum pf_trace_format */
    int log;                /* enum pf_level: most verbose level printed */
    int stage;              /* route pageable copies through pinned staging */
    int hugepages;          /* MADV_HUGEPAGE on fresh D2H destinations */
    int threads;            /* staging worker threads; 0: one per CPU, capped */
    size_t chunk;           /* staging chunk (slot) size */
    size_t min_size;        /* smaller pageable copies pass through */
    size_t staging;         /* pinned staging memory per context */
    size_t bounce;          /* pinned bounce area per context; 0: no bounce */
    int copy_h2d, copy_d2h; /* enum pf_host_copy of the host side of each direction */
    size_t pool_idle;       /* freed pinned memory the cache may keep; 0: no cache */
    int async_d2h;          /* pageable async D2H lands in stream callbacks */
    int callsites;          /* walk the stack of 1 in N small copies; 0: no call sites */
    int nvtx;               /* NVTX ranges around the copies pinfast stages */
    int reg;                /* pinfast's heap, and registering its blocks */
    size_t reg_max;         /* registered bytes at most; 0: the locked-memory limit, RAM / 4 */
    size_t reg_min;         /* smaller heap blocks are the real allocator's */
    int reg_after;          /* a block is registered at its Nth copy */
    size_t heap_keep;       /* freed blocks kept warm; 0: RAM / 8, at most 8 GiB */
    /* derived: a trace, or every copy's stack walked, wants every call timed */
    int time_every_call;
};

/* Parsed on first use; every copy reads them, so the common path is one load. */
extern struct pf_options pf_options_parsed;
extern int pf_options_ready;
const struct pf_options *pf_options_load(void);
static inline const struct pf_options *pf_options(void) {
    if (__builtin_expect(__atomic_load_n(&pf_options_ready, __ATOMIC_ACQUIRE), 1))
        return &pf_options_parsed;
    return pf_options_load();
}

/* Warns about the settings refused (a value not allowed: its default is
 * used), unless PINFAST_DISABLE=1.  Called once, at the process's first
 * CUDA call (driver.c), so that a process that makes none (a shell, a
 * compiler under LD_PRELOAD) says nothing; a forked child has had its
 * parent's. */
void pf_options_warn(void);

/* Whether the environment set the setting `name` (PINFAST_...), valid or
 * not, as the options were parsed. */
int pf_options_given(const char *name);

/* A file name from a setting: %p becomes the pid (each process of a
 * program writes its own), %r the launcher's rank (RANK,
 * OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID; x when none is set or it
 * is no number), %h the short host name, %% a %.  Returns -1 when it does
 * not fit. */
int pf_options_file(const char *pattern, char *path, size_t size);

/* Writes the table (name, default, range, help) for `pinfast options`. */
void pf_options_describe(int fd);

#endif
