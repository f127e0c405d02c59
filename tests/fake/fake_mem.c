/* fake_mem.c - the allocation table and the memory API.
 *
 * Device memory is host memory handed out at backing + FAKE_DEV_BIAS, a
 * non-canonical address, so it can only be reached through the table (a shim
 * that dereferences a device pointer crashes in the tests, as it would on a
 * GPU).  Managed memory is usable from the host like real UVM, so its address
 * is its backing.  Pinned memory (cuMemHostAlloc/cuMemAllocHost) and
 * registered ranges are ordinary host memory recorded in the table; with
 * unified addressing their device pointer is their host address.  A
 * registration pins the pages under the range, as the real one does: the
 * whole pages inside the range are moved into a memfd, mapped shared at the
 * same address (same contents, the program's writes stay visible) and a
 * second time as the "physical pages" copies read and write (the partial
 * pages at its ends, which other data may share and other threads write,
 * are left in place and copied from where they are).  Memory the program unmaps,
 * remaps or advises away without unregistering it first is new memory at
 * the same address, and copies still move the old pages: stale data, as on
 * a GPU.  The real driver pins the pages where they are, while other
 * threads go on writing them (the program, its allocator, a registering
 * thread's neighbours): so the pages are write-protected while they move,
 * and a thread writing to them waits until they have moved, then writes
 * again (`moving`).  A forked child gets its own copy of the pages, as from
 * the kernel, and none of the registrations.  (Unlike the real pages,
 * MADV_DONTNEED keeps the memfd's contents.)  Memory
 * belongs to the context it was allocated in and goes with it.  Pinned
 * allocation and freeing are potentially unsafe during a capture
 * (fake_capture_prohibit).
 */
#define _GNU_SOURCE
#include "fake.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct alloc {
    uintptr_t base;          /* address the application sees */
    size_t size;
    enum fake_mem_kind kind;
    char *host;              /* backing memory */
    char *alias;             /* a registration: the second mapping of its whole pages */
    uintptr_t ilo, ihi;      /* those pages (none: ilo == ihi) */
    unsigned long alias_ino; /* the memfd behind them (0: shared memory mapped again) */
    struct fake_ctx *ctx;
    unsigned flags;
    unsigned long long id;
    int vmm;                 /* a mapping (fake_vmm.c): its backing is the reservation's */
    uintptr_t handle;        /* the mapping's allocation handle */
    int dev;                 /* a mapping's device (it has no context) */
    int dontfork;            /* a registration of memory advised MADV_DONTFORK */
};

static void backing_free(const struct alloc *a);

/* sorted by base; ranges never overlap */
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *tab;
static size_t ntab, captab;
static unsigned long long next_buffer_id = 1;
static size_t device_bytes;
static atomic_long registered_now; /* registrations held (fakecuda_registered) */

#define TOTAL_MEM (80ULL << 30)

/* index of the entry containing addr, or -1 (mem_lock held) */
static long find_locked(uintptr_t addr)
{
    size_t lo = 0, hi = ntab;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tab[mid].base + tab[mid].size <= addr)
            lo = mid + 1;
        else if (tab[mid].base > addr)
            hi = mid;
        else
            return (long)mid;
    }
    return -1;
}

/* does [base, base+size) overlap an entry? (mem_lock held) */
static int overlaps_locked(uintptr_t base, size_t size)
{
    for (size_t i = 0; i < ntab; i++)
        if (tab[i].base < base + size && base < tab[i].base + tab[i].size)
            return 1;
    return 0;
}

static int insert_locked(struct alloc a)
{
    if (ntab == captab) {
        size_t cap = captab ? 2 * captab : 64;
        struct alloc *t = realloc(tab, cap * sizeof *t);
        if (!t)
            return -1;
        tab = t;
        captab = cap;
    }
    size_t i = 0;
    while (i < ntab && tab[i].base < a.base)
        i++;
    memmove(&tab[i + 1], &tab[i], (ntab - i) * sizeof *tab);
    a.id = next_buffer_id++;
    tab[i] = a;
    ntab++;
    if (a.kind == MEM_DEVICE)
        device_bytes += a.size;
    return 0;
}

