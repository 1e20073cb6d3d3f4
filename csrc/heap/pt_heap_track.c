/* What an allocation and a free do (see pt_heap.h).
 *
 * Allocation: unwind and intern the stack as a bucket of the run file
 * (pt_heap_stacks.c; a race may make two buckets for one stack, which the
 * reader merges), count it, and remember pointer -> (bucket, size) in the
 * pointer table.
 * Free: take the pointer out of the table and credit its bucket.
 *
 * The pointer table lives in process memory (the front end never reads it):
 * PT_HEAP_STRIPES sub-tables, each a linear-probing hash table with
 * backward-shift deletion (no tombstones, so alloc/free churn never fills
 * it) under its own spin lock.  A lock is only taken with the thread's busy
 * flag set, so a signal handler interrupting the holder never waits for it:
 * its allocations pass through untracked.
 *
 * Sampled mode: a per-thread countdown of bytes (pt_heap_skip) drawn from an exponential
 * distribution (mean sample_bytes): an allocation of s bytes is sampled with
 * probability 1 - exp(-s/mean) and then stands for s / (1 - exp(-s/mean))
 * bytes and 1 / (1 - exp(-s/mean)) blocks (counts scaled by
 * PT_HEAP_SAMPLED_SCALE), so every total is unbiased.  Unsampled blocks
 * never touch the table; a counting filter of the sampled addresses in the
 * table (pt_heap.h) lets their frees skip the lookup too.
 *
 * Everything here is async-signal-safe: no libc calls besides sched_yield
 * and clock_gettime.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pt_heap.h"
#include "pt_runfile.h"

/* One pointer: key 0 = empty; meta = bucket << 40 | (requested size + 1), never 0. */
struct pt_entry {
    uint64_t key;
    uint64_t meta;
};

struct pt_stripe {
    int lock;
    uint32_t count;
    uint64_t mask; /* capacity - 1 */
    struct pt_entry *e;
} __attribute__((aligned(64)));

/* The pointer table: stripes grow (double) under their lock while the whole
 * stays within the budget, so a small live set stays in cache.  Made at
 * start, remade in a fork child.  The sampled-address filter (pt_heap.h;
 * kept by pt_put/pt_take in sampled mode only).  pt_table_bytes counts the stripes' memory (atomic). */
static struct pt_stripe pt_stripes[PT_HEAP_STRIPES];
PT_HIDDEN uint64_t pt_heap_filter[(1u << PT_HEAP_FILTER_BITS) / 64];
/* The filter's counters: live sampled blocks per slot, under the slot's
 * stripe lock; 65535 sticks (then the slot is "maybe" for good). */
static uint16_t pt_filter_count[1u << PT_HEAP_FILTER_BITS];
static uint64_t pt_table_bytes, pt_table_budget;
/* 1 while a peak snapshot copies (CAS-claimed; others skip theirs). */
static int pt_peak_busy;

#define PT_SIZE_MASK ((1ull << PT_HEAP_SIZE_BITS) - 1)
#define PT_STRIPE_INITIAL 256 /* entries: one page */

/* Not async-signal-safe (mmap at start or in a fork child). */
int pt_heap_track_init(void) {
    pt_table_budget = pt_heap_cfg.buffer_bytes / 2;
    pt_table_bytes = 0;
    for (int i = 0; i < PT_HEAP_STRIPES; i++) {
        struct pt_entry *e = pt_alloc(PT_STRIPE_INITIAL * sizeof *e);
        if (e == NULL) {
            pt_note_map_failure(PT_NOTE_POINTERS, PT_STRIPE_INITIAL * sizeof *e, errno);
            return -1;
        }
        pt_stripes[i].lock = 0;
        pt_stripes[i].count = 0;
        pt_stripes[i].mask = PT_STRIPE_INITIAL - 1;
        pt_stripes[i].e = e;
        pt_table_bytes += PT_STRIPE_INITIAL * sizeof *e;
    }
    if (pt_heap_file.heap != NULL)
        pt_heap_file.heap->ptr_capacity = pt_table_budget / sizeof(struct pt_entry) * 3 / 4;
    pt_peak_busy = 0;
    return 0;
}

