/* fake_core.c - cuInit, devices, error strings and the call counters.
 *
 * Error behaviour of the fake driver (modelled on the real one, driver 580):
 *
 *   situation                                            result
 *   ---------------------------------------------------  -----------------------------------------
 *   any call (except cuGetProcAddress*, cuDriverGetVersion,
 *     cuGetError*) before cuInit                         CUDA_ERROR_NOT_INITIALIZED
 *   no current context (or it was destroyed)             CUDA_ERROR_INVALID_CONTEXT
 *   cuDeviceGet / primary ctx with a bad ordinal         CUDA_ERROR_INVALID_DEVICE
 *   NULL output pointer, NULL host pointer               CUDA_ERROR_INVALID_VALUE
 *   device pointer outside every allocation, or a range
 *     running past the end of its allocation             CUDA_ERROR_INVALID_VALUE
 *   copy of 0 bytes (after context/stream checks)        CUDA_SUCCESS, nothing happens
 *   cuMemFree/cuMemFreeAsync of an unknown/freed pointer CUDA_ERROR_INVALID_VALUE
 *   cuMemFree(0)                                         CUDA_SUCCESS (like cudaFree(NULL))
 *   cuMemFreeHost of a pointer not from cuMemHostAlloc /
 *     cuMemAllocHost (or already freed)                  CUDA_ERROR_INVALID_VALUE
 *   cuMemHostRegister of a range overlapping a
 *     registered or pinned range                         CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
 *   cuMemHostUnregister of a pointer that is not the
 *     base of a registered range                         CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
 *   alloc of 0 bytes                                     CUDA_ERROR_INVALID_VALUE
 *   unknown/destroyed stream, event, graph handle        CUDA_ERROR_INVALID_HANDLE
 *   stream of a destroyed context                        CUDA_ERROR_INVALID_HANDLE (it is destroyed)
 *   stream of another (live) context                     accepted: the work runs in the stream's context
 *   cuMemcpyBatchAsync on the legacy stream, count 0,
 *     bad attribute arrays or source orders              CUDA_ERROR_INVALID_VALUE (failIdx = SIZE_MAX)
 *   batch copy operand invalid                           CUDA_ERROR_INVALID_VALUE, failIdx = index
 *   3D batch with an array operand                       CUDA_ERROR_NOT_SUPPORTED
 *     (batches: fake_copy.c marks what is UNVERIFIED on a GPU)
 *   sync call / cuStreamSynchronize / cuStreamQuery on
 *     a capturing stream; capture of the legacy stream   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 *   potentially unsafe call prohibited by a capture's
 *     mode (fake_stream.c), cuCtxSynchronize while its
 *     context captures                                   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 *                                                          the capture is invalidated
 *   cuStreamEndCapture of an invalidated capture         CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, no graph
 *   cuEventRecord on a stream of another context         CUDA_ERROR_INVALID_HANDLE
 *   event or memory of a destroyed context               as unknown (destroyed with it)
 *   cuEventQuery / cuStreamQuery on unfinished work      CUDA_ERROR_NOT_READY
 *   cuPointerGetAttribute of an unknown pointer          CUDA_ERROR_INVALID_VALUE
 *   cuPointerGetAttributes of an unknown pointer         CUDA_SUCCESS, all values zeroed
 *   cuMemGetAddressRange of an unknown pointer           CUDA_ERROR_NOT_FOUND
 *   cuGetProcAddress: see fake_gpa.c
 */
#define _GNU_SOURCE
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

atomic_int fake_initialized;

/* ---- call counters ------------------------------------------------------ */
static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_counter *counters;

void fake_count(struct fake_counter *c)
{
    atomic_fetch_add(&c->n, 1);
    if (!atomic_load(&c->registered)) {
        pthread_mutex_lock(&counters_lock);
        if (!atomic_load(&c->registered)) {
            c->next = counters;
            counters = c;
            atomic_store(&c->registered, 1);
        }
        pthread_mutex_unlock(&counters_lock);
    }
}

FAKE_API unsigned long fakecuda_calls(const char *exported_name)
{
    unsigned long n = 0;
    pthread_mutex_lock(&counters_lock);
    for (struct fake_counter *c = counters; c; c = c->next)
        if (strcmp(c->name, exported_name) == 0)
            n = atomic_load(&c->n);
    pthread_mutex_unlock(&counters_lock);
    return n;
}

FAKE_API void fakecuda_reset_calls(void)
{
    pthread_mutex_lock(&counters_lock);
    for (struct fake_counter *c = counters; c; c = c->next)
        atomic_store(&c->n, 0);
    pthread_mutex_unlock(&counters_lock);
}

/* ---- environment ------------------------------------------------------------ */
static int env_int(const char *name, int dflt, int lo, int hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi)
        return dflt;
    return (int)x;
}

int fake_ndevices(void)
{
    static atomic_int n = -1;
    if (atomic_load(&n) < 0)
        atomic_store(&n, env_int("FAKECUDA_DEVICES", 2, 0, 16));
    return atomic_load(&n);
}

unsigned fake_delay_us(void)
{
    static atomic_int d = -1;
    if (atomic_load(&d) < 0)
        atomic_store(&d, env_int("FAKECUDA_DELAY_US", 50, 0, 1000000));
    return (unsigned)atomic_load(&d);
}

/* ---- init, version, devices -------------------------------------------------- */
FAKE_API CUresult cuInit(unsigned int Flags)
{
    FAKE_ENTER();
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_ndevices() == 0)
        return CUDA_ERROR_NO_DEVICE;
    fake_mem_watch_moves();
    atomic_store(&fake_initialized, 1);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int *driverVersion)
{
    FAKE_ENTER();
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = 13000;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetCount(int *count)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = fake_ndevices();
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= fake_ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:       *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:       *pi = 2; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:      *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:           *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:     *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:               *pi = 0x18 + dev; break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:  *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:   *pi = 1; break;
    default:                                           *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

/* ---- error strings ---------------------------------------------------------- */
static const struct { CUresult r; const char *name, *str; } errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
      "part or all of the requested memory range is already mapped" },
    { CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
      "pointer does not correspond to a registered memory region" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
      "operation not permitted when stream is capturing" },
    { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
      "operation failed due to a previous error during capture" },
};

/* the name (want_name) or the description of an error, NULL for one we do not know */
static CUresult error_text(CUresult error, const char **pStr, int want_name)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].r == error) {
            *pStr = want_name ? errors[i].name : errors[i].str;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    FAKE_ENTER();
    return error_text(error, pStr, 0);
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    FAKE_ENTER();
    return error_text(error, pStr, 1);
}