static void remove_locked(long i)
{
    if (tab[i].kind == MEM_DEVICE)
        device_bytes -= tab[i].size;
    memmove(&tab[i], &tab[i + 1], (ntab - (size_t)i - 1) * sizeof *tab);
    ntab--;
}

/* find the entry starting exactly at base with one of the kinds in mask;
 * on success copy it out and remove it */
static int take_locked(uintptr_t base, unsigned kind_mask, struct alloc *out)
{
    long i = find_locked(base);
    if (i < 0 || tab[i].base != base || !((1u << tab[i].kind) & kind_mask) || tab[i].vmm)
        return -1;
    *out = tab[i];
    remove_locked(i);
    return 0;
}

/* records a, or frees its backing when the table cannot grow */
static CUresult insert_or_free(struct alloc a)
{
    pthread_mutex_lock(&mem_lock);
    int rc = insert_locked(a);
    pthread_mutex_unlock(&mem_lock);
    if (rc) {
        backing_free(&a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* the frees are synchronous, like the real ones: find the entry starting at
 * base with one of the kinds in kind_mask, wait for the work queued in its
 * context (sync_all: in every context), then copy it out and remove it.  The
 * backing is the caller's to free. */
static int take_synced(uintptr_t base, unsigned kind_mask, int sync_all, struct alloc *out)
{
    pthread_mutex_lock(&mem_lock);
    long i = find_locked(base);
    int ok = i >= 0 && tab[i].base == base && ((1u << tab[i].kind) & kind_mask) && !tab[i].vmm;
    if (ok)
        *out = tab[i];
    pthread_mutex_unlock(&mem_lock);
    if (!ok)
        return -1;
    fake_ctx_sync(sync_all ? NULL : out->ctx);
    pthread_mutex_lock(&mem_lock);
    ok = take_locked(base, kind_mask, out) == 0;    /* not freed concurrently */
    pthread_mutex_unlock(&mem_lock);
    return ok ? 0 : -1;
}

CUresult fake_mem_translate(uintptr_t addr, size_t len, int need_alloc,
                            void **host, enum fake_mem_kind *kind)
{
    if (addr == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mem_lock);
    long i = find_locked(addr);
    if (i >= 0) {
        struct alloc *a = &tab[i];
        size_t off = addr - a->base, have = a->size - off;
        /* mappings laid end to end in one reservation are one range */
        for (size_t j = (size_t)i + 1; len > have && a->vmm && j < ntab && tab[j].vmm &&
                                      tab[j].base == tab[j - 1].base + tab[j - 1].size &&
                                      tab[j].host == tab[j - 1].host + tab[j - 1].size; j++)
            have += tab[j].size;
        if (len <= have) {
            *host = a->host + off;
            if (a->kind == MEM_REGISTERED && addr >= a->ilo && addr + len <= a->ihi)
                *host = a->alias + (addr - a->ilo);
            *kind = a->kind;
            pthread_mutex_unlock(&mem_lock);
            return CUDA_SUCCESS;
        }
        int refused = a->kind == MEM_DEVICE || a->kind == MEM_REGISTERED;
        pthread_mutex_unlock(&mem_lock);
        /* a host range running past a pinned block is just pageable
         * memory; one running past a registration is refused, as the
         * H200's driver refuses it (tests/gpu/probes/probe_reg_pieces.c) */
        if (refused || need_alloc)
            return CUDA_ERROR_INVALID_VALUE;
        *host = (void *)addr;
        *kind = MEM_PAGEABLE;
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mem_lock);
    if (need_alloc || addr >= FAKE_DEV_BIAS)
        return CUDA_ERROR_INVALID_VALUE;
    *host = (void *)addr;
    *kind = MEM_PAGEABLE;
    return CUDA_SUCCESS;
}

static void unpin(const struct alloc *a);

void fake_mem_ctx_destroyed(struct fake_ctx *c)
{
    pthread_mutex_lock(&mem_lock);
    for (size_t i = ntab; i-- > 0;)
        if (tab[i].ctx == c) {
            if (tab[i].kind == MEM_REGISTERED) {  /* registered memory is the application's */
                unpin(&tab[i]);
                atomic_fetch_sub(&registered_now, 1);
            }
            else
                backing_free(&tab[i]);
            remove_locked((long)i);
        }
    pthread_mutex_unlock(&mem_lock);
}

CUresult fake_mem_map(uintptr_t base, size_t size, char *host, int dev, uintptr_t handle)
{
    struct alloc a = { .base = base, .size = size, .kind = MEM_DEVICE, .host = host, .vmm = 1, .dev = dev,
                       .handle = handle };
    pthread_mutex_lock(&mem_lock);
    int bad = overlaps_locked(base, size);
    int rc = bad ? -1 : insert_locked(a);
    pthread_mutex_unlock(&mem_lock);
    return bad ? CUDA_ERROR_INVALID_VALUE : rc ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

uintptr_t fake_mem_handle(uintptr_t addr)
{
    pthread_mutex_lock(&mem_lock);
    long i = find_locked(addr);
    uintptr_t h = i >= 0 && tab[i].vmm ? tab[i].handle : 0;
    pthread_mutex_unlock(&mem_lock);
    return h;
}

int fake_mem_unmap(uintptr_t base, size_t size)
{
    int n = 0;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = ntab; i-- > 0;)
        if (tab[i].vmm && tab[i].base >= base && tab[i].base + tab[i].size <= base + size) {
            remove_locked((long)i);
            n++;
        }
    pthread_mutex_unlock(&mem_lock);
    return n;
}

static void *backing_alloc(size_t size)
{
    size_t rounded = (size + 4095) & ~(size_t)4095;
    return aligned_alloc(4096, rounded);
}

/* Pinned and managed memory are the driver's own mappings, as the real
 * driver's are: never blocks of the program's heap (whose malloc may be a
 * preloaded library's, pinfast's among them). */
static void *mapping_alloc(size_t size)
{
    void *p = (void *)syscall(SYS_mmap, NULL, (size + 4095) & ~(size_t)4095, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    return p == MAP_FAILED ? NULL : p;
}

static void backing_free(const struct alloc *a)
{
    if (a->kind == MEM_PINNED || a->kind == MEM_MANAGED)
        syscall(SYS_munmap, a->host, (a->size + 4095) & ~(size_t)4095);
    else
        free(a->host);
}

/* ---- device memory -------------------------------------------------------- */
static CUresult dev_alloc(CUdeviceptr *dptr, size_t size, struct fake_ctx *c, enum fake_mem_kind kind)
{
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    char *host = kind == MEM_MANAGED ? mapping_alloc(size) : backing_alloc(size);
    if (!host)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc a = { .size = size, .kind = kind, .host = host, .ctx = c };
    a.base = kind == MEM_DEVICE ? (uintptr_t)host + FAKE_DEV_BIAS : (uintptr_t)host;
    CUresult r = insert_or_free(a);
    if (!r)
        *dptr = a.base;
    return r;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    return dev_alloc(dptr, bytesize, c, MEM_DEVICE);
}

FAKE_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return dev_alloc(dptr, bytesize, c, MEM_MANAGED);
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    struct alloc a;
    if (take_synced(dptr, 1u << MEM_DEVICE | 1u << MEM_MANAGED, 0, &a))
        return CUDA_ERROR_INVALID_VALUE;
    backing_free(&a);
    return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream h, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    /* graph memory nodes are not modelled */
    if (fake_stream_capturing(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return dev_alloc(dptr, size, s->ctx, MEM_DEVICE);
}

FAKE_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FAKE_ENTER();
    return alloc_async(dptr, bytesize, hStream, 0);
}

FAKE_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FAKE_ENTER();
    return alloc_async(dptr, bytesize, hStream, 1);
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (fake_stream_capturing(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct fake_op *op = fake_op_new(OP_FREE);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc a;
    pthread_mutex_lock(&mem_lock);
    int ok = take_locked(dptr, 1u << MEM_DEVICE, &a) == 0;
    pthread_mutex_unlock(&mem_lock);
    if (!ok) {
        fake_op_free(op);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the address is invalid from now on; the backing goes when the stream
     * reaches the free, so work queued before it still finds its memory */
    op->owned = a.host;
    fake_enqueue(s, op, NULL);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    FAKE_ENTER();
    return free_async(dptr, hStream, 0);
}

FAKE_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    FAKE_ENTER();
    return free_async(dptr, hStream, 1);
}

FAKE_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mem_lock);
    *total = TOTAL_MEM;
    *free_bytes = device_bytes < TOTAL_MEM ? TOTAL_MEM - device_bytes : 0;
    pthread_mutex_unlock(&mem_lock);
    return CUDA_SUCCESS;
}

/* ---- pinned and registered host memory ----------------------------------------- */
/* a copy of the entry containing ptr, if any */
static int lookup_copy(uintptr_t ptr, struct alloc *out)
{
    pthread_mutex_lock(&mem_lock);
    long i = find_locked(ptr);
    if (i >= 0)
        *out = tab[i];
    pthread_mutex_unlock(&mem_lock);
    return i >= 0;
}

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!pp || size == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = fake_capture_prohibit(NULL)))
        return r;
    char *host = mapping_alloc(size);
    if (!host)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc a = { .base = (uintptr_t)host, .size = size, .kind = MEM_PINNED,
                       .host = host, .ctx = c, .flags = flags };
    r = insert_or_free(a);
    if (!r)
        *pp = host;
    return r;
}

