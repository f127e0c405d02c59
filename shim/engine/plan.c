/* A staged copy's plan and its run loop: chunks of growing size, each cut
 * into tasks for the workers, each DMA issued by the caller the moment its
 * chunk is ready. */
#include "staging.h"
#include "../driver/driver.h"
#include "../memory/first_touch.h"

/* With lanes, a chunk of up to `size` bytes: an equal piece (whole
 * pages) of each lane with bytes left, its next bytes. */
static void take_pieces(struct pf_plan *p, struct pf_chunk *h, size_t size) {
    int open = 0;
    for (int i = 0; i < p->lanes; i++)
        open += p->lane_next[i] < p->lane_at[i + 1];
    size_t each = size / (size_t)open & ~(size_t)4095;
    h->len = 0;
    for (int i = 0; i < p->lanes; i++) {
        size_t at = p->lane_next[i], left = p->lane_at[i + 1] - at, len = left < each ? left : each;
        if (!left)
            continue;
        h->piece[h->npieces++] = (struct pf_lane_piece){at, len ? len : left < 4096 ? left : 4096};
        p->lane_next[i] += h->piece[h->npieces - 1].len;
        h->len += h->piece[h->npieces - 1].len;
    }
    h->off = h->piece[0].off;
}

/* Takes the next chunk: the first ones are small, so that the first DMA
 * starts early and a small copy still overlaps copying and DMA.  A D2H copy
 * ends on smaller chunks too: its last chunk's copy-out is time nothing else
 * overlaps (docs/tuning.md#a-d2h-copy-ends-on-smaller-chunks-tail_split).
 * With lanes, a chunk is a piece of each. */
static void take_chunk(struct pf_plan *p, struct pf_chunk *h) {
    size_t left = p->x->bytes - p->next;
    h->taken_ns = pf_stamp(p->debug);
    h->landed_ns = 0;
    h->logged = 0;
    h->npieces = 0;
    h->off = p->next;
    h->len = left < p->ramp ? left : p->ramp;
    if (p->lanes) {
        take_pieces(p, h, h->len);
    } else if (p->x->dir == PF_DIR_D2H && h->len >= TAIL_SPLIT && left < 2 * h->len) {
        size_t half = (left / 2 + 4095) & ~(size_t)4095;
        if (half < h->len)
            h->len = half;
    }
    const struct pf_shape *sh = p->x->shape;
    if (sh) { /* whole rows, at least one (a slot holds one), of one slice */
        size_t row = h->off / sh->width, in_slice = (sh->slice_rows - row % sh->slice_rows) * sh->width;
        h->len = h->len < sh->width ? sh->width : h->len - h->len % sh->width;
        if (h->len > in_slice)
            h->len = in_slice;
    }
    if (p->huge) { /* a huge page in two chunks would be faulted by two tasks */
        uintptr_t at = (uintptr_t)p->x->host + h->off, end = (at + h->len) & ~(uintptr_t)(PF_HUGE_PAGE - 1);
        if (end > at)
            h->len = end - at;
    }
    p->next += h->len;
    p->nchunks += h->npieces ? h->npieces : 1;
    if (p->ramp < p->chunk)
        p->ramp = p->ramp * 2 < p->chunk ? p->ramp * 2 : p->chunk;
}

/* Tasks of a chunk: several, so that the first (small) chunks are ready
 * soon, none so small that handing it out costs more than doing it. */
size_t pf_task_size(size_t len) {
    size_t task = (len / SPLIT + 4095) & ~(size_t)4095;
    if (task > MAX_TASK)
        task = MAX_TASK;
    if (task < MIN_TASK)
        task = MIN_TASK;
    if (task < (len + PF_MAX_SPLIT - 1) / PF_MAX_SPLIT)
        task = (len + PF_MAX_SPLIT - 1) / PF_MAX_SPLIT;
    return task;
}

/* Queues a host copy as tasks of `task` bytes; returns how many.  With a
 * shape (NULL: linear), the bytes are its rows, packed on the slot's side
 * (dst for H2D) and pitched on the program's, and a task is whole rows. */
int pf_host_tasks_cut(struct pf_task *tasks, char *dst, const char *src, size_t len, enum pf_host_copy kind,
                      size_t task, const struct pf_shape *shape, int h2d) {
    size_t row = shape ? shape->width : 0, pitch = shape ? shape->hpitch : 0;
    if (row) /* rounded up: no more tasks than PF_MAX_SPLIT */
        task = (task + row - 1) / row * row;
    int n = 0;
    for (size_t done = 0; done < len; done += task, n++) {
        size_t at = row ? done / row * pitch : done; /* on the pitched side */
        tasks[n] = (struct pf_task){.dst = dst + (row && !h2d ? at : done),
                                    .src = src + (row && h2d ? at : done),
                                    .len = len - done < task ? len - done : task,
                                    .kind = kind,
                                    .row = (uint32_t)row,
                                    .pitch = (uint32_t)pitch,
                                    .pitched_dst = row && !h2d};
    }
    pf_task_submit(tasks, n);
    return n;
}