/* Fork child: the parent's blocks are the parent's (their frees here are
 * untracked), and a lock may have been held by a thread that is gone.
 * Not async-signal-safe. */
void pt_heap_track_fork_child(void) {
    for (int i = 0; i < PT_HEAP_STRIPES; i++)
        if (pt_stripes[i].e != NULL)
            pt_free(pt_stripes[i].e, (pt_stripes[i].mask + 1) * sizeof(struct pt_entry));
    memset(pt_heap_filter, 0, sizeof pt_heap_filter);
    memset(pt_filter_count, 0, sizeof pt_filter_count);
    pt_heap_track_init();
}

/* Async-signal-safe (spins; sched_yield after a while). */
static inline void pt_lock(int *l) {
    unsigned spins = 0;
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
            if (++spins > 64) sched_yield(); /* the holder may be preempted (2 cores) */
#if defined(__x86_64__)
            else __builtin_ia32_pause();
#endif
        }
    }
}

static inline void pt_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* The stripe of `key` and its hash.  Async-signal-safe. */
static inline struct pt_stripe *pt_stripe_of(uint64_t key, uint64_t *h) {
    *h = pt_mix(key);
    /* The spread's top bits, as the filter's: a filter word is one stripe's. */
    return &pt_stripes[pt_heap_spread((const void *)(uintptr_t)key) >> (64 - 6)];
}
_Static_assert(PT_HEAP_STRIPES == 64, "pt_stripe_of takes 6 bits");

static inline uint64_t pt_home(const struct pt_stripe *s, uint64_t h) { return h & s->mask; }

/* Double a stripe (its lock held) within the budget; 0, or -1.
 * Async-signal-safe (mmap, munmap). */
static int pt_grow(struct pt_stripe *s) {
    uint64_t cap = s->mask + 1, bytes = 2 * cap * sizeof(struct pt_entry);
    if (__atomic_add_fetch(&pt_table_bytes, bytes, __ATOMIC_RELAXED) > pt_table_budget) {
        __atomic_sub_fetch(&pt_table_bytes, bytes, __ATOMIC_RELAXED);
        return -1;
    }
    struct pt_entry *e = pt_alloc(bytes);
    if (e == NULL) { /* not the budget: the address space (noted) */
        pt_note_map_failure(PT_NOTE_POINTERS, bytes, errno);
        __atomic_sub_fetch(&pt_table_bytes, bytes, __ATOMIC_RELAXED);
        return -1;
    }
    uint64_t mask = 2 * cap - 1;
    for (uint64_t i = 0; i < cap; i++) {
        if (s->e[i].key == 0) continue;
        uint64_t j = pt_mix(s->e[i].key) & mask;
        while (e[j].key != 0) j = (j + 1) & mask;
        e[j] = s->e[i];
    }
    pt_free(s->e, cap * sizeof(struct pt_entry));
    __atomic_sub_fetch(&pt_table_bytes, cap * sizeof(struct pt_entry), __ATOMIC_RELAXED);
    s->e = e;
    s->mask = mask;
    return 0;
}

/* A sampled block `key` entered (+1) or left (-1) the table: its filter
 * counter and bit.  Called under the stripe lock of `key`, which owns the
 * slot's whole filter word.  Async-signal-safe. */
static inline void pt_filter_add(uint64_t key, int delta) {
    if (!pt_heap_cfg.sample_bytes) return;
    uint32_t slot = pt_heap_slot(pt_heap_spread((const void *)(uintptr_t)key));
    uint16_t c = pt_filter_count[slot];
    if (c == UINT16_MAX || (delta < 0 && c == 0)) return;
    pt_filter_count[slot] = (uint16_t)(c + delta);
    if (c == 0) /* 0 -> 1: set before the block can be freed (we return it after) */
        __atomic_fetch_or(&pt_heap_filter[slot / 64], 1ull << (slot % 64), __ATOMIC_RELAXED);
    else if (c == 1 && delta < 0)
        __atomic_fetch_and(&pt_heap_filter[slot / 64], ~(1ull << (slot % 64)), __ATOMIC_RELAXED);
}
_Static_assert(PT_HEAP_FILTER_BITS >= 6 + 6, "a filter word lies within one stripe");