/* FAKECUDA_FAIL_HOSTALLOC=<bytes>: cuMemHostAlloc of at least that many bytes
 * fails with CUDA_ERROR_OUT_OF_MEMORY (1: every call), so that tests can see
 * what a shim does when it cannot pin.  Unset or 0: never.  cuMemAllocHost is
 * not affected. */
static size_t fail_hostalloc_at(void)
{
    const char *v = getenv("FAKECUDA_FAIL_HOSTALLOC");
    return v && *v ? (size_t)strtoull(v, NULL, 0) : 0;
}

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    FAKE_ENTER();
    size_t fail_at = fail_hostalloc_at();
    if (fail_at && bytesize >= fail_at && atomic_load(&fake_initialized) && pp && bytesize)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return host_alloc(pp, bytesize, Flags);
}

FAKE_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    FAKE_ENTER();
    return host_alloc(pp, bytesize, 0);
}

FAKE_API CUresult cuMemFreeHost(void *p)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    struct alloc a;
    if (!p || !lookup_copy((uintptr_t)p, &a) || a.base != (uintptr_t)p || a.kind != MEM_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_capture_prohibit(NULL);
    if (r)
        return r;
    if (take_synced((uintptr_t)p, 1u << MEM_PINNED, 1, &a))
        return CUDA_ERROR_INVALID_VALUE;
    backing_free(&a);
    return CUDA_SUCCESS;
}

