/* Buffers that go to the host and come straight back unchanged: data that
 * could have stayed on the GPU. */
#ifndef PINFAST_ROUNDTRIP_H
#define PINFAST_ROUNDTRIP_H

#include <stddef.h>

/* After a successful D2H into host memory p of n bytes. */
void pf_roundtrip_d2h(const void *p, size_t n);

/* Before an H2D from host memory p of n bytes: 1 when this thread brought
 * the same n bytes to p from the device and they look unchanged. */
int pf_roundtrip_h2d(const void *p, size_t n);

#endif
