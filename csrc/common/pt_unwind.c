/* Stack walking inside the signal handler.
 *
 * x86-64: for each frame, look the pc up in the CFI rows built outside the
 * handler (pt_sampler_cfi.c) to find the canonical frame address, the return
 * address at CFA-8 and where the caller's rbp was saved; where no row covers
 * the pc (JIT code, objects without .eh_frame), follow the frame-pointer
 * chain.  aarch64: frame pointers only.
 *
 * Memory is read only inside [interrupted sp, top of the thread's stack),
 * which is always mapped, so garbage cuts a stack short but never faults.
 * Everything here is async-signal-safe: no calls, no locks, no allocation.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "pt_sampler.h"

/* Rows published by pt_sampler_maps.c; read with acquire ordering. */
PT_HIDDEN const struct pt_cfi_set *volatile pt_cfi_current;

struct pt_bounds {
    uintptr_t lo, hi;
};

/* 1 if the 8 bytes at `addr` lie within the stack bounds.  Async-signal-safe. */
static inline int pt_readable(const struct pt_bounds *b, uintptr_t addr) {
    return addr >= b->lo && addr <= b->hi - 8 && (addr & 7) == 0;
}

/* Follow one frame-pointer link: fp -> (saved fp, return address).
 * 0 when the chain leaves the stack.  Async-signal-safe. */
static int pt_fp_step(const struct pt_bounds *b, uintptr_t *fp, uintptr_t *sp, uintptr_t *ra) {
    uintptr_t frame = *fp;
    if (frame < *sp || !pt_readable(b, frame) || !pt_readable(b, frame + 8)) return 0;
    *ra = ((const uintptr_t *)frame)[1];
    *fp = ((const uintptr_t *)frame)[0];
    *sp = frame + 16;
    return 1;
}

#if defined(__x86_64__)

/* The row covering `pc`, or NULL when no table covers it.  Async-signal-safe. */
static const struct pt_cfi_row *pt_cfi_find(const struct pt_cfi_set *set, uintptr_t pc) {
    size_t lo = 0, hi = set->n;
    while (lo < hi) { /* last table with table->lo <= pc */
        size_t mid = lo + (hi - lo) / 2;
        if (set->tables[mid]->lo <= pc) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    const struct pt_cfi_table *t = set->tables[lo - 1];
    uint64_t off = pc - t->lo;
    if (pc >= t->hi || t->nrows == 0 || off < t->rows[0].pc) return NULL;
    size_t a = 0, z = t->nrows;
    while (a < z) { /* last row with row->pc <= off */
        size_t mid = a + (z - a) / 2;
        if (t->rows[mid].pc <= off) a = mid + 1;
        else z = mid;
    }
    return &t->rows[a - 1];
}

/* Async-signal-safe. */
unsigned pt_unwind(const void *ucontext, const struct pt_thread *self, uint64_t *frames,
                   unsigned max, unsigned *flags) {
    const ucontext_t *uc = ucontext;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    uintptr_t fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
    unsigned n = 0;
    frames[n++] = pc;
    if (sp < self->stack_lo || sp >= self->stack_hi) {
        *flags |= PT_SREC_OFFSTACK; /* sigaltstack or a coroutine stack: pc only */
        return n;
    }
    struct pt_bounds b = {sp, self->stack_hi};
    const struct pt_cfi_set *set = __atomic_load_n(&pt_cfi_current, __ATOMIC_ACQUIRE);
    while (n < max) {
        /* A return address may point just past a noreturn call: look up ra-1. */
        uintptr_t lookup = n == 1 ? pc : pc - 1;
        const struct pt_cfi_row *row = set != NULL ? pt_cfi_find(set, lookup) : NULL;
        uintptr_t ra, prev_sp = sp;
        if (row != NULL && (row->cfa_reg & PT_ROW_OUTERMOST)) return n; /* _start, clone */
        if (row != NULL && (row->cfa_reg & PT_CFA_MASK) != PT_CFA_NONE) {
            uintptr_t base = (row->cfa_reg & PT_CFA_MASK) == PT_CFA_RSP ? sp : fp;
            uintptr_t cfa = base + 8 * (intptr_t)row->cfa_off8;
            if (!pt_readable(&b, cfa - 8)) break;
            ra = ((const uintptr_t *)cfa)[-1];
            if (row->rbp_off8 != 0) {
                uintptr_t at = cfa + 8 * (intptr_t)row->rbp_off8;
                if (!pt_readable(&b, at)) break;
                fp = *(const uintptr_t *)at;
            }
            sp = cfa;
        } else if (!pt_fp_step(&b, &fp, &sp, &ra)) {
            if (fp == 0) return n; /* the outermost frame cleared rbp */
            break;
        }
        if (ra < 4096 || sp <= prev_sp) {
            if (ra == 0) return n;
            break;
        }
        frames[n++] = ra;
        pc = ra;
    }
    *flags |= n == max ? PT_SREC_DEPTH : PT_SREC_TRUNCATED;
    return n;
}

#elif defined(__aarch64__)

/* aarch64: frame records {x29, x30} only.  Async-signal-safe. */
unsigned pt_unwind(const void *ucontext, const struct pt_thread *self, uint64_t *frames,
                   unsigned max, unsigned *flags) {
    const ucontext_t *uc = ucontext;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.sp;
    uintptr_t fp = (uintptr_t)uc->uc_mcontext.regs[29];
    unsigned n = 0;
    frames[n++] = pc;
    if (sp < self->stack_lo || sp >= self->stack_hi) {
        *flags |= PT_SREC_OFFSTACK;
        return n;
    }
    struct pt_bounds b = {sp, self->stack_hi};
    /* The leaf may not have stored its link register yet: x30 is its caller. */
    uintptr_t lr = (uintptr_t)uc->uc_mcontext.regs[30];
    if (n < max && lr > 4096 && lr != pc) frames[n++] = lr;
    uintptr_t ra;
    while (n < max && pt_fp_step(&b, &fp, &sp, &ra)) {
        if (ra < 4096) return n;
        if (ra != frames[n - 1]) frames[n++] = ra;
    }
    if (fp != 0) *flags |= PT_SREC_TRUNCATED;
    return n;
}

#else

/* Other architectures: the interrupted pc only.  Async-signal-safe. */
unsigned pt_unwind(const void *ucontext, const struct pt_thread *self, uint64_t *frames,
                   unsigned max, unsigned *flags) {
    (void)ucontext;
    (void)self;
    (void)max;
    frames[0] = 0;
    *flags |= PT_SREC_TRUNCATED;
    return 0;
}

#endif
