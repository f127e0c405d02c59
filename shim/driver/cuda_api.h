/* The driver API with every versioned and per-thread-stream entry point
 * declared under its exported name: the shim defines functions with those
 * names, so cuda.h must not rename them with its compatibility macros. */
#ifndef PINFAST_CUDA_API_H
#define PINFAST_CUDA_API_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define PF_API __attribute__((visibility("default")))

#endif
