/* proftui_heap: the LD_PRELOAD heap profiler (--mode heap).
 *
 * The constructor reads PROFTUI_* once, creates this process's run file in
 * $PROFTUI_DIR (pt_heap_file.c), logs the loaded objects and builds their
 * unwind tables.  The interposers below then see every allocation and free:
 *   malloc calloc realloc reallocarray free posix_memalign aligned_alloc
 *   memalign valloc pvalloc here, and C++ operator new/delete in all their
 *   forms in pt_heap_cxx.c; pthread_create, so that a new thread knows its
 *   stack bounds before its first allocation (pt_heap_track.c).
 * Sizes are the sizes asked for (as heaptrack and gperftools count them);
 * no header is added to blocks, so malloc_usable_size and every other
 * allocator entry point see the real allocator's blocks unchanged.
 *
 * Bootstrap: the real functions are found with dlsym(RTLD_NEXT), and dlsym
 * itself allocates; what is asked for while it runs comes from a static
 * arena that is never given back (frees of its blocks are ignored).
 *
 * Environment (read once, in the constructor):
 *   PROFTUI_DIR              per-run directory (required; nothing happens without it)
 *   PROFTUI_BUFFER_BYTES     pointer table + run file budget (default 64 MiB)
 *   PROFTUI_HEAP_SAMPLE      mean bytes between samples (default 0: every allocation)
 *   PROFTUI_FOLLOW_CHILDREN=1  fork children write their own files
 *   PROFTUI_FRONTEND_PID     without follow, only this pid's direct child profiles
 *   PROFTUI_HEAP_UNWIND=fp   frame pointers only (tests, benchmarks)
 * No function here is async-signal-safe beyond what the real allocator is:
 * each adds only async-signal-safe bookkeeping (pt_heap_track.c) to it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pt_env.h"
#include "pt_exec.h"
#include "pt_heap.h"
#include "pt_note.h"

PT_HIDDEN struct pt_heap_config pt_heap_cfg;
PT_HIDDEN __thread struct pt_heap_thread pt_heap_self __attribute__((tls_model("initial-exec")));
PT_HIDDEN int pt_heap_on;
PT_HIDDEN int pt_heap_sampling;

PT_HIDDEN struct pt_heap_real pt_heap_real;
/* Threads inside dlsym right now: their (and everyone's) allocations are
 * served by the arena meanwhile. */
static int pt_resolving;

/* ---- bootstrap arena ----------------------------------------------------------- */

/* Static, bump-allocated, never reused; each block has its size in the 8
 * bytes before it.  Only dlsym's few small allocations land here. */
PT_HIDDEN unsigned char pt_heap_boot_arena[PT_HEAP_BOOT_ARENA] __attribute__((aligned(64)));
static size_t pt_boot_used;

/* Async-signal-safe (one atomic add). */
static void *pt_boot_alloc(size_t size, size_t align) {
    if (align < 16) align = 16;
    if (size > sizeof pt_heap_boot_arena || align > 4096) return NULL;
    size_t need = size + align + 16;
    size_t off = __atomic_fetch_add(&pt_boot_used, need, __ATOMIC_RELAXED);
    if (off + need > sizeof pt_heap_boot_arena) return NULL;
    uintptr_t p = ((uintptr_t)pt_heap_boot_arena + off + 16 + align - 1) & ~(uintptr_t)(align - 1);
    memcpy((void *)(p - 8), &size, sizeof size);
    if (pt_heap_file.heap != NULL)
        __atomic_add_fetch(&pt_heap_file.heap->boot_bytes, size, __ATOMIC_RELAXED);
    return (void *)p; /* zeroed: the arena is never reused */
}

static size_t pt_boot_size(const void *p) {
    size_t size;
    memcpy(&size, (const unsigned char *)p - 8, sizeof size);
    return size;
}

