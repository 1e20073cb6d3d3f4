/* proftui_heap's C++ interposers: operator new and delete in all sixteen
 * forms (plain, array, nothrow, aligned, sized).  libstdc++'s operators call
 * malloc, so the real operator is called with the busy flag set: the malloc
 * under it is not counted twice and the recorded stack starts at the
 * program's `new`, not inside libstdc++.  In sampled mode an allocation not
 * sampled skips libstdc++ (the default operator new is malloc when memory is
 * there; the default delete is free), so the fast path is the same as
 * malloc's.  Built with -fexceptions: a bad_alloc thrown by the real operator
 * passes through and the busy flag is cleared on the way.  No function here
 * is async-signal-safe beyond what the real allocator is.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "pt_heap.h"

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
    if (align <= 16) return pt_heap_real.malloc(n ? n : 1);
    void *q = NULL;
    return pt_heap_real.posix_memalign(&q, align, n ? n : 1) == 0 ? q : NULL;
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
        if (t->busy || !PT_GET(pt_heap_on)) return pt_call_new(real, kind, n, al, nt);
        t->nallocs++;
        track = !pt_heap_skip(t, n); /* sampled mode may skip this one */
        if (!track && pt_heap_real.ready) { /* the default operator is malloc: skip a layer */
            void *q = pt_new_direct(n, kind >= PT_NEW_N_AL ? al : 0);
            if (q != NULL) return q; /* else the real one: new_handler, bad_alloc */
        }
    } else {
        track = state == 0 && pt_heap_due(t, n);
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
    if (p == NULL || t->busy || !PT_GET(pt_heap_on)) {
        pt_call_delete(real, kind, p, n, al, nt);
        return;
    }
    if (pt_heap_cfg.sample_bytes && !pt_heap_maybe_sampled(p) && !pt_heap_boot_owns(p)) {
        pt_heap_real.free(p); /* never sampled: the default operator delete is free */
        return;
    }
    t->busy = 1;
    pt_heap_on_free(t, p);
    pt_call_delete(real, kind, p, n, al, nt);
    t->busy = 0;
}

/* operator new: sampled mode's fast path inline (count, countdown, malloc),
 * everything else in pt_new_slow. */
#define PT_DEFINE_NEW(name, params, kind, n, al, nt)                                              \
    static struct pt_real_op pt_op_##name = {NULL, #name};                                        \
    PT_EXPORT void *name params {                                                                 \
        struct pt_heap_thread *t = &pt_heap_self;                                                 \
        int fast = pt_heap_fast(t, (n));                                                               \
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
        if (__builtin_expect(PT_GET(pt_heap_sampling) && !pt_heap_maybe_sampled(p) &&             \
                                 !pt_heap_boot_owns(p),                                           \
                             1)) {                                                                \
            pt_heap_real.free(p);                                                                      \
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
