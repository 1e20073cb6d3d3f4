/* proftui_heap: the LD_PRELOAD heap profiler (--mode heap).
 *
 * The constructor reads PROFTUI_* once, creates this process's run file in
 * $PROFTUI_DIR (pt_heap_file.c), logs the loaded objects and builds their
 * unwind tables.  The interposers below then see every allocation and free:
 *   malloc calloc realloc reallocarray free posix_memalign aligned_alloc
 *   memalign valloc pvalloc, and C++ operator new/delete in all their forms
 *   (plain, array, nothrow, aligned, sized): the real operator is called with
 *   the busy flag set, so the malloc it calls is not counted twice and the
 *   recorded stack starts at the program's `new`, not inside libstdc++.
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

#include "pt_heap.h"

PT_HIDDEN struct pt_heap_config pt_heap_cfg;
PT_HIDDEN __thread struct pt_heap_thread pt_heap_self __attribute__((tls_model("initial-exec")));
PT_HIDDEN volatile int pt_heap_on;
/* 1 while this process is profiled in sampled mode with the real allocator
 * resolved: the one global the sampled fast paths read (set last by the
 * constructor, cleared with pt_heap_on in an unfollowed fork child). */
static volatile int pt_sampling;

/* The real allocator, resolved once (lazily when called before the
 * constructor); `ready` is stored with release after every pointer. */
static struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    int ready;
} pt_real;
/* Threads inside dlsym right now: their (and everyone's) allocations are
 * served by the arena meanwhile. */
static int pt_resolving;

/* ---- bootstrap arena ----------------------------------------------------------- */

/* Static, bump-allocated, never reused; each block has its size in the 8
 * bytes before it.  Only dlsym's few small allocations land here. */
static unsigned char pt_boot_arena[256u << 10] __attribute__((aligned(64)));
static size_t pt_boot_used;

/* Async-signal-safe (one atomic add). */
static void *pt_boot_alloc(size_t size, size_t align) {
    if (align < 16) align = 16;
    if (size > sizeof pt_boot_arena || align > 4096) return NULL;
    size_t need = size + align + 16;
    size_t off = __atomic_fetch_add(&pt_boot_used, need, __ATOMIC_RELAXED);
    if (off + need > sizeof pt_boot_arena) return NULL;
    uintptr_t p = ((uintptr_t)pt_boot_arena + off + 16 + align - 1) & ~(uintptr_t)(align - 1);
    memcpy((void *)(p - 8), &size, sizeof size);
    if (pt_heap_file.heap != NULL)
        __atomic_add_fetch(&pt_heap_file.heap->boot_bytes, size, __ATOMIC_RELAXED);
    return (void *)p; /* zeroed: the arena is never reused */
}

static inline int pt_boot_owns(const void *p) {
    return (const unsigned char *)p >= pt_boot_arena &&
           (const unsigned char *)p < pt_boot_arena + sizeof pt_boot_arena;
}

static size_t pt_boot_size(const void *p) {
    size_t size;
    memcpy(&size, (const unsigned char *)p - 8, sizeof size);
    return size;
}

/* Find the real allocator.  Not async-signal-safe (dlsym). */
static void pt_resolve(void) {
    if (__atomic_load_n(&pt_real.ready, __ATOMIC_ACQUIRE)) return;
    __atomic_add_fetch(&pt_resolving, 1, __ATOMIC_ACQ_REL);
    pt_real.malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    pt_real.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    pt_real.calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    pt_real.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    pt_real.posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    pt_real.aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    pt_real.memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    pt_real.valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
    pt_real.pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
    __atomic_store_n(&pt_real.ready, pt_real.malloc != NULL && pt_real.free != NULL,
                     __ATOMIC_RELEASE);
    __atomic_sub_fetch(&pt_resolving, 1, __ATOMIC_ACQ_REL);
}

