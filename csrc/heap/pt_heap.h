/* proftui_heap internals: the LD_PRELOAD heap profiler (--mode heap).
 *
 * Files, one job each:
 *   proftui_heap.c     constructor (reads PROFTUI_* once), exit, fork, the
 *                      dlsym bootstrap arena and the malloc family's interposers
 *   pt_heap_cxx.c      the C++ operator new/delete interposers
 *   pt_heap_track.c    what an allocation and a free do: the stack (common
 *                      unwinder), its bucket, the pointer table, sampling, peak
 *   pt_heap_file.c     the shared-memory run file and its map log
 * and from csrc/common: pt_maps.c (loaded objects, CFI tables), pt_unwind.c
 * (the walk), pt_cfi.c, pt_runfile.c, pt_mem.c.
 *
 * Re-entrancy: every interposer sets this thread's `busy` flag around the
 * real call and the bookkeeping; an allocation made while it is set (by our
 * own code, by the real allocator, by a signal handler that interrupted us)
 * goes straight to the real allocator, untracked.  So nothing here can
 * recurse or deadlock on its own locks.
 */
#ifndef PT_HEAP_H
#define PT_HEAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "proftui_wire.h"
#include "proftui_wire_heap.h"
#include "pt_common.h"
#include "pt_maps.h"
#include "pt_runfile.h"
#include "pt_unwind.h"

#define PT_HEAP_DEFAULT_BUFFER (64u << 20) /* bytes: pointer table + buckets + frames */
#define PT_HEAP_MAX_BUFFER (64ull << 30)   /* the most: --buffer's limit */
#define PT_HEAP_STRIPES 64                 /* independently locked pointer sub-tables */
#define PT_HEAP_SIZE_BITS 40 /* a pointer entry's size field: blocks up to 1 TiB */

/* Settings read once from the environment by the constructor. */
struct pt_heap_config {
    uint64_t buffer_bytes; /* --buffer: pointer table and run file budget */
    uint64_t sample_bytes; /* --heap-sample: mean bytes between samples; 0: exact */
    int follow_children;   /* a fork child writes its own file (else it stops) */
    int fp_only;           /* PROFTUI_HEAP_UNWIND=fp: no CFI tables */
    char dir[4096];        /* PROFTUI_DIR */
};

/* The current process's run file (zeroed when profiling is off).  The
 * layout's numbers and the counts are kept here: the target may overwrite
 * the file's headers, and nothing is addressed through what they say. */
struct pt_heap_file {
    struct pt_runfile rf;     /* the file; its head maps the headers and the index */
    pt_file_header *hdr;
    pt_heap_header *heap;
    uint32_t *index;          /* bucket hash index (in the head) */
    uint32_t index_mask;      /* index slots - 1 */
    uint32_t bucket_cap;      /* buckets that fit */
    uint64_t frames_cap;      /* frame pool words */
    uint32_t bucket_count;    /* buckets claimed (atomic; may pass bucket_cap) */
    uint64_t frames_used;     /* words claimed (atomic) */
    struct pt_region buckets; /* bucket 0 is the overflow bucket; windows backed whole */
    struct pt_region frames;  /* u64 words; a stack's run is contiguous (overlap) */
    struct pt_maplog maplog;  /* the loaded objects' log (csrc/common/pt_maps.h) */
};

/* Per-thread state, initial-exec TLS (reached without calling anything). */
struct pt_heap_thread {
    int busy;            /* inside an interposer: nested allocations are untracked */
    int stack_known;     /* stack_lo/hi set (pt_heap_stack_init, or /proc/self/maps) */
    uintptr_t stack_lo;  /* [stack_lo, stack_hi): this thread's stack */
    uintptr_t stack_hi;
    uint64_t nallocs;     /* allocation calls of this thread (fast path included) */
    void *last_alloc;     /* this thread's latest tracked block and the value of */
    uint64_t last_count;  /* nallocs then (pt_heap_end_temporary) */
    int64_t until_sample; /* sampled mode: bytes to go before the next sample */
    uint64_t rng;         /* sampled mode: xorshift state (0: not seeded) */
    uint64_t maps_tick;   /* tracked allocations since the last new-objects check */
    uint32_t maps_quiet;  /* allocations before a cut-short walk may check again */
    struct pt_unwind_memo *memo; /* pc -> CFI row, this thread's (pt_alloc'd on first use) */
    int memo_failed;             /* no memory for it: walk without */
};

extern PT_HIDDEN struct pt_heap_config pt_heap_cfg;
extern PT_HIDDEN struct pt_heap_file pt_heap_file;
extern PT_HIDDEN __thread struct pt_heap_thread pt_heap_self
    __attribute__((tls_model("initial-exec")));
