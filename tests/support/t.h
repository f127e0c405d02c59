/* t.h - helpers shared by the cmocka tests. */
#ifndef PFT_T_H
#define PFT_T_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "drv.h"

extern struct drv D;          /* filled by t_setup from PFT_PATH / PFT_FLAVOUR */
extern CUcontext T_CTX;       /* primary context of device 0, current in the main thread */

/* check a CUresult, printing the expression and both codes' names on failure */
#define CK(expr) t_check((expr), CUDA_SUCCESS, #expr, __FILE__, __LINE__)
#define CK_EQ(expr, want) t_check((expr), (want), #expr, __FILE__, __LINE__)
void t_check(CUresult got, CUresult want, const char *expr, const char *file, int line);

int t_setup(void **state);           /* group setup: load, cuInit, context */
/* t_setup, then a blocking and a non-blocking stream */
int t_setup_streams(void **state, CUstream *blocking, CUstream *nonblocking);
int t_pinfast(void);                 /* running under LD_PRELOAD=libpinfast.so */
uint64_t t_seed(void);               /* PFT_SEED or time; printed once */
uint64_t t_rand(void);               /* xorshift64* on the seed */
double t_now(void);                  /* CLOCK_MONOTONIC in seconds */
size_t t_rand_range(size_t lo, size_t hi);   /* inclusive */
void t_fill(void *p, size_t n, uint64_t salt);   /* deterministic pseudo-random bytes */
/* n bytes the test maps itself (NULL: refused), outside pinfast's heap:
 * the registration cache never takes them, so that their copies stage */
void *t_map(size_t n);
void t_unmap(void *p, size_t n);
int t_check_fill(const void *p, size_t n, uint64_t salt, size_t *bad);
/* fails the test, naming `what` and the first wrong byte, unless p holds t_fill(salt) */
void t_expect_fill(const void *p, size_t n, uint64_t salt, const char *what);
void t_poison(void *p, size_t n);
/* For child processes, which report by exit status: fills h with random
 * bytes, copies them to d and back into o (poisoned first), and checks o.
 * 0, 32 when a copy failed, 33 (the byte named on stderr) when o is wrong. */
int t_round_trip(unsigned char *h, unsigned char *o, CUdeviceptr d, size_t n);
/* For child processes: h (n bytes of a heap block) copied whole to d ten
 * times, random bytes each time, the registrar's turn between: under
 * pinfast the block is registered.  0, or 32 when a copy failed. */
int t_copied_again(unsigned char *h, CUdeviceptr d, size_t n);
/* pinfast registers, and unregisters freed blocks, on a thread of its own:
 * polls `done` (every 200 us, at most 5 s); its last answer */
int t_await(int (*done)(void *), void *arg);
/* make the calling (non-main) thread use T_CTX */
void t_bind_ctx(void);
#endif
