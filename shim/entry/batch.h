/* A batch of copies, whatever its ABI: which of them pinfast stages and
 * which go to the driver as one smaller batch (batch.c); the ABIs' own
 * arguments are batch_entries.c's. */
#ifndef PINFAST_BATCH_H
#define PINFAST_BATCH_H

#include "copies.h"

#include <stddef.h>

/* One copy of a batch, and who moves it. */
enum batch_to { TO_DRIVER, TO_ENGINE, TO_BOUNCE };
struct batch_copy {
    struct pf_xfer x;
    struct pf_shape s; /* a pitched copy's (3D batches) */
    enum batch_to to;
};

/* A batch as its wrapper has it: `stageable` says whether copy i is valid
 * as far as pinfast can check (COPY_INVALID if not) and whether pinfast may
 * take it (COPY_TAKE, with c->x and c->to set but the stream), `part` is the
 * driver's own call of the same ABI for the copies idx[0..k) alone, built
 * in `scratch` (room for every copy: `scratch_bytes` each), with failIdx
 * `fail` (the 12.8 ABI; NULL for 13.0). */
struct batch_abi {
    void *args;
    int (*stageable)(void *args, size_t i, struct batch_copy *c); /* COPY_* */
    CUresult (*part)(void *args, void *scratch, const size_t *idx, size_t k, size_t *fail);
    size_t scratch_bytes;
    CUstream stream;
    int (*guard)(void *args, size_t i);   /* before the driver sees copy i: 1 when it is to be waited for */
    int (*overrun)(void *args, size_t i); /* copy i runs past the program's own registration (copies.h) */
    /* NULL, or: the driver checks every copy's parameters before it moves
     * any, and refuses a copy's memory with failIdx SIZE_MAX (3D batches,
     * tests/gpu/probes/probe_reg_pieces.c); copy i's parameters pass */
    int (*checked)(void *args, size_t i);
};

/* What `stageable` finds of a copy. */
enum { COPY_INVALID = -1, COPY_DRIVER, COPY_TAKE };

/* Before the driver sees the whole batch, well formed or not: 1 when a
 * registration of pinfast's holds the source of one of its copies read in
 * the call (DURING_API_CALL), which the driver would read later. */
int pf_batch_guard_all(const struct batch_abi *b, size_t n, int valid);

/* A batch the wrapper found well formed with a copy that runs from the
 * program's own registration past its end (pf_overruns_hand): the driver
 * refuses it there, having moved the copies before it
 * (tests/gpu/probes/probe_reg_pieces.c), so those go to the driver as one
 * batch and the batch is refused at that copy.  1 then (c->result is the
 * call's); 0 when there is none, on the legacy stream or a capturing one,
 * without a failIdx on the 12.8 ABI (`v1`), or with a copy whose
 * parameters the driver would refuse first (b->checked): the driver
 * answers those. */
int pf_batch_refused(struct pf_copy_seen *c, const struct batch_abi *b, size_t n, size_t *fail, int v1);

/* Stages what it can of a batch of n copies the wrapper found well formed:
 * 1 when it took the batch (c->result is the call's), 0 when the whole
 * batch goes to the driver untouched.  Every copy is checked before
 * anything moves, and pinfast takes a batch only when it finds every copy
 * valid: a refused batch has moved the copies before the one refused (H100, batch-probe.log in
 * docs/results/2026-11-24-h100-registration-cache/logs.log), which only the driver can reproduce, so any doubt
 * leaves the whole batch to the driver (codes, failIdx and bytes its own).
 * Under a capture the driver refuses batches (900, H100): they pass
 * through, unlooked at.  The copies pinfast does not take go to the driver
 * first, as one smaller batch: its answer is the whole batch's (copies have
 * no order within a batch, and all were found valid), failIdx mapped back.  On the 12.8 ABI one copy always
 * goes to the driver, so that failIdx gets what the driver writes there
 * on success.  A copy the engine then declines (no slot free) goes to the
 * driver after the staged ones. */
int pf_batch_stage(struct pf_copy_seen *c, struct batch_abi *b, size_t n, size_t *fail, int v1);

#endif
