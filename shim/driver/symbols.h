/* The driver entry points pinfast knows, by exported name: THE table.  Each
 * name is one ABI: the per-thread-default-stream forms (_ptds, _ptsz) and
 * each _vN are separate functions in libcuda, and cuGetProcAddress hands
 * them out by (base name, version, flags).  pinfast identifies them by
 * address (entry/interpose.c).
 *
 * Entry points pinfast wraps, one row each: X(family, opens, shape, ptds, symbol)
 *   family  the row of the exit report the calls count in, and its name there
 *           (copies and allocations; `none` for the rest);
 *   opens   1 on the first row of a family: the report's families are these;
 *   shape   how entry/ makes the wrapper (the WRAP_<shape> macro of the file
 *           that expands the table);
 *   ptds    1 for the per-thread-default-stream form (stream 0 means the
 *           calling thread's stream);
 *   symbol  the exported name: pinfast defines and exports a function of
 *           this name, whose body the shape gives. */
#ifndef PINFAST_SYMBOLS_H
#define PINFAST_SYMBOLS_H

/* The copies; the report lists their families in this order.  Each part is
 * expanded by its own file: one copy a call (entry/copy_entries.c), then
 * the batches (entry/batch_entries.c). */
/* (the tables are laid out by hand, an entry a line) */
/* clang-format off */
#define PF_COPY_ENTRIES(X) PF_SINGLE_COPY_ENTRIES(X) PF_BATCH_ENTRIES(X)

#define PF_SINGLE_COPY_ENTRIES(X)                                              \
    X(cuMemcpy, 1, LINEAR_ANY, 0, cuMemcpy)                                    \
    X(cuMemcpy, 0, LINEAR_ANY, 1, cuMemcpy_ptds)                               \
    X(cuMemcpyAsync, 1, LINEAR_ANY_ASYNC, 0, cuMemcpyAsync)                    \
    X(cuMemcpyAsync, 0, LINEAR_ANY_ASYNC, 1, cuMemcpyAsync_ptsz)               \
    X(cuMemcpyHtoD, 1, LINEAR_H2D, 0, cuMemcpyHtoD_v2)                         \
    X(cuMemcpyHtoD, 0, LINEAR_H2D, 1, cuMemcpyHtoD_v2_ptds)                    \
    X(cuMemcpyHtoDAsync, 1, LINEAR_H2D_ASYNC, 0, cuMemcpyHtoDAsync_v2)         \
    X(cuMemcpyHtoDAsync, 0, LINEAR_H2D_ASYNC, 1, cuMemcpyHtoDAsync_v2_ptsz)    \
    X(cuMemcpyDtoH, 1, LINEAR_D2H, 0, cuMemcpyDtoH_v2)                         \
    X(cuMemcpyDtoH, 0, LINEAR_D2H, 1, cuMemcpyDtoH_v2_ptds)                    \
    X(cuMemcpyDtoHAsync, 1, LINEAR_D2H_ASYNC, 0, cuMemcpyDtoHAsync_v2)         \
    X(cuMemcpyDtoHAsync, 0, LINEAR_D2H_ASYNC, 1, cuMemcpyDtoHAsync_v2_ptsz)    \
    X(cuMemcpyDtoD, 1, LINEAR_D2D, 0, cuMemcpyDtoD_v2)                         \
    X(cuMemcpyDtoD, 0, LINEAR_D2D, 1, cuMemcpyDtoD_v2_ptds)                    \
    X(cuMemcpyDtoDAsync, 1, LINEAR_D2D_ASYNC, 0, cuMemcpyDtoDAsync_v2)         \
    X(cuMemcpyDtoDAsync, 0, LINEAR_D2D_ASYNC, 1, cuMemcpyDtoDAsync_v2_ptsz)    \
    X(cuMemcpyPeer, 1, PEER, 0, cuMemcpyPeer)                                  \
    X(cuMemcpyPeer, 0, PEER, 1, cuMemcpyPeer_ptds)                             \
    X(cuMemcpyPeerAsync, 1, PEER_ASYNC, 0, cuMemcpyPeerAsync)                  \
    X(cuMemcpyPeerAsync, 0, PEER_ASYNC, 1, cuMemcpyPeerAsync_ptsz)             \
    X(cuMemcpy2D, 1, M2D, 0, cuMemcpy2D_v2)                                    \
    X(cuMemcpy2D, 0, M2D, 1, cuMemcpy2D_v2_ptds)                               \
    X(cuMemcpy2DUnaligned, 1, M2D, 0, cuMemcpy2DUnaligned_v2)                  \
    X(cuMemcpy2DUnaligned, 0, M2D, 1, cuMemcpy2DUnaligned_v2_ptds)             \
    X(cuMemcpy2DAsync, 1, M2D_ASYNC, 0, cuMemcpy2DAsync_v2)                    \
    X(cuMemcpy2DAsync, 0, M2D_ASYNC, 1, cuMemcpy2DAsync_v2_ptsz)               \
    X(cuMemcpy3D, 1, M3D, 0, cuMemcpy3D_v2)                                    \
    X(cuMemcpy3D, 0, M3D, 1, cuMemcpy3D_v2_ptds)                               \
    X(cuMemcpy3DAsync, 1, M3D_ASYNC, 0, cuMemcpy3DAsync_v2)                    \
    X(cuMemcpy3DAsync, 0, M3D_ASYNC, 1, cuMemcpy3DAsync_v2_ptsz)               \
    X(cuMemcpyHtoA, 1, HTOA, 0, cuMemcpyHtoA_v2)                               \
    X(cuMemcpyHtoA, 0, HTOA, 1, cuMemcpyHtoA_v2_ptds)                          \
    X(cuMemcpyAtoH, 1, ATOH, 0, cuMemcpyAtoH_v2)                               \
    X(cuMemcpyAtoH, 0, ATOH, 1, cuMemcpyAtoH_v2_ptds)                          \
    X(cuMemcpyHtoAAsync, 1, HTOA_ASYNC, 0, cuMemcpyHtoAAsync_v2)               \
    X(cuMemcpyHtoAAsync, 0, HTOA_ASYNC, 1, cuMemcpyHtoAAsync_v2_ptsz)          \
    X(cuMemcpyAtoHAsync, 1, ATOH_ASYNC, 0, cuMemcpyAtoHAsync_v2)               \
    X(cuMemcpyAtoHAsync, 0, ATOH_ASYNC, 1, cuMemcpyAtoHAsync_v2_ptsz)

