/* drv_direct.c - direct binding: the addresses of the exported driver symbols,
 * resolved by the dynamic linker like a program linked with -lcuda (so under
 * LD_PRELOAD they are the preloaded library's if it exports them).  Built with
 * __CUDA_API_VERSION_INTERNAL so cuda.h declares every versioned name. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include "drv_list.h"

struct drv;
int drv_load_direct_table(void **legacy, void **per_thread, int n);

int drv_load_direct_table(void **legacy, void **per_thread, int n)
{
    int i = 0;
#define X(f, base, ver, T, leg, pt) \
    if (i < n) { legacy[i] = (void *)&leg; per_thread[i] = (void *)&pt; } i++;
    DRV_LIST(X)
#undef X
    return i;
}
