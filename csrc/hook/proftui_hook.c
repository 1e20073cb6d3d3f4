/*
 * proftui_hook.c - the -finstrument-functions runtime (LD_PRELOAD).
 *
 * gcc/clang call __cyg_profile_func_enter(fn, call_site) at the start of every
 * instrumented function and __cyg_profile_func_exit at its end.  Each thread
 * keeps a shadow stack (private mmap, lazily touched, 1 Mi entries) and builds
 * its own calling-context tree in the shared file (pt_hook_file.c): a node per
 * (parent node, function), found through a per-thread open-addressing hash,
 * allocated from the thread's own chunk of the node pool.  The fast path takes
 * no lock, makes no syscall and never calls malloc.
 *
 * Resynchronisation: every entry remembers the stack slot holding its return
 * address (found on a context's first call by scanning up from the hook's CFA
 * for `call_site`; the offset is then known).  A longjmp that skips exit hooks
 * leaves entries whose slots are below the live frames: an enter pops entries
 * below its own slot, an exit pops entries below the exiting frame, then the
 * function itself.  gcc may tail-call the exit hook after the epilogue (jmp):
 * its CFA is then the return slot + 8, so an exit treats slots >= CFA - 8 as
 * live (popping the exiting frame as stale would let the search for `fn` pop
 * an outer call of the same function: Lua's nested luaV_execute).  Calls on
 * another stack than the thread's own (a sigaltstack handler) nest instead.
 *
 * Inlining: gcc instruments a function before inlining it, so an inlined
 * body's enter/exit run in its container's frame and pass the container's
 * call site: the same return slot as the container's entry.  An equal slot is
 * therefore not proof of a dead frame.  Rule (pt_enter_slow): an enter whose
 * slot equals the top entry's is inlined into that frame (pushed, its node
 * marked PT_HOOK_INLINED) unless the top entry came from another call site
 * (the frame was left by longjmp and the caller made a new call at the same
 * stack depth) or the very same hook call instruction already made one of the
 * entries on that slot (it runs once per activation of a frame: that entry
 * and the ones above it are dead, as after a longjmp out of a loop's call).
 * Entries record the low 32 bits of both addresses for this.
 *
 * Signals: the fast paths take no guard; slow paths set `busy`, and hooks
 * re-entered meanwhile (an instrumented signal handler) are ignored.
 *
 * Time (the default) comes from the thread's clock, not from the hooks: its
 * handler (pt_hook_tick.c) adds a tick to the thread's current node, `cur`.
 * Every change of the shadow stack's top stores that node once, after it is
 * valid (pt_set_depth; the fast enter stores its node directly), so a tick
 * that lands while the hooks work finds the node before or after the change,
 * never a half-written one; the hooks' own instructions are charged to the
 * node's [instrumentation] ticks anyway.
 *
 * Nothing here is compiled with -finstrument-functions; every function is
 * also marked no_instrument_function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pt_hook.h"

#define PT_EXPORT __attribute__((visibility("default"), no_instrument_function))
#define PT_SLOT_SCAN 64                  /* words above the CFA searched for the return address */
#define PT_SLOT_SCAN_OWN 8192            /* the same on the thread's own stack (mapped to stk_hi) */
#define PT_SAME_STACK (64ull << 20)      /* entries further away are on another stack */
#define PT_FAST_PROBES 16                /* hash slots the fast enter looks at */

static PT_NOINST void pt_retire(pt_hook_tstate *t, void *p, size_t bytes);

/* The process-wide state (options, file, calibration). */
pt_global pt_g;
/* Threads that must not record point here (busy forever). */
pt_hook_tstate pt_off_thread = {.busy = 1};
/* This thread's state. */
__thread pt_hook_tstate *pt_tls __attribute__((tls_model("initial-exec")));

/* ---- per-thread hash: (parent node, fn) -> node ------------------------------- */

/* The hash of (fn, parent): both halves mixed into every bit.  The slot index
 * is its high half, the tag its low half.  (The bits 40.. of a single product,
 * as before, left hot contexts in runs of 3-9 occupied slots.)  Async-signal-safe. */
