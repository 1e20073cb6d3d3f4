/*
 * pt_hook_tick.c - time by sampling the calling context (the default).
 *
 * Each thread that calls an instrumented function gets its own clock
 * (csrc/common/pt_timer.c: perf task-clock, else a timer on the thread's CPU
 * clock; CLOCK_MONOTONIC with PROFTUI_WALL_CLOCK=1).  Every period its
 * handler adds one tick to the thread's current node (pt_hook_tstate.cur,
 * which the hooks keep exact as they keep the call counts): constant time,
 * no unwinding, no lock, no allocation.  A tick whose interrupted code is the
 * hook library's own (or any slow path: `busy`) goes to the node's
 * hook_ticks, shown as an [instrumentation] row under it, so the hooks' cost
 * is visible rather than spread over the program's functions.  The hooks
 * themselves then read no clock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <string.h>

#include "arch/pt_arch.h"
#include "pt_hook.h"

PT_TIMER_FLAGS_ARE(PT_HOOK_TIMER_PERF, PT_HOOK_TIMER_POSIX, PT_HOOK_TIMER_SIGNAL_MOVED,
                   PT_HOOK_TIMER_USER_ONLY, "the hook file's timer flags are the common timer's");

/* The interrupted program counter, or 0 where this architecture's ucontext
 * cannot be read.  Async-signal-safe. */
static inline PT_NOINST uintptr_t pt_tick_where(const void *ucontext)
{
    struct pt_regs regs;
    return pt_arch_ucontext_regs(ucontext, &regs) == 0 ? regs.pc : 0;
}

/* Add `w` to a counter only this thread's handler writes; one store, so the
 * front end never reads a torn value.  Async-signal-safe. */
static inline PT_NOINST void pt_tick_add(uint64_t *counter, uint64_t w)
{
    __atomic_store_n(counter, *counter + w, __ATOMIC_RELAXED);
}

/* Count a tick of `node` at `pc` in the thread's pc table: at most
 * PT_HOOK_PC_PROBES slots looked at; a new entry's pc is stored last, so the
 * reader never sees a pc with another entry's node.  Only this thread's
 * handler writes the table.  Async-signal-safe. */
static inline PT_NOINST void pt_tick_count_pc(pt_hook_tstate *t, uint32_t node, uintptr_t pc,
                                        uint64_t w)
{
    pt_hook_pc *table = t->pcs;
    if (table == NULL || pc == 0)
        return;
    uint32_t mask = t->pc_mask;
    uint64_t h = ((uint64_t)pc ^ ((uint64_t)node << 40)) * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 40);
    for (uint32_t k = 0; k < PT_HOOK_PC_PROBES; k++, i++) {
        pt_hook_pc *e = &table[i & mask];
        if (e->pc == pc && e->node == node) {
            __atomic_store_n(&e->count, e->count + (uint32_t)w, __ATOMIC_RELAXED);
            return;
        }
        if (e->pc == 0) {
            e->node = node;
            e->count = (uint32_t)w;
            __atomic_store_n(&e->pc, (uint64_t)pc, __ATOMIC_RELEASE);
            return;
        }
    }
    pt_tick_add(&pt_g.threads[t->slot].pcs_dropped, w);
}

/* SA_SIGINFO handler of the clocks' signal.  Async-signal-safe: reads the
 * thread's current node and adds the tick to it (and, outside the hook
 * library, to its pc table); errno kept. */
static PT_NOINST void pt_hook_on_tick(int sig, siginfo_t *info, void *ucontext)
{
    (void)sig;
    int saved_errno = errno;
    pt_hook_tstate *t = pt_tls;
    if (t != NULL && t->ticking && pt_timer_is_tick(info) && pt_g.hdr != NULL &&
        !(__atomic_load_n(&pt_g.hdr->control, __ATOMIC_RELAXED) & PT_CONTROL_PAUSED)) {
        uint64_t w = pt_timer_weight(info);
        uint32_t node = __atomic_load_n(&t->cur, __ATOMIC_ACQUIRE);
        uintptr_t pc = pt_tick_where(ucontext);
        int hook = t->busy || (pc >= pt_g.text_lo && pc < pt_g.text_hi);
        if (node == PT_HOOK_ROOT) {
            pt_hook_thread *th = &pt_g.threads[t->slot];
            pt_tick_add(hook ? &th->hook_ticks : &th->ticks, w);
        } else if (node < pt_g.node_cap && pt_node(node) != NULL) {
            pt_hook_node *n = pt_node(node);
            pt_tick_add(hook ? &n->hook_ticks : &n->ticks, w);
        } else {
            __atomic_fetch_add(&pt_g.hook->ticks_unplaced, w, __ATOMIC_RELAXED);
            hook = 1;  /* nothing to refine */
        }
        if (!hook)
            pt_tick_count_pc(t, node, pc, w);
    }
    errno = saved_errno;
}

/* dl_iterate_phdr callback: the executable segments of the object holding
 * this file's code.  Start-up only. */
static PT_NOINST int pt_text_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    uintptr_t self = (uintptr_t)&pt_hook_on_tick, lo = UINTPTR_MAX, hi = 0;
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
        inside |= self >= a && self < b;
    }
    if (!inside)
        return 0;
    pt_g.text_lo = lo;
    pt_g.text_hi = hi;
    return 1;
}

/* Clock name, period, signal and flags into the file's headers (after init,
 * a signal move, a fork child's new file).  Async-signal-safe. */
PT_NOINST void pt_hook_tick_describe(void)
{
    if (!pt_g.ticking || pt_g.hdr == NULL)
        return;
    const char *name = pt_timer_clock_name();
    size_t len = strnlen(name, sizeof pt_g.hdr->clock - 1);
    memcpy(pt_g.hdr->clock, name, len);
    pt_g.hdr->clock[len] = '\0';
    pt_g.hdr->period_ns = pt_g.opt.timer.period_ns;
    if (pt_g.opt.timer.wall_clock)
        pt_g.hdr->flags |= PT_FLAG_WALL_CLOCK;
    pt_g.hook->timer_signal = (uint32_t)PT_GET(pt_timer_signal);
    pt_g.hook->timer_flags = pt_timer_flags();
}

/* Choose the clock and the signal, install the handler.  0, or -1 (no
 * clock: the run counts calls only).  Start-up only, not async-signal-safe. */
PT_NOINST int pt_hook_tick_init(void)
{
    dl_iterate_phdr(pt_text_cb, NULL);
    return pt_timer_init(&pt_g.opt.timer, pt_hook_on_tick, pt_hook_tick_describe);
}

/* Start the calling thread's clock (its first hook call; a fork child's
 * thread).  `t` is registered; the handler may charge it from the moment the
 * clock runs.  Not async-signal-safe (perf_event_open, a mutex). */
PT_NOINST void pt_hook_tick_arm(pt_hook_tstate *t)
{
    if (!pt_g.ticking || !PT_GET(pt_timer_on))
        return;
    t->ticking = 1;
    if (pt_timer_thread_arm() != 0)
        t->ticking = 0;  /* this thread's calls are counted, its time is not */
}

/* Stop the calling thread's clock; later signals find it not ticking.
 * Not async-signal-safe (a mutex). */
PT_NOINST void pt_hook_tick_disarm(pt_hook_tstate *t)
{
    if (t != NULL)
        t->ticking = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pt_timer_thread_disarm();
}
