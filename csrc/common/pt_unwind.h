/* The one stack unwinder of proftui's C runtimes (csrc/common).
 *
 *   pt_cfi_build   .eh_frame (found through .eh_frame_hdr, or walked whole when
 *                  there is none) -> compact rows for one object
 *                  (outside signal handlers: sampler start/dlopen, attach maps)
 *   pt_unwind_walk the walk: CFI rows where they cover the pc (x86-64),
 *                  frame pointers elsewhere; async-signal-safe
 *
 * The walk reads memory through one seam, struct pt_memory: a window
 * [lo, hi) of the target's address space whose bytes are at `data`.  The
 * sampler passes its own live stack (data == lo: direct reads); proftui-attach
 * passes the copy of the target's stack a sample carries.  Nothing outside
 * the window is ever read, so garbage cuts a stack short but never faults.
 */
#ifndef PT_UNWIND_H
#define PT_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "arch/pt_arch.h"
#include "pt_common.h"

/* ---- CFI rows (pt_cfi.c) ---------------------------------------------------- */

/* 8 bytes a row: a big C++ program has hundreds of thousands of them. */
struct pt_cfi_row {
    uint32_t pc;      /* first address this row applies to, minus the table's lo */
    int16_t cfa_off8; /* CFA = (cfa_reg) + 8 * cfa_off8 */
    int8_t fp_off8;   /* caller's frame pointer saved at CFA + 8 * fp_off8; 0: unchanged */
    uint8_t cfa_reg;  /* PT_CFA_SP, PT_CFA_FP or PT_CFA_NONE (no rule), | PT_ROW_OUTERMOST */
};
_Static_assert(sizeof(struct pt_cfi_row) == 8, "CFI rows are 8 bytes");
enum { PT_CFA_NONE = 0, PT_CFA_FP = 1, PT_CFA_SP = 2, PT_CFA_MASK = 0x0f };
enum { PT_ROW_OUTERMOST = 0x80 }; /* return address undefined: the first frame */

/* The rows of one object. */
struct pt_cfi_table {
    uint64_t lo, hi; /* runtime address range covered (hi - lo < 4 GiB) */
    size_t nrows;
    const struct pt_cfi_row *rows; /* sorted by pc; pt_alloc'd */
    uint32_t flags;                /* PT_TABLE_* */
    /* NULL, or for each 2^PT_CFI_BUCKET_SHIFT bytes of the range (and one
     * past the end) the number of rows that start before it: a lookup
     * searches the rows of one bucket, a cache line or two, not the whole
     * table (whose binary search touches a cold line per step in a sampled
     * process).  pt_cfi_bucket_bytes(hi - lo) bytes, pt_alloc'd. */
    const uint32_t *bucket_start;
};
enum { PT_CFI_BUCKET_SHIFT = 9 }; /* 512 bytes of code: about 20 rows in libc */

/* Bytes of the bucket index of a table covering `span` bytes. */
static inline size_t pt_cfi_bucket_bytes(uint64_t span) {
    return (size_t)((span >> PT_CFI_BUCKET_SHIFT) + 2) * sizeof(uint32_t);
}
/* Generated code (pt_jit.c), which its JIT may unmap at any time: the walk
 * never reads the code such a table covers. */
enum { PT_TABLE_GENERATED = 1 };

/* The tables a walk searches, sorted by lo. */
struct pt_cfi_set {
    size_t n;
    const struct pt_cfi_table *tables[];
};

/* Where an object's unwind sections are: `hdr` is .eh_frame_hdr as readable
 * here (the live object, or a read-only mapping of its file), `hdr_addr` its
 * runtime address in the target; [bound_lo, bound_hi) is the readable memory
 * around it (a file mapping's extent; any FDE outside is ignored).  With
 * eh_frame_len != 0, `hdr` and `hdr_addr` are .eh_frame itself, that many
 * bytes, and its FDEs are found by walking it (a `gcc -static` link has
 * .eh_frame but no .eh_frame_hdr, so no search table). */