/* 1 while this process is profiled (set by the constructor, cleared in an
 * unfollowed fork child).  Read without a lock on every call. */
extern PT_HIDDEN int pt_heap_on;

/* pt_heap_track.c - async-signal-safe (spin locks are only taken with the
 * caller's busy flag set, so a handler never waits on its own thread). */
PT_HIDDEN int pt_heap_track_init(void); /* pointer table; 0 or -1.  Not async-signal-safe. */
PT_HIDDEN void pt_heap_track_fork_child(void); /* forget the parent's blocks */
/* This thread's stack bounds from pthread_getattr_np: the constructor and our
 * thread start only, busy flag set.  Not async-signal-safe. */
PT_HIDDEN void pt_heap_stack_init(struct pt_heap_thread *t);
/* pt_heap_stacks.c.  The allocating stack, innermost first, walked into
 * raw[0..PT_HEAP_RAW_FRAMES): the stack is raw[*first..].  Async-signal-safe. */
#define PT_HEAP_RAW_FRAMES (PT_HEAP_MAX_FRAMES + 8)
PT_HIDDEN unsigned pt_heap_backtrace(struct pt_heap_thread *t, uint64_t *raw, unsigned *first,
                                     unsigned *flags);
/* The bucket of a stack, found or appended; 0 (overflow) when there is no room.
 * Async-signal-safe. */
PT_HIDDEN uint32_t pt_heap_bucket_for(const uint64_t *frames, unsigned n, unsigned flags);
PT_HIDDEN void pt_heap_on_alloc(struct pt_heap_thread *t, void *p, size_t size);
PT_HIDDEN void pt_heap_on_free(struct pt_heap_thread *t, void *p);
/* realloc: take `p` out of the table into *saved (0: it was not tracked); put it back. */
PT_HIDDEN int pt_heap_take(void *p, uint64_t *saved);
PT_HIDDEN void pt_heap_put_back(void *p, uint64_t saved);
PT_HIDDEN void pt_heap_credit_free(struct pt_heap_thread *t, uint64_t saved, int temporary);

/* A tracked block `p` is being freed: 1 when that ends a temporary allocation as
 * heaptrack counts them (accumulatedtracedata.cpp: a free is temporary when the last
 * event was the block's allocation; a realloc is a free then an allocation), i.e. `p`
 * is this thread's latest tracked block and no allocation call came since but the
 * `own` ones of the call freeing it (realloc: 1).  Any tracked free ends the run, as
 * heaptrack forgets its last allocation on every free.  Async-signal-safe. */
static inline int pt_heap_end_temporary(struct pt_heap_thread *t, const void *p, uint64_t own) {
    int temporary = p == t->last_alloc && t->nallocs == t->last_count + own;
    t->last_alloc = NULL;
    return temporary;
}
PT_HIDDEN void pt_heap_count_untracked_free(void);
PT_HIDDEN void pt_heap_peak_snapshot(int force); /* copy live -> peak if live grew */
PT_HIDDEN int64_t pt_heap_draw(struct pt_heap_thread *t, uint64_t mean); /* exponential */

/* Sampled mode: a counting filter of the sampled blocks now in the pointer
 * table.  An address's slot is the top PT_HEAP_FILTER_BITS bits of its
 * spread (one multiply: the free fast path computes it); the slot's counter
 * (pt_heap_track.c) counts the live sampled blocks hashing there, and its bit
 * here is set while that counter is nonzero.  Since the pointer table's
 * stripe is the top 6 bits of the same spread, a slot and its 64-slot word
 * belong to one stripe: counter and bit change only under that stripe's lock
 * (no lost update between an entry and a leave).  A clear bit means "no
 * sampled block lives here", so a free of a block that was never sampled, or
 * whose address held a sampled block since freed, skips the table; unlike a
 * never-cleared bitmap it does not fill up with the hot addresses the
 * allocator hands out again and again.  A set bit only means "look it up"
 * (the table decides), so a block is never taken for sampled by mistake.
 * 8 KiB, static (no pointer to load; it stays in L1); zeroed in a fork child. */
#define PT_HEAP_FILTER_BITS 16
extern PT_HIDDEN uint64_t pt_heap_filter[(1u << PT_HEAP_FILTER_BITS) / 64];

/* Fibonacci hashing of an address (blocks are 16-byte aligned): its top
 * bits pick the stripe and the filter slot.  Async-signal-safe. */
