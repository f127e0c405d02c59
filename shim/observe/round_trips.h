/* Buffers that go to the host and come straight back unchanged: data that
 * could have stayed on the GPU. */
#ifndef PINFAST_ROUND_TRIPS_H
#define PINFAST_ROUND_TRIPS_H

#include <stddef.h>

/* The digest reads 64 cache lines of the buffer on every D2H this size or
 * more: for a 4 KiB copy, the whole buffer again, on a call pinfast should
 * leave as it found it (docs/tuning.md#round-trip-digests-only-from-512-kib-pf_roundtrip_min_bytes);
 * under pinfast's own staging threshold a round trip costs the program
 * little anyway. */
#define PF_ROUNDTRIP_MIN_BYTES (512u << 10)

/* After a successful D2H into host memory p of n bytes. */
void pf_round_trip_d2h_large(const void *p, size_t n);
static inline void pf_round_trip_d2h(const void *p, size_t n) {
    if (n >= PF_ROUNDTRIP_MIN_BYTES && p)
        pf_round_trip_d2h_large(p, n);
}

/* Before an H2D from host memory p of n bytes: 1 when this thread brought
 * the same n bytes to p from the device and they look unchanged. */
int pf_round_trip_h2d_large(const void *p, size_t n);
static inline int pf_round_trip_h2d(const void *p, size_t n) {
    return n >= PF_ROUNDTRIP_MIN_BYTES && p && pf_round_trip_h2d_large(p, n);
}

#endif