/* Find the real allocator.  Not async-signal-safe (dlsym). */
static void pt_resolve(void) {
    if (__atomic_load_n(&pt_heap_real.ready, __ATOMIC_ACQUIRE)) return;
    __atomic_add_fetch(&pt_resolving, 1, __ATOMIC_ACQ_REL);
    pt_heap_real.malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    pt_heap_real.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    pt_heap_real.calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    pt_heap_real.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    pt_heap_real.posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    pt_heap_real.aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    pt_heap_real.memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    pt_heap_real.valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
    pt_heap_real.pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
    pt_heap_real.pthread_create =
        (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
            RTLD_NEXT, "pthread_create");
    __atomic_store_n(&pt_heap_real.ready, pt_heap_real.malloc != NULL && pt_heap_real.free != NULL,
                     __ATOMIC_RELEASE);
    __atomic_sub_fetch(&pt_resolving, 1, __ATOMIC_ACQ_REL);
}

/* 1 when the call must be served by the arena (resolution under way or failed). */
static inline int pt_need_boot(void) {
    if (__builtin_expect(__atomic_load_n(&pt_heap_real.ready, __ATOMIC_ACQUIRE), 1)) return 0;
    if (__atomic_load_n(&pt_resolving, __ATOMIC_ACQUIRE)) return 1;
    pt_resolve();
    return !pt_heap_real.ready;
}

/* ---- lifecycle ------------------------------------------------------------------ */

/* Fork child (pthread_atfork): its own file, or no profiling at all; the
 * parent's blocks are forgotten (their frees here count as untracked). */
static void pt_atfork_child(void) {
    if (!PT_GET(pt_heap_on)) return;
    struct pt_heap_thread *t = &pt_heap_self;
    int was_busy = t->busy;
    t->busy = 1;
    pt_note_fork_child();
    pt_maps_fork_child();
    pt_heap_file_forget();
    if (pt_heap_cfg.follow_children && pt_heap_file_create() == 0) {
        pt_heap_track_fork_child();
        pt_heap_maps_refresh(1);
    } else {
        PT_SET(pt_heap_sampling, 0);
        PT_SET(pt_heap_on, 0);
    }
    t->busy = was_busy;
}

/* The exec wrappers' hooks (csrc/common/pt_exec.c): nothing to stop here.
 * Async-signal-safe. */
void pt_exec_before(void) {}
void pt_exec_failed(void) {}

__attribute__((constructor)) static void pt_heap_init(void) {
    pt_resolve();
    const char *dir = getenv("PROFTUI_DIR");
    if (dir == NULL || *dir == '\0' || strlen(dir) >= sizeof pt_heap_cfg.dir) return;
    strcpy(pt_heap_cfg.dir, dir);
    pt_note_init(pt_heap_cfg.dir, "heap"); /* what cannot be mapped is said there */
    pt_heap_cfg.follow_children = pt_env_is("PROFTUI_FOLLOW_CHILDREN", "1");
    /* Without follow only the front end's own child (the target, also after it
     * exec's) profiles; others that inherited LD_PRELOAD anyway stay idle. */
    long frontend = pt_env_long("PROFTUI_FRONTEND_PID", 0);
    int stray = !pt_heap_cfg.follow_children && frontend > 0 && getppid() != (pid_t)frontend;
    long buffer = pt_env_long("PROFTUI_BUFFER_BYTES", PT_HEAP_DEFAULT_BUFFER);
    pt_heap_cfg.buffer_bytes = buffer >= (1 << 20) ? (uint64_t)buffer : PT_HEAP_DEFAULT_BUFFER;
    /* proftui holds the budget to --buffer's range; this is the backstop. */
    if (pt_heap_cfg.buffer_bytes > PT_HEAP_MAX_BUFFER) pt_heap_cfg.buffer_bytes = PT_HEAP_MAX_BUFFER;
    long sample = pt_env_long("PROFTUI_HEAP_SAMPLE", 0);
    pt_heap_cfg.sample_bytes = sample > 0 ? (uint64_t)sample : 0;
    pt_heap_cfg.fp_only = pt_env_is("PROFTUI_HEAP_UNWIND", "fp");
    /* Settings read: without follow, nothing the target runs inherits the heap profiler. */
    if (!pt_heap_cfg.follow_children) pt_env_scrub("proftui_heap");
    if (stray) return;
    struct pt_heap_thread *t = &pt_heap_self;
    t->busy = 1;
    /* Before tracking starts: the main thread's first tracked allocation may
     * be made inside the target's own pthread_getattr_np, under the lock a
     * lookup would wait on (pt_heap_track.c). */
    pt_heap_stack_init(t);
    if (pt_heap_file_create() == 0) {
        if (pt_heap_track_init() == 0) {
            pt_heap_maps_refresh(0);
            pthread_atfork(NULL, NULL, pt_atfork_child);
            __atomic_store_n(&pt_heap_on, 1, __ATOMIC_RELEASE);
            if (pt_heap_cfg.sample_bytes && pt_heap_real.ready) PT_SET(pt_heap_sampling, 1);
        } else {
            pt_heap_file_forget();
        }
    }
    t->busy = 0;
}