static inline PT_NOINST uint64_t pt_hash(uintptr_t fn, uint32_t parent)
{
    return ((uint64_t)fn ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
}

/* The known node of (fn, parent), looking at no more than `probes` slots of its
 * probe sequence, and its index in *index; NULL if not found there.
 * Async-signal-safe. */
static inline PT_NOINST pt_hook_node *pt_find(const pt_hook_tstate *t, uintptr_t fn,
                                              uint32_t parent, uint32_t probes, uint32_t *index)
{
    uint64_t h = pt_hash(fn, parent);
    const pt_slot *table = t->hash;
    uint32_t mask = t->hash_mask, i = (uint32_t)(h >> 32), tag = (uint32_t)h | 1;
    for (uint32_t k = 0; k < probes; k++) {
        pt_slot e = table[(i + k) & mask];
        if (!e.node1)
            return NULL;
        if (e.tag == tag) {
            pt_hook_node *n = pt_node(e.node1 - 1);
            if (n->fn == fn && n->parent == parent) {
                *index = e.node1 - 1;
                return n;
            }
        }
    }
    return NULL;
}

/* Put node `node` of key hash `h` into `table` (mask `mask`).  Async-signal-safe. */
static PT_NOINST void pt_hash_put(pt_slot *table, uint32_t mask, uint64_t h, uint32_t node)
{
    uint32_t i = (uint32_t)(h >> 32) & mask;
    while (table[i].node1)
        i = (i + 1) & mask;
    table[i] = (pt_slot){node + 1, (uint32_t)h | 1};
}

/* mmap a zeroed hash of `n` slots.  Async-signal-safe. */
PT_NOINST pt_slot *pt_hash_alloc(uint32_t n)
{
    void *p = mmap(NULL, (size_t)n * sizeof(pt_slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        pt_note_map_failure(PT_NOTE_HASH, (uint64_t)n * sizeof(pt_slot), errno);
        return NULL;
    }
    return p;
}

/* Double the hash when half full.  Returns 0 if it cannot take one more key.
 * Async-signal-safe (mmap/munmap). */
static PT_NOINST int pt_hash_grow(pt_hook_tstate *t)
{
    if ((t->hash_count + 1) * 2 <= t->hash_mask + 1)
        return 1;
    uint32_t n = (t->hash_mask + 1) * 2;
    pt_slot *h = n ? pt_hash_alloc(n) : NULL;
    if (!h)
        return t->hash_count + 1 < t->hash_mask + 1;
    for (uint32_t i = 0; i <= t->hash_mask; i++) {
        uint32_t node1 = t->hash[i].node1;
        if (node1) {
            const pt_hook_node *x = pt_node(node1 - 1);
            pt_hash_put(h, n - 1, pt_hash(x->fn, x->parent), node1 - 1);
        }
    }
    pt_retire(t, t->hash, (size_t)(t->hash_mask + 1) * sizeof(pt_slot));
    t->hash = h;
    t->hash_mask = n - 1;
    return 1;
}

/* A new node in this thread's chunk; PT_NONE (counted as dropped) when the
 * pool is full (or its next window cannot be mapped: noted).  The chunk
 * size, the pool's capacity and the counts are the runtime's own, never the
 * header's.  Async-signal-safe. */
static PT_NOINST uint32_t pt_new_node(pt_hook_tstate *t, uint32_t parent, uintptr_t fn)
{
    if (t->pool_full)
        goto drop;
    if (t->chunk == PT_NONE || t->used >= PT_CHUNK_NODES) {
        uint32_t c = pt_hook_chunks_claim(1);
        /* Map and back the chunk's nodes and table entry before touching them:
         * a full file system or address space then ends this thread's
         * recording, never the process. */
        if (c == PT_NONE || pt_hook_reserve(&pt_g.chunks[c], sizeof(pt_hook_chunk)) != 0 ||
            pt_region_back(&pt_g.nodes, (uint64_t)c * PT_CHUNK_NODES,
                           (uint64_t)(c + 1) * PT_CHUNK_NODES) != 0) {
            t->pool_full = 1;
            goto drop;
        }
        pt_g.chunks[c].thread = t->slot;
        t->chunk = c;
        t->used = 0;
    }
    uint32_t index = t->chunk * PT_CHUNK_NODES + t->used;
    pt_hook_node *n = pt_node(index);
    n->fn = fn;
    n->parent = parent;
    n->module = pt_module_of(fn);
    n->calls = n->incl = n->self = n->ticks = n->hook_ticks = 0;
    n->off_ = 0;
    n->self_ = index;
    t->used++;
    __atomic_store_n(&pt_g.chunks[t->chunk].count, t->used, __ATOMIC_RELEASE);
    return index;
drop:
    __atomic_fetch_add(&pt_g.hdr->dropped, 1, __ATOMIC_RELAXED);
    return PT_NONE;
}

/* The node of (parent, fn), created on first sight, and its index in *index;
 * NULL when no node can be made (pool or hash full: counted as dropped).
 * Async-signal-safe. */
static PT_NOINST pt_hook_node *pt_lookup_node(pt_hook_tstate *t, uint32_t parent, uintptr_t fn,
                                              uint32_t *index)
{
    pt_hook_node *found = pt_find(t, fn, parent, t->hash_mask + 1, index);
    if (found)
        return found;
    uint64_t t0 = pt_g.timed ? pt_ticks() : 0;
    if (!pt_hash_grow(t)) {
        __atomic_fetch_add(&pt_g.hdr->dropped, 1, __ATOMIC_RELAXED);
    } else {
        uint32_t node = pt_new_node(t, parent, fn);
        if (node != PT_NONE) {
            pt_hash_put(t->hash, t->hash_mask, pt_hash(fn, parent), node);
            t->hash_count++;
            found = pt_node(node);
            *index = node;
        }
    }
    if (pt_g.timed)
        t->setup += pt_ticks() - t0;
    return found;
}

/* The node for `fn` under `parent` (PT_NONE if none can be made).  Async-signal-safe. */
static PT_NOINST uint32_t pt_lookup(pt_hook_tstate *t, uint32_t parent, uintptr_t fn)
{
    uint32_t index = PT_NONE;
    return pt_lookup_node(t, parent, fn, &index) ? index : PT_NONE;
}

/* ---- shadow stack ------------------------------------------------------------- */

/* Keep a mapping that may still be used (an enter interrupted by a signal
 * whose handler's calls replaced it) until the thread exits, its pages given
 * back now: a late read finds zeros (an empty hash slot, an entry the exit
 * hook resynchronises), a late write lands in a page of its own.  With no
 * room left to remember it, it stays mapped for good (never unmapped under
 * a reader).  Async-signal-safe. */
static PT_NOINST void pt_retire(pt_hook_tstate *t, void *p, size_t bytes)
{
    if (t->nretired < sizeof t->retired / sizeof t->retired[0])
        t->retired[t->nretired++] = (__typeof__(t->retired[0])){p, bytes};
    madvise(p, bytes, MADV_DONTNEED);
}

/* Make the shadow stack 4 times deeper (up to PT_STACK_CAP): a new mapping,
 * the entries copied, the old one retired.  A thread's stack starts small
 * (PT_STACK_INITIAL) so that its address space follows its depth.  0, or -1
 * when it may not grow or no memory is left (noted; deeper calls are then
 * dropped).  Called by the slow enter under `busy`.  Async-signal-safe (mmap). */
PT_NOINST int pt_stack_grow(pt_hook_tstate *t)
{
    if (t->cap >= PT_STACK_CAP)
        return -1;
    uint32_t cap = t->cap * 4 < PT_STACK_CAP ? t->cap * 4 : PT_STACK_CAP;
    size_t bytes = (size_t)cap * sizeof(pt_entry);
    pt_entry *stack = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
        pt_note_map_failure(PT_NOTE_SHADOW, bytes, errno);
        return -1;
    }
    uint32_t used = t->max_depth + 2 < t->cap ? t->max_depth + 2 : t->cap;
    memcpy(stack, t->stack, (size_t)used * sizeof(pt_entry));
    pt_entry *old = t->stack;
    size_t old_bytes = t->stack_bytes;
    __atomic_store_n(&t->stack, stack, __ATOMIC_RELEASE);  /* the front end reads both */
    __atomic_store_n(&t->cap, cap, __ATOMIC_RELEASE);
    t->stack_bytes = bytes;
    pt_retire(t, old, old_bytes);
    return 0;
}

/* Close entry `e` at `now`: add its times to its node and its duration to the
 * entry it is charged to.  Async-signal-safe. */
static inline PT_NOINST void pt_finish(pt_hook_tstate *t, pt_entry *e, uint64_t now)
{
    pt_hook_node *n;
    if (!(e->flags & PT_ENTRY_UNRECORDED) && pt_g.timed && (n = pt_node(e->anode)) != NULL) {
        uint64_t dur = (int64_t)(now - e->ts) > 0 ? now - e->ts : 0;
        __atomic_store_n(&n->incl, n->incl + dur, __ATOMIC_RELAXED);
        __atomic_store_n(&n->self, n->self + (dur > e->child ? dur - e->child : 0),
                         __ATOMIC_RELAXED);
        t->stack[e->up].child += dur;
    }
    if (PT_UNLIKELY(e->flags)) {
        t->excl -= (e->flags & PT_FILTER_EXCLUDE) != 0;
        t->incl -= (e->flags & PT_FILTER_INCLUDE) != 0;
        e->flags = 0;  /* the next fast-path entry here relies on it */
    }
}

/* Whether `addr` is on the thread's own stack (not a sigaltstack or another
 * stack; with unknown bounds everything is).  Async-signal-safe. */
static inline PT_NOINST int pt_on_stack(const pt_hook_tstate *t, uintptr_t addr)
{
    return addr >= t->stk_lo && addr < t->stk_hi;
}

/* Pop the entries a longjmp or an exception left without exit hooks before a
 * call whose return-address slot is `limit` (enter: entries at or below it,
 * `inclusive`; exit: entries below it).  Across stacks: a call on the thread's
 * own stack abandons entries on another stack (a handler left by longjmp); a
 * call on another stack (a sigaltstack handler) pops nothing below it; on
 * other stacks, entries further than PT_SAME_STACK are on yet another one.
 * Async-signal-safe. */
static PT_NOINST void pt_pop_stale(pt_hook_tstate *t, uintptr_t limit, int inclusive)
{
    uint64_t now = pt_g.timed ? pt_thread_now(t) : 0;
    int on = pt_on_stack(t, limit);
    uint32_t d = t->depth;
    while (d) {
        pt_entry *e = &t->stack[d];
        int e_on = pt_on_stack(t, e->slot);
        if (on == e_on) {
            if (e->slot > limit || (e->slot == limit && !inclusive) ||
                (!on && limit - e->slot > PT_SAME_STACK))
                break;
        } else if (!on) {
            break;
        }
        pt_finish(t, e, now);
        d--;
    }
    pt_set_depth(t, d);
}

/* Where the function that called the hook keeps its return address: the first
 * word above the hook's CFA equal to `site`, else the CFA itself (frames
 * larger than the scan window: 64 KiB on the thread's own stack, which is
 * mapped up to stk_hi, 512 bytes elsewhere).  Reads only the caller's own
 * frame.  Async-signal-safe. */
static inline PT_NOINST uintptr_t pt_return_slot(const pt_hook_tstate *t, uintptr_t cfa,
                                                 uintptr_t site)
{
    const uintptr_t *p = (const uintptr_t *)cfa;
    uintptr_t n = PT_SLOT_SCAN;
    if (pt_on_stack(t, cfa) && t->stk_hi != UINTPTR_MAX) {
        n = (t->stk_hi - cfa) / sizeof(uintptr_t);
        n = n < PT_SLOT_SCAN_OWN ? n : PT_SLOT_SCAN_OWN;
    }
    for (uintptr_t i = 0; i < n; i++)
        if (p[i] == site)
            return (uintptr_t)&p[i];
    return cfa;
}

/* Filters, depth limit and pause for the call at `e` above `p`; 1 to record
 * it.  Async-signal-safe except for the first sight of a module under
 * filtering (pt_module_of reads its symbols). */
static PT_NOINST int pt_should_record(pt_hook_tstate *t, pt_entry *e, const pt_entry *p)
{
    if (pt_g.filtering) {
        uint32_t c = (uint32_t)(e->fn >> 4) & (PT_FCACHE - 1);
        int verdict;
        if (t->fcache[c].fn == e->fn) {
            verdict = t->fcache[c].verdict;
        } else {
            pt_module_of(e->fn);  /* makes sure its object's symbols are resolved */
            verdict = pt_filter_verdict(e->fn);
            t->fcache[c].fn = e->fn;
            t->fcache[c].verdict = verdict;
        }
        e->flags = (uint32_t)verdict;
        t->excl += (verdict & PT_FILTER_EXCLUDE) != 0;
        t->incl += (verdict & PT_FILTER_INCLUDE) != 0;
    }
    if ((pt_g.hdr->control & PT_CONTROL_PAUSED) || t->excl ||
        (pt_g.has_include && !t->incl) || (pt_g.max_depth && p->rdepth >= pt_g.max_depth)) {
        __atomic_fetch_add(&pt_g.hook->filtered_calls, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return 1;
}

/* Push `e` above `p` at index d+1, recorded as `node` (or not, PT_NONE).
 * Async-signal-safe. */
static inline PT_NOINST void pt_push(pt_hook_tstate *t, pt_entry *p, uint32_t d, uintptr_t fn,
                                     uintptr_t slot, uint32_t node)
{
    pt_entry *e = p + 1;
    e->fn = fn;
    e->slot = slot;  /* e->ra and e->site: the caller's */
    e->child = 0;
    uint32_t anchor = pt_anchor(p, d);
    e->up = anchor;
    if (PT_LIKELY(node != PT_NONE)) {
        pt_hook_node *n = pt_node(node);
        /* A node is in one thread's tree: one writer, so the relaxed store of the
         * incremented count loses nothing; readers need it only to grow. */
        __atomic_store_n(&n->calls, n->calls + 1, __ATOMIC_RELAXED);
        e->anchor = d + 1;
        e->anode = node;
    } else {
        e->anchor = anchor;
        e->anode = p->anode;
        e->flags |= PT_ENTRY_UNRECORDED;
    }
    pt_set_depth(t, d + 1);
}

/* Every enter the fast path does not take: first call of a context, deep
 * overflow, stale entries, filters, depth limit, pause.  Async-signal-safe
 * (see pt_should_record). */
PT_NOINST void pt_enter_slow(pt_hook_tstate *t, uintptr_t fn, uintptr_t site, uintptr_t cfa,
                             uintptr_t ra)
{
    uint32_t d = t->depth;
    if (d + 1 >= t->cap && pt_stack_grow(t) != 0) {
        t->overflow++;
        __atomic_fetch_add(&pt_g.hdr->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    uintptr_t slot = pt_return_slot(t, cfa, site);
    if (t->stack[d].slot < slot || pt_on_stack(t, slot) != pt_on_stack(t, t->stack[d].slot)) {
        pt_pop_stale(t, slot, 0);
        d = t->depth;
    }
    /* Equal slots: inlined into the top entry's frame, or that frame is dead
     * (see the file comment). */
    int inlined = 0;
    if (d && t->stack[d].slot == slot) {
        uint32_t i = d;
        if (t->stack[d].site == (uint32_t)site) {  /* dead only from a repeated instruction */
            while (i && t->stack[i].slot == slot && t->stack[i].ra != (uint32_t)ra)
                i--;
        } else {  /* another call: every entry on that slot is dead */
            while (i > 1 && t->stack[i - 1].slot == slot)
                i--;
        }
        if (i && t->stack[i].slot == slot) {  /* dead from entry i up */
            uint64_t now = pt_g.timed ? pt_thread_now(t) : 0;
            while (t->depth >= i) {
                pt_finish(t, &t->stack[t->depth], now);
                pt_set_depth(t, t->depth - 1);
            }
            d = t->depth;
            inlined = d && t->stack[d].slot == slot;  /* still inside a live container */
        } else {
            inlined = 1;
        }
    }
    pt_entry *p = &t->stack[d], *e = p + 1;
    e->fn = fn;
    e->flags = 0;
    e->ra = (uint32_t)ra;
    e->site = (uint32_t)site;
    uint32_t node = PT_NONE;
    if (pt_should_record(t, e, p)) {
        pt_hook_node *n = pt_lookup_node(t, p->anode, fn, &node);
        if (n) {
            n->off_ = (uint32_t)(slot - cfa);  /* learned once: the fast path adds it */
            if (inlined)  /* the fast path may push it on an equal slot from now on */
                __atomic_fetch_or(&n->module, PT_HOOK_INLINED, __ATOMIC_RELAXED);
        }
    }
    pt_push(t, p, d, fn, slot, node);
    e->rdepth = p->rdepth + (node != PT_NONE);
    if (d + 1 > t->max_depth) {
        t->max_depth = d + 1;
        t->limit = pt_g.slow ? 0 : d + 2 < t->cap ? d + 2 : t->cap;
        pt_g.threads[t->slot].max_depth = d + 1;
    }
    if (pt_g.timed)
        e->ts = pt_call_start(t);
}

/* Every exit the fast path does not take: overflow, an exit whose function is
 * not on top, dead frames above it.  Ignores an exit whose enter was never
 * seen.  Async-signal-safe. */
static PT_NOINST void pt_exit_slow(pt_hook_tstate *t, uintptr_t fn, uintptr_t cfa, uint64_t now)
{
    if (t->overflow) {
        t->overflow--;
        return;
    }
    pt_pop_stale(t, cfa - sizeof(uintptr_t), 0);  /* see __cyg_profile_func_exit */
    uint32_t d = t->depth;
    for (uint32_t i = d; i > 0 && d - i <= 64; i--) {
        if (t->stack[i].fn == fn) {
            while (t->depth >= i) {
                pt_finish(t, &t->stack[t->depth], now);
                pt_set_depth(t, t->depth - 1);
            }
            return;
        }
    }
}

/* pt_lookup for the other files.  Async-signal-safe. */
PT_NOINST uint32_t pt_node_for(pt_hook_tstate *t, uint32_t parent, uintptr_t fn)
{
    return pt_lookup(t, parent, fn);
}

/* Close every open call of `t` at `now` (thread or process exit).  Async-signal-safe. */
PT_NOINST void pt_hook_close_all(pt_hook_tstate *t, uint64_t now)
{
    while (t->depth) {
        pt_finish(t, &t->stack[t->depth], now);
        pt_set_depth(t, t->depth - 1);
    }
}

/* ---- the hooks ---------------------------------------------------------------- */

/* Hook calls the fast paths do not handle: a thread's first call (and the
 * process's: pt_hook_init), and re-entry while a slow path runs (a signal handler's
 * instrumented code), which is ignored.  Not async-signal-safe on the
 * process's very first call only. */
static __attribute__((noinline)) PT_NOINST void pt_enter_cold(pt_hook_tstate *t, uintptr_t fn,
                                                              uintptr_t site, uintptr_t cfa,
                                                              uintptr_t ra)
{
    int saved_errno = errno;  /* the slow paths map memory: the target's errno stays */
    if (t) {
        if (!t->busy) {  /* overflow: the slow path counts it */
            t->busy = 1;
            pt_enter_slow(t, fn, site, cfa, ra);
            t->busy = 0;
        }
        errno = saved_errno;
        return;  /* busy: a signal handler's code re-entering, ignored */
    }
    t = pt_thread_attach();
    if (t) {
        t->busy = 1;
        pt_enter_slow(t, fn, site, cfa, ra);
        t->busy = 0;
    }
    errno = saved_errno;
}

/* The slow enter under the re-entry guard.  Async-signal-safe (see pt_should_record). */
static __attribute__((noinline)) PT_NOINST void pt_enter_guarded(pt_hook_tstate *t, uintptr_t fn,
                                                                 uintptr_t site, uintptr_t cfa,
                                                                 uintptr_t ra)
{
    int saved_errno = errno;  /* a new node may map a window: the target's errno stays */
    t->busy = 1;
    pt_enter_slow(t, fn, site, cfa, ra);
    t->busy = 0;
    errno = saved_errno;
}

/* The slow exit under the re-entry guard.  Async-signal-safe. */
static __attribute__((noinline)) PT_NOINST void pt_exit_guarded(pt_hook_tstate *t, uintptr_t fn,
                                                                uintptr_t cfa, uint64_t now)
{
    t->busy = 1;
    pt_exit_slow(t, fn, cfa, now);
    t->busy = 0;
}

/* Whether an enter on the top entry `p`'s own slot is inlined in that frame
 * by the rule of pt_enter_slow: the top entry came from the same call site and
 * no entry on that slot was made by this very hook call instruction `ra`
 * (the scan stops at the first entry on another slot; the sentinel's slot is
 * never a stack address).  Only for a context (node `n`) the slow path already
 * found inlined, so the node's mark is set.  Async-signal-safe. */
static inline PT_NOINST int pt_known_inline(const pt_entry *p, const pt_hook_node *n,
                                            uintptr_t slot, uint32_t ra, uint32_t site)
{
    if (p->slot != slot || p->site != site || !(n->module & PT_HOOK_INLINED))
        return 0;
    for (const pt_entry *q = p; q->slot == slot; q--)
        if (q->ra == ra)
            return 0;
    return 1;
}

/*
 * The fast paths take no guard and call nothing: every slow case jumps out to
 * a guarded function.  A signal handler's instrumented code may run between
 * any two instructions: the new entry's slot is written before the depth that
 * makes it visible, and the depth is the last store of an exit, so a nested
 * call never overwrites an entry in use (at worst it hangs under a parent
 * whose fields are not written yet).  Both hooks are async-signal-safe.
 */
/* Push a call of known context `n` on top of entry `p` (index `d`), or hand it
 * to the slow path when the fast conditions fail: the shared tail of both
 * fast enters.  Async-signal-safe. */
static inline __attribute__((always_inline)) PT_NOINST void
pt_enter_known(pt_hook_tstate *t, pt_entry *p, uint32_t d, pt_hook_node *n, uintptr_t fn,
               uintptr_t site, uintptr_t cfa, uintptr_t ra)
{
    /* Its return-address slot is at the offset learned on the context's first
     * (slow) call, fixed by the function's prologue. */
    uintptr_t slot = cfa + n->off_;
    uint32_t node = pt_node_index(n);  /* PT_NONE: the target overwrote it, look it up */
    if (PT_UNLIKELY(p->slot <= slot || p->slot >= t->stk_hi || d + 1 >= t->limit ||
                    node == PT_NONE || (pt_g.hdr->control & PT_CONTROL_PAUSED))) {
        if (!(p->slot < t->stk_hi && d + 1 < t->limit && node != PT_NONE &&
              !(pt_g.hdr->control & PT_CONTROL_PAUSED) &&
              pt_known_inline(p, n, slot, (uint32_t)ra, (uint32_t)site))) {
            pt_enter_guarded(t, fn, site, cfa, ra);
            return;
        }
    }
    p->kid = n;
    pt_entry *e = p + 1;
    e->slot = slot;
    e->ra = (uint32_t)ra;
    e->site = (uint32_t)site;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->depth = d + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    e->fn = fn;
    e->anode = node;  /* flags stay 0 and anchor unwritten: a recorded fast-path entry */
    __atomic_store_n(&t->cur, node, __ATOMIC_RELEASE);  /* the clock charges it from here */
    __atomic_store_n(&n->calls, n->calls + 1, __ATOMIC_RELAXED);
    if (pt_g.timed) {  /* count-only never reads child/up */
        e->child = 0;
        e->up = pt_anchor(p, d);
        e->ts = pt_call_start(t);  /* last: the hook's own work stays outside the call */
    }
}

/* The fast enter when the top entry's last child is not this context: the
 * child before it, else a few slots of the hash's probe sequence (a context
 * another one displaced from its home slot took the slow path on every call
 * when only the home slot was looked at: 40 % of Lua's enters).  Out of line,
 * so the common case keeps few registers live (no saves).  Async-signal-safe. */
static __attribute__((noinline)) PT_NOINST void pt_enter_other(pt_hook_tstate *t, uintptr_t fn,
                                                               uintptr_t site, uintptr_t cfa,
                                                               uintptr_t ra)
{
    uint32_t d = t->depth;
    pt_entry *p = &t->stack[d];
    uint32_t parent = p->anode;
    pt_hook_node *last = p->kid;
    uint32_t index;
    pt_hook_node *n = p->kid2 ? pt_node(p->kid2 - 1) : NULL;
    if (!n || n->fn != fn || n->parent != parent)
        n = pt_find(t, fn, parent, PT_FAST_PROBES, &index);
    if (!n) {
        pt_enter_guarded(t, fn, site, cfa, ra);  /* a new context */
        return;
    }
    index = last ? pt_node_index(last) : PT_NONE;
    p->kid2 = index != PT_NONE ? index + 1 : 0;
    pt_enter_known(t, p, d, n, fn, site, cfa, ra);
}

PT_EXPORT void __cyg_profile_func_enter(void *fn, void *site)
{
    uintptr_t cfa = (uintptr_t)__builtin_dwarf_cfa();
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    pt_hook_tstate *t = pt_tls;
    if (PT_UNLIKELY(!t || t->guard)) {
        pt_enter_cold(t, (uintptr_t)fn, (uintptr_t)site, cfa, ra);
        return;
    }
    uint32_t d = t->depth;
    pt_entry *p = &t->stack[d];
    pt_hook_node *n = p->kid;  /* loops call the same child again and again */
    if (PT_UNLIKELY(!n || n->fn != (uintptr_t)fn || n->parent != p->anode)) {
        pt_enter_other(t, (uintptr_t)fn, (uintptr_t)site, cfa, ra);
        return;
    }
    pt_enter_known(t, p, d, n, (uintptr_t)fn, (uintptr_t)site, cfa, ra);
}

PT_EXPORT void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)site;
    uint64_t now = pt_g.timed ? pt_call_end_raw() : 0;  /* first, for the same reason */
    uintptr_t cfa = (uintptr_t)__builtin_dwarf_cfa();
    pt_hook_tstate *t = pt_tls;
    if (PT_UNLIKELY(!t))
        return;
    now -= t->setup;  /* pt_thread_now(t) as of the first instruction */
    uint32_t d = t->depth;
    pt_entry *e = &t->stack[d];
    /* gcc may tail-call this hook after the function's epilogue (jmp): the
     * hook's CFA is then just above the return slot, slot + 8. */
    if (PT_UNLIKELY(t->guard || e->fn != (uintptr_t)fn || e->slot + sizeof(uintptr_t) < cfa ||
                    e->flags)) {
        if (!t->busy)  /* busy: a signal handler's code re-entering, ignored */
            pt_exit_guarded(t, (uintptr_t)fn, cfa, now);
        return;
    }
    pt_finish(t, e, now);  /* inline: flags are 0 here, so only the timed update remains */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pt_set_depth(t, d - 1);
}