#define PF_BATCH_ENTRIES(X)                                                    \
    X(cuMemcpyBatchAsync, 1, BATCH_V1, 0, cuMemcpyBatchAsync)                  \
    X(cuMemcpyBatchAsync, 0, BATCH_V1, 1, cuMemcpyBatchAsync_ptsz)             \
    X(cuMemcpyBatchAsync, 0, BATCH_V2, 0, cuMemcpyBatchAsync_v2)               \
    X(cuMemcpyBatchAsync, 0, BATCH_V2, 1, cuMemcpyBatchAsync_v2_ptsz)          \
    X(cuMemcpy3DBatchAsync, 1, BATCH3D_V1, 0, cuMemcpy3DBatchAsync)            \
    X(cuMemcpy3DBatchAsync, 0, BATCH3D_V1, 1, cuMemcpy3DBatchAsync_ptsz)       \
    X(cuMemcpy3DBatchAsync, 0, BATCH3D_V2, 0, cuMemcpy3DBatchAsync_v2)         \
    X(cuMemcpy3DBatchAsync, 0, BATCH3D_V2, 1, cuMemcpy3DBatchAsync_v2_ptsz)

/* The allocations; the report lists their families in this order. */
#define PF_ALLOC_ENTRIES(X)                                                    \
    X(cuMemHostAlloc, 1, HOST_ALLOC, 0, cuMemHostAlloc)                        \
    X(cuMemAllocHost, 1, ALLOC_HOST, 0, cuMemAllocHost_v2)                     \
    X(cuMemFreeHost, 1, FREE_HOST, 0, cuMemFreeHost)                           \
    X(cuMemHostRegister, 1, HOST_REGISTER, 0, cuMemHostRegister_v2)            \
    X(cuMemHostUnregister, 1, HOST_UNREGISTER, 0, cuMemHostUnregister)         \
    X(cuMemAlloc, 1, ALLOC, 0, cuMemAlloc_v2)                                  \
    X(cuMemFree, 1, FREE, 0, cuMemFree_v2)                                     \
    X(cuMemAllocAsync, 1, ALLOC_ASYNC, 0, cuMemAllocAsync)                     \
    X(cuMemAllocAsync, 0, ALLOC_ASYNC, 1, cuMemAllocAsync_ptsz)                \
    X(cuMemFreeAsync, 1, FREE_ASYNC, 0, cuMemFreeAsync)                        \
    X(cuMemFreeAsync, 0, FREE_ASYNC, 1, cuMemFreeAsync_ptsz)                   \
    X(cuMemAllocManaged, 1, ALLOC_MANAGED, 0, cuMemAllocManaged)

/* How programs find the driver's functions (entry/interpose.c). */
#define PF_LOOKUP_ENTRIES(X)                                                   \
    X(none, 0, LOOKUP, 0, cuGetProcAddress)                                    \
    X(none, 0, LOOKUP_V2, 0, cuGetProcAddress_v2)

