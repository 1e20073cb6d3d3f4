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
    return addr >= m->lo && m->hi >= 8 && addr <= m->hi - 8 && (addr & 7) == 0
#if defined(PT_UNWIND_PROBE)
           && (m->probed == NULL || addr + 8 <= *m->probed || pt_probe_pages(m, addr + 8))
#endif
        ;
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
    if (t->bucket_start != NULL) { /* rows[start[b] - 1].pc < bucket b <= off */
        size_t b = (size_t)(off >> PT_CFI_BUCKET_SHIFT), first = t->bucket_start[b];
        a = first > 0 ? first - 1 : 0;
        z = t->bucket_start[b + 1];
    }
    while (a < z) { /* last row with row->pc <= off */
        size_t mid = a + (z - a) / 2;
        if (t->rows[mid].pc <= off) a = mid + 1;
        else z = mid;
    }
    return &t->rows[a - 1];
}
#endif

#if PT_ARCH_CFI && defined(PT_ARCH_SIGRETURN)
/* 1 if `pc` is the start of the rt_sigreturn trampoline.  Only code of an
 * object a table of `set` covers is read (mapped, in this process).
 * Async-signal-safe. */
static int pt_is_sigreturn(const struct pt_cfi_set *set, const struct pt_memory *mem,
                           uintptr_t pc) {
    if (!mem->code_local || set == NULL) return 0;
    size_t lo = 0, hi = set->n;
    while (lo < hi) { /* last table with table->lo <= pc */
        size_t mid = lo + (hi - lo) / 2;
        if (set->tables[mid]->lo <= pc) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return 0;
    const struct pt_cfi_table *t = set->tables[lo - 1];
    if (pc >= t->hi || t->hi - pc < PT_ARCH_SIGRETURN_LEN || (t->flags & PT_TABLE_GENERATED))
        return 0;
    return memcmp((const void *)pc, PT_ARCH_SIGRETURN_CODE, PT_ARCH_SIGRETURN_LEN) == 0;
}
#endif

#if PT_ARCH_CFI
/* 1 if the code before return address `ra` is a call instruction (e8 rel32,
 * or ff /2 through a register or memory operand).  Read only when the code is
 * this process's and a table of `set` covers it (mapped), not generated code.
 * Async-signal-safe. */
static int pt_after_call(const struct pt_cfi_set *set, const struct pt_memory *mem, uintptr_t ra) {
    if (!mem->code_local) return 1; /* another process's code: the CFI cover must do */
    size_t lo = 0, hi = set->n;
    while (lo < hi) { /* last table with table->lo <= ra */
        size_t mid = lo + (hi - lo) / 2;
        if (set->tables[mid]->lo <= ra - 1) lo = mid + 1;
        else hi = mid;
    }
    const struct pt_cfi_table *t = set->tables[lo - 1]; /* pt_cfi_find found one */
    if (ra - t->lo < 7 || (t->flags & PT_TABLE_GENERATED)) return 0; /* may be unmapped */
    const unsigned char *c = (const unsigned char *)ra;
    if (c[-5] == 0xe8) return 1;                                    /* call rel32 */
    for (int len = 2; len <= 7; len++) {                            /* call r/m64 */
        unsigned char modrm = c[1 - len];
        if (c[-len] == 0xff && ((modrm >> 3) & 7) == 2) {
            unsigned mod = modrm >> 6, rm = modrm & 7;
            int want = 2 + (mod == 1) + 4 * (mod == 2) + (mod != 3 && rm == 4) +
                       4 * (mod == 0 && rm == 5);
            if (want == len) return 1;
        }
    }
    return 0;
}

/* 1 if `r` looks like a return address: it lands right after a call in code
 * with CFI.  Async-signal-safe. */
static int pt_believable_ra(const struct pt_cfi_set *set, const struct pt_memory *mem,
                            uintptr_t r) {
    return r >= 4096 && pt_cfi_find(set, r - 1) != NULL && pt_after_call(set, mem, r);
}

/* The step out of a call stub that generated code interposes without saving
 * a frame pointer or writing unwind tables: CPython 3.12/3.13's perf
 * trampoline (`sub $8,%rsp; call *%rcx; add $8,%rsp; ret`), named in
 * /tmp/perf-PID.map.  At its return address the stub's frame is 16 bytes:
 * the return address into its caller at sp+8, rbp untouched (the caller's).
 * Taken only where no CFI row covers the pc and the frame-pointer step
 * failed, and only if the return address found lands right after a call in
 * code with CFI (so the walk goes on by rows, and garbage is not believed).
 * 1 when taken (sp, ra set).  Async-signal-safe. */
static int pt_stub_step(const struct pt_cfi_set *set, const struct pt_memory *mem, uintptr_t *sp,
                        uintptr_t *ra) {
    uintptr_t at = *sp + 8;
    if (set == NULL || !pt_readable(mem, at)) return 0;
    uintptr_t r = pt_word(mem, at);
    if (!pt_believable_ra(set, mem, r)) return 0;
    *ra = r;
    *sp = at + 8;
    return 1;
}
#endif

#if PT_ARCH_CFI
/* The step out of an interrupted pc in code without CFI (JIT code) at a
 * frame-pointer prologue or epilogue, where rbp is still the caller's: a
 * frame-pointer step would take whatever the caller keeps in rbp for a frame
 * record (a garbage caller).  At `push rbp` or `ret` the return address is at
 * sp; at `mov rbp, rsp` right after `push rbp`, at sp+8.  Only this process's
 * code is read (the instruction being executed, and the byte before it when on
 * the same page), and the return address must land after a call in code with
 * CFI; rbp stays the caller's.  1 when taken (sp, ra set).  Async-signal-safe. */
static int pt_entry_step(const struct pt_cfi_set *set, const struct pt_memory *mem, uintptr_t pc,
                         uintptr_t *sp, uintptr_t *ra) {
    if (!mem->code_local || pc < 4096) return 0;
    const unsigned char *c = (const unsigned char *)pc;
    uintptr_t at;
    if (c[0] == 0x55 || c[0] == 0xc3) /* push rbp; ret */
        at = *sp;
    else if (c[0] == 0x48 && c[1] == 0x89 && c[2] == 0xe5 && (pc & 4095) != 0 && c[-1] == 0x55)
        at = *sp + 8; /* mov rbp, rsp after push rbp: a REX.W mov is 3 bytes, all mapped */
    else
        return 0;
    if (!pt_readable(mem, at)) return 0;
    uintptr_t r = pt_word(mem, at);
    if (!pt_believable_ra(set, mem, r)) return 0;
    *ra = r;
    *sp = at + 8;
    return 1;
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

#if PT_ARCH_CFI
/* Walk memo: the previous walk's frames, the state (pc, sp, fp) at each and
 * the stack words each step out of it read.  A walk is a pure function of
 * (pc, sp, fp), the words it reads and the window's end, so when a new walk
 * reaches a frame in the same state as the previous one did and every word
 * the previous walk read from there on still holds the same value, the rest
 * of the walk is the same: copy it instead of stepping (the outer frames of
 * a program that allocates in a loop).  Async-signal-safe. */

/* 1 if every word read by steps k.. of `w` that the rest of the walk depends
 * on still holds its value: where no step from k on reads fp, only the return
 * addresses (the other word such steps read is a saved fp). */
static int pt_memo_still(const struct pt_unwind_memo_walk *w, unsigned k,
                         const struct pt_memory *mem) {
    int words = w->fp_last >= (int)k ? 2 : 1;
    for (unsigned j = k; j < w->n; j++)
        for (int r = 0; r < words; r++) {
            uintptr_t a = w->raddr[j][r];
            if (a != 0 && (!pt_readable(mem, a) || pt_word(mem, a) != w->rval[j][r])) return 0;
        }
    return 1;
}

/* Frames 0..i are walked; frame i is the previous walk's frame k: copy the
 * rest (and its record, so the memo stays whole).  Returns the frame count. */
static unsigned pt_memo_reuse(struct pt_unwind_memo *memo, const struct pt_unwind_memo_walk *prev,
                              unsigned k, struct pt_unwind_memo_walk *next, unsigned i,
                              uint64_t *frames, unsigned max, unsigned *flags) {
    unsigned rest = prev->n - 1 - k, n = i + 1;
    for (unsigned j = 0; j < rest && n < max; j++) frames[n++] = prev->pc[k + 1 + j];
    if (n == max && rest > max - (i + 1)) {
        *flags |= PT_UNWIND_DEPTH;
        next->n = 0; /* cut short: no whole walk to remember */
    } else {
        *flags |= prev->end_flags;
        unsigned copy = prev->n - k; /* entries k.. of prev become i.. of next */
        if (i + copy <= PT_UNWIND_MEMO_FRAMES) {
            memcpy(&next->pc[i], &prev->pc[k], copy * sizeof prev->pc[0]);
            memcpy(&next->sp[i], &prev->sp[k], copy * sizeof prev->sp[0]);
            memcpy(&next->fp[i], &prev->fp[k], copy * sizeof prev->fp[0]);
            memcpy(&next->raddr[i], &prev->raddr[k], copy * sizeof prev->raddr[0]);
            memcpy(&next->rval[i], &prev->rval[k], copy * sizeof prev->rval[0]);
            if (prev->fp_last >= (int)k) next->fp_last = prev->fp_last - (int)k + (int)i;
            next->n = i + copy;
            next->end_flags = prev->end_flags;
        } else {
            next->n = 0;
        }
    }
    memo->cur ^= 1;
    return n;
}
#endif

/* The walk; inlined into both entry points so the memo-less one pays nothing.
 * Async-signal-safe. */
static inline __attribute__((always_inline)) unsigned
pt_walk(const struct pt_cfi_set *set, const struct pt_memory *mem, const struct pt_regs *regs,
        uint64_t *frames, unsigned max, unsigned *flags, struct pt_unwind_memo *memo,
        struct pt_unwind_stop *stop) {
    uintptr_t pc = regs->pc, sp = regs->sp, fp = regs->fp;
    unsigned n = 0, end = 0;
    if (stop != NULL) *stop = (struct pt_unwind_stop){*regs, 0};
    if (max == 0) return 0;
    /* The address a step wanted beyond the window's end (stop->want). */
#define PT_WANT(addr)                                                                              \
    do {                                                                                           \
        if (stop != NULL && (addr) >= mem->hi - (mem->hi >= 8 ? 8 : 0)) stop->want = (addr);      \
    } while (0)
    frames[n++] = pc;
#if !PT_ARCH_CFI
    (void)set;
    (void)memo;
    /* A leaf may not have stored its link register yet: lr is its caller. */
    if (regs->lr > 4096 && regs->lr != pc && n < max) frames[n++] = regs->lr;
#else
    struct pt_unwind_memo_walk *prev = NULL, *next = NULL;
    unsigned k = 0;
    int exact_pc = 0; /* pc was interrupted, not a return address */
    if (memo != NULL) {
        prev = &memo->walks[memo->cur];
        next = &memo->walks[memo->cur ^ 1];
        if (prev->n == 0 || prev->hi != mem->hi || prev->set != set) prev = NULL;
        next->n = 0;
        next->fp_last = -1;
        next->hi = mem->hi;
        next->set = set;
    }
    /* Remember the word the current step read (memo walks only). */
#define PT_MEMO_READ(slot, addr, val)                                                              \
    do {                                                                                           \
        if (next != NULL && n - 1 < PT_UNWIND_MEMO_FRAMES) {                                       \
            next->raddr[n - 1][slot] = (addr);                                                     \
            next->rval[n - 1][slot] = (val);                                                       \
        }                                                                                          \
    } while (0)
    /* The current step reads fp (memo walks only). */
#define PT_MEMO_FP_USED()                                                                          \
    do {                                                                                           \
        if (next != NULL) next->fp_last = (int)n - 1;                                              \
    } while (0)
#endif
    while (n < max) {
        uintptr_t ra = 0, prev_sp = sp;
        if (stop != NULL) stop->regs = (struct pt_regs){pc, sp, fp, 0};
#if PT_ARCH_CFI
        if (next != NULL && n - 1 < PT_UNWIND_MEMO_FRAMES) {
            unsigned i = n - 1; /* the frame this step leaves */
            next->pc[i] = pc;
            next->sp[i] = sp;
            next->fp[i] = fp;
            next->raddr[i][0] = next->raddr[i][1] = 0;
            if (prev != NULL && i > 0) {
                while (k < prev->n && prev->sp[k] < sp) k++;
                if (k > 0 && k < prev->n && prev->sp[k] == sp && prev->pc[k] == pc &&
                    (prev->fp[k] == fp || prev->fp_last < (int)k) &&
                    pt_memo_still(prev, k, mem))
                    return pt_memo_reuse(memo, prev, k, next, i, frames, max, flags);
            }
        }
        /* A return address may point just past a noreturn call: look up ra-1;
         * an interrupted pc (frame 0, or after a signal frame) is exact. */
        int at_ra = n > 1 && !exact_pc;
        uintptr_t lookup = at_ra ? pc - 1 : pc;
        exact_pc = 0;
        const struct pt_cfi_row *row = set != NULL ? pt_cfi_lookup(set, lookup, memo) : NULL;
        if (row != NULL && (row->cfa_reg & PT_ROW_OUTERMOST)) goto done; /* _start, clone */
#if defined(PT_ARCH_SIGRETURN)
        /* A signal handler returned into the trampoline: sp is the kernel's
         * ucontext, holding the interrupted code's registers.  Its pc is no
         * return address (looked up as is), and a memo walk neither reuses
         * nor records from here on (this step reads three words, not two).
         * The trampoline has no row we can use (glibc's CFI is an
         * expression; musl has none), so only such frames are checked. */
        if ((row == NULL || (row->cfa_reg & PT_CFA_MASK) == PT_CFA_NONE) &&
            pt_is_sigreturn(set, mem, pc)) {
            uintptr_t at_pc = sp + PT_ARCH_UC_PC, at_sp = sp + PT_ARCH_UC_SP,
                      at_fp = sp + PT_ARCH_UC_FP;
            if (!pt_readable(mem, at_pc) || !pt_readable(mem, at_sp) || !pt_readable(mem, at_fp))
                break;
            uintptr_t new_sp = pt_word(mem, at_sp);
            pc = pt_word(mem, at_pc);
            fp = pt_word(mem, at_fp);
            if (pc < 4096 || new_sp <= sp) break;
            sp = new_sp;
            exact_pc = 1;
            prev = next = NULL;
            frames[n++] = pc;
            continue;
        }
#endif
        if (row != NULL && (row->cfa_reg & PT_CFA_MASK) != PT_CFA_NONE) {
            uintptr_t base = (row->cfa_reg & PT_CFA_MASK) == PT_CFA_SP ? sp : fp;
            if ((row->cfa_reg & PT_CFA_MASK) != PT_CFA_SP) PT_MEMO_FP_USED();
            uintptr_t cfa = base + 8 * (intptr_t)row->cfa_off8;
            if (!pt_readable(mem, cfa - 8)) {
                PT_WANT(cfa - 8);
                break;
            }
            ra = pt_word(mem, cfa - 8);
            PT_MEMO_READ(0, cfa - 8, ra);
            if (row->fp_off8 != 0) {
                uintptr_t at = cfa + 8 * (intptr_t)row->fp_off8;
                if (!pt_readable(mem, at)) {
                    PT_WANT(at);
                    break;
                }
                fp = pt_word(mem, at);
                PT_MEMO_READ(1, at, fp);
            }
            sp = cfa;
            *flags |= PT_UNWIND_CFI;
            end |= PT_UNWIND_CFI;
        } else
#endif
        {
#if PT_ARCH_CFI
            if (row == NULL && !at_ra && set != NULL && pt_entry_step(set, mem, pc, &sp, &ra)) {
                PT_MEMO_READ(0, sp - 8, ra);
                goto stepped;
            }
#endif
            uintptr_t frame = fp;
#if PT_ARCH_CFI
            PT_MEMO_FP_USED();
#endif
            if (!pt_fp_step(mem, &fp, &sp, &ra)) {
#if PT_ARCH_CFI
                /* Generated code (no table covers it) entered by a call:
                 * perhaps a stub that kept no frame pointer. */
                if (row == NULL && at_ra && pt_stub_step(set, mem, &sp, &ra)) {
                    PT_MEMO_READ(0, sp - 8, ra);
                    goto stepped;
                }
#endif
                if (fp == 0) goto done; /* the outermost frame cleared its frame pointer */
                if (fp >= sp && (fp & 7) == 0) PT_WANT(fp + 8);
                break;
            }
#if PT_ARCH_CFI
            PT_MEMO_READ(0, frame, fp);
            PT_MEMO_READ(1, frame + 8, ra);
#else
            (void)frame;
#endif
        }
#if PT_ARCH_CFI
    stepped:
#endif
        if (ra < 4096 || sp <= prev_sp) {
            if (ra == 0) goto done;
            break;
        }
#if !PT_ARCH_CFI
        if (n == 2 && ra == frames[1]) continue; /* lr was already stored: no duplicate */
#endif
        frames[n++] = ra;
        pc = ra;
    }
    end |= n == max ? PT_UNWIND_DEPTH : PT_UNWIND_TRUNCATED;
    *flags |= end & ~(unsigned)PT_UNWIND_CFI;
done:
#undef PT_WANT
#if PT_ARCH_CFI
#undef PT_MEMO_READ
#undef PT_MEMO_FP_USED
    if (next != NULL) {
        /* Only whole walks are worth remembering: not one cut by `max`. */
        next->n = (end & PT_UNWIND_DEPTH) || n > PT_UNWIND_MEMO_FRAMES ? 0 : n;
        next->end_flags = end;
        memo->cur ^= 1;
    }
#endif
    return n;
}

/* Async-signal-safe. */
int pt_cfi_outermost(const struct pt_cfi_set *set, uintptr_t ra) {
#if PT_ARCH_CFI
    const struct pt_cfi_row *row = set != NULL && ra > 0 ? pt_cfi_find(set, ra - 1) : NULL;
    return row != NULL && (row->cfa_reg & PT_ROW_OUTERMOST);
#else
    (void)set;
    (void)ra;
    return 0;
#endif
}

/* Async-signal-safe. */
unsigned pt_unwind_walk(const struct pt_cfi_set *set, const struct pt_memory *mem,
                        const struct pt_regs *regs, uint64_t *frames, unsigned max,
                        unsigned *flags) {
    return pt_walk(set, mem, regs, frames, max, flags, NULL, NULL);
}

/* Async-signal-safe. */
unsigned pt_unwind_walk_stop(const struct pt_cfi_set *set, const struct pt_memory *mem,
                             const struct pt_regs *regs, uint64_t *frames, unsigned max,
                             unsigned *flags, struct pt_unwind_stop *stop) {
    return pt_walk(set, mem, regs, frames, max, flags, NULL, stop);
}

/* Async-signal-safe. */
unsigned pt_unwind_walk_memo(const struct pt_cfi_set *set, const struct pt_memory *mem,
                             const struct pt_regs *regs, uint64_t *frames, unsigned max,
                             unsigned *flags, struct pt_unwind_memo *memo) {
    return pt_walk(set, mem, regs, frames, max, flags, memo, NULL);
}