struct pt_cfi_source {
    const unsigned char *hdr;
    uint64_t hdr_addr;
    const unsigned char *bound_lo, *bound_hi;
    uint64_t eh_frame_len;
};

/* Bytes of the last allocation pt_cfi_build could not make (out of address
 * space: the object gets no rows); 0 when none.  The caller resets it. */
extern PT_HIDDEN uint64_t pt_cfi_failed_bytes;

/* Rows of one object whose executable code spans runtime [lo, hi); NULL when
 * it has no table we can read (or on a non-CFI architecture).  Not
 * async-signal-safe. */
PT_HIDDEN struct pt_cfi_table *pt_cfi_build(const struct pt_cfi_source *src, uint64_t lo,
                                            uint64_t hi);

/* pt_cfi_build's rows written into rows[0, cap) (the caller keeps them as it
 * likes): how many, or -1 when the source has no table we can read or may
 * need more than `cap` rows.  No memory of its own for a source with
 * .eh_frame_hdr.  Not async-signal-safe by contract (mmap only). */
PT_HIDDEN long pt_cfi_build_rows(const struct pt_cfi_source *src, uint64_t lo, uint64_t hi,
                                 struct pt_cfi_row *rows, size_t cap);

/* Give a table back (single-threaded users only: no walk may hold it).
 * Not async-signal-safe. */
PT_HIDDEN void pt_cfi_free(struct pt_cfi_table *table);

/* ---- the walk (pt_unwind.c) ------------------------------------------------- */

/* 1 if the return address `ra` returns into code whose CFI says it has no
 * caller (_start, a thread's clone): a chain ending there is whole.
 * Async-signal-safe. */
PT_HIDDEN int pt_cfi_outermost(const struct pt_cfi_set *set, uintptr_t ra);

/* Bits of *flags, equal to the sampler's PT_SREC_* record flags. */
enum pt_unwind_flags {
    PT_UNWIND_TRUNCATED = 1u << 0, /* stopped early: garbage, no rule, end of the window */
    PT_UNWIND_DEPTH = 1u << 2,     /* `max` frames reached: the outermost are cut */
    PT_UNWIND_CFI = 1u << 8,       /* at least one step used a CFI row */
};

/* Readable target memory: [lo, hi) of its address space, stored at `data`.
 * code_local: the target is this process, so the code of every object a CFI
 * table of the walk's set covers may be read in place (to recognise the
 * signal return trampoline and continue into the interrupted code); 0 for
 * proftui-attach, whose target is another process.
 * probed: NULL, or (a live stack read in place from a signal handler) the
 * end of the part of [lo, hi) known to be readable: each page above it is
 * probed before a word on it is read, as the target may have protected a
 * page of its own stack (PROT_NONE) while the code it runs keeps to
 * registers.  Start it at lo rounded down to 8; bit 0 is set once a page
 * could not be read (nothing above it is then read).  Only a library built with PT_UNWIND_PROBE
 * (the sampler: setup.py) probes; the check costs the heap runtime's
 * unwinder 10% where it is compiled in. */
struct pt_memory {
    uintptr_t lo, hi;
    const unsigned char *data;
    int code_local;
    uintptr_t *probed;
};

/* Probe the pages from *m->probed to the one holding end - 1, raising
 * *m->probed past each readable one; 0 at the first that is not (marked in
 * bit 0, so no later call probes again).  A futex
 * call that compares the page's first word and does nothing either way:
 * EFAULT says it cannot be read (the call is one seccomp filters allow, as
 * threads need it).  Async-signal-safe. */
PT_HIDDEN int pt_probe_pages(const struct pt_memory *m, uintptr_t end);