/* Runs after the program's and the other libraries' destructors (a preloaded
 * library is finalized last): what is live now is what was never freed.
 * Later frees (if any) are still counted. */
__attribute__((destructor)) static void pt_heap_fini(void) {
    if (!PT_GET(pt_heap_on) || pt_heap_file.hdr == NULL) return;
    pt_heap_peak_snapshot(1);
    __atomic_store_n(&pt_heap_file.hdr->state, (uint32_t)PT_STATE_EXITED, __ATOMIC_RELEASE);
}

/* ---- the malloc family ------------------------------------------------------------ */

/* The fast path's test, for an allocation of `n` bytes: 1 to go straight to
 * the real allocator (this thread is inside an interposer, profiling is off,
 * or sampled mode did not pick it), 0 for the slow path (bootstrap, or
 * track it).  Counts the allocation for the "temporary" test.  Inlined so
 * each interposer's fast path is a few loads and a tail call. */
static inline __attribute__((always_inline)) int pt_pass(struct pt_heap_thread *t, size_t n) {
    if (__builtin_expect(!__atomic_load_n(&pt_heap_real.ready, __ATOMIC_ACQUIRE), 0)) return 0;
    if (t->busy || !PT_GET(pt_heap_on)) return 1;
    t->nallocs++;
    return pt_heap_skip(t, n);
}

/* Run `call` (which sets `p`) as the real allocation with the busy flag set,
 * then track `p` of `size` bytes (the slow path; the decision to track was
 * made by pt_pass). */
#define PT_TRACKED_ALLOC(call, size)                                                              \
    do {                                                                                          \
        struct pt_heap_thread *t_ = &pt_heap_self;                                               \
        if (t_->busy || !PT_GET(pt_heap_on)) {                                                    \
            call;                                                                                 \
            break;                                                                                \
        }                                                                                         \
        t_->busy = 1;                                                                             \
        call;                                                                                     \
        if (p != NULL) {                                                                          \
            int e_ = errno;                                                                       \
            pt_heap_on_alloc(t_, p, (size));                                                      \
            errno = e_;                                                                           \
        }                                                                                         \
        t_->busy = 0;                                                                             \
    } while (0)

static __attribute__((noinline)) void *pt_malloc_slow(size_t n) {
    if (pt_need_boot()) return pt_boot_alloc(n, 16);
    void *p;
    PT_TRACKED_ALLOC(p = pt_heap_real.malloc(n), n);
    return p;
}

/* Sampled mode, this thread's countdown ran out in a fast path that already
 * counted the allocation: a new distance, and track it.  Async-signal-safe
 * as the real allocator is. */