/* The fake's own mappings are made with system calls: the program's mmap
 * may be a preloaded library's, which must not see the driver's work. */
static void *sys_mmap(void *p, size_t n, int prot, int flags, int fd)
{
    return (void *)syscall(SYS_mmap, p, n, prot, flags, fd, 0L);
}

#define PAGE ((uintptr_t)4096)

/* Copies whole pages as a device would, redzones of a sanitizer's heap
 * included: not instrumented, and kept from becoming a memcpy call. */
__attribute__((no_sanitize("address", "thread", "undefined"), optimize("no-tree-loop-distribute-patterns")))
static void page_copy(void *dst, const void *src, size_t n)
{
    uint64_t *d = dst;
    const uint64_t *s = src;
    for (size_t i = 0; i < n / 8; i++)
        d[i] = s[i];
}

/* Whether [pb, pe) lies in one shared mapping (shm, a shared file or
 * memfd), read from /proc/self/maps. */
static int shared_mapping(uintptr_t pb, uintptr_t pe)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512], perms[8];
    int shared = 0;
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo <= pb && pb < hi) {
            shared = perms[3] == 's' && pe <= hi;
            break;
        }
    }
    if (maps)
        fclose(maps);
    return shared;
}

/* ---- pages moving under writers: one move at a time -------------------------------- */
static pthread_mutex_t move_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uintptr_t moving_lo, moving_hi;
static atomic_ulong moves; /* moves ended */
static struct sigaction chained;
static __thread uintptr_t retried_at;
static __thread unsigned long retried_gen;