/* Insert (or replace) key -> meta; 0, or -1 when the table may not grow.
 * Returns the replaced meta in *old (0: none).  Async-signal-safe. */
static int pt_put(uint64_t key, uint64_t meta, uint64_t *old) {
    uint64_t h;
    struct pt_stripe *s = pt_stripe_of(key, &h);
    *old = 0;
    pt_lock(&s->lock);
    if ((uint64_t)s->count + 1 > s->mask - s->mask / 4 && pt_grow(s) != 0) { /* 3/4 full */
        /* Full: still replace a stale entry of the same key, if any. */
        for (uint64_t i = pt_home(s, h); s->e[i].key != 0; i = (i + 1) & s->mask)
            if (s->e[i].key == key) {
                *old = s->e[i].meta;
                s->e[i].meta = meta;
                pt_unlock(&s->lock);
                return 0;
            }
        pt_unlock(&s->lock);
        return -1;
    }
    for (uint64_t i = pt_home(s, h);; i = (i + 1) & s->mask) {
        if (s->e[i].key == key) { /* a block freed behind our back (untracked): replace */
            *old = s->e[i].meta;
            s->e[i].meta = meta;
            break;
        }
        if (s->e[i].key == 0) {
            s->e[i].key = key;
            s->e[i].meta = meta;
            s->count++;
            pt_filter_add(key, 1); /* before any free of it can look */
            break;
        }
    }
    pt_unlock(&s->lock);
    return 0;
}

/* Remove key; its meta, or 0 when absent.  Async-signal-safe. */
static uint64_t pt_take(uint64_t key) {
    uint64_t h;
    struct pt_stripe *s = pt_stripe_of(key, &h);
    uint64_t meta = 0;
    pt_lock(&s->lock);
    for (uint64_t i = pt_home(s, h);; i = (i + 1) & s->mask) {
        if (s->e[i].key == 0) break;
        if (s->e[i].key != key) continue;
        meta = s->e[i].meta;
        s->count--;
        pt_filter_add(key, -1);
        /* Backward-shift deletion: pull later entries of the cluster into the hole. */
        uint64_t hole = i, j = i;
        for (;;) {
            j = (j + 1) & s->mask;
            if (s->e[j].key == 0) break;
            uint64_t home = pt_home(s, pt_mix(s->e[j].key));
            /* Movable unless its home lies cyclically in (hole, j]. */
            int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (!stays) {
                s->e[hole] = s->e[j];
                hole = j;
            }
        }
        s->e[hole].key = 0;
        s->e[hole].meta = 0;
        break;
    }
    pt_unlock(&s->lock);
    return meta;
}

/* ---- peak -------------------------------------------------------------------- */

/* Copy each bucket's live counters into its peak column when the whole heap
 * grew 1% past the last copy (force: whenever it is at a new peak, at exit).
 * One thread copies; the others skip.  Async-signal-safe. */
