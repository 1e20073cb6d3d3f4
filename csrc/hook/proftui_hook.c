/*
 * proftui_hook.c - the -finstrument-functions runtime (LD_PRELOAD).
 *
 * gcc/clang call __cyg_profile_func_enter(fn, call_site) at the start of every
 * instrumented function and __cyg_profile_func_exit at its end.  Each thread
 * keeps a shadow stack (private mmap, lazily touched, 1 Mi entries) and builds
 * its own calling-context tree in the shared file (pt_hook_file.c): a node per
 * (parent node, function), found through a per-thread open-addressing hash,
 * allocated from the thread's own chunk of the node pool (pt_hook_table.c
 * adds keys and nodes).  The fast path takes
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

static PT_NOINST void pt_retire(pt_hook_tstate *t, void *p, size_t bytes);

/* The process-wide state (options, file, calibration). */
pt_global pt_g;
/* Threads that must not record point here (busy forever). */
pt_hook_tstate pt_off_thread = {.busy = 1};
/* This thread's state. */
__thread pt_hook_tstate *pt_tls __attribute__((tls_model("initial-exec")));

/* ---- per-thread hash: (parent node, fn) -> node ------------------------------- */

/* The lane of (fn, parent): its bucket, then the buckets after it while each
 * is full (keys that found their bucket full went on to the next; none is
 * ever removed).  *lane receives its index in the bucket; NULL: not in the
 * table.  Async-signal-safe. */
static PT_NOINST pt_bucket *pt_find(const pt_hook_tstate *t, uintptr_t fn, uint32_t parent,
                                    unsigned *lane)
{
    uint32_t mask = t->hash_mask, fnhi = pt_lane_fnhi(fn);
    uint32_t i = (uint32_t)(pt_hash((uint32_t)fn, parent) >> t->hash_shift);
    for (uint32_t k = 0; k <= mask; k++) {
        pt_bucket *b = &t->hash[(i + k) & mask];
        for (unsigned m = pt_bucket_match(b, (uint32_t)fn, parent); m; m &= m - 1) {
            unsigned j = (unsigned)__builtin_ctz(m);
            /* A function above 2^47 (PT_LANE_FNHI): its node's fn decides. */
            if ((b->word[j] >> PT_LANE_FNHI_SHIFT & PT_LANE_FNHI) == fnhi &&
                (fnhi != PT_LANE_FNHI || pt_node_own(b->node[j])->fn == fn)) {
                *lane = j;
                return b;
            }
        }
        if (b->parent2[PT_BUCKET_SLOTS - 1] == 0)
            return NULL;  /* a bucket with room: the key would be here */
    }
    return NULL;
}

/* The lane of (parent, fn), its node created on first sight; NULL when no
 * node can be made (pool or table full: counted as dropped).  *lane receives
 * the lane's index in the returned bucket.  Async-signal-safe. */