/* A write to pages being moved waits for the move's end and is retried; a
 * fault just after a move ended is retried once; any other fault is the
 * program's, for the handler before this one. */
static void on_segv(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    unsigned long gen = atomic_load(&moves);
    if (a >= atomic_load(&moving_lo) && a < atomic_load(&moving_hi)) {
        while (atomic_load(&moves) == gen)
            sched_yield();
        return;
    }
    if (retried_at != a || retried_gen != gen) {
        retried_at = a;
        retried_gen = gen;
        return;
    }
    if (chained.sa_flags & SA_SIGINFO)
        chained.sa_sigaction(sig, si, uc);
    else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN)
        chained.sa_handler(sig);
    else
        sigaction(SIGSEGV, &chained, NULL); /* the fault again, unhandled */
}

/* The handler, first again if another took its place (move_lock held):
 * it is in from cuInit on, and again at each move. */
static void install_locked(void)
{
    struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER }, cur;
    sigemptyset(&sa.sa_mask);
    if (!sigaction(SIGSEGV, NULL, &cur) && cur.sa_sigaction != on_segv)
        sigaction(SIGSEGV, &sa, &chained);
}

void fake_mem_watch_moves(void)
{
    pthread_mutex_lock(&move_lock);
    install_locked();
    pthread_mutex_unlock(&move_lock);
}

/* Test hook (tests/support's signal(), which cmocka calls around each
 * test): act goes behind the fake's handler, *old the one it replaces; 0
 * when the fake's is not first (the caller installs act itself). */
FAKE_API int fakecuda_segv_behind(const struct sigaction *act, struct sigaction *old)
{
    pthread_mutex_lock(&move_lock);
    struct sigaction cur;
    int first = !sigaction(SIGSEGV, NULL, &cur) && cur.sa_sigaction == on_segv;
    if (first) {
        *old = chained;
        chained = *act;
    }
    pthread_mutex_unlock(&move_lock);
    return first;
}

/* The pages [lo, hi) are about to be replaced: writers wait from now on. */
static void move_begin(uintptr_t lo, uintptr_t hi)
{
    pthread_mutex_lock(&move_lock);
    install_locked();
    atomic_store(&moving_lo, lo);
    atomic_store(&moving_hi, hi);
    syscall(SYS_mprotect, lo, hi - lo, PROT_READ);
}

/* They were replaced (ok), or are given their writes back. */
static void move_end(uintptr_t lo, uintptr_t hi, int ok)
{
    if (!ok)
        syscall(SYS_mprotect, lo, hi - lo, PROT_READ | PROT_WRITE);
    atomic_store(&moving_lo, 0);
    atomic_store(&moving_hi, 0);
    atomic_fetch_add(&moves, 1);
    pthread_mutex_unlock(&move_lock);
}

