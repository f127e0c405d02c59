/* Destinations never touched: a D2H into memory the program just got
 * (.cpu(), .numpy(), copy_to_host(), a checkpoint being saved) is bound by
 * page faults, one per 4 KiB page.  Advised MADV_HUGEPAGE first, the 2 MiB
 * aligned interior the copy writes whole faults in 2 MiB at a time, and
 * the engine has its workers fault it in ahead of the copy (docs/design.md,
 * "Fresh destinations").  Advice is given only to blocks of pinfast's heap
 * on which the program gave none: it never overrides the program's, and
 * is never left on memory pinfast does not own.  The copy writes every byte of the interior, so
 * neither makes the program's memory larger than the copy does. */
#include "first_touch.h"
#include "heap.h"
#include "../base/options.h"
#include "../base/libc.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((uintptr_t)PF_HUGE_PAGE)
/* Huge-page advice from this size only: smaller copies into fresh memory are
 * faster without it (docs/tuning.md#huge-page-advice-from-16-mib-fresh_from) */
#define FRESH_FROM ((size_t)16 << 20)

/* 1 when transparent huge pages are used on advice only, 2 otherwise ("always":
 * no advice needed; "never", or no THP: none possible). */
static int mode;

static int advice_helps(void) {
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (!m) {
        char buf[80] = {0};
        int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        m = n > 0 && strstr(buf, "[madvise]") ? 1 : 2;
        __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    }
    return m == 1;
}

/* The interior of [p, p+n) aligned to `align`, when its first page is not
 * yet in memory: its length (0: none, or touched) and start (*lo). */
static size_t untouched(void *p, size_t n, uintptr_t align, uintptr_t *lo) {
    uintptr_t hi = ((uintptr_t)p + n) & ~(align - 1);
    unsigned char resident = 1;
    *lo = ((uintptr_t)p + align - 1) & ~(align - 1);
    if (hi <= *lo || mincore((void *)*lo, (size_t)sysconf(_SC_PAGESIZE), &resident) || (resident & 1))
        return 0;
    return hi - *lo;
}

size_t pf_first_touch_advise(void *p, size_t n, char **interior) {
    uintptr_t lo;
    size_t len;
    *interior = NULL;
    /* advice only on a block of pinfast's heap the program gave none of its
     * own: the advice stays on the memory */
    if (n < FRESH_FROM || !pf_options()->hugepages || !advice_helps() || !pf_heap_advisable(p, n) ||
        !(len = untouched(p, n, HUGE_PAGE, &lo)))
        return 0; /* too small, not wanted, not pinfast's, or already touched: not fresh */
    if (pf_libc_madvise((void *)lo, len, MADV_HUGEPAGE))
        return 0;
    *interior = (char *)lo;
    return len;
}

size_t pf_first_touch_fresh(void *p, size_t n, char **interior) {
    uintptr_t lo;
    size_t len = untouched(p, n, (uintptr_t)sysconf(_SC_PAGESIZE), &lo);
    *interior = len ? (char *)lo : NULL;
    return len;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void pf_first_touch_populate(void *p, size_t n) { (void)pf_libc_madvise(p, n, MADV_POPULATE_WRITE); }