static PT_NOINST pt_bucket *pt_lookup(pt_hook_tstate *t, uint32_t parent, uintptr_t fn,
                                      unsigned *lane)
{
    pt_bucket *b = pt_find(t, fn, parent, lane);
    if (b || !pt_hash_add(t, parent, fn))
        return b;
    return pt_find(t, fn, parent, lane);
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

/* Set the depth below which enters may take the fast path: the deepest depth
 * seen plus one (a new depth takes the slow path), 0 under include patterns or
 * a depth limit, and 0 inside an excluded call, whose callees are not recorded
 * while the current node is still its caller's.  Async-signal-safe. */
static inline PT_NOINST void pt_set_limit(pt_hook_tstate *t)
{
    t->limit = pt_g.slow || t->excl ? 0 : t->max_depth + 1 < t->cap ? t->max_depth + 1 : t->cap;
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
        if (e->flags & PT_FILTER_EXCLUDE && --t->excl == 0)
            pt_set_limit(t);  /* out of the excluded call: the fast path again */
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
        if (verdict & PT_FILTER_EXCLUDE && t->excl++ == 0)
            t->limit = 0;  /* its callees: the slow path, until it returns */
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
        unsigned lane;
        pt_bucket *b = pt_lookup(t, p->anode, fn, &lane);
        if (b) {
            node = b->node[lane];
            /* The fast path adds the offset (fixed by the function's prologue),
             * and may push an inlined context on an equal slot from now on. */
            inlined |= (b->word[lane] & PT_LANE_INLINED) != 0;
            if (inlined)
                __atomic_fetch_or(&pt_node_own(node)->module, PT_HOOK_INLINED,
                                  __ATOMIC_RELAXED);
            b->word[lane] = pt_lane_word(fn, slot - cfa, inlined,
                                         (b->word[lane] & PT_LANE_SHARED) != 0);
        }
    }
    pt_push(t, p, d, fn, slot, node);
    e->rdepth = p->rdepth + (node != PT_NONE);
    if (d + 1 > t->max_depth) {
        t->max_depth = d + 1;
        pt_set_limit(t);
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
    unsigned lane;
    pt_bucket *b = pt_lookup(t, parent, fn, &lane);
    return b ? b->node[lane] : PT_NONE;
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
 * by the rule of pt_enter_slow: the top entry came from the same call site
 * `site` and no entry on that slot was made by this very hook call
 * instruction `ra` (the scan stops at the first entry on another slot; the
 * sentinel's slot is never a stack address).  Only for a context the slow
 * path already found inlined.  Async-signal-safe. */
static inline PT_NOINST int pt_known_inline(const pt_entry *p, uintptr_t slot, uint32_t ra,
                                            uint32_t site)
{
    if (p->slot != slot || p->site != site)
        return 0;
    for (const pt_entry *q = p; q->slot == slot; q--)
        if (q->ra == ra)
            return 0;
    return 1;
}

/* Push a call of a known context (its bucket lane's `node` and `slot`) on the
 * top entry `p` at index `d`: the shared tail of the fast enters.  The new
 * entry's slot goes in before the depth that makes it visible.
 * Async-signal-safe. */
static inline __attribute__((always_inline)) PT_NOINST void
pt_push_known(pt_hook_tstate *t, pt_entry *p, uint32_t d, uintptr_t fn, uint32_t node,
              uintptr_t slot, uint32_t ra, uint32_t site)
{
    pt_entry *e = p + 1;
    e->slot = slot;
    e->ra = ra;
    e->site = site;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->depth = d + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    e->fn = fn;
    e->anode = node;  /* flags stay 0 and anchor unwritten: a recorded fast-path entry */
    __atomic_store_n(&t->cur, node, __ATOMIC_RELEASE);  /* the clock charges it from here */
    /* A node is in one thread's tree: one writer, so the relaxed store of the
     * incremented count loses nothing; readers need it only to grow. */
    pt_hook_node *n = pt_node_own(node);
    __atomic_store_n(&n->calls, n->calls + 1, __ATOMIC_RELAXED);
    if (pt_g.timed) {  /* count-only never reads child/up */
        e->child = 0;
        e->up = pt_anchor(p, d);
        e->ts = pt_call_start(t);  /* last: the hook's own work stays outside the call */
    }
}

/*
 * The fast paths take no guard and call nothing: every slow case jumps out to
 * a guarded function.  A signal handler's instrumented code may run between
 * any two instructions: the new entry's slot is written before the depth that
 * makes it visible, and the depth is the last store of an exit, so a nested
 * call never overwrites an entry in use (at worst it hangs under a parent
 * whose fields are not written yet).  Both hooks are async-signal-safe.
 *
 * The enter's common path reads the thread state's first line, one bucket of
 * its table (the child of the current node, found without a branch per slot,
 * with the return slot's offset) and the top entry, and writes the new entry
 * and the child's count.  Everything else (a context not in its bucket: new,
 * or pushed on by a full bucket; frames not nested as expected; a pause; a
 * new depth) goes to the slow path.
 */
PT_EXPORT void __cyg_profile_func_enter(void *fn_, void *site_)
{
    uintptr_t fn = (uintptr_t)fn_;
    pt_hook_tstate *t = pt_tls;
    if (PT_UNLIKELY(!t || t->guard))
        goto cold;
    uint32_t d = t->depth;
    uint32_t parent = t->cur;  /* stack[d].anode, one load earlier */
    uint32_t shift = t->hash_shift;
    /* The shift before the table: a handler that grows the table in between
     * leaves this enter with the old shift, in range of either table. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    const pt_bucket *b = &t->hash[pt_hash((uint32_t)fn, parent) >> shift];
    unsigned m = pt_bucket_match(b, (uint32_t)fn, parent);
    if (PT_UNLIKELY(!m || d + 1 >= t->limit ||
                    (__atomic_load_n(&pt_g.hdr->control, __ATOMIC_RELAXED) & PT_CONTROL_PAUSED)))
        goto slow;
    unsigned j = (unsigned)__builtin_ctz(m);
    uint32_t word = b->word[j], node = b->node[j];
    pt_entry *p = &t->stack[d];
    /* Its return-address slot: the offset learned on the context's first
     * (slow) call, fixed by the function's prologue.  A lane whose offset is
     * not known (or whose key another function shares: pt_hash_put) always
     * takes the slow path. */
    uintptr_t slot = (uintptr_t)__builtin_dwarf_cfa() + (word & PT_LANE_OFF);
    uintptr_t top = p->slot;
    /* The lane matched fn's low half only: its high half must match too (a
     * function 4 GiB away, first called here, would count as this one until
     * the slow path marks the key PT_LANE_SHARED).  About 5 % of the hooks'
     * cost on Lua: a silent miscount is worse. */
    if (PT_UNLIKELY((word >> PT_LANE_FNHI_SHIFT & PT_LANE_FNHI) != (uint64_t)fn >> 32))
        goto slow;
    if (PT_UNLIKELY(top <= slot || top >= t->stk_hi || (word & PT_LANE_OFF) == PT_LANE_OFF)) {
        /* An inlined context on the top entry's own slot. */
        if (!((word & PT_LANE_INLINED) && top < t->stk_hi &&
              (word & PT_LANE_OFF) != PT_LANE_OFF &&
              pt_known_inline(p, slot, (uint32_t)(uintptr_t)__builtin_return_address(0),
                              (uint32_t)(uintptr_t)site_)))
            goto slow;
    }
    pt_push_known(t, p, d, fn, node, slot, (uint32_t)(uintptr_t)__builtin_return_address(0),
                  (uint32_t)(uintptr_t)site_);
    return;
cold:
    pt_enter_cold(t, fn, (uintptr_t)site_, (uintptr_t)__builtin_dwarf_cfa(),
                  (uintptr_t)__builtin_return_address(0));
    return;
slow:
    pt_enter_guarded(t, fn, (uintptr_t)site_, (uintptr_t)__builtin_dwarf_cfa(),
                     (uintptr_t)__builtin_return_address(0));
}

PT_EXPORT void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)site;
    uint64_t now = pt_g.timed ? pt_call_end_raw() : 0;  /* first, for the same reason */
    uintptr_t cfa = (uintptr_t)__builtin_dwarf_cfa();
    pt_hook_tstate *t = pt_tls;
    if (PT_UNLIKELY(!t))
        return;
    uint32_t d = t->depth;
    pt_entry *e = &t->stack[d];
    /* gcc may tail-call this hook after the function's epilogue (jmp): the
     * hook's CFA is then just above the return slot, slot + 8.  One test for
     * every way out: re-entry, another function on top, dead frames above,
     * an entry with flags. */
    if (PT_UNLIKELY((t->guard | (e->fn ^ (uintptr_t)fn) | e->flags |
                     (uint64_t)(e->slot + sizeof(uintptr_t) < cfa)) != 0)) {
        if (!t->busy)  /* busy: a signal handler's code re-entering, ignored */
            pt_exit_guarded(t, (uintptr_t)fn, cfa, now - t->setup);
        return;
    }
    if (pt_g.timed)
        pt_finish(t, e, now - t->setup);  /* flags are 0 here: only the timed update */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pt_set_depth(t, d - 1);
}
