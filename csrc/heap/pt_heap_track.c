/* What an allocation and a free do (see pt_heap.h).
 *
 * Allocation: unwind (the common unwinder, from here, skipping this
 * library's frames), intern the stack as a bucket of the run file (lock-free:
 * buckets are appended with fetch_add, the index is claimed with CAS; a race
 * may make two buckets for one stack, which the reader merges), count it,
 * and remember pointer -> (bucket, size) in the pointer table.
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
 * Everything here is async-signal-safe: no libc calls besides sched_yield,
 * sigaltstack, clock_gettime and, once per thread whose stack bounds nobody
 * looked up, a read of /proc/self/maps with plain system calls.  The bounds
 * come from pthread_getattr_np only outside any tracked allocation
 * (pt_heap_stack_init).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <fcntl.h>
#include <sys/resource.h>
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

/* ---- stacks and buckets ------------------------------------------------------ */

/* The calling thread's stack from pthread_getattr_np.  Only where no lock
 * of glibc's can be held by this thread: the constructor and the start of a
 * thread made by our pthread_create (busy flag set: it allocates).  Never
 * from a tracked allocation: glibc holds the thread's lock while it
 * allocates inside pthread_getattr_np (the main thread's /proc/self/maps
 * read, every thread's cpuset), so a lookup from such an allocation waits
 * on a lock its own thread holds.  Not async-signal-safe. */
void pt_heap_stack_init(struct pt_heap_thread *t) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
    void *addr;
    size_t size;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr != NULL) {
        t->stack_lo = (uintptr_t)addr;
        t->stack_hi = (uintptr_t)addr + size;
        t->stack_known = 1;
    }
    pthread_attr_destroy(&attr);
}

/* A hex digit's value, or -1.  Async-signal-safe. */
static inline int pt_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The stack of a thread whose bounds nobody looked up (not started by our
 * pthread_create: made before we were loaded, or by a raw clone): the
 * mapping of /proc/self/maps that holds `sp`, read with plain system calls
 * (no allocation, no lock: a tracked allocation may be in a signal handler
 * or inside the target's own pthread_getattr_np).  For the main thread the
 * stack may still grow: its bottom is the RLIMIT_STACK below the top, but
 * not past the previous mapping (glibc's rule).  Not cached when `sp` is on
 * an alternate signal stack (the thread's own stack is then unknown).
 * Async-signal-safe. */
static void pt_stack_from_maps(struct pt_heap_thread *t, uintptr_t sp) {
    stack_t ss;
    if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) return;
    t->stack_known = 1; /* one try: without /proc, stacks of this thread stay empty */
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[2048];
    uintptr_t start = 0, end = 0, prev_end = 0;
    int field = 0; /* 0: start, 1: end, 2: the rest of the line */
    for (;;) {
        ssize_t got = syscall(SYS_read, fd, buf, sizeof buf);
        if (got <= 0) break;
        for (ssize_t i = 0; i < got; i++) {
            char c = buf[i];
            if (c == '\n') {
                if (field == 2 && start <= sp && sp < end) {
                    t->stack_lo = start;
                    t->stack_hi = end;
                    if (syscall(SYS_getpid) == syscall(SYS_gettid)) { /* the main thread */
                        struct rlimit rl;
                        uintptr_t lo = prev_end;
                        if (syscall(SYS_getrlimit, RLIMIT_STACK, &rl) == 0 &&
                            rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < end &&
                            end - rl.rlim_cur > lo)
                            lo = end - rl.rlim_cur;
                        if (lo < start) t->stack_lo = lo;
                    }
                    syscall(SYS_close, fd);
                    return;
                }
                if (field == 2) prev_end = end;
                start = end = 0;
                field = 0;
                continue;
            }
            if (field == 2) continue;
            int v = pt_hex(c);
            if (v >= 0) {
                if (field == 0) start = start << 4 | (uintptr_t)v;
                else end = end << 4 | (uintptr_t)v;
            } else {
                field++; /* '-' after the start, ' ' after the end */
            }
        }
    }
    syscall(SYS_close, fd);
}

/* The allocating call stack, innermost first, this library's frames left
 * out: walked into raw[0..PT_HEAP_RAW_FRAMES), the stack is raw[*first..]
 * (no copy).  noinline: the registers read here describe this very frame.
 * Async-signal-safe. */
#define PT_HEAP_RAW_FRAMES (PT_HEAP_MAX_FRAMES + 8)
static __attribute__((noinline)) unsigned pt_backtrace(struct pt_heap_thread *t, uint64_t *raw,
                                                       unsigned *first, unsigned *flags) {
    *first = 0;
    struct pt_regs regs;
#if defined(__x86_64__)
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                     : "=r"(regs.pc), "=r"(regs.sp), "=r"(regs.fp));
    regs.lr = 0;
#else
    regs.fp = (uintptr_t)__builtin_frame_address(0);
    regs.sp = regs.fp;
    regs.pc = (uintptr_t)&pt_backtrace;
    regs.lr = 0;
#endif
    if (!t->stack_known) pt_stack_from_maps(t, regs.sp);
    uintptr_t lo = t->stack_lo, hi = t->stack_hi;
    if (regs.sp < lo || regs.sp >= hi) { /* a signal handler on its alternate stack */
        stack_t ss;
        if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) {
            lo = (uintptr_t)ss.ss_sp;
            hi = lo + ss.ss_size;
        }
        if (regs.sp < lo || regs.sp >= hi) {
            *flags |= PT_HBUCKET_TRUNCATED;
            return 0;
        }
    }
    struct pt_memory mem = {regs.sp, hi, (const unsigned char *)regs.sp, 1};
    const struct pt_cfi_set *set = __atomic_load_n(&pt_maps_cfi, __ATOMIC_ACQUIRE);
    if (t->memo == NULL && !t->memo_failed) { /* once per thread: 16 KiB of rows found */
        t->memo = pt_alloc(sizeof *t->memo);
        t->memo_failed = t->memo == NULL;
    }
    unsigned uflags = 0;
    unsigned n = pt_unwind_walk_memo(set, &mem, &regs, raw, PT_HEAP_RAW_FRAMES, &uflags,
                                     t->memo);
    unsigned skip = 0;
    while (skip < n && raw[skip] >= pt_maps_self_lo && raw[skip] < pt_maps_self_hi) skip++;
    /* Our thread start (proftui_heap.c) sits below a thread's own frames: out too. */
    unsigned keep = skip;
    for (unsigned r = skip; r < n; r++)
        if (raw[r] < pt_maps_self_lo || raw[r] >= pt_maps_self_hi) raw[keep++] = raw[r];
    n = keep;
    unsigned m = n - skip;
    if (m > PT_HEAP_MAX_FRAMES) {
        m = PT_HEAP_MAX_FRAMES;
        *flags |= PT_HBUCKET_DEPTH;
    } else if (uflags & PT_UNWIND_DEPTH) {
        *flags |= PT_HBUCKET_DEPTH;
    } else if (uflags & PT_UNWIND_TRUNCATED) {
        *flags |= PT_HBUCKET_TRUNCATED;
    }
    *first = skip;
    return m;
}