static __attribute__((noinline)) void *pt_malloc_sampled(struct pt_heap_thread *t, size_t n) {
    if (!pt_heap_due(t, n)) return pt_heap_real.malloc(n);
    t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    void *p;
    PT_TRACKED_ALLOC(p = pt_heap_real.malloc(n), n);
    return p;
}

/* Everything but sampled mode's unsampled allocation: exact mode, a thread inside
 * an interposer, profiling off.  Not inlined, so malloc's fast path saves no
 * registers.  Async-signal-safe as the real allocator is. */
static __attribute__((noinline)) void *pt_malloc_other(size_t n) {
    struct pt_heap_thread *t = &pt_heap_self;
    if (pt_pass(t, n)) return pt_heap_real.malloc(n);
    return pt_malloc_slow(n);
}

PT_EXPORT void *malloc(size_t n) {
    struct pt_heap_thread *t = &pt_heap_self;
    int fast = pt_heap_fast(t, n);
    if (__builtin_expect(fast > 0, 1)) return pt_heap_real.malloc(n);
    if (fast == 0) return pt_malloc_sampled(t, n);
    return pt_malloc_other(n);
}

static __attribute__((noinline)) void *pt_calloc_slow(size_t n, size_t m, size_t size) {
    if (pt_need_boot()) return pt_boot_alloc(size, 16); /* the arena is zeroed */
    void *p;
    PT_TRACKED_ALLOC(p = pt_heap_real.calloc(n, m), size);
    return p;
}

PT_EXPORT void *calloc(size_t n, size_t m) {
    size_t size;
    if (__builtin_mul_overflow(n, m, &size)) size = SIZE_MAX;
    struct pt_heap_thread *t = &pt_heap_self;
    int fast = pt_heap_fast(t, size);
    if (__builtin_expect(fast > 0, 1)) return pt_heap_real.calloc(n, m);
    if (fast == 0) {
        if (!pt_heap_due(t, size)) return pt_heap_real.calloc(n, m);
        t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    } else if (pt_pass(t, size)) {
        return pt_heap_real.calloc(n, m);
    }
    return pt_calloc_slow(n, m, size);
}

static __attribute__((noinline)) void pt_free_slow(void *p) {
    if (p == NULL) return;
    if (pt_heap_boot_owns(p)) return; /* bootstrap arena: never given back */
    if (pt_need_boot()) return;  /* no real free: leak rather than crash */
    struct pt_heap_thread *t = &pt_heap_self;
    if (t->busy || !PT_GET(pt_heap_on)) {
        pt_heap_real.free(p);
        return;
    }
    t->busy = 1;
    int e = errno;
    pt_heap_on_free(t, p);
    errno = e;
    pt_heap_real.free(p);
    t->busy = 0;
}

PT_EXPORT void free(void *p) {
    /* Sampled mode: no sampled block lives at p (and it is no arena block). */
    if (__builtin_expect(
            PT_GET(pt_heap_sampling) && !pt_heap_maybe_sampled(p) && !pt_heap_boot_owns(p), 1)) {
        pt_heap_real.free(p);
        return;
    }
    struct pt_heap_thread *t = &pt_heap_self;
    /* Fast: nothing to credit (inside an interposer, off, or never sampled). */
    if (__builtin_expect(__atomic_load_n(&pt_heap_real.ready, __ATOMIC_ACQUIRE) && !pt_heap_boot_owns(p) &&
                             (t->busy || !PT_GET(pt_heap_on) ||
                              (pt_heap_cfg.sample_bytes && !pt_heap_maybe_sampled(p))),
                         1)) {
        pt_heap_real.free(p);
        return;
    }
    pt_free_slow(p);
}

