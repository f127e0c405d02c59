/* fake_gpa.c - cuGetProcAddress (v1, CUDA 11.3 ABI) and cuGetProcAddress_v2
 * (CUDA 12.0 ABI), answering exactly like the real driver (measured on driver
 * 580 / CUDA 13) and always with THE SAME ADDRESS as the exported symbol.
 *
 * Rules, for a request (name, cudaVersion, flags):
 *  - the table holds, per base name, every variant the fake exports with the
 *    CUDA version that introduced it (from the PFN_<name>_v<version>[_ptds|
 *    _ptsz] typedefs of cudaTypedefs.h);
 *  - flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (2) on a name that
 *    has per-thread variants: the newest _ptds/_ptsz variant with version <=
 *    cudaVersion; if there is none (e.g. cuMemcpyHtoD at 5000) the answer is
 *    CUDA_ERROR_NOT_FOUND, *pfn = NULL, status VERSION_NOT_SUFFICIENT.  (The
 *    real driver returned CUDA_SUCCESS with a NULL pointer here; we chose the
 *    error so a caller cannot mistake it for a success.)
 *  - otherwise (flags 0 or 1, or a name without stream variants such as
 *    cuMemAlloc): the newest legacy variant with version <= cudaVersion, or
 *    NOT_FOUND / VERSION_NOT_SUFFICIENT if the name exists only in newer
 *    versions;
 *  - unknown names: CUDA_ERROR_NOT_FOUND, *pfn = NULL, SYMBOL_NOT_FOUND.
 * Built with FAKE_NO_GPA_V2, the fake is an old driver: cuGetProcAddress_v2 is
 * neither exported nor handed out ("cuGetProcAddress" >= 12000 gives v1).
 */
#define _GNU_SOURCE
#include "fake.h"

#include <string.h>

struct entry { const char *name; int version; int per_thread; void *fn; };

#define L(name, ver, fn) { #name, ver, 0, (void *)fn }
#define P(name, ver, fn) { #name, ver, 1, (void *)fn }

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus);

