/* The program's own registrations over blocks of pinfast's heap (register.h):
 * answered as the driver answers without pinfast.  Where pinfast's
 * registration holds the program's range with flags it can stand for, the
 * program's is answered from it, with no driver call (none of pinfast's is
 * undone, which would wait for the device): a hand, in the block's
 * hand[].  Several may share a block, as the driver takes registrations
 * that share no byte.  A range pinfast cannot answer (other flags, past
 * its block) goes to the driver, pinfast's registrations under it undone
 * first, the hands made with the driver; the block is then the
 * program's (PROGRAM), its registrations still listed, until the last is
 * undone. */
#include "register.h"
#include "register_state.h"

#define PAGE ((uintptr_t)4096)

/* The hand at p, or -1. */
static int hand_at(const struct pf_block *b, uintptr_t p) {
    for (int i = 0; i < b->nhands; i++)
        if (b->hand[i].lo == p)
            return i;
    return -1;
}

/* The hand holding p, or NULL. */
static const struct pf_hand *hand_over(const struct pf_block *b, uintptr_t p) {
    for (int i = 0; i < b->nhands; i++)
        if (p - b->hand[i].lo < b->hand[i].len)
            return &b->hand[i];
    return NULL;
}

/* Whether [lo, hi) meets one of b's hands: the driver refuses such a
 * registration (bytes, not pages: two that share a page it takes). */
static int meets_hand(const struct pf_block *b, uintptr_t lo, uintptr_t hi) {
    for (int i = 0; i < b->nhands; i++)
        if (lo < b->hand[i].lo + b->hand[i].len && b->hand[i].lo < hi)
            return 1;
    return 0;
}

static void add_hand(struct pf_block *b, uintptr_t lo, size_t n, unsigned flags) {
    if (b->nhands < PF_HANDS)
        b->hand[b->nhands++] = (struct pf_hand){lo, n, flags};
    else
        b->hands_lost++;
}

static void drop_hand(struct pf_block *b, int i) { b->hand[i] = b->hand[--b->nhands]; }

int pf_register_owns(uintptr_t p) {
    if (!pf_register_watching() || !pf_heap_owns((const void *)p))
        return 0;
    pf_heap_lock();
    struct pf_block *b = pf_heap_find(p);
    int owns = b && pf_reg_holds(b->reg) && !hand_over(b, p);
    pf_heap_unlock();
    return owns;
}

int pf_register_handed_flags(uintptr_t p, unsigned *flags) {
    if (!pf_register_watching() || !pf_heap_owns((const void *)p))
        return 0;
    pf_heap_lock();
    struct pf_block *b = pf_heap_find(p);
    const struct pf_hand *h = b && pf_reg_holds(b->reg) ? hand_over(b, p) : NULL;
    if (h) /* the driver reports every registration mapped (unified addressing) */
        *flags = h->flags | CU_MEMHOSTREGISTER_DEVICEMAP;
    pf_heap_unlock();
    return h != NULL;
}

int pf_register_hand_overrun(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p;
    if (!pf_register_watching() || !pf_heap_owns(p))
        return 0;
    pf_heap_lock();
    struct pf_block *b = pf_heap_find(lo);
    const struct pf_hand *h = b && pf_reg_holds(b->reg) ? hand_over(b, lo) : NULL;
    int over = h && n > h->lo + h->len - lo;
    pf_heap_unlock();
    return over;
}

/* The program registers memory over b through the driver: pinfast's
 * registration is undone first where it holds pages, its hands made with
 * the driver. */
static void to_program(struct pf_block *b, void *arg) {
    (void)arg;
    uint32_t gen = b->gen;
    if (pf_reg_holds(b->reg))
        pf_reg_undo(b, NULL);
    if (b->gen == gen && b->state == PF_BLOCK_LIVE) /* not freed meanwhile by another thread */
        pf_reg_set(b, PF_REG_PROGRAM);
}

int pf_register_program(void *p, size_t n, unsigned flags, CUresult *r) {
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    if (!n || hi < lo || !pf_heap_meets(lo, hi))
        return 0;
    pf_heap_lock();
    struct pf_block *b;
    while ((b = pf_reg_block_of(p, n)) && b->reg == PF_REG_MAKING)
        pf_reg_wait();
    int answered = b && pf_reg_covers(b, p, n) && !(flags & ~(unsigned)PF_REG_HOST_FLAGS) &&
                   (b->nhands < PF_HANDS || meets_hand(b, lo, hi));
    if (answered && meets_hand(b, lo, hi)) {
        *r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    } else if (answered) {
        add_hand(b, lo, n, flags);
        pf_reg_count_handed();
        *r = CUDA_SUCCESS;
    } else {
        pf_reg_each_meeting(lo & ~(PAGE - 1), hi, to_program, NULL);
    }
    pf_heap_unlock();
    return answered;
}

static void program_made(struct pf_block *b, void *arg) {
    const struct pf_hand *h = arg;
    if (b->reg == PF_REG_PROGRAM)
        add_hand(b, h->lo, h->len, h->flags);
}

/* A block of the program's whose last registration went is pinfast's
 * again; a freed one goes back. */
static void program_left(struct pf_block *b) {
    if (b->reg != PF_REG_PROGRAM || b->nhands || b->hands_lost)
        return;
    pf_reg_set(b, PF_REG_NONE);
    if (b->state == PF_BLOCK_HELD)
        pf_heap_release(b);
}

static void program_refused(struct pf_block *b, void *arg) {
    (void)arg;
    program_left(b);
}

void pf_register_program_result(void *p, size_t n, unsigned flags, CUresult r) {
    uintptr_t lo = (uintptr_t)p;
    if (!pf_heap_meets(lo, lo + n))
        return;
    struct pf_hand h = {lo, n, flags};
    pf_heap_lock();
    pf_reg_each_meeting(lo & ~(PAGE - 1), lo + n, r == CUDA_SUCCESS ? program_made : program_refused, &h);
    pf_heap_unlock();
}

int pf_register_program_undo(void *p, CUresult *r) {
    if (!pf_register_watching() || !pf_heap_owns(p))
        return 0;
    pf_heap_lock();
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    int answered = 0, i;
    if (b && pf_reg_holds(b->reg) && (i = hand_at(b, (uintptr_t)p)) >= 0) { /* pinfast's registration stays */
        drop_hand(b, i);
        *r = CUDA_SUCCESS;
        answered = 1;
    } else if (b && pf_reg_holds(b->reg)) { /* not the program's: the driver would undo pinfast's */
        *r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        answered = 1;
    }
    pf_heap_unlock();
    return answered;
}

void pf_register_program_undone(void *p, CUresult r) {
    if (r != CUDA_SUCCESS || !pf_heap_meets((uintptr_t)p, (uintptr_t)p + 1))
        return;
    pf_heap_lock();
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    int found = 0;
    for (size_t k = 0; k < n; k++) { /* the registration may reach over several blocks */
        int i = all[k].reg == PF_REG_PROGRAM ? hand_at(&all[k], (uintptr_t)p) : -1;
        if (i >= 0) {
            drop_hand(&all[k], i);
            program_left(&all[k]);
            found = 1;
        }
    }
    struct pf_block *b = found ? NULL : pf_heap_find((uintptr_t)p);
    if (b && b->reg == PF_REG_PROGRAM && b->hands_lost) { /* one hand[] had no room for */
        b->hands_lost--;
        program_left(b);
    }
    pf_heap_unlock();
}