/* realloc's slow path; track_new: the new block is to be tracked. */
static __attribute__((noinline)) void *pt_realloc_slow(void *p, size_t n, int track_new) {
    if (p != NULL && pt_heap_boot_owns(p)) { /* a bootstrap block grows into a real one */
        void *q = malloc(n);
        size_t old = pt_boot_size(p);
        if (q != NULL) memcpy(q, p, old < n ? old : n);
        return q;
    }
    if (pt_need_boot()) {
        void *q = pt_boot_alloc(n, 16);
        if (q != NULL && p != NULL) memcpy(q, p, n); /* only arena blocks exist before */
        return q;
    }
    struct pt_heap_thread *t = &pt_heap_self;
    if (t->busy || !PT_GET(pt_heap_on)) return pt_heap_real.realloc(p, n);
    t->busy = 1;
    uint64_t saved = 0;
    /* Out of the table before the real call: once it returns, another thread
     * may be handed the same address. */
    int had = p != NULL && pt_heap_take(p, &saved);
    void *q = pt_heap_real.realloc(p, n);
    int e = errno;
    if (q == NULL && p != NULL && n != 0) { /* failed: the old block is intact */
        if (had) pt_heap_put_back(p, saved);
    } else {
        if (had) { /* the old block's free: temporary when nothing but this call came since */
            if (!pt_heap_cfg.sample_bytes)
                __atomic_add_fetch(&pt_heap_file.heap->frees, 1, __ATOMIC_RELAXED);
            pt_heap_credit_free(t, saved, pt_heap_end_temporary(t, p, 1));
        } else if (p != NULL && !pt_heap_cfg.sample_bytes) {
            pt_heap_count_untracked_free();
        }
        if (q != NULL && track_new) pt_heap_on_alloc(t, q, n);
    }
    errno = e;
    t->busy = 0;
    return q;
}

/* Sampled mode after the countdown moved: this allocation is sampled (`pass`
 * 0: a new distance), or a sampled block may live at p.  Not inlined, so
 * realloc's fast path saves no registers.  Async-signal-safe as the real
 * allocator is. */
static __attribute__((noinline)) void *pt_realloc_counted(void *p, size_t n, int pass) {
    if (!pass) {
        struct pt_heap_thread *t = &pt_heap_self;
        if (pt_heap_due(t, n))
            t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
        else
            pass = 1;
    }
    if (pass && (p == NULL || (!pt_heap_maybe_sampled(p) && !pt_heap_boot_owns(p))))
        return pt_heap_real.realloc(p, n);
    return pt_realloc_slow(p, n, !pass);
}

/* Exact mode, a thread inside an interposer, profiling off.  Async-signal-safe as
 * the real allocator is. */
static __attribute__((noinline)) void *pt_realloc_other(void *p, size_t n) {
    struct pt_heap_thread *t = &pt_heap_self;
    int pass = pt_pass(t, n);
    /* Fast: the new block is not tracked and the old one has nothing to credit. */
    if (pass && (p == NULL || (!pt_heap_boot_owns(p) &&
                               (t->busy || !PT_GET(pt_heap_on) ||
                                (pt_heap_cfg.sample_bytes && !pt_heap_maybe_sampled(p))))))
        return pt_heap_real.realloc(p, n);
    return pt_realloc_slow(p, n, !pass);
}

PT_EXPORT void *realloc(void *p, size_t n) {
    struct pt_heap_thread *t = &pt_heap_self;
    int pass = pt_heap_fast(t, n); /* decided once: the countdown moves here */
    if (__builtin_expect(pass > 0, 1)) {
        /* Sampled mode, not sampled: fast unless a sampled block may live at p. */
        if (p == NULL || (!pt_heap_maybe_sampled(p) && !pt_heap_boot_owns(p)))
            return pt_heap_real.realloc(p, n);
        return pt_realloc_counted(p, n, 1);
    }
    if (pass == 0) return pt_realloc_counted(p, n, 0);
    return pt_realloc_other(p, n);
}

PT_EXPORT void *reallocarray(void *p, size_t n, size_t m) {
    size_t size;
    if (__builtin_mul_overflow(n, m, &size)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, size);
}

