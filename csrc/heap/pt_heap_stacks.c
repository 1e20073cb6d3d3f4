/* The allocating stack (the common unwinder, from the allocation hook, this
 * library's frames left out) and its bucket in the run file (interned
 * lock-free: appended with fetch_add, the index claimed with CAS).  A
 * thread's stack bounds come from pthread_getattr_np where that is safe, or
 * from /proc/self/maps read with plain system calls.  See pt_heap_track.c for
 * what an allocation does with them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include "pt_heap.h"
#include "pt_runfile.h"

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
__attribute__((noinline)) unsigned pt_heap_backtrace(struct pt_heap_thread *t, uint64_t *raw,
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
    struct pt_memory mem = {regs.sp, hi, (const unsigned char *)regs.sp, 1, NULL};
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
uint32_t pt_heap_bucket_for(const uint64_t *frames, unsigned n, unsigned flags) {
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