void pf_plan_lanes(struct pf_plan *p) {
    uintptr_t at = (uintptr_t)p->x->host, first = at / PF_HUGE_PAGE;
    size_t regions = (at + p->x->bytes - 1) / PF_HUGE_PAGE - first + 1;
    /* a shaped copy's or a huge page's chunks are cut their own way */
    if (regions < 2 || regions > PF_MAX_LANES || p->x->shape || p->huge)
        return;
    for (p->lanes = 0; p->lanes < (int)regions; p->lanes++)
        p->lane_at[p->lanes] = p->lane_next[p->lanes] = p->lanes ? (first + p->lanes) * PF_HUGE_PAGE - at : 0;
    p->lane_at[p->lanes] = p->x->bytes;
}

int pf_populate_cut(struct pf_task *tasks, char *lo, size_t len, size_t unit) {
    size_t units = (len + unit - 1) / unit, piece = (units + PF_POPULATE_TASKS - 1) / PF_POPULATE_TASKS * unit;
    int n = 0;
    for (size_t off = 0; off < len; off += piece, n++)
        tasks[n] = (struct pf_task){.dst = lo + off, .src = NULL, .len = len - off < piece ? len - off : piece};
    pf_task_submit(tasks, n);
    return n;
}

/* Queues a D2H chunk of pieces as tasks from the slot into the program's
 * memory, taken round the pieces: the first task of each, then the second
 * of each, ... (no more than PF_MAX_SPLIT in all). */
static int cut_pieces(const struct pf_plan *p, struct pf_chunk *h) {
    size_t task = pf_task_size(h->len / (size_t)h->npieces),
           most = (h->len + PF_MAX_SPLIT - h->npieces - 1) / (PF_MAX_SPLIT - h->npieces);
    task = task < most ? (most + 4095) & ~(size_t)4095 : task;
    size_t from[PF_MAX_LANES]; /* each piece's place in the slot */
    for (int i = 0; i < h->npieces; i++)
        from[i] = i ? from[i - 1] + h->piece[i - 1].len : 0;
    int n = 0;
    for (size_t done = 0, more = 1; more; done += task) {
        more = 0;
        for (int i = 0; i < h->npieces; i++) {
            if (done >= h->piece[i].len)
                continue;
            size_t len = h->piece[i].len - done < task ? h->piece[i].len - done : task;
            h->tasks[n++] = (struct pf_task){.dst = (char *)p->x->host + h->piece[i].off + done,
                                             .src = h->s->mem + from[i] + done,
                                             .len = len,
                                             .kind = p->kind};
            more |= done + task < h->piece[i].len;
        }
    }
    pf_task_submit(h->tasks, n);
    return n;
}

/* Queues the host side of the slot's chunk as tasks between the slot and the
 * program's memory. */
static void split(const struct pf_plan *p, struct pf_chunk *h) {
    const struct pf_shape *sh = p->x->shape;
    char *user = (char *)p->x->host + (sh ? pf_shape_at(sh, h->off / sh->width) : h->off);
    int h2d = p->x->dir == PF_DIR_H2D;
    h->phase = COPYING;
    if (h->npieces) {
        h->ntasks = cut_pieces(p, h);
        return;
    }
    /* a chunk faulting its own huge page is one task: two faulting it at
     * once would each clear a page of their own */
    size_t task = p->lean                    ? (h->len + LEAN_TASKS - 1) / LEAN_TASKS
                  : p->huge == PF_FRESH_SELF ? h->len
                                             : pf_task_size(h->len);
    h->ntasks =
        pf_host_tasks_cut(h->tasks, h2d ? h->s->mem : user, h2d ? user : h->s->mem, h->len, p->kind, task, sh, h2d);
}

static void wait_tasks(struct pf_chunk *h) {
    for (int i = 0; i < h->ntasks; i++)
        pf_task_wait(&h->tasks[i]);
    h->ntasks = 0;
}

/* CUDA_SUCCESS once the slot's last DMA is complete, else CUDA_ERROR_NOT_READY
 * (or the error the stream met). */
static CUresult unfence(struct pf_slot *s) {
    if (!s->fenced)
        return CUDA_SUCCESS;
    CUresult r = PF_CALL(cuEventQuery, s->ev);
    if (r == CUDA_SUCCESS)
        s->fenced = 0;
    return r;
}

