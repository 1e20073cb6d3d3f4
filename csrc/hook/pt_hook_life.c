/*
 * pt_hook_life.c - the hook runtime's threads and process life: thread
 * registration and exit, calibration of the hooks' own cost, fork, start-up
 * and clean exit.  The hooks themselves are in proftui_hook.c.
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
#include "pt_runfile.h"

#define PT_HASH_INITIAL 256u /* buckets of a thread's first table (16 KiB, 341 contexts) */

/* Set once the constructor has read PROFTUI_* (pt_hook_init then skips it). */
static int pt_options_done;
/* Destructor key: detaches a thread's state when it exits. */
static pthread_key_t pt_key;

static void pt_hook_init(void) PT_NOINST;

/* ---- threads ------------------------------------------------------------------ */

/* Copy the calling thread's name into its table slot.  Async-signal-safe. */
static PT_NOINST void pt_thread_name(pt_hook_tstate *t)
{
    char name[16] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    name[15] = '\0';
    memcpy(pt_g.threads[t->slot].name, name, sizeof name);
}

/* Give a registered thread its pc table (pt_hook_pc): 2^k whole chunks of the
 * node pool, backed now since the clock's handler may write anywhere in it.
 * None when the pool is small (under 128 chunks) or cannot back it: the
 * thread's ticks then stay whole in its nodes.  Async-signal-safe. */
static PT_NOINST void pt_thread_pcs(pt_hook_tstate *t, pt_hook_thread *th)
{
    t->pcs = NULL;
    th->pcs_chunk = PT_NONE;
    if (!pt_g.ticking)
        return;
    uint32_t k = pt_g.chunk_cap / 128;
    k = k >= 8 ? 8 : k >= 4 ? 4 : k >= 2 ? 2 : k;
    if (!k)
        return;
    /* Aligned to k: the k chunks lie in one window of the pool (contiguous). */
    uint32_t c = pt_hook_chunks_claim(k);
    size_t bytes = (size_t)k * PT_CHUNK_NODES * sizeof(pt_hook_node);
    if (c == PT_NONE || pt_hook_reserve(&pt_g.chunks[c], k * sizeof(pt_hook_chunk)) != 0 ||
        pt_region_back(&pt_g.nodes, (uint64_t)c * PT_CHUNK_NODES,
                       (uint64_t)(c + k) * PT_CHUNK_NODES) != 0)
        return;  /* the chunks stay handed out, unused: count 0 */
    for (uint32_t i = 0; i < k; i++)
        pt_g.chunks[c + i].thread = t->slot | PT_HOOK_CHUNK_PCS;
    t->pcs = (pt_hook_pc *)(void *)pt_node(c * PT_CHUNK_NODES);
    t->pc_mask = (uint32_t)(bytes / sizeof(pt_hook_pc)) - 1;
    th->pcs_entries = t->pc_mask + 1;
    __atomic_store_n(&th->pcs_chunk, c, __ATOMIC_RELEASE);
}