/* 1 when the call must be served by the arena (resolution under way or failed). */
static inline int pt_need_boot(void) {
    if (__builtin_expect(__atomic_load_n(&pt_real.ready, __ATOMIC_ACQUIRE), 1)) return 0;
    if (__atomic_load_n(&pt_resolving, __ATOMIC_ACQUIRE)) return 1;
    pt_resolve();
    return !pt_real.ready;
}

/* ---- lifecycle ------------------------------------------------------------------ */

static long pt_env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return fallback;
    char *end;
    long n = strtol(v, &end, 10);
    return *end == '\0' ? n : fallback;
}

static int pt_env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v != NULL && strcmp(v, value) == 0;
}

/* Fork child (pthread_atfork): its own file, or no profiling at all; the
 * parent's blocks are forgotten (their frees here count as untracked). */
static void pt_atfork_child(void) {
    if (!pt_heap_on) return;
    struct pt_heap_thread *t = &pt_heap_self;
    int was_busy = t->busy;
    t->busy = 1;
    pt_maps_fork_child();
    pt_heap_file_forget();
    if (pt_heap_cfg.follow_children && pt_heap_file_create() == 0) {
        pt_heap_track_fork_child();
        pt_heap_maps_refresh(1);
    } else {
        pt_sampling = 0;
        pt_heap_on = 0;
    }
    t->busy = was_busy;
}