/* Pins the whole pages [lo, hi): returns their second mapping (NULL when
 * they cannot be pinned).  Shared memory is mapped again as it is; private
 * pages move into a memfd mapped over them, *ino its inode. */
/* Whether the mapping holding p is advised MADV_DONTFORK ("dc" in smaps):
 * the pages' move below makes a new mapping, which gets the advice again,
 * as the kernel keeps it on a registered range. */
static int vma_dontfork(uintptr_t p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, dc = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = lo <= p && p < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            dc = strstr(line, " dc") != NULL;
            break;
        }
    }
    if (f)
        fclose(f);
    return dc;
}

static void advise_dontfork(const struct alloc *a, uintptr_t lo, uintptr_t hi)
{
    if (a->dontfork)
        syscall(SYS_madvise, lo, hi - lo, MADV_DONTFORK);
}

static char *pin(uintptr_t lo, uintptr_t hi, unsigned long *ino)
{
    size_t n = hi - lo;
    *ino = 0;
    if (shared_mapping(lo, hi)) {
        char *alias = (void *)syscall(SYS_mremap, lo, 0UL, n, MREMAP_MAYMOVE);
        return alias == MAP_FAILED ? NULL : alias;
    }
    int fd = (int)syscall(SYS_memfd_create, "fakecuda-registered", 1u /* MFD_CLOEXEC */);
    struct stat st;
    if (fd < 0)
        return NULL;
    char *alias = MAP_FAILED;
    if (!ftruncate(fd, (off_t)n) && !fstat(fd, &st))
        alias = sys_mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
    if (alias != MAP_FAILED) {
        move_begin(lo, hi);
        page_copy(alias, (void *)lo, n);
        int moved = sys_mmap((void *)lo, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd) != MAP_FAILED;
        move_end(lo, hi, moved);
        if (!moved) {
            syscall(SYS_munmap, alias, n);
            alias = MAP_FAILED;
        }
    }
    close(fd);
    *ino = (unsigned long)st.st_ino;
    return alias == MAP_FAILED ? NULL : alias;
}

/* Unpins a registration: the parts of its pages still mapped to its memfd
 * (the program may have mapped other memory there since) get private pages
 * with the same contents, as after a real unregistration. */
static void unpin(const struct alloc *a)
{
    if (a->ilo == a->ihi)
        return;
    FILE *maps = a->alias_ino ? fopen("/proc/self/maps", "r") : NULL;
    char line[512];
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi, ino;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &ino) != 3 || ino != a->alias_ino ||
            hi <= a->ilo || lo >= a->ihi)
            continue;
        lo = lo < a->ilo ? a->ilo : lo;
        hi = hi > a->ihi ? a->ihi : hi;
        char *copy = sys_mmap(NULL, hi - lo, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        if (copy == MAP_FAILED)
            continue;
        move_begin(lo, hi);
        page_copy(copy, (void *)lo, hi - lo);
        move_end(lo, hi, syscall(SYS_mremap, copy, hi - lo, hi - lo, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)lo) != -1);
        advise_dontfork(a, lo, hi);
    }
    if (maps)
        fclose(maps);
    syscall(SYS_munmap, a->alias, a->ihi - a->ilo);
}

/* Copies of registered memory are cut where its whole pages begin and end
 * (fake_copy.c): the length of the piece at addr that lies on one side. */
size_t fake_mem_piece(uintptr_t addr, size_t len)
{
    pthread_mutex_lock(&mem_lock);
    long i = find_locked(addr);
    if (i >= 0 && tab[i].kind == MEM_REGISTERED && tab[i].ilo < tab[i].ihi) {
        uintptr_t cut = addr < tab[i].ilo ? tab[i].ilo : addr < tab[i].ihi ? tab[i].ihi : 0;
        if (cut && cut - addr < len)
            len = cut - addr;
    }
    pthread_mutex_unlock(&mem_lock);
    return len;
}