/* Register the calling thread in the file's thread table.  Async-signal-safe. */
static PT_NOINST void pt_thread_register(pt_hook_tstate *t)
{
    uint32_t slot = __atomic_fetch_add(&pt_g.thread_next, 1, __ATOMIC_RELAXED);
    if (slot < PT_THREAD_CAP)
        pt_publish_max32(&pt_g.hook->thread_count, slot + 1);
    if (slot >= PT_THREAD_CAP || pt_hook_reserve(&pt_g.threads[slot], sizeof(pt_hook_thread)) != 0) {
        t->busy = 1;  /* table full (or no space for its entry): this thread records nothing */
        __atomic_fetch_add(&pt_g.hdr->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    t->slot = slot;
    pt_hook_thread *th = &pt_g.threads[slot];
    pt_thread_name(t);
    th->state = 1;
    th->live = (uint64_t)(uintptr_t)t;
    pt_thread_pcs(t, th);
    __atomic_store_n(&th->tid, (uint32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
}

/* The calling thread's stack bounds, so calls on another stack (a signal
 * handler on a sigaltstack) are told apart from stale frames.  Not
 * async-signal-safe (pthread_getattr_np reads /proc for the main thread):
 * a thread's first hook call only. */
static PT_NOINST void pt_thread_stack(pt_hook_tstate *t)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size) {
        t->stk_lo = (uintptr_t)addr;
        t->stk_hi = (uintptr_t)addr + size;
        t->stack[0].slot = t->stk_hi - 1;  /* above every frame of this stack */
    }
    pthread_attr_destroy(&attr);
}

/* Map a thread's state and a small shadow stack (PT_STACK_INITIAL entries,
 * grown as calls go deeper: pt_stack_grow); NULL if memory is refused (noted).
 * Async-signal-safe (mmap). */
static PT_NOINST pt_hook_tstate *pt_thread_new(void)
{
    size_t head = (sizeof(pt_hook_tstate) + 4095) & ~(size_t)4095;
    for (uint32_t cap = PT_STACK_INITIAL; cap >= 1024; cap /= 4) {
        size_t bytes = (size_t)cap * sizeof(pt_entry);
        void *p = mmap(NULL, head, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *s = p == MAP_FAILED ? MAP_FAILED
                                  : mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (s == MAP_FAILED) {
            pt_note_map_failure(PT_NOTE_SHADOW, head + bytes, errno);
            if (p != MAP_FAILED)
                munmap(p, head);
            continue;
        }
        pt_hook_tstate *t = p;
        t->hash = pt_hash_alloc(PT_HASH_INITIAL);
        if (!t->hash) {
            munmap(s, bytes);
            munmap(p, head);
            return NULL;
        }
        t->hash_mask = PT_HASH_INITIAL - 1;
        t->hash_shift = 64 - (uint32_t)__builtin_ctz(PT_HASH_INITIAL);
        t->region = head;
        t->stack_bytes = bytes;
        t->cap = cap;
        t->limit = 1;
        t->stack = s;
        t->stk_hi = UINTPTR_MAX;
        t->stack[0].slot = UINTPTR_MAX - 1;  /* the sentinel is never stale */
        t->stack[0].anode = PT_HOOK_ROOT;
        t->cur = PT_HOOK_ROOT;
        t->chunk = PT_NONE;
        return t;
    }
    return NULL;
}

/* First hook call of a thread: initialise the runtime if needed, then the
 * thread.  Returns NULL when this call must not be recorded.
 * Not async-signal-safe on the process's very first call (pt_hook_init). */
PT_NOINST pt_hook_tstate *pt_thread_attach(void)
{
    int state = __atomic_load_n(&pt_g.state, __ATOMIC_ACQUIRE);
    if (state == PT_STATE_UNINIT) {
        pt_hook_init();
        state = __atomic_load_n(&pt_g.state, __ATOMIC_ACQUIRE);
    }
    if (state != PT_STATE_READY)
        return NULL;  /* initialising in another thread: try again next call */
    pt_hook_tstate *t = pt_thread_new();
    if (!t) {
        pt_tls = &pt_off_thread;
        return NULL;
    }
    pt_thread_register(t);
    if (t->busy) {
        pt_tls = t;  /* thread table full: t stays busy, this thread records nothing */
        return NULL;
    }
    /* Busy while libc runs (it may call instrumented code, e.g. a malloc built
     * with -finstrument-functions): those calls are ignored, not recursed into. */
    t->busy = 1;
    pt_tls = t;
    pt_thread_stack(t);
    pthread_setspecific(pt_key, t);
    pt_hook_tick_arm(t);
    t->busy = 0;
    return t;
}

/* Thread exit (TSD destructor): stop the thread's clock, close open entries,
 * mark the slot exited, unmap.  Not async-signal-safe (the clock's mutex):
 * runs from pthread_exit only. */
static PT_NOINST void pt_thread_detach(void *arg)
{
    pt_hook_tstate *t = arg;
    pt_tls = &pt_off_thread;  /* first: a tick from here on charges nothing */
    if (t == &pt_off_thread || t == NULL)
        return;
    pt_hook_tick_disarm(t);
    if (!t->busy && pt_g.hook) {
        uint64_t now = pt_g.timed ? pt_thread_now(t) : 0;
        pt_hook_close_all(t, now);
        pt_thread_name(t);  /* threads often name themselves after starting */
        __atomic_store_n(&pt_g.threads[t->slot].state, 2, __ATOMIC_RELEASE);
    }
    munmap(t->hash, pt_hash_bytes(t));
    for (uint32_t i = 0; i < t->nretired; i++)
        munmap(t->retired[i].table, t->retired[i].bytes);
    munmap(t->stack, t->stack_bytes);
    munmap(t, t->region);
}

/* ---- calibration of the hooks' own cost ------------------------------------------ */

/* Indirect calls, like an instrumented program's calls through the PLT. */
static void (*volatile pt_enter_fp)(void *, void *) = __cyg_profile_func_enter;
static void (*volatile pt_exit_fp)(void *, void *) = __cyg_profile_func_exit;

/* What gcc makes of an empty function with -finstrument-functions.  Calibration only. */
static __attribute__((noinline)) PT_NOINST void pt_calib_fn(void)
{
    pt_enter_fp((void *)pt_calib_fn, __builtin_return_address(0));
    __asm__ volatile("" ::: "memory");
    pt_exit_fp((void *)pt_calib_fn, __builtin_return_address(0));
}

/* The same without hooks.  Calibration only. */
static __attribute__((noinline)) PT_NOINST void pt_calib_empty(void)
{
    __asm__ volatile("" ::: "memory");
}

/* Measure the ticks one enter/exit pair costs, split into the part inside the
 * callee's measured interval (inner: what an empty function records) and the
 * part left in its caller (outer: the rest of the pair's cost); minimum of
 * each over rounds.  An empty function is the right model: with plain rdtsc
 * a body's instructions partly overlap the timestamps, so measured costs of
 * real functions carry about the empty function's interval on top of their
 * work (checked against uninstrumented timings in the tests).  Runs on a
 * scratch thread state, then resets the pool.  Init only (before the file is
 * published). */
static PT_NOINST void pt_calibrate_overhead(void)
{
    enum { ROUNDS = 50, N = 800 };
    pt_hook_tstate *t = pt_thread_new();
    if (!t)
        return;
    t->slot = 0;
    pt_tls = t;
    /* Minimum of each loop on its own: a round whose empty loop was preempted
     * would make pair = hooked - empty negative, and the minimum of the
     * differences then threw the whole calibration away (0 ns recorded). */
    double best_empty = 1e300, best_hooked = 1e300, best_inner = 1e300;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = pt_ticks();
        for (int i = 0; i < N; i++)
            pt_calib_empty();
        uint64_t t1 = pt_ticks();
        uint64_t incl0 = t->chunk == PT_NONE ? 0 : pt_node(0)->incl;
        for (int i = 0; i < N; i++)
            pt_calib_fn();
        uint64_t t2 = pt_ticks();
        double empty = (double)(t1 - t0) / N, hooked = (double)(t2 - t1) / N;
        double inner = (double)((t->chunk == PT_NONE ? 0 : pt_node(0)->incl) - incl0) / N;
        best_empty = empty < best_empty ? empty : best_empty;
        best_hooked = hooked < best_hooked ? hooked : best_hooked;
        best_inner = inner < best_inner ? inner : best_inner;
    }
    pt_tls = NULL;
    double best_pair = best_hooked - best_empty;
    /* Left at 0 (the reader says "not calibrated") when nothing sensible came out. */
    if (best_pair > 0 && best_inner < 1e300) {
        pt_g.overhead_inner = best_inner;
        pt_g.overhead_outer = best_pair > best_inner ? best_pair - best_inner : 0;
    }
    /* Forget the scratch node(s): only the chunk the scratch thread got and the
     * module entries made, the only pages backed (pt_runfile.h). */
    pt_hook_header *h = pt_g.hook;
    if (t->chunk != PT_NONE) {
        memset(&pt_g.chunks[t->chunk], 0, sizeof(pt_hook_chunk));
        memset(pt_node(t->chunk * PT_CHUNK_NODES), 0, PT_CHUNK_NODES * sizeof(pt_hook_node));
    }
    uint32_t modules = pt_g.module_next < pt_g.module_limit ? pt_g.module_next : pt_g.module_limit;
    pt_g.chunk_next = 0;
    pt_g.module_next = 0;
    h->chunk_count = 0;
    h->module_count = 0;
    memset(&pt_g.threads[0], 0, sizeof(pt_hook_thread));
    memset(pt_g.modules, 0, modules * sizeof(pt_hook_module));
    h->overhead_inner = pt_g.overhead_inner;
    h->overhead_outer = pt_g.overhead_outer;
    munmap(t->hash, pt_hash_bytes(t));
    for (uint32_t i = 0; i < t->nretired; i++)
        munmap(t->retired[i].table, t->retired[i].bytes);
    munmap(t->stack, t->stack_bytes);
    munmap(t, t->region);
}

/* ---- process life --------------------------------------------------------------- */

/* fork child: a file of its own; the forking thread keeps its shadow stack,
 * re-rooted in the new file (open calls get nodes with 0 calls), and gets a
 * clock of its own (the parent's is the parent thread's).  Not
 * async-signal-safe (the clock's set-up), as pthread_atfork handlers need not be. */
static PT_NOINST void pt_hook_atfork_child(void)
{
    if (__atomic_load_n(&pt_g.state, __ATOMIC_ACQUIRE) != PT_STATE_READY)
        return;
    pt_hook_tstate *t = pt_tls;
    pt_filter_atfork_child();
    pt_note_fork_child();
    pt_hook_file_forget();  /* the parent's file: never write it from here */
    if (t && t != &pt_off_thread) {
        t->ticking = 0;  /* the parent thread's clock: not this thread's */
        t->pcs = NULL;   /* in the parent's file */
    }
    if (pt_hook_file_create() != 0) {
        __atomic_store_n(&pt_g.state, PT_STATE_OFF, __ATOMIC_RELEASE);
        if (t && t != &pt_off_thread)
            t->busy = 1;
        if (pt_g.ticking)
            pt_timer_fork_child(0);
        return;
    }
    if (pt_g.ticking)
        pt_timer_fork_child(1);  /* the new file already describes the clock */
    if (t && t != &pt_off_thread && !t->busy) {
        memset(t->hash, 0, pt_hash_bytes(t));
        t->hash_count = 0;
        t->chunk = PT_NONE;
        t->used = 0;
        t->pool_full = 0;
        pt_thread_register(t);
        uint64_t now = pt_g.timed ? pt_thread_now(t) : 0;
        for (uint32_t i = 1; i <= t->depth && !t->busy; i++) {
            pt_entry *e = &t->stack[i], *p = e - 1;
            e->ts = now;
            e->child = 0;
            e->up = pt_anchor(p, i - 1);
            uint32_t node = PT_NONE;
            if (!(e->flags & PT_ENTRY_UNRECORDED))
                node = pt_node_for(t, p->anode, e->fn);
            if (node == PT_NONE)
                e->flags |= PT_ENTRY_UNRECORDED;
            e->anchor = node != PT_NONE ? i : pt_anchor(p, i - 1);
            e->anode = node != PT_NONE ? node : p->anode;
        }
        pt_set_depth(t, t->depth);
        if (!t->busy)
            pt_hook_tick_arm(t);
    }
    pt_runfile_publish(pt_g.hdr);
}

/* Everything but the options: clock, file, calibration.  Runs once, from the
 * constructor or from the first hook call if an instrumented constructor ran
 * before ours.  Not async-signal-safe. */
static PT_NOINST void pt_hook_init(void)
{
    int expected = PT_STATE_UNINIT;
    if (!__atomic_compare_exchange_n(&pt_g.state, &expected, PT_STATE_BUSY, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    if (!__atomic_load_n(&pt_options_done, __ATOMIC_ACQUIRE))
        pt_options_read(&pt_g.opt);
    if (!pt_g.opt.dir || !*pt_g.opt.dir) {
        __atomic_store_n(&pt_g.state, PT_STATE_OFF, __ATOMIC_RELEASE);
        return;
    }
    pt_note_init(pt_g.opt.dir, "hook");  /* what cannot be mapped is said there */
    ssize_t n = readlink("/proc/self/exe", pt_g.exe, sizeof pt_g.exe - 1);
    pt_g.exe[n > 0 ? n : 0] = '\0';
    pt_g.timed = pt_g.opt.timed && !pt_g.opt.count_only;
    pt_g.ticking = !pt_g.opt.timed && !pt_g.opt.count_only;
    pt_g.max_depth = pt_g.opt.max_depth;
    pt_filter_init();
    /* Exclude patterns alone keep the fast path outside excluded calls
     * (pt_set_limit): -N on a short function must not slow every call. */
    pt_g.slow = pt_g.has_include || pt_g.max_depth;
    if (pt_g.timed)
        pt_clock_calibrate();  /* 2 ms: only timestamps need it */
    else
        pt_g.ns_per_tick = 1.0;
    if (pt_g.ticking && pt_hook_tick_init() != 0)
        pt_g.ticking = 0;  /* no clock can tick here: calls are counted, the notes say so */
    if (pt_hook_file_create() != 0 || pthread_key_create(&pt_key, pt_thread_detach) != 0) {
        __atomic_store_n(&pt_g.state, PT_STATE_OFF, __ATOMIC_RELEASE);
        return;
    }
    if (pt_g.timed)
        pt_calibrate_overhead();
    pt_modules_scan_all();
    pthread_atfork(NULL, NULL, pt_hook_atfork_child);
    pt_runfile_publish(pt_g.hdr);
    __atomic_store_n(&pt_g.state, PT_STATE_READY, __ATOMIC_RELEASE);
}

/* Reads the options only.  Nothing is created for processes that never call a
 * hook (an uninstrumented child started through the preload): the file
 * appears on the first call.  Not async-signal-safe (getenv, strdup): load time. */
__attribute__((constructor)) static PT_NOINST void pt_constructor(void)
{
    pt_timer_interpose_resolve();  /* so that close() never resolves in a signal handler */
    if (__atomic_load_n(&pt_g.state, __ATOMIC_ACQUIRE) != PT_STATE_UNINIT)
        return;  /* an instrumented constructor already initialised us */
    pt_options_read(&pt_g.opt);
    __atomic_store_n(&pt_options_done, 1, __ATOMIC_RELEASE);
}

/* Clean exit: stop the exiting thread's clock, close its open calls, refine
 * the clock, mark the file complete.  Not async-signal-safe (the clock's
 * mutex): exit() only. */
__attribute__((destructor)) static PT_NOINST void pt_destructor(void)
{
    if (__atomic_load_n(&pt_g.state, __ATOMIC_ACQUIRE) != PT_STATE_READY)
        return;
    pt_hook_tstate *t = pt_tls;
    if (pt_g.ticking)
        pt_hook_tick_disarm(t && t != &pt_off_thread ? t : NULL);
    if (t && t != &pt_off_thread && !t->busy) {
        t->busy = 1;
        uint64_t now = pt_g.timed ? pt_thread_now(t) : 0;
        pt_hook_close_all(t, now);
        pt_thread_name(t);
        t->busy = 0;
    }
    pt_clock_refine();
    __atomic_store_n(&pt_g.hdr->state, PT_STATE_EXITED, __ATOMIC_RELEASE);
}