void pt_heap_peak_snapshot(int force) {
    pt_heap_header *heap = pt_heap_file.heap;
    if (heap == NULL) return;
    uint64_t live = __atomic_load_n(&heap->live_bytes, __ATOMIC_RELAXED);
    uint64_t last = __atomic_load_n(&heap->peak_snapshot, __ATOMIC_RELAXED);
    if (force ? live <= last || live < heap->peak_bytes : live <= last + last / 100) return;
    int expect = 0;
    if (!__atomic_compare_exchange_n(&pt_peak_busy, &expect, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return;
    uint32_t n = __atomic_load_n(&pt_heap_file.bucket_count, __ATOMIC_ACQUIRE);
    if (n > pt_heap_file.bucket_cap) n = pt_heap_file.bucket_cap;
    for (uint32_t i = 0; i < n; i++) {
        pt_heap_bucket *b = pt_region_peek(&pt_heap_file.buckets, i);
        if (b == NULL || !(__atomic_load_n(&b->bflags, __ATOMIC_ACQUIRE) & PT_HBUCKET_READY))
            continue;  /* its window not mapped yet (nothing counted there), or being written */
        __atomic_store_n(&b->peak_bytes, __atomic_load_n(&b->live_bytes, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&b->peak_blocks, __atomic_load_n(&b->live_blocks, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    heap->peak_time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    __atomic_store_n(&heap->peak_snapshot, live, __ATOMIC_RELAXED);
    __atomic_store_n(&pt_peak_busy, 0, __ATOMIC_RELEASE);
}

/* Raise the recorded peak to `live` if higher.  Async-signal-safe. */
static inline void pt_raise_peak(uint64_t live) {
    pt_heap_header *heap = pt_heap_file.heap;
    uint64_t peak = __atomic_load_n(&heap->peak_bytes, __ATOMIC_RELAXED);
    while (live > peak && !__atomic_compare_exchange_n(&heap->peak_bytes, &peak, live, 1,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    if (live > peak) pt_heap_peak_snapshot(0);
}

/* ---- sampling ---------------------------------------------------------------- */

/* Exponential draw with mean `mean` from this thread's xorshift.  Async-signal-safe. */
int64_t pt_heap_draw(struct pt_heap_thread *t, uint64_t mean) {
    if (t->rng == 0) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        t->rng = pt_mix((uint64_t)now.tv_nsec ^ ((uint64_t)syscall(SYS_gettid) << 32)) | 1;
    }
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 7;
    t->rng ^= t->rng << 17;
    double u = ((double)(t->rng >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
    double d = -log(u) * (double)mean;
    return d < 1.0 ? 1 : (int64_t)d;
}

/* Weight of a sampled block of `size` bytes: 1 / P(sampled), scaled.  Async-signal-safe. */
static inline uint64_t pt_inverse_p_scaled(uint64_t size) {
    double p = -expm1(-(double)size / (double)pt_heap_cfg.sample_bytes);
    return (uint64_t)((double)PT_HEAP_SAMPLED_SCALE / p + 0.5);
}

/* (bytes, scaled blocks) a tracked block of `size` stands for.  Async-signal-safe. */
static inline void pt_weight(uint64_t size, uint64_t *bytes, uint64_t *blocks) {
    if (!pt_heap_cfg.sample_bytes) {
        *bytes = size;
        *blocks = 1;
        return;
    }
    uint64_t w = pt_inverse_p_scaled(size);
    *blocks = w;
    *bytes = (uint64_t)((double)size * (double)w / PT_HEAP_SAMPLED_SCALE + 0.5);
}

/* ---- allocation and free ----------------------------------------------------- */

/* A block of `size` bytes was allocated at `p` (busy flag set).  Async-signal-safe. */
void pt_heap_on_alloc(struct pt_heap_thread *t, void *p, size_t size) {
    pt_heap_header *heap = pt_heap_file.heap;
    if (heap == NULL ||
        (__atomic_load_n(&pt_heap_file.hdr->control, __ATOMIC_RELAXED) & PT_CONTROL_PAUSED))
        return;
    t->last_alloc = p;
    t->last_count = t->nallocs;
    __atomic_add_fetch(&heap->allocs, 1, __ATOMIC_RELAXED);
    uint64_t raw[PT_HEAP_RAW_FRAMES];
    unsigned flags = 0, first;
    unsigned n = pt_heap_backtrace(t, raw, &first, &flags);
    /* Code of an object loaded since the last refresh (dlopen, or glibc's own
     * loads: NSS, iconv) has no unwind table or map log entry yet.  Look for
     * it in this stack, lock-free, every 4096 allocations and whenever the
     * walk was cut short (what a table-less object does to it; at most once
     * per 64 allocations, as JIT code cuts walks too); then refresh unless
     * another refresh is under way (this may be a signal handler: it must
     * never wait), and walk again with the new tables. */
    if (t->maps_quiet > 0) t->maps_quiet--;
    if (++t->maps_tick >= 4096 || ((flags & PT_HBUCKET_TRUNCATED) && t->maps_quiet == 0)) {
        t->maps_tick = 0;
        t->maps_quiet = 64;
        if (pt_maps_unknown(raw + first, n)) {
            if (pt_heap_maps_try_refresh() == 0) {
                flags = 0;
                n = pt_heap_backtrace(t, raw, &first, &flags);
            } else { /* busy: the next such allocation looks again */
                t->maps_tick = 4096 - 16;
                t->maps_quiet = 0;
            }
        }
    }
    uint32_t b = pt_heap_bucket_for(raw + first, n, flags);
    uint64_t bytes, blocks;
    pt_weight(size, &bytes, &blocks);
    uint64_t sz = (size >= PT_SIZE_MASK ? PT_SIZE_MASK - 1 : size) + 1;
    uint64_t old;
    pt_heap_bucket *bk = pt_region_peek(&pt_heap_file.buckets, b); /* b's window: mapped */
    __atomic_add_fetch(&bk->alloc_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bk->allocs, blocks, __ATOMIC_RELAXED);
    if (pt_put((uint64_t)p, ((uint64_t)b << PT_HEAP_SIZE_BITS) | sz, &old) != 0) {
        __atomic_add_fetch(&heap->ptr_dropped, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&pt_heap_file.hdr->dropped, 1, __ATOMIC_RELAXED);
        return; /* counted as allocated, never as live */
    }
    if (old != 0) pt_heap_credit_free(t, old, 0);
    __atomic_add_fetch(&bk->live_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bk->live_blocks, blocks, __ATOMIC_RELAXED);
    __atomic_add_fetch(&heap->live_blocks, blocks, __ATOMIC_RELAXED);
    pt_raise_peak(__atomic_add_fetch(&heap->live_bytes, bytes, __ATOMIC_RELAXED));
}

/* Credit the free of a block whose table entry was `saved`.  Async-signal-safe. */
void pt_heap_credit_free(struct pt_heap_thread *t, uint64_t saved, int temporary) {
    (void)t;
    pt_heap_header *heap = pt_heap_file.heap;
    uint32_t b = (uint32_t)(saved >> PT_HEAP_SIZE_BITS);
    pt_heap_bucket *bk = heap != NULL && b < pt_heap_file.bucket_cap
                             ? pt_region_peek(&pt_heap_file.buckets, b) : NULL;
    if (bk == NULL) return;
    uint64_t bytes, blocks;
    pt_weight((saved & PT_SIZE_MASK) - 1, &bytes, &blocks);
    __atomic_sub_fetch(&bk->live_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&bk->live_blocks, blocks, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bk->frees, blocks, __ATOMIC_RELAXED);
    if (temporary) __atomic_add_fetch(&bk->temporary, blocks, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&heap->live_blocks, blocks, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&heap->live_bytes, bytes, __ATOMIC_RELAXED);
}

/* A free was counted for a block never tracked.  Async-signal-safe. */
void pt_heap_count_untracked_free(void) {
    if (pt_heap_file.heap != NULL)
        __atomic_add_fetch(&pt_heap_file.heap->untracked_frees, 1, __ATOMIC_RELAXED);
}

/* Take `p` out of the table: 1 with its entry in *saved, or 0.  Async-signal-safe. */
int pt_heap_take(void *p, uint64_t *saved) {
    if (pt_heap_file.heap == NULL || pt_stripes[0].e == NULL) return 0;
    if (pt_heap_cfg.sample_bytes && !pt_heap_maybe_sampled(p)) return 0; /* no lookup */
    *saved = pt_take((uint64_t)p);
    return *saved != 0;
}

/* realloc failed: the block is still there.  Async-signal-safe. */
void pt_heap_put_back(void *p, uint64_t saved) {
    uint64_t old;
    pt_put((uint64_t)p, saved, &old);
}

/* `p` is about to be freed by free or operator delete (busy flag set).
 * Async-signal-safe. */
void pt_heap_on_free(struct pt_heap_thread *t, void *p) {
    uint64_t saved;
    if (pt_heap_take(p, &saved)) {
        if (!pt_heap_cfg.sample_bytes)
            __atomic_add_fetch(&pt_heap_file.heap->frees, 1, __ATOMIC_RELAXED);
        pt_heap_credit_free(t, saved, pt_heap_end_temporary(t, p, 0));
    } else if (!pt_heap_cfg.sample_bytes) {
        pt_heap_count_untracked_free();
    }
}