static void pause(void) {
    for (int k = 0; k < POLL_PAUSES; k++)
        pf_relax();
}

static uint64_t polled_ns; /* the report's CPU time spent waiting */

CUresult pf_event_poll(CUevent ev, uint64_t poll_ns) {
    uint64_t t0 = pf_now_ns();
    CUresult r;
    while ((r = PF_CALL(cuEventQuery, ev)) == CUDA_ERROR_NOT_READY && pf_now_ns() - t0 <= poll_ns)
        pause();
    __atomic_fetch_add(&polled_ns, pf_now_ns() - t0, __ATOMIC_RELAXED);
    return r;
}

CUresult pf_event_await(CUevent ev, uint64_t poll_ns) {
    CUresult r = pf_event_poll(ev, poll_ns);
    return r == CUDA_ERROR_NOT_READY ? PF_CALL(cuEventSynchronize, ev) : r;
}

/* Returns once the slot's fence is over (or its stream met an error),
 * `ahead` bytes of DMAs up to it. */
static CUresult await(struct pf_slot *s, size_t ahead) {
    CUresult r =
        s->fenced ? pf_event_await(s->ev, POLL_NS + (uint64_t)(ahead >> 10) * SLOW_NS_PER_MIB / 1024) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        s->fenced = 0;
    return r;
}

double pf_plan_polled_seconds(int reset) {
    if (reset)
        polled_ns = 0;
    return (double)__atomic_load_n(&polled_ns, __ATOMIC_RELAXED) * 1e-9;
}

static int copying(const struct pf_chunk *h, int nh) {
    for (int i = 0; i < nh; i++)
        if (h[i].phase == COPYING)
            return 1;
    return 0;
}

/* Issues the DMA of a held chunk and fences its slot. */
static CUresult dma(struct pf_plan *p, struct pf_chunk *h) {
    const struct pf_xfer *x = p->x;
    h->dma_ns = pf_stamp(p->debug);
    CUresult r = x->shape               ? pf_shape_dma(x, h->s->mem, h->off, h->len)
                 : x->dir == PF_DIR_H2D ? PF_CALL(cuMemcpyHtoDAsync_v2, x->dev + h->off, h->s->mem, h->len, x->stream)
                 : h->npieces           ? CUDA_SUCCESS
                                        : PF_CALL(cuMemcpyDtoHAsync_v2, h->s->mem, x->dev + h->off, h->len, x->stream);
    size_t at = 0; /* pieces: a DMA each, one after the other in the slot */
    for (int i = 0; i < h->npieces && r == CUDA_SUCCESS; at += h->piece[i++].len) {
        r = PF_CALL(cuMemcpyDtoHAsync_v2, h->s->mem + at, x->dev + h->piece[i].off, h->piece[i].len, x->stream);
        if (r != CUDA_SUCCESS && i) /* no fence: those issued must be over before the slot is reused */
            PF_CALL(cuStreamSynchronize, x->stream);
    }
    if (r != CUDA_SUCCESS)
        return r;
    h->dma_end_ns = pf_stamp(p->debug);
    if (!p->first_dma_ns)
        p->first_dma_ns = h->dma_end_ns;
    r = PF_CALL(cuEventRecord, h->s->ev, x->stream);
    if (r != CUDA_SUCCESS) {
        /* no fence: make sure the DMA is over before the slot is reused */
        PF_CALL(cuStreamSynchronize, x->stream);
        return r;
    }
    h->s->fenced = 1;
    h->s->owner = pf_fence_owner(x->stream);
    return CUDA_SUCCESS;
}

static int tasks_done(const struct pf_chunk *h) {
    /* tasks finish roughly in order: ask the last first */
    for (int i = h->ntasks - 1; i >= 0; i--)
        if (!pf_task_done(&h->tasks[i]))
            return 0;
    return 1;
}

/* The DMA of the oldest fenced chunk is over: a D2H chunk is copied out,
 * an H2D chunk's line gets the time. */
static void dma_over(struct pf_plan *p, struct pf_chunk *c) {
    c->landed_ns = pf_stamp(p->debug);
    if (c->phase == DMA)
        split(p, c);
    else if (c->logged)
        p->log[c->logged - 1].landed = c->landed_ns;
}

/* Nothing moved: lets the DMA run a little before the driver is asked
 * again, so the caller does not hammer its locks; when only the DMA can
 * move, waits for the oldest one and takes it off the fifo at once (its
 * slot may be taken again before the run loop next asks). */
static CUresult stalled(struct pf_plan *p, struct pf_chunk *h, int nh, const int *fifo, int *first, int *count) {
    if (!*count || copying(h, nh)) {
        pause();
        return CUDA_SUCCESS;
    }
    CUresult err = await(h[fifo[*first]].s, p->chunk);
    if (!err) {
        dma_over(p, &h[fifo[*first]]);
        *first = (*first + 1) % nh;
        (*count)--;
    }
    return err;
}