static const struct entry table[] = {
    L(cuInit, 2000, cuInit),
    L(cuDriverGetVersion, 2020, cuDriverGetVersion),
    L(cuDeviceGet, 2000, cuDeviceGet),
    L(cuDeviceGetCount, 2000, cuDeviceGetCount),
    L(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    L(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    L(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    L(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    L(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    L(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    L(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
    L(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
    L(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
    L(cuCtxGetFlags, 7000, cuCtxGetFlags),
    L(cuCtxSetFlags, 12010, cuCtxSetFlags),
    L(cuCtxCreate, 3020, cuCtxCreate_v2),
    L(cuCtxCreate, 12050, cuCtxCreate_v4),
    L(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    L(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    L(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    L(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    L(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    L(cuCtxGetDevice, 2000, cuCtxGetDevice),
    L(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
    L(cuCtxGetId, 12000, cuCtxGetId),
    L(cuCtxSynchronize, 2000, cuCtxSynchronize),
    L(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    L(cuGetErrorString, 6000, cuGetErrorString),
    L(cuGetErrorName, 6000, cuGetErrorName),

    L(cuMemAlloc, 3020, cuMemAlloc_v2),
    L(cuMemFree, 3020, cuMemFree_v2),
    L(cuMemAllocAsync, 11020, cuMemAllocAsync),
    P(cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz),
    L(cuMemFreeAsync, 11020, cuMemFreeAsync),
    P(cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz),
    L(cuMemAllocManaged, 6000, cuMemAllocManaged),
    L(cuMemAllocHost, 3020, cuMemAllocHost_v2),
    L(cuMemHostAlloc, 2020, cuMemHostAlloc),
    L(cuMemFreeHost, 2000, cuMemFreeHost),
    L(cuMemHostRegister, 6050, cuMemHostRegister_v2),
    L(cuMemHostUnregister, 4000, cuMemHostUnregister),
    L(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2),
    L(cuMemHostGetFlags, 2030, cuMemHostGetFlags),
    L(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
    L(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    L(cuPointerGetAttributes, 7000, cuPointerGetAttributes),
    L(cuMemGetInfo, 3020, cuMemGetInfo_v2),

    L(cuMemcpy, 4000, cuMemcpy),
    P(cuMemcpy, 7000, cuMemcpy_ptds),
    L(cuMemcpyAsync, 4000, cuMemcpyAsync),
    P(cuMemcpyAsync, 7000, cuMemcpyAsync_ptsz),
    L(cuMemcpyHtoD, 2000, cuMemcpyHtoD),
    L(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2),
    P(cuMemcpyHtoD, 7000, cuMemcpyHtoD_v2_ptds),
    L(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2),
    P(cuMemcpyHtoDAsync, 7000, cuMemcpyHtoDAsync_v2_ptsz),
    L(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2),
    P(cuMemcpyDtoH, 7000, cuMemcpyDtoH_v2_ptds),
    L(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2),
    P(cuMemcpyDtoHAsync, 7000, cuMemcpyDtoHAsync_v2_ptsz),
    L(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2),
    P(cuMemcpyDtoD, 7000, cuMemcpyDtoD_v2_ptds),
    L(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2),
    P(cuMemcpyDtoDAsync, 7000, cuMemcpyDtoDAsync_v2_ptsz),
    L(cuMemcpyPeer, 4000, cuMemcpyPeer),
    P(cuMemcpyPeer, 7000, cuMemcpyPeer_ptds),
    L(cuMemcpyPeerAsync, 4000, cuMemcpyPeerAsync),
    P(cuMemcpyPeerAsync, 7000, cuMemcpyPeerAsync_ptsz),
    L(cuMemcpy2D, 3020, cuMemcpy2D_v2),
    P(cuMemcpy2D, 7000, cuMemcpy2D_v2_ptds),
    L(cuMemcpy2DUnaligned, 3020, cuMemcpy2DUnaligned_v2),
    P(cuMemcpy2DUnaligned, 7000, cuMemcpy2DUnaligned_v2_ptds),
    L(cuMemcpy2DAsync, 3020, cuMemcpy2DAsync_v2),
    P(cuMemcpy2DAsync, 7000, cuMemcpy2DAsync_v2_ptsz),
    L(cuMemcpy3D, 3020, cuMemcpy3D_v2),
    P(cuMemcpy3D, 7000, cuMemcpy3D_v2_ptds),
    L(cuMemcpy3DAsync, 3020, cuMemcpy3DAsync_v2),
    P(cuMemcpy3DAsync, 7000, cuMemcpy3DAsync_v2_ptsz),
    L(cuMemcpyHtoA, 3020, cuMemcpyHtoA_v2),
    P(cuMemcpyHtoA, 7000, cuMemcpyHtoA_v2_ptds),
    L(cuMemcpyAtoH, 3020, cuMemcpyAtoH_v2),
    P(cuMemcpyAtoH, 7000, cuMemcpyAtoH_v2_ptds),
    L(cuMemcpyHtoAAsync, 3020, cuMemcpyHtoAAsync_v2),
    P(cuMemcpyHtoAAsync, 7000, cuMemcpyHtoAAsync_v2_ptsz),
    L(cuMemcpyAtoHAsync, 3020, cuMemcpyAtoHAsync_v2),
    P(cuMemcpyAtoHAsync, 7000, cuMemcpyAtoHAsync_v2_ptsz),
    L(cuArrayCreate, 3020, cuArrayCreate_v2),
    L(cuArray3DCreate, 3020, cuArray3DCreate_v2),
    L(cuArrayGetDescriptor, 3020, cuArrayGetDescriptor_v2),
    L(cuArray3DGetDescriptor, 3020, cuArray3DGetDescriptor_v2),
    L(cuArrayDestroy, 2000, cuArrayDestroy),
    L(cuMemAddressReserve, 10020, cuMemAddressReserve),
    L(cuMemAddressFree, 10020, cuMemAddressFree),
    L(cuMemCreate, 10020, cuMemCreate),
    L(cuMemRelease, 10020, cuMemRelease),
    L(cuMemMap, 10020, cuMemMap),
    L(cuMemUnmap, 10020, cuMemUnmap),
    L(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle),
    L(cuMemSetAccess, 10020, cuMemSetAccess),
    L(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    L(cuMemcpyBatchAsync, 12080, cuMemcpyBatchAsync),
    L(cuMemcpyBatchAsync, 13000, cuMemcpyBatchAsync_v2),
    P(cuMemcpyBatchAsync, 12080, cuMemcpyBatchAsync_ptsz),
    P(cuMemcpyBatchAsync, 13000, cuMemcpyBatchAsync_v2_ptsz),
    L(cuMemcpy3DBatchAsync, 12080, cuMemcpy3DBatchAsync),
    L(cuMemcpy3DBatchAsync, 13000, cuMemcpy3DBatchAsync_v2),
    P(cuMemcpy3DBatchAsync, 12080, cuMemcpy3DBatchAsync_ptsz),
    P(cuMemcpy3DBatchAsync, 13000, cuMemcpy3DBatchAsync_v2_ptsz),

    L(cuStreamCreate, 2000, cuStreamCreate),
    L(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    L(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    L(cuStreamSynchronize, 2000, cuStreamSynchronize),
    P(cuStreamSynchronize, 7000, cuStreamSynchronize_ptsz),
    L(cuStreamQuery, 2000, cuStreamQuery),
    P(cuStreamQuery, 7000, cuStreamQuery_ptsz),
    L(cuStreamGetCtx, 9020, cuStreamGetCtx),
    L(cuStreamGetCtx, 12050, cuStreamGetCtx_v2),
    P(cuStreamGetCtx, 9020, cuStreamGetCtx_ptsz),
    P(cuStreamGetCtx, 12050, cuStreamGetCtx_v2_ptsz),
    L(cuStreamWaitEvent, 3020, cuStreamWaitEvent),
    P(cuStreamWaitEvent, 7000, cuStreamWaitEvent_ptsz),
    L(cuStreamIsCapturing, 10000, cuStreamIsCapturing),
    P(cuStreamIsCapturing, 10000, cuStreamIsCapturing_ptsz),
    L(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3),
    P(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3_ptsz),
    L(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2),
    P(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2_ptsz),
    L(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
    L(cuStreamEndCapture, 10000, cuStreamEndCapture),
    P(cuStreamEndCapture, 10000, cuStreamEndCapture_ptsz),
    L(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    L(cuGraphLaunch, 10000, cuGraphLaunch),
    P(cuGraphLaunch, 10000, cuGraphLaunch_ptsz),
    L(cuGraphDestroy, 10000, cuGraphDestroy),
    L(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
    L(cuEventCreate, 2000, cuEventCreate),
    L(cuEventRecord, 2000, cuEventRecord),
    P(cuEventRecord, 7000, cuEventRecord_ptsz),
    L(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags),
    P(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags_ptsz),
    L(cuEventQuery, 2000, cuEventQuery),
    L(cuEventSynchronize, 2000, cuEventSynchronize),
    L(cuEventDestroy, 4000, cuEventDestroy_v2),
    L(cuEventElapsedTime, 2000, cuEventElapsedTime),
    L(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),
    L(cuLaunchHostFunc, 10000, cuLaunchHostFunc),
    P(cuLaunchHostFunc, 10000, cuLaunchHostFunc_ptsz),

    L(cuGetProcAddress, 11030, cuGetProcAddress),
#ifndef FAKE_NO_GPA_V2
    L(cuGetProcAddress, 12000, cuGetProcAddress_v2),
#endif
};

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn) {
        if (status)
            *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = NULL;
    int known = 0, has_pt = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0) {
            known = 1;
            has_pt |= table[i].per_thread;
        }
    if (!known) {
        if (status)
            *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && has_pt;
    const struct entry *best = NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0 && table[i].per_thread == want_pt &&
            table[i].version <= version && (!best || table[i].version > best->version))
            best = &table[i];
    if (!best) {
        if (status)
            *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->fn;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    FAKE_ENTER();
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

#ifndef FAKE_NO_GPA_V2
FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult *symbolStatus)
{
    FAKE_ENTER();
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
#endif