PT_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    if (pt_pass(&pt_heap_self, n)) return pt_heap_real.posix_memalign(out, align, n);
    if (pt_need_boot()) {
        *out = pt_boot_alloc(n, align);
        return *out != NULL ? 0 : ENOMEM;
    }
    void *p = NULL;
    int rc = 0;
    PT_TRACKED_ALLOC((rc = pt_heap_real.posix_memalign(out, align, n), p = rc == 0 ? *out : NULL), n);
    return rc;
}

/* aligned_alloc and memalign, which differ only in the real function: `*real`,
 * read where it is called (pt_need_boot may resolve it meanwhile).  Inlined into
 * both.  Async-signal-safe as the real allocator is. */
static inline __attribute__((always_inline)) void *pt_aligned(void *(*const *real)(size_t, size_t),
                                                              size_t align, size_t n) {
    if (pt_pass(&pt_heap_self, n)) return (*real)(align, n);
    if (pt_need_boot()) return pt_boot_alloc(n, align);
    void *p;
    PT_TRACKED_ALLOC(p = (*real)(align, n), n);
    return p;
}

PT_EXPORT void *aligned_alloc(size_t align, size_t n) {
    return pt_aligned(&pt_heap_real.aligned_alloc, align, n);
}

PT_EXPORT void *memalign(size_t align, size_t n) {
    return pt_aligned(&pt_heap_real.memalign, align, n);
}

PT_EXPORT void *valloc(size_t n) {
    if (pt_pass(&pt_heap_self, n)) return pt_heap_real.valloc(n);
    if (pt_need_boot()) return pt_boot_alloc(n, 4096);
    void *p;
    PT_TRACKED_ALLOC(p = pt_heap_real.valloc(n), n);
    return p;
}

PT_EXPORT void *pvalloc(size_t n) {
    if (pt_pass(&pt_heap_self, n)) return pt_heap_real.pvalloc(n);
    if (pt_need_boot()) return pt_boot_alloc((n + 4095) & ~(size_t)4095, 4096);
    void *p;
    PT_TRACKED_ALLOC(p = pt_heap_real.pvalloc(n), n);
    return p;
}

/* ---- threads ------------------------------------------------------------------------ */

/* What our thread start needs (from the real malloc: not a tracked block). */
struct pt_heap_start {
    void *(*fn)(void *);
    void *arg;
};

/* A new thread: its stack bounds before any of its code runs (no lock of
 * glibc's can be held by it yet), then its start routine.  Our frame is
 * left out of stacks (pt_heap_track.c).  Not async-signal-safe. */
static void *pt_heap_thread_start(void *p) {
    struct pt_heap_start start = *(struct pt_heap_start *)p;
    pt_heap_real.free(p);
    struct pt_heap_thread *t = &pt_heap_self;
    int was_busy = t->busy;
    t->busy = 1;
    pt_heap_stack_init(t);
    t->busy = was_busy;
    return start.fn(start.arg);
}

/* Wraps the start routine so the thread's stack bounds are known before its
 * first tracked allocation (else they come from /proc/self/maps, slower).
 * Not async-signal-safe (pthread_create is not). */
PT_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg) {
    if (pt_need_boot() || pt_heap_real.pthread_create == NULL) {
        int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
            (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
                RTLD_NEXT, "pthread_create");
        return real != NULL ? real(thread, attr, fn, arg) : EAGAIN;
    }
    struct pt_heap_start *start = PT_GET(pt_heap_on) ? pt_heap_real.malloc(sizeof *start) : NULL;
    if (start == NULL) return pt_heap_real.pthread_create(thread, attr, fn, arg);
    start->fn = fn;
    start->arg = arg;
    int rc = pt_heap_real.pthread_create(thread, attr, pt_heap_thread_start, start);
    if (rc != 0) pt_heap_real.free(start);
    return rc;
}
