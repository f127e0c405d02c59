#include "hostcopy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) static void stream_avx2(char *d, const char *s, size_t n) {
    for (; n >= 128; n -= 128, d += 128, s += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)s);
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + 96));
        _mm256_stream_si256((__m256i *)d, a);
        _mm256_stream_si256((__m256i *)(d + 32), b);
        _mm256_stream_si256((__m256i *)(d + 64), c);
        _mm256_stream_si256((__m256i *)(d + 96), e);
    }
    memcpy(d, s, n);
}

static void stream_sse2(char *d, const char *s, size_t n) {
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, n);
}

typedef void (*stream_fn)(char *, const char *, size_t);

/* The widest streaming routine this CPU has, chosen at the first call. */
static stream_fn stream_routine(void) {
    static stream_fn chosen;
    stream_fn f = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (!f) {
        __builtin_cpu_init(); /* idempotent; a shared object may run before libgcc's */
        f = __builtin_cpu_supports("avx2") ? stream_avx2 : stream_sse2;
        __atomic_store_n(&chosen, f, __ATOMIC_RELAXED);
    }
    return f;
}

/* Streaming stores from d's first 32-byte boundary on (they want
 * alignment), with no fence: a row of a pitched copy is one call of many. */
static void stream_unfenced(stream_fn f, char *d, const char *s, size_t n) {
    size_t head = (32 - ((uintptr_t)d & 31)) & 31;
    if (head > n)
        head = n;
    memcpy(d, s, head);
    f(d + head, s + head, n - head);
}
#endif

void pf_copy_rows(enum pf_host_copy kind, char *dst, size_t dpitch, const char *src, size_t spitch, size_t row,
                  size_t len) {
    if (!row || (dpitch == row && spitch == row))
        row = len; /* one run */
#if defined(__x86_64__)
    if (kind == PF_HOST_COPY_STREAM) {
        stream_fn f = stream_routine();
        for (size_t done = 0; done < len; done += row, dst += dpitch, src += spitch)
            stream_unfenced(f, dst, src, row);
        /* the stores are visible before the task says it is done: one fence
         * for all the rows (docs/tuning.md#pitched-rows-share-one-store-fence) */
        _mm_sfence();
        return;
    }
#endif
    (void)kind;
    for (size_t done = 0; done < len; done += row, dst += dpitch, src += spitch)
        memcpy(dst, src, row);
}

void pf_copy_bytes(enum pf_host_copy kind, void *dst, const void *src, size_t len) {
    pf_copy_rows(kind, dst, len, src, len, 0, len);
}