/* Frames [at, at + n) of the pool if they were claimed (so mapped and
 * backed), else NULL: a position read from the file is followed only this
 * far.  Async-signal-safe. */
static inline const uint64_t *pt_frames_at(uint64_t at, unsigned n) {
    uint64_t used = __atomic_load_n(&pt_heap_file.frames_used, __ATOMIC_ACQUIRE);
    if (used > pt_heap_file.frames_cap) used = pt_heap_file.frames_cap;
    if (at > used || n > used - at) return NULL;
    return pt_region_peek(&pt_heap_file.frames, at);
}

/* The bucket of a stack: found in the index, or appended.  0 (the overflow
 * bucket) when there is no room.  Capacities and counts are the runtime's
 * own; an index slot, and a bucket's frames position, are followed only
 * when they point at something claimed.  Async-signal-safe (lock-free; mmap
 * when a window of buckets or frames is first needed). */
static uint32_t pt_bucket_for(const uint64_t *frames, unsigned n, unsigned flags) {
    struct pt_heap_file *f = &pt_heap_file;
    /* Products of independent terms, xor'ed: no multiply chain through the
     * frames (deep stacks), position-dependent through `+ i`; one mix at the
     * end.  Collisions only cost a compare: a hit checks every frame. */
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (unsigned i = 0; i < n; i++) h ^= (frames[i] + i) * 0xc2b2ae3d27d4eb4full;
    h = pt_mix(h) | 1;
    uint32_t mask = f->index_mask, slot = (uint32_t)h & mask;
    for (unsigned probe = 0; probe < 128; probe++, slot = (slot + 1) & mask) {
        uint32_t v = __atomic_load_n(&f->index[slot], __ATOMIC_ACQUIRE);
        if (v != 0) {
            uint32_t claimed = __atomic_load_n(&f->bucket_count, __ATOMIC_ACQUIRE);
            const pt_heap_bucket *b = v - 1 < claimed && v - 1 < f->bucket_cap
                                          ? pt_region_peek(&f->buckets, v - 1) : NULL;
            const uint64_t *bf;
            if (b != NULL && b->hash == h && b->nframes == n &&
                (bf = pt_frames_at(b->frames_index, n)) != NULL &&
                memcmp(bf, frames, n * sizeof *frames) == 0)
                return v - 1;
            continue;
        }
        /* A new bucket: frames first, then the bucket, then the index. */
        uint64_t at = __atomic_fetch_add(&f->frames_used, n, __ATOMIC_RELAXED);
        if (at + n > f->frames_cap) break;
        uint32_t b = __atomic_fetch_add(&f->bucket_count, 1, __ATOMIC_RELAXED);
        if (b >= f->bucket_cap) break;
        /* The bucket's window is backed when mapped; the frame pool as it fills. */
        pt_heap_bucket *nb = pt_region_at(&f->buckets, b);
        if (nb == NULL || pt_region_back(&f->frames, at, at + n) != 0) break;
        pt_publish_max32(&f->heap->bucket_count, b + 1);
        pt_publish_max64(&f->heap->frames_used, at + n);
        memcpy(pt_region_peek(&f->frames, at), frames, n * sizeof *frames);
        nb->hash = h;
        nb->frames_index = (uint32_t)at;
        nb->nframes = (uint16_t)n;
        __atomic_store_n(&nb->bflags, (uint16_t)(flags | PT_HBUCKET_READY), __ATOMIC_RELEASE);
        uint32_t expect = 0;
        /* Lost the slot to another thread: ours still counts, unindexed. */
        __atomic_compare_exchange_n(&f->index[slot], &expect, b + 1, 0,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
        return b;
    }
    __atomic_add_fetch(&f->heap->stack_dropped, 1, __ATOMIC_RELAXED);
    return 0;
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
    unsigned n = pt_backtrace(t, raw, &first, &flags);
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
                n = pt_backtrace(t, raw, &first, &flags);
            } else { /* busy: the next such allocation looks again */
                t->maps_tick = 4096 - 16;
                t->maps_quiet = 0;
            }
        }
    }
    uint32_t b = pt_bucket_for(raw + first, n, flags);
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