/* Stream captures, counted (entry/capture_entries.c). */
#define PF_CAPTURE_ENTRIES(X)                                                  \
    X(none, 0, BEGIN, 0, cuStreamBeginCapture)                                 \
    X(none, 0, BEGIN, 1, cuStreamBeginCapture_ptsz)                            \
    X(none, 0, BEGIN_V2, 0, cuStreamBeginCapture_v2)                           \
    X(none, 0, BEGIN_V2, 1, cuStreamBeginCapture_v2_ptsz)                      \
    X(none, 0, BEGIN_TO_GRAPH, 0, cuStreamBeginCaptureToGraph)                 \
    X(none, 0, BEGIN_TO_GRAPH, 1, cuStreamBeginCaptureToGraph_ptsz)            \
    X(none, 0, END, 0, cuStreamEndCapture)                                     \
    X(none, 0, END, 1, cuStreamEndCapture_ptsz)

/* Questions about host memory, answered as for pageable memory where
 * pinfast registered it (entry/query_entries.c). */
#define PF_QUERY_ENTRIES(X)                                                    \
    X(none, 0, POINTER_ATTRIBUTE, 0, cuPointerGetAttribute)                    \
    X(none, 0, POINTER_ATTRIBUTES, 0, cuPointerGetAttributes)                  \
    X(none, 0, HOST_FLAGS, 0, cuMemHostGetFlags)                               \
    X(none, 0, HOST_DEVICE_POINTER, 0, cuMemHostGetDevicePointer_v2)

/* Contexts destroyed, and waited for (entry/context_entries.c). */
#define PF_CONTEXT_ENTRIES(X)                                                  \
    X(none, 0, CTX_SYNC, 0, cuCtxSynchronize)                                  \
    X(none, 0, CTX_DESTROY, 0, cuCtxDestroy)                                   \
    X(none, 0, CTX_DESTROY, 0, cuCtxDestroy_v2)                                \
    X(none, 0, PRIMARY_RELEASE, 0, cuDevicePrimaryCtxRelease)                  \
    X(none, 0, PRIMARY_RELEASE, 0, cuDevicePrimaryCtxRelease_v2)               \
    X(none, 0, PRIMARY_RESET, 0, cuDevicePrimaryCtxReset)                      \
    X(none, 0, PRIMARY_RESET, 0, cuDevicePrimaryCtxReset_v2)

/* Every wrapped entry point. */
#define PF_WRAPPED(X)                                                          \
    PF_LOOKUP_ENTRIES(X) PF_COPY_ENTRIES(X) PF_ALLOC_ENTRIES(X)                \
    PF_CAPTURE_ENTRIES(X) PF_CONTEXT_ENTRIES(X) PF_QUERY_ENTRIES(X)

/* Driver functions pinfast calls without wrapping them: X(symbol). */
#define PF_INTERNAL(X)                                                         \
    X(cuCtxGetCurrent) X(cuCtxGetId) X(cuCtxGetDevice) X(cuCtxGetFlags)       \
    X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)                               \
    X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRetain)                  \
    X(cuThreadExchangeStreamCaptureMode) X(cuStreamIsCapturing_ptsz)           \
    X(cuMemGetAddressRange_v2)                                                 \
    X(cuStreamIsCapturing) X(cuStreamSynchronize) X(cuStreamGetCtx)            \
    X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)                    \
    X(cuEventQuery) X(cuEventDestroy_v2)                                      \
    X(cuStreamAddCallback) X(cuStreamWaitEvent) X(cuStreamQuery)              \
    X(cuArray3DGetDescriptor_v2) X(cuMemRetainAllocationHandle) X(cuMemRelease) \
    X(cuDeviceGetCount)

/* PF_IF_1(x) is x, PF_IF_0(x) nothing: for a table column that is 0 or 1. */
/* clang-format on */
#define PF_IF_1(...) __VA_ARGS__
#define PF_IF_0(...)

#define PF_ENUM_(name) PF_S_##name,
#define PF_ENUM_WRAPPED_(family, opens, shape, ptds, name) PF_S_##name,
enum pf_symbol {
    PF_WRAPPED(PF_ENUM_WRAPPED_) PF_NWRAPPED,
    PF_INTERNAL_FIRST_ = PF_NWRAPPED - 1,
    PF_INTERNAL(PF_ENUM_) PF_NSYMBOLS
};
#undef PF_ENUM_
#undef PF_ENUM_WRAPPED_

/* The report's families: PF_API_<family> and their count. */
#define PF_FAMILY_ENUM_(family, opens, shape, ptds, name) PF_IF_##opens(PF_API_##family, )
enum pf_copy_api { PF_COPY_ENTRIES(PF_FAMILY_ENUM_) PF_COPY_API_COUNT };
enum pf_alloc_api { PF_ALLOC_ENTRIES(PF_FAMILY_ENUM_) PF_ALLOC_API_COUNT };
#undef PF_FAMILY_ENUM_

#endif