static inline uint64_t pt_heap_spread(const void *p) {
    return ((uint64_t)(uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull;
}

/* The filter slot of a spread.  Async-signal-safe. */
static inline uint32_t pt_heap_slot(uint64_t spread) {
    return (uint32_t)(spread >> (64 - PT_HEAP_FILTER_BITS));
}

/* 0 if no sampled block lives at `p` (the table need not be asked).
 * Async-signal-safe. */
static inline int pt_heap_maybe_sampled(const void *p) {
    uint32_t slot = pt_heap_slot(pt_heap_spread(p));
    return (int)(__atomic_load_n(&pt_heap_filter[slot / 64], __ATOMIC_RELAXED) >> (slot % 64) & 1);
}

/* Sampled mode's fast path: 1 when an allocation of `n` bytes is not sampled
 * (the countdown is still above zero); 0 when it must be tracked (exact
 * mode, or the countdown ran out: a new distance is drawn).  Async-signal-safe. */
static inline int pt_heap_skip(struct pt_heap_thread *t, size_t n);

/* Sampled mode, this thread's countdown reached zero on an allocation of `n`
 * bytes (already subtracted): 1 when the allocation is sampled, 0 when it is
 * not.  A thread that never drew a distance (rng still 0) starts with a
 * countdown of 0, which would sample every thread's first allocation (and
 * weigh it as 1/P): its first distance is drawn here, and only an allocation
 * that reaches it is sampled.  The caller draws the next distance when this
 * returns 1.  Async-signal-safe. */
static inline int pt_heap_due(struct pt_heap_thread *t, size_t n) {
    (void)n;
    if (__builtin_expect(t->rng != 0, 1)) return 1;
    t->until_sample += pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    return t->until_sample <= 0;
}

static inline int pt_heap_skip(struct pt_heap_thread *t, size_t n) {
    if (!pt_heap_cfg.sample_bytes) return 0;
    t->until_sample -= (int64_t)n;
    if (__builtin_expect(t->until_sample > 0, 1)) return 1;
    if (!pt_heap_due(t, n)) return 1;
    t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    return 0;
}

/* pt_heap_file.c - not async-signal-safe unless stated. */
PT_HIDDEN int pt_heap_file_create(void); /* 0, or -1 leaving pt_heap_file zero */
PT_HIDDEN void pt_heap_file_forget(void); /* fork child: unmap the parent's file */
PT_HIDDEN void pt_heap_maps_refresh(int log_all); /* log objects, publish CFI tables */
/* pt_heap_maps_refresh(0) from an allocation: -1, not waiting, when another
 * refresh is under way.  Async-signal-safe but for glibc's loader lock. */
PT_HIDDEN int pt_heap_maps_try_refresh(void);
/* The rest is csrc/common/pt_maps.h: pt_maps_unknown (code of an object loaded
 * since the last refresh in a stack?), pt_maps_fork_child, pt_maps_cfi (the
 * tables the unwinder searches), pt_maps_self_lo/hi (this library's code:
 * frames left out). */

/* ---- shared by the interposers (proftui_heap.c, pt_heap_cxx.c) ---------------- */

#define PT_EXPORT __attribute__((visibility("default")))

/* The real allocator, resolved once (lazily when called before the
 * constructor); `ready` is stored with release after every pointer. */
struct pt_heap_real {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int ready;
};
extern PT_HIDDEN struct pt_heap_real pt_heap_real;

/* 1 while this process is profiled in sampled mode with the real allocator
 * resolved: the one global the sampled fast paths read (set last by the
 * constructor, cleared with pt_heap_on in an unfollowed fork child). */
extern PT_HIDDEN int pt_heap_sampling;

/* The dlsym bootstrap arena (proftui_heap.c): its blocks are never freed. */
#define PT_HEAP_BOOT_ARENA (256u << 10)
extern PT_HIDDEN unsigned char pt_heap_boot_arena[PT_HEAP_BOOT_ARENA];

/* Async-signal-safe. */
static inline int pt_heap_boot_owns(const void *p) {
    return (const unsigned char *)p >= pt_heap_boot_arena &&
           (const unsigned char *)p < pt_heap_boot_arena + PT_HEAP_BOOT_ARENA;
}

/* Sampled mode's fast path, shared by malloc and operator new: for an
 * allocation of `n` bytes by a thread not inside an interposer, count it and
 * move the countdown.  1: not sampled, call the real allocator; 0: sampled
 * (the caller takes its slow path and draws a new distance); -1: not decided
 * here (exact mode, off, inside an interposer).  One global load, and this
 * thread's initial-exec TLS.  Async-signal-safe. */
static inline __attribute__((always_inline)) int pt_heap_fast(struct pt_heap_thread *t, size_t n) {
    if (__builtin_expect(!PT_GET(pt_heap_sampling) || t->busy, 0)) return -1;
    t->nallocs++;
    t->until_sample -= (int64_t)n;
    return __builtin_expect(t->until_sample > 0, 1);
}

#endif /* PT_HEAP_H */