/* More chunks to take, and no slot free to take them. */
static int needs_slot(const struct pf_plan *p, const struct pf_chunk *h, int nh) {
    if (p->next >= p->x->bytes)
        return 0;
    for (int i = 0; i < nh; i++)
        if (h[i].phase == IDLE && !h[i].s->fenced)
            return 0;
    return 1;
}

/* A paced H2D with chunks left, as far ahead of its DMA as it may get:
 * `filling` chunks being copied in, `dmas` fenced slots not seen done. */
static int held_back(const struct pf_plan *p, int filling, int dmas) {
    return p->lean && p->next < p->x->bytes && filling + dmas >= LEAN_AHEAD;
}

/* The caller polls: it issues each DMA the moment its chunk is ready and
 * starts each host copy the moment its DMA is over, in whatever order the
 * workers finish (the chunks are disjoint; a slow worker must not hold the
 * copy engine up), so the copy engine is never idle while the caller does
 * something else.  The caller copies itself only pieces small enough not to
 * delay that (or everything, when there is no worker).
 * H2D chunks go IDLE -> COPYING -> DMA'd, their slot fenced until the DMA is
 * over; an asynchronous call returns once the program's memory has been
 * read, the last DMAs possibly in flight, a synchronous one once they are
 * over, as the plain driver's.  D2H chunks go IDLE -> DMA -> COPYING ->
 * IDLE; the call returns with every byte in place. */
CUresult pf_plan_run(struct pf_plan *p, struct pf_chunk *h, int nh, size_t help_max) {
    int fifo[MAX_SLOTS];                   /* fenced slots, in fence order: they complete in it */
    int first = 0, count = 0, filling = 0; /* H2D chunks being copied in */
    size_t retired = 0;                    /* bytes */
    int h2d = p->x->dir == PF_DIR_H2D;
    CUresult err = CUDA_SUCCESS;
    for (int i = 0; i < nh; i++) /* fences left by earlier copies */
        if (h[i].s->fenced)
            fifo[(first + count++) % nh] = i;
    while (retired < p->x->bytes && !err) {
        int progress = 0;
        /* DMAs that are over: D2H chunks to copy out, slots to reuse.  An
         * H2D copy asks only when it needs a slot or is held back (paced):
         * each question is a driver call, made while its finished tasks
         * wait for their DMA (docs/tuning.md#h2d-copies-ask-about-their-dmas-only-when-needed) */
        while (count && !err && (!h2d || needs_slot(p, h, nh) || held_back(p, filling, count))) {
            struct pf_chunk *c = &h[fifo[first]];
            CUresult q = unfence(c->s);
            if (q == CUDA_ERROR_NOT_READY)
                break;
            if (q)
                err = q;
            else
                dma_over(p, c);
            first = (first + 1) % nh;
            count--;
            progress = 1;
        }
        for (int i = 0; i < nh && !err; i++) {
            struct pf_chunk *c = &h[i];
            if (c->phase == IDLE && !c->s->fenced && p->next < p->x->bytes &&
                (!p->lean || (filling < LEAN_CHUNKS && !held_back(p, filling, count)))) {
                take_chunk(p, c);
                if (h2d) {
                    split(p, c);
                    filling++;
                } else if (!(err = dma(p, c))) {
                    c->phase = DMA;
                    fifo[(first + count++) % nh] = i;
                }
                progress = 1;
            } else if (c->phase == COPYING && tasks_done(c)) {
                if (h2d && !(err = dma(p, c)))
                    fifo[(first + count++) % nh] = i;
                filling -= h2d;
                if (p->debug)
                    pf_timeline_account(p, c);
                c->phase = IDLE;
                retired += c->len;
                progress = 1;
            }
        }
        /* a task into a fresh destination (lanes) takes ten times as long:
         * taking one, the caller would leave landed chunks unseen, so it
         * helps only once no DMA is left to see land */
        if (!progress && ((p->lanes && count) || !pf_task_help(help_max)))
            err = stalled(p, h, nh, fifo, &first, &count);
    }
    if (!err && h2d && !p->x->async && count) { /* they complete in order */
        err = await(h[fifo[(first + count - 1) % nh]].s, count * p->chunk);
        for (; count && !err; count--, first = (first + 1) % nh)
            h[fifo[first]].s->fenced = 0;
    }
    for (int i = 0; i < nh; i++) { /* after an error */
        if (h[i].phase == COPYING)
            wait_tasks(&h[i]); /* DMA-phase slots stay fenced for whoever comes next */
        h[i].phase = IDLE;
    }
    return err;
}