/* Walk from `regs` (pc, sp, fp[, lr]) into frames[0..max): the pc, then
 * return addresses.  With mem->code_local, a frame in the rt_sigreturn
 * trampoline (x86-64) is followed by the pc the signal interrupted and that
 * code's callers, from the ucontext on the stack.  `set` may be NULL (frame pointers only).  Returns the
 * number of frames; sets PT_UNWIND_* bits in *flags.  Async-signal-safe. */
PT_HIDDEN unsigned pt_unwind_walk(const struct pt_cfi_set *set, const struct pt_memory *mem,
                                  const struct pt_regs *regs, uint64_t *frames, unsigned max,
                                  unsigned *flags);

/* Where a walk stopped: the registers of the outermost frame it reached
 * (for a whole walk, that frame's sp bounds the stack the walk needed), and,
 * when it stopped because the next step needed a word beyond the window's
 * end, that word's address (`want`; 0 otherwise: garbage, no rule, the
 * outermost frame).  A caller whose copy of the stack was too short can read
 * up to want + 8 and walk again. */
struct pt_unwind_stop {
    struct pt_regs regs;
    uintptr_t want;
};

/* pt_unwind_walk that also says where it stopped (`stop` filled).
 * Async-signal-safe. */
PT_HIDDEN unsigned pt_unwind_walk_stop(const struct pt_cfi_set *set, const struct pt_memory *mem,
                                       const struct pt_regs *regs, uint64_t *frames,
                                       unsigned max, unsigned *flags,
                                       struct pt_unwind_stop *stop);

/* A memo of pc -> CFI row for one caller that walks often from a normal
 * context (the heap runtime: one per thread).  The rows it points to must
 * outlive it: only for callers that never free the tables of a set they
 * walked (the LD_PRELOAD runtimes leak old sets on purpose).  A walk with
 * another set than the memo's clears it first.  It also remembers the
 * previous walk: a walk that reaches a frame in the state the previous one
 * did, with every stack word read from there on unchanged, copies the rest
 * (pt_unwind.c says why that is exact). */
#define PT_UNWIND_MEMO_SIZE 1024  /* power of 2 */
#define PT_UNWIND_MEMO_FRAMES 128 /* deeper walks are not remembered */
/* One remembered walk: per frame its pc, sp, fp and the two stack words the
 * step out of it read (address 0: none), and how the walk ended. */
struct pt_unwind_memo_walk {
    unsigned n, end_flags;
    /* The last step that read fp (a CFA based on it, a frame-pointer step), or
     * -1: from any frame after it, fp and the saved fp words cannot change
     * the rest of the walk (in code without frame pointers fp is a
     * callee-saved register whose value changes from call to call). */
    int fp_last;
    uintptr_t hi;
    const struct pt_cfi_set *set;
    uintptr_t pc[PT_UNWIND_MEMO_FRAMES], sp[PT_UNWIND_MEMO_FRAMES], fp[PT_UNWIND_MEMO_FRAMES];
    uintptr_t raddr[PT_UNWIND_MEMO_FRAMES][2], rval[PT_UNWIND_MEMO_FRAMES][2];
};
struct pt_unwind_memo {
    const struct pt_cfi_set *set;
    uint64_t pc[PT_UNWIND_MEMO_SIZE];
    const struct pt_cfi_row *row[PT_UNWIND_MEMO_SIZE]; /* NULL: no row covers the pc */
    struct pt_unwind_memo_walk walks[2];                /* the previous walk, the current one */
    unsigned cur;                                       /* which of walks[] is the previous */
};

/* pt_unwind_walk, looking rows up through `memo` first (may be NULL).  The
 * memo must not be used by two walks at once (one per thread, and not from a
 * signal handler that may interrupt its owner).  Async-signal-safe. */
PT_HIDDEN unsigned pt_unwind_walk_memo(const struct pt_cfi_set *set, const struct pt_memory *mem,
                                       const struct pt_regs *regs, uint64_t *frames,
                                       unsigned max, unsigned *flags,
                                       struct pt_unwind_memo *memo);

#endif /* PT_UNWIND_H */