/* Under valgrind's memcheck the pages are not moved: it cannot follow their
 * contents into the memfd (the bytes read back as undefined), and the
 * stale-page checks (test_register) do not run there. */
static int under_memcheck(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload");
}

/* FAKECUDA_FAIL_REGISTER=<bytes>: cuMemHostRegister of at least that many
 * bytes fails with CUDA_ERROR_OUT_OF_MEMORY (1: every call), as
 * FAKECUDA_FAIL_HOSTALLOC does for cuMemHostAlloc. */
static size_t fail_register_at(void)
{
    const char *v = getenv("FAKECUDA_FAIL_REGISTER");
    return v && *v ? (size_t)strtoull(v, NULL, 0) : 0;
}

/* Test hook: each cuMemHostRegister first sleeps this long, as the real
 * driver's takes ~0.2 s a GiB (tests/gpu/probes/probe_pin_cost.c): a test
 * holds pinfast's registrar on one block with it. */
static atomic_uint register_delay_us;

FAKE_API void fakecuda_register_delay(unsigned us)
{
    atomic_store(&register_delay_us, us);
}

FAKE_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    FAKE_ENTER();
    unsigned delay = atomic_load(&register_delay_us);
    if (delay)
        usleep(delay);
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!p || bytesize == 0 || (Flags & ~0xFu))
        return CUDA_ERROR_INVALID_VALUE;
    struct alloc a = { .base = (uintptr_t)p, .size = bytesize, .kind = MEM_REGISTERED, .host = p,
                       .ctx = c, .flags = Flags, .ilo = ((uintptr_t)p + PAGE - 1) & ~(PAGE - 1),
                       .ihi = ((uintptr_t)p + bytesize) & ~(PAGE - 1) };
    if (a.ihi <= a.ilo || under_memcheck())
        a.ilo = a.ihi = 0;
    size_t fail_at = fail_register_at();
    if (fail_at && bytesize >= fail_at)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a.dontfork = vma_dontfork(a.base);
    pthread_mutex_lock(&mem_lock);
    /* bytes, not pages: the real driver registers two ranges that share a
     * page (tests/gpu/checks/ownership_check.c, parts) */
    if (overlaps_locked(a.base, a.size)) {
        pthread_mutex_unlock(&mem_lock);
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    if (a.ilo < a.ihi && !(a.alias = pin(a.ilo, a.ihi, &a.alias_ino))) {
        pthread_mutex_unlock(&mem_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (a.ilo < a.ihi)
        advise_dontfork(&a, a.ilo, a.ihi);
    int rc = insert_locked(a);
    if (rc)
        unpin(&a);
    else
        atomic_fetch_add(&registered_now, 1);
    pthread_mutex_unlock(&mem_lock);
    return rc ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostUnregister(void *p)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    struct alloc a;
    if (take_synced((uintptr_t)p, 1u << MEM_REGISTERED, 1, &a))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    unpin(&a);
    atomic_fetch_sub(&registered_now, 1);
    return CUDA_SUCCESS;
}

/* A forked child, as the kernel makes it: it gets its own copy of pages a
 * registration pins (the memfd here would be shared with the parent), and
 * none of the parent's registrations (its CUDA state is the parent's).  A
 * registration or unregistration under way on another thread is waited
 * for (its pages are moving), as the kernel's fork waits for the lock. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&mem_lock);
    pthread_mutex_lock(&move_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&move_lock);
    pthread_mutex_unlock(&mem_lock);
}

static void fork_child(void)
{
    pthread_mutex_unlock(&move_lock);
    size_t kept = 0;
    for (size_t i = 0; i < ntab; i++) {
        if (tab[i].kind != MEM_REGISTERED) {
            tab[kept++] = tab[i];
            continue;
        }
        unpin(&tab[i]);
        atomic_fetch_sub(&registered_now, 1);
    }
    ntab = kept;
    pthread_mutex_unlock(&mem_lock);
}

__attribute__((constructor)) static void fork_model(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* Test hook: registrations held now (made in the process, not undone). */
FAKE_API long fakecuda_registered(void)
{
    return atomic_load(&registered_now);
}

/* Test hook: registrations held now of memory advised MADV_DONTFORK. */
FAKE_API long fakecuda_registered_dontfork(void)
{
    long n = 0;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < ntab; i++)
        n += tab[i].kind == MEM_REGISTERED && tab[i].dontfork;
    pthread_mutex_unlock(&mem_lock);
    return n;
}

/* Test hook: whether p lies in a registration. */
FAKE_API int fakecuda_registered_at(const void *p)
{
    pthread_mutex_lock(&mem_lock);
    long i = find_locked((uintptr_t)p);
    int at = i >= 0 && tab[i].kind == MEM_REGISTERED;
    pthread_mutex_unlock(&mem_lock);
    return at;
}

/* look up a host pointer inside a pinned or registered range */
static int host_entry(void *p, struct alloc *out)
{
    pthread_mutex_lock(&mem_lock);
    long i = find_locked((uintptr_t)p);
    int ok = p && i >= 0 && (tab[i].kind == MEM_PINNED || tab[i].kind == MEM_REGISTERED);
    if (ok)
        *out = tab[i];
    pthread_mutex_unlock(&mem_lock);
    return ok;
}

FAKE_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    struct alloc a;
    if (!pdptr || Flags != 0 || !host_entry(p, &a))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;    /* unified addressing */
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    struct alloc a;
    if (!pFlags || !host_entry(p, &a))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = a.flags;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    pthread_mutex_lock(&mem_lock);
    long i = find_locked(dptr);
    if (i >= 0) {
        if (pbase)
            *pbase = tab[i].base;
        if (psize)
            *psize = tab[i].size;
    }
    pthread_mutex_unlock(&mem_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- pointer attributes ----------------------------------------------------------- */
/* a == NULL: unknown pointer -> zero of the attribute's size (the
 * cuPointerGetAttributes behaviour).  Returns INVALID_VALUE for attributes the
 * fake does not model or that do not apply (host pointer of device memory). */
static CUresult attr_value(const struct alloc *a, uintptr_t ptr, CUpointer_attribute attr, void *data)
{
    unsigned int u = 0;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = a ? (CUcontext)a->ctx : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        if (a)
            u = (a->kind == MEM_DEVICE || a->kind == MEM_MANAGED) ? CU_MEMORYTYPE_DEVICE
                                                                 : CU_MEMORYTYPE_HOST;
        *(unsigned int *)data = u;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = a ? ptr : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a && a->kind == MEM_DEVICE) {
            *(void **)data = NULL;
            return CUDA_ERROR_INVALID_VALUE;
        }
        *(void **)data = a ? (void *)ptr : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = a && a->kind == MEM_MANAGED;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = a != NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(unsigned int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = a && a->ctx ? a->ctx->dev : (a ? a->dev : -2);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = a ? a->id : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a ? a->base : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a ? a->size : 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

FAKE_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    struct alloc a;
    if (!data || !lookup_copy(ptr, &a))
        return CUDA_ERROR_INVALID_VALUE;
    return attr_value(&a, ptr, attribute, data);
}

FAKE_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                         void **data, CUdeviceptr ptr)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!attributes || !data || numAttributes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct alloc a;
    int known = lookup_copy(ptr, &a);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
        CUresult r = attr_value(known ? &a : NULL, ptr, attributes[i], data[i]);
        /* the multi-attribute call reports "does not apply" as a NULL value */
        if (r && attributes[i] != CU_POINTER_ATTRIBUTE_HOST_POINTER)
            return r;
    }
    return CUDA_SUCCESS;
}
