/* The stack walk (see pt_unwind.h).
 *
 * For each frame, look the pc up in the CFI rows (pt_cfi.c) to find the
 * canonical frame address, the return address at CFA-8 and where the
 * caller's frame pointer was saved; where no row covers the pc (JIT code,
 * objects without .eh_frame, architectures without CFI support) follow the
 * frame-pointer chain.  Everything here is async-signal-safe: no calls, no
 * locks, no allocation.
 */
#define _GNU_SOURCE /* REG_RIP and friends in arch/pt_arch_x86_64.h */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pt_unwind.h"

/* 1 if the 8 bytes at `addr` lie in the window.  Async-signal-safe. */
static inline int pt_readable(const struct pt_memory *m, uintptr_t addr) {
    return addr >= m->lo && m->hi >= 8 && addr <= m->hi - 8 && (addr & 7) == 0;
}

/* The word at `addr` (pt_readable checked).  Async-signal-safe. */
static inline uintptr_t pt_word(const struct pt_memory *m, uintptr_t addr) {
    uintptr_t v;
    memcpy(&v, m->data + (addr - m->lo), sizeof v); /* compiles to one load */
    return v;
}

/* Follow one frame-pointer link: fp -> (saved fp, return address).
 * 0 when the chain leaves the window.  Async-signal-safe. */
static int pt_fp_step(const struct pt_memory *m, uintptr_t *fp, uintptr_t *sp, uintptr_t *ra) {
    uintptr_t frame = *fp;
    if (frame < *sp || !pt_readable(m, frame) || !pt_readable(m, frame + 8)) return 0;
    *ra = pt_word(m, frame + 8);
    *fp = pt_word(m, frame);
    *sp = frame + 16;
    return 1;
}

#if PT_ARCH_CFI
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
#endif

#if PT_ARCH_CFI
/* pt_cfi_find through `memo` (NULL: no memo).  Async-signal-safe. */
static inline const struct pt_cfi_row *pt_cfi_lookup(const struct pt_cfi_set *set, uintptr_t pc,
                                                     struct pt_unwind_memo *memo) {
    if (memo == NULL) return pt_cfi_find(set, pc);
    if (memo->set != set) {
        memset(memo->pc, 0, sizeof memo->pc);
        memo->set = set;
    }
    size_t i = (pc ^ (pc >> 12)) & (PT_UNWIND_MEMO_SIZE - 1);
    if (memo->pc[i] == pc) return memo->row[i];
    const struct pt_cfi_row *row = pt_cfi_find(set, pc);
    memo->pc[i] = pc;
    memo->row[i] = row;
    return row;
}
#endif

/* The walk; inlined into both entry points so the memo-less one pays nothing.
 * Async-signal-safe. */
static inline __attribute__((always_inline)) unsigned
pt_walk(const struct pt_cfi_set *set, const struct pt_memory *mem, const struct pt_regs *regs,
        uint64_t *frames, unsigned max, unsigned *flags, struct pt_unwind_memo *memo) {
    uintptr_t pc = regs->pc, sp = regs->sp, fp = regs->fp;
    unsigned n = 0;
    if (max == 0) return 0;
    frames[n++] = pc;
#if !PT_ARCH_CFI
    (void)set;
    (void)memo;
    /* A leaf may not have stored its link register yet: lr is its caller. */
    if (regs->lr > 4096 && regs->lr != pc && n < max) frames[n++] = regs->lr;
#endif
    while (n < max) {
        uintptr_t ra = 0, prev_sp = sp;
#if PT_ARCH_CFI
        /* A return address may point just past a noreturn call: look up ra-1. */
        uintptr_t lookup = n == 1 ? pc : pc - 1;
        const struct pt_cfi_row *row = set != NULL ? pt_cfi_lookup(set, lookup, memo) : NULL;
        if (row != NULL && (row->cfa_reg & PT_ROW_OUTERMOST)) return n; /* _start, clone */
        if (row != NULL && (row->cfa_reg & PT_CFA_MASK) != PT_CFA_NONE) {
            uintptr_t base = (row->cfa_reg & PT_CFA_MASK) == PT_CFA_SP ? sp : fp;
            uintptr_t cfa = base + 8 * (intptr_t)row->cfa_off8;
            if (!pt_readable(mem, cfa - 8)) break;
            ra = pt_word(mem, cfa - 8);
            if (row->fp_off8 != 0) {
                uintptr_t at = cfa + 8 * (intptr_t)row->fp_off8;
                if (!pt_readable(mem, at)) break;
                fp = pt_word(mem, at);
            }
            sp = cfa;
            *flags |= PT_UNWIND_CFI;
        } else
#endif
            if (!pt_fp_step(mem, &fp, &sp, &ra)) {
            if (fp == 0) return n; /* the outermost frame cleared its frame pointer */
            break;
        }
        if (ra < 4096 || sp <= prev_sp) {
            if (ra == 0) return n;
            break;
        }
#if !PT_ARCH_CFI
        if (n == 2 && ra == frames[1]) continue; /* lr was already stored: no duplicate */
#endif
        frames[n++] = ra;
        pc = ra;
    }
    *flags |= n == max ? PT_UNWIND_DEPTH : PT_UNWIND_TRUNCATED;
    return n;
}

/* Async-signal-safe. */
unsigned pt_unwind_walk(const struct pt_cfi_set *set, const struct pt_memory *mem,
                        const struct pt_regs *regs, uint64_t *frames, unsigned max,
                        unsigned *flags) {
    return pt_walk(set, mem, regs, frames, max, flags, NULL);
}

/* Async-signal-safe. */
unsigned pt_unwind_walk_memo(const struct pt_cfi_set *set, const struct pt_memory *mem,
                             const struct pt_regs *regs, uint64_t *frames, unsigned max,
                             unsigned *flags, struct pt_unwind_memo *memo) {
    return pt_walk(set, mem, regs, frames, max, flags, memo);
}
