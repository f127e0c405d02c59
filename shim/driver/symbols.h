/* The driver entry points pinfast knows, by exported name.  Each name is one
 * ABI: the per-thread-default-stream forms (_ptds, _ptsz) and each _vN are
 * separate functions in libcuda, and cuGetProcAddress hands them out by
 * (base name, version, flags).  pinfast identifies them by address. */
#ifndef PINFAST_SYMBOLS_H
#define PINFAST_SYMBOLS_H

/* Entry points pinfast wraps: it defines and exports a function of each name. */
#define PF_WRAPPED(X)                                                          \
    X(cuGetProcAddress) X(cuGetProcAddress_v2)                                 \
    X(cuMemcpy) X(cuMemcpy_ptds)                                               \
    X(cuMemcpyAsync) X(cuMemcpyAsync_ptsz)                                     \
    X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds)                                 \
    X(cuMemcpyHtoDAsync_v2) X(cuMemcpyHtoDAsync_v2_ptsz)                       \
    X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds)                                 \
    X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz)                       \
    X(cuMemcpyDtoD_v2) X(cuMemcpyDtoD_v2_ptds)                                 \
    X(cuMemcpyDtoDAsync_v2) X(cuMemcpyDtoDAsync_v2_ptsz)                       \
    X(cuMemcpyPeer) X(cuMemcpyPeer_ptds)                                       \
    X(cuMemcpyPeerAsync) X(cuMemcpyPeerAsync_ptsz)                             \
    X(cuMemcpy2D_v2) X(cuMemcpy2D_v2_ptds)                                     \
    X(cuMemcpy2DUnaligned_v2) X(cuMemcpy2DUnaligned_v2_ptds)                   \
    X(cuMemcpy2DAsync_v2) X(cuMemcpy2DAsync_v2_ptsz)                           \
    X(cuMemcpy3D_v2) X(cuMemcpy3D_v2_ptds)                                     \
    X(cuMemcpy3DAsync_v2) X(cuMemcpy3DAsync_v2_ptsz)                           \
    X(cuMemcpyBatchAsync) X(cuMemcpyBatchAsync_ptsz)                           \
    X(cuMemcpyBatchAsync_v2) X(cuMemcpyBatchAsync_v2_ptsz)                     \
    X(cuMemcpy3DBatchAsync) X(cuMemcpy3DBatchAsync_ptsz)                       \
    X(cuMemcpy3DBatchAsync_v2) X(cuMemcpy3DBatchAsync_v2_ptsz)                 \
    X(cuMemHostAlloc) X(cuMemAllocHost_v2) X(cuMemFreeHost)                    \
    X(cuMemHostRegister_v2) X(cuMemHostUnregister)                             \
    X(cuMemAlloc_v2) X(cuMemFree_v2)                                           \
    X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)                                 \
    X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz)                                   \
    X(cuMemAllocManaged)                                                       \
    X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz)                       \
    X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz)                 \
    X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz)         \
    X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)                           \
    X(cuCtxDestroy) X(cuCtxDestroy_v2)                                         \
    X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxRelease_v2)               \
    X(cuDevicePrimaryCtxReset) X(cuDevicePrimaryCtxReset_v2)

/* Driver functions pinfast calls without wrapping them. */
#define PF_INTERNAL(X)                                                         \
    X(cuCtxGetCurrent) X(cuCtxGetId) X(cuCtxGetDevice) X(cuCtxSynchronize)    \
    X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)                               \
    X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRetain)                  \
    X(cuThreadExchangeStreamCaptureMode) X(cuStreamIsCapturing_ptsz)           \
    X(cuPointerGetAttributes) X(cuMemGetAddressRange_v2)                       \
    X(cuStreamIsCapturing) X(cuStreamSynchronize) X(cuStreamGetCtx)            \
    X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)                    \
    X(cuEventQuery) X(cuEventDestroy_v2)                                      \
    X(cuStreamAddCallback) X(cuStreamWaitEvent)

#define PF_ENUM_(name) PF_S_##name,
enum pf_symbol { PF_WRAPPED(PF_ENUM_) PF_NWRAPPED, PF_INTERNAL_FIRST_ = PF_NWRAPPED - 1,
                 PF_INTERNAL(PF_ENUM_) PF_NSYMBOLS };
#undef PF_ENUM_

#endif