__attribute__((constructor)) static void pt_heap_init(void) {
    pt_resolve();
    const char *dir = getenv("PROFTUI_DIR");
    if (dir == NULL || *dir == '\0' || strlen(dir) >= sizeof pt_heap_cfg.dir) return;
    strcpy(pt_heap_cfg.dir, dir);
    pt_heap_cfg.follow_children = pt_env_is("PROFTUI_FOLLOW_CHILDREN", "1");
    /* Without follow, an exec'd child still inherits LD_PRELOAD: only the front
     * end's own child (the target, also after it exec's) profiles. */
    long frontend = pt_env_long("PROFTUI_FRONTEND_PID", 0);
    if (!pt_heap_cfg.follow_children && frontend > 0 && getppid() != (pid_t)frontend) return;
    long buffer = pt_env_long("PROFTUI_BUFFER_BYTES", PT_HEAP_DEFAULT_BUFFER);
    pt_heap_cfg.buffer_bytes = buffer >= (1 << 20) ? (uint64_t)buffer : PT_HEAP_DEFAULT_BUFFER;
    long sample = pt_env_long("PROFTUI_HEAP_SAMPLE", 0);
    pt_heap_cfg.sample_bytes = sample > 0 ? (uint64_t)sample : 0;
    pt_heap_cfg.fp_only = pt_env_is("PROFTUI_HEAP_UNWIND", "fp");
    struct pt_heap_thread *t = &pt_heap_self;
    t->busy = 1;
    if (pt_heap_file_create() == 0) {
        if (pt_heap_track_init() == 0) {
            pt_heap_maps_refresh(0);
            pthread_atfork(NULL, NULL, pt_atfork_child);
            __atomic_store_n(&pt_heap_on, 1, __ATOMIC_RELEASE);
            if (pt_heap_cfg.sample_bytes && pt_real.ready) pt_sampling = 1;
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
    if (!pt_heap_on || pt_heap_file.hdr == NULL) return;
    pt_heap_peak_snapshot(1);
    __atomic_store_n(&pt_heap_file.hdr->state, (uint32_t)PT_STATE_EXITED, __ATOMIC_RELEASE);
}

/* ---- the malloc family ------------------------------------------------------------ */

#define PT_EXPORT __attribute__((visibility("default")))

/* The fast path's test, for an allocation of `n` bytes: 1 to go straight to
 * the real allocator (this thread is inside an interposer, profiling is off,
 * or sampled mode did not pick it), 0 for the slow path (bootstrap, or
 * track it).  Counts the allocation for the "temporary" test.  Inlined so
 * each interposer's fast path is a few loads and a tail call. */
static inline __attribute__((always_inline)) int pt_pass(struct pt_heap_thread *t, size_t n) {
    if (__builtin_expect(!__atomic_load_n(&pt_real.ready, __ATOMIC_ACQUIRE), 0)) return 0;
    if (t->busy || !pt_heap_on) return 1;
    t->nallocs++;
    return pt_heap_skip(t, n);
}

/* Run `call` (which sets `p`) as the real allocation with the busy flag set,
 * then track `p` of `size` bytes (the slow path; the decision to track was
 * made by pt_pass). */
#define PT_TRACKED_ALLOC(call, size)                                                              \
    do {                                                                                          \
        struct pt_heap_thread *t_ = &pt_heap_self;                                               \
        if (t_->busy || !pt_heap_on) {                                                            \
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
    PT_TRACKED_ALLOC(p = pt_real.malloc(n), n);
    return p;
}

/* Sampled mode, this thread's countdown ran out in a fast path that already
 * counted the allocation: a new distance, and track it.  Async-signal-safe
 * as the real allocator is. */
static __attribute__((noinline)) void *pt_malloc_sampled(struct pt_heap_thread *t, size_t n) {
    t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    void *p;
    PT_TRACKED_ALLOC(p = pt_real.malloc(n), n);
    return p;
}

/* Sampled mode's fast path, shared by malloc and operator new: for an
 * allocation of `n` bytes by a thread not inside an interposer, count it and
 * move the countdown.  1: not sampled, call the real allocator; 0: sampled
 * (the caller takes its slow path); -1: not decided here (exact mode, off,
 * inside an interposer).  Two loads and two stores when not sampled.
 * Async-signal-safe. */
static inline __attribute__((always_inline)) int pt_fast(struct pt_heap_thread *t, size_t n) {
    if (__builtin_expect(!pt_sampling || t->busy, 0)) return -1;
    t->nallocs++;
    t->until_sample -= (int64_t)n;
    return __builtin_expect(t->until_sample > 0, 1);
}

PT_EXPORT void *malloc(size_t n) {
    struct pt_heap_thread *t = &pt_heap_self;
    int fast = pt_fast(t, n);
    if (__builtin_expect(fast > 0, 1)) return pt_real.malloc(n);
    if (fast == 0) return pt_malloc_sampled(t, n);
    if (pt_pass(t, n)) return pt_real.malloc(n);
    return pt_malloc_slow(n);
}

static __attribute__((noinline)) void *pt_calloc_slow(size_t n, size_t m, size_t size) {
    if (pt_need_boot()) return pt_boot_alloc(size, 16); /* the arena is zeroed */
    void *p;
    PT_TRACKED_ALLOC(p = pt_real.calloc(n, m), size);
    return p;
}

PT_EXPORT void *calloc(size_t n, size_t m) {
    size_t size;
    if (__builtin_mul_overflow(n, m, &size)) size = SIZE_MAX;
    struct pt_heap_thread *t = &pt_heap_self;
    int fast = pt_fast(t, size);
    if (__builtin_expect(fast > 0, 1)) return pt_real.calloc(n, m);
    if (fast == 0) t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    else if (pt_pass(t, size)) return pt_real.calloc(n, m);
    return pt_calloc_slow(n, m, size);
}

static __attribute__((noinline)) void pt_free_slow(void *p) {
    if (p == NULL) return;
    if (pt_boot_owns(p)) return; /* bootstrap arena: never given back */
    if (pt_need_boot()) return;  /* no real free: leak rather than crash */
    struct pt_heap_thread *t = &pt_heap_self;
    if (t->busy || !pt_heap_on) {
        pt_real.free(p);
        return;
    }
    t->busy = 1;
    int e = errno;
    pt_heap_on_free(t, p, 1);
    errno = e;
    pt_real.free(p);
    t->busy = 0;
}

PT_EXPORT void free(void *p) {
    /* Sampled mode: no sampled block lives at p (and it is no arena block). */
    if (__builtin_expect(pt_sampling && !pt_heap_maybe_sampled(p) && !pt_boot_owns(p), 1)) {
        pt_real.free(p);
        return;
    }
    struct pt_heap_thread *t = &pt_heap_self;
    /* Fast: nothing to credit (inside an interposer, off, or never sampled). */
    if (__builtin_expect(__atomic_load_n(&pt_real.ready, __ATOMIC_ACQUIRE) && !pt_boot_owns(p) &&
                             (t->busy || !pt_heap_on ||
                              (pt_heap_cfg.sample_bytes && !pt_heap_maybe_sampled(p))),
                         1)) {
        pt_real.free(p);
        return;
    }
    pt_free_slow(p);
}

/* realloc's slow path; track_new: the new block is to be tracked. */
static __attribute__((noinline)) void *pt_realloc_slow(void *p, size_t n, int track_new) {
    if (p != NULL && pt_boot_owns(p)) { /* a bootstrap block grows into a real one */
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
    if (t->busy || !pt_heap_on) return pt_real.realloc(p, n);
    t->busy = 1;
    uint64_t saved = 0;
    /* Out of the table before the real call: once it returns, another thread
     * may be handed the same address. */
    int had = p != NULL && pt_heap_take(p, &saved);
    void *q = pt_real.realloc(p, n);
    int e = errno;
    if (q == NULL && p != NULL && n != 0) { /* failed: the old block is intact */
        if (had) pt_heap_put_back(p, saved);
    } else {
        if (had) {
            if (!pt_heap_cfg.sample_bytes)
                __atomic_add_fetch(&pt_heap_file.heap->frees, 1, __ATOMIC_RELAXED);
            pt_heap_credit_free(t, saved, 0);
        } else if (p != NULL && !pt_heap_cfg.sample_bytes) {
            pt_heap_count_untracked_free();
        }
        if (p != NULL && p == t->last_alloc) t->last_alloc = NULL;
        if (q != NULL && track_new) pt_heap_on_alloc(t, q, n);
    }
    errno = e;
    t->busy = 0;
    return q;
}

PT_EXPORT void *realloc(void *p, size_t n) {
    struct pt_heap_thread *t = &pt_heap_self;
    int pass = pt_fast(t, n); /* decided once: the countdown moves here */
    if (__builtin_expect(pass > 0, 1)) {
        /* Sampled mode, not sampled: fast unless a sampled block may live at p. */
        if (p == NULL || (!pt_heap_maybe_sampled(p) && !pt_boot_owns(p)))
            return pt_real.realloc(p, n);
    } else if (pass == 0) { /* sampled: a new distance */
        t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    } else {
        pass = pt_pass(t, n);
        /* Fast: the new block is not tracked and the old one has nothing to credit. */
        if (pass && (p == NULL || (!pt_boot_owns(p) &&
                                   (t->busy || !pt_heap_on ||
                                    (pt_heap_cfg.sample_bytes && !pt_heap_maybe_sampled(p))))))
            return pt_real.realloc(p, n);
    }
    return pt_realloc_slow(p, n, !pass);
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
    if (pt_pass(&pt_heap_self, n)) return pt_real.posix_memalign(out, align, n);
    if (pt_need_boot()) {
        *out = pt_boot_alloc(n, align);
        return *out != NULL ? 0 : ENOMEM;
    }
    void *p = NULL;
    int rc = 0;
    PT_TRACKED_ALLOC((rc = pt_real.posix_memalign(out, align, n), p = rc == 0 ? *out : NULL), n);
    return rc;
}

PT_EXPORT void *aligned_alloc(size_t align, size_t n) {
    if (pt_pass(&pt_heap_self, n)) return pt_real.aligned_alloc(align, n);
    if (pt_need_boot()) return pt_boot_alloc(n, align);
    void *p;
    PT_TRACKED_ALLOC(p = pt_real.aligned_alloc(align, n), n);
    return p;
}

PT_EXPORT void *memalign(size_t align, size_t n) {
    if (pt_pass(&pt_heap_self, n)) return pt_real.memalign(align, n);
    if (pt_need_boot()) return pt_boot_alloc(n, align);
    void *p;
    PT_TRACKED_ALLOC(p = pt_real.memalign(align, n), n);
    return p;
}

PT_EXPORT void *valloc(size_t n) {
    if (pt_pass(&pt_heap_self, n)) return pt_real.valloc(n);
    if (pt_need_boot()) return pt_boot_alloc(n, 4096);
    void *p;
    PT_TRACKED_ALLOC(p = pt_real.valloc(n), n);
    return p;
}

PT_EXPORT void *pvalloc(size_t n) {
    if (pt_pass(&pt_heap_self, n)) return pt_real.pvalloc(n);
    if (pt_need_boot()) return pt_boot_alloc((n + 4095) & ~(size_t)4095, 4096);
    void *p;
    PT_TRACKED_ALLOC(p = pt_real.pvalloc(n), n);
    return p;
}

/* ---- C++ operator new / delete -------------------------------------------------- */

/* Clears the busy flag when a real operator new throws (bad_alloc) through
 * us: this file is built with -fexceptions so the cleanup runs. */
static void pt_leave(int **busy) { **busy = 0; }

static void *pt_sym(const char *name) {
    struct pt_heap_thread *t = &pt_heap_self;
    int was = t->busy;
    t->busy = 1; /* dlsym may allocate */
    void *f = dlsym(RTLD_NEXT, name);
    t->busy = was;
    return f;
}

/* No real operator (no libstdc++ behind us): plain malloc; abort on failure
 * as an unhandled bad_alloc would. */
static void *pt_new_fallback(size_t n, size_t align) {
    void *p = NULL;
    if (align > 16) {
        if (posix_memalign(&p, align, n) != 0) p = NULL;
    } else {
        p = malloc(n ? n : 1);
    }
    if (p == NULL) abort();
    return p;
}

/* Sampled mode, an allocation not sampled: what the default operator new does
 * when memory is there (malloc, or an aligned allocation), without the extra
 * call through libstdc++.  NULL: let the real operator handle the failure. */
static inline void *pt_new_direct(size_t n, size_t align) {
    if (align <= 16) return pt_real.malloc(n ? n : 1);
    void *q = NULL;
    return pt_real.posix_memalign(&q, align, n ? n : 1) == 0 ? q : NULL;
}

/* The forms of operator new and delete, by their parameters after the size
 * (new) or the pointer (delete): nt = const std::nothrow_t&, al =
 * std::align_val_t, n = the size (sized delete). */
enum { PT_NEW_N, PT_NEW_N_NT, PT_NEW_N_AL, PT_NEW_N_AL_NT };
enum { PT_DEL_P, PT_DEL_P_N, PT_DEL_P_NT, PT_DEL_P_AL, PT_DEL_P_N_AL, PT_DEL_P_AL_NT };

/* One real operator (new or delete), resolved on first use. */
struct pt_real_op {
    void *fn;
    const char *name;
};

/* Call the real operator new of form `kind`.  Its exceptions propagate (this
 * file is built with -fexceptions). */
static void *pt_call_new(void *fn, int kind, size_t n, size_t al, const void *nt) {
    switch (kind) {
    case PT_NEW_N: return ((void *(*)(size_t))fn)(n);
    case PT_NEW_N_NT: return ((void *(*)(size_t, const void *))fn)(n, nt);
    case PT_NEW_N_AL: return ((void *(*)(size_t, size_t))fn)(n, al);
    default: return ((void *(*)(size_t, size_t, const void *))fn)(n, al, nt);
    }
}

static void pt_call_delete(void *fn, int kind, void *p, size_t n, size_t al, const void *nt) {
    switch (kind) {
    case PT_DEL_P: ((void (*)(void *))fn)(p); break;
    case PT_DEL_P_N: ((void (*)(void *, size_t))fn)(p, n); break;
    case PT_DEL_P_NT: ((void (*)(void *, const void *))fn)(p, nt); break;
    case PT_DEL_P_AL: ((void (*)(void *, size_t))fn)(p, al); break;
    case PT_DEL_P_N_AL: ((void (*)(void *, size_t, size_t))fn)(p, n, al); break;
    default: ((void (*)(void *, size_t, const void *))fn)(p, al, nt); break;
    }
}

/* operator new's slow path.  state: -1 nothing counted yet (decide here), 1
 * counted and not sampled (the direct allocation failed: the real operator
 * runs the new_handler or throws), 0 counted and sampled (track it).  The
 * real operator is called with the busy flag set, so the malloc under it is
 * not counted again. */
static __attribute__((noinline)) void *pt_new_slow(struct pt_real_op *op, int kind, size_t n,
                                                   size_t al, const void *nt, int state) {
    void *real = __atomic_load_n(&op->fn, __ATOMIC_ACQUIRE);
    if (real == NULL) {
        real = pt_sym(op->name);
        __atomic_store_n(&op->fn, real, __ATOMIC_RELEASE);
    }
    if (real == NULL) return pt_new_fallback(n, kind >= PT_NEW_N_AL ? al : 0);
    struct pt_heap_thread *t = &pt_heap_self;
    int track;
    if (state < 0) {
        if (t->busy || !pt_heap_on) return pt_call_new(real, kind, n, al, nt);
        t->nallocs++;
        track = !pt_heap_skip(t, n); /* sampled mode may skip this one */
        if (!track && pt_real.ready) { /* the default operator is malloc: skip a layer */
            void *q = pt_new_direct(n, kind >= PT_NEW_N_AL ? al : 0);
            if (q != NULL) return q; /* else the real one: new_handler, bad_alloc */
        }
    } else {
        track = state == 0;
        if (track) t->until_sample = pt_heap_draw(t, pt_heap_cfg.sample_bytes);
    }
    t->busy = 1;
    int *guard __attribute__((cleanup(pt_leave))) = &t->busy;
    void *p = pt_call_new(real, kind, n, al, nt);
    if (p != NULL && track) pt_heap_on_alloc(t, p, n);
    return p;
}

/* operator delete's slow path: credit the block, then the real operator. */
static __attribute__((noinline)) void pt_delete_slow(struct pt_real_op *op, int kind, void *p,
                                                     size_t n, size_t al, const void *nt) {
    void *real = __atomic_load_n(&op->fn, __ATOMIC_ACQUIRE);
    if (real == NULL) {
        real = pt_sym(op->name);
        __atomic_store_n(&op->fn, real, __ATOMIC_RELEASE);
    }
    if (real == NULL) {
        free(p);
        return;
    }
    struct pt_heap_thread *t = &pt_heap_self;
    if (p == NULL || t->busy || !pt_heap_on) {
        pt_call_delete(real, kind, p, n, al, nt);
        return;
    }
    if (pt_heap_cfg.sample_bytes && !pt_heap_maybe_sampled(p) && !pt_boot_owns(p)) {
        pt_real.free(p); /* never sampled: the default operator delete is free */
        return;
    }
    t->busy = 1;
    pt_heap_on_free(t, p, 1);
    pt_call_delete(real, kind, p, n, al, nt);
    t->busy = 0;
}

/* operator new: sampled mode's fast path inline (count, countdown, malloc),
 * everything else in pt_new_slow. */
#define PT_DEFINE_NEW(name, params, kind, n, al, nt)                                              \
    static struct pt_real_op pt_op_##name = {NULL, #name};                                        \
    PT_EXPORT void *name params {                                                                 \
        struct pt_heap_thread *t = &pt_heap_self;                                                 \
        int fast = pt_fast(t, (n));                                                               \
        if (__builtin_expect(fast > 0, 1)) {                                                      \
            void *q = pt_new_direct((n), (al));                                                   \
            if (__builtin_expect(q != NULL, 1)) return q;                                         \
        }                                                                                         \
        return pt_new_slow(&pt_op_##name, (kind), (n), (al), (nt), fast);                        \
    }

/* operator delete: sampled mode's fast path inline (the filter says no
 * sampled block lives at p: the default operator delete is free). */
#define PT_DEFINE_DELETE(name, params, kind, n, al, nt)                                           \
    static struct pt_real_op pt_op_##name = {NULL, #name};                                        \
    PT_EXPORT void name params {                                                                  \
        if (__builtin_expect(pt_sampling && !pt_heap_maybe_sampled(p) && !pt_boot_owns(p), 1)) { \
            pt_real.free(p);                                                                      \
            return;                                                                               \
        }                                                                                         \
        pt_delete_slow(&pt_op_##name, (kind), p, (n), (al), (nt));                               \
    }

/* Itanium C++ ABI names: nw/na = new/new[], dl/da = delete/delete[]; m = size_t,
 * St11align_val_t = std::align_val_t, RKSt9nothrow_t = const std::nothrow_t&. */
PT_DEFINE_NEW(_Znwm, (size_t n), PT_NEW_N, n, 0, NULL)
PT_DEFINE_NEW(_Znam, (size_t n), PT_NEW_N, n, 0, NULL)
PT_DEFINE_NEW(_ZnwmRKSt9nothrow_t, (size_t n, const void *nt), PT_NEW_N_NT, n, 0, nt)
PT_DEFINE_NEW(_ZnamRKSt9nothrow_t, (size_t n, const void *nt), PT_NEW_N_NT, n, 0, nt)
PT_DEFINE_NEW(_ZnwmSt11align_val_t, (size_t n, size_t al), PT_NEW_N_AL, n, al, NULL)
PT_DEFINE_NEW(_ZnamSt11align_val_t, (size_t n, size_t al), PT_NEW_N_AL, n, al, NULL)
PT_DEFINE_NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, const void *nt),
              PT_NEW_N_AL_NT, n, al, nt)
PT_DEFINE_NEW(_ZnamSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, const void *nt),
              PT_NEW_N_AL_NT, n, al, nt)

PT_DEFINE_DELETE(_ZdlPv, (void *p), PT_DEL_P, 0, 0, NULL)
PT_DEFINE_DELETE(_ZdaPv, (void *p), PT_DEL_P, 0, 0, NULL)
PT_DEFINE_DELETE(_ZdlPvm, (void *p, size_t n), PT_DEL_P_N, n, 0, NULL)
PT_DEFINE_DELETE(_ZdaPvm, (void *p, size_t n), PT_DEL_P_N, n, 0, NULL)
PT_DEFINE_DELETE(_ZdlPvRKSt9nothrow_t, (void *p, const void *nt), PT_DEL_P_NT, 0, 0, nt)
PT_DEFINE_DELETE(_ZdaPvRKSt9nothrow_t, (void *p, const void *nt), PT_DEL_P_NT, 0, 0, nt)
PT_DEFINE_DELETE(_ZdlPvSt11align_val_t, (void *p, size_t al), PT_DEL_P_AL, 0, al, NULL)
PT_DEFINE_DELETE(_ZdaPvSt11align_val_t, (void *p, size_t al), PT_DEL_P_AL, 0, al, NULL)
PT_DEFINE_DELETE(_ZdlPvmSt11align_val_t, (void *p, size_t n, size_t al), PT_DEL_P_N_AL, n, al,
                 NULL)
PT_DEFINE_DELETE(_ZdaPvmSt11align_val_t, (void *p, size_t n, size_t al), PT_DEL_P_N_AL, n, al,
                 NULL)
PT_DEFINE_DELETE(_ZdlPvSt11align_val_tRKSt9nothrow_t, (void *p, size_t al, const void *nt),
                 PT_DEL_P_AL_NT, 0, al, nt)
PT_DEFINE_DELETE(_ZdaPvSt11align_val_tRKSt9nothrow_t, (void *p, size_t al, const void *nt),
                 PT_DEL_P_AL_NT, 0, al, nt)
