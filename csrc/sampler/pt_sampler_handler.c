/* The sampling signal handler: unwind the interrupted stack into a local
 * array, count it in the stack table (csrc/common/pt_stacktab.c) and note
 * which stack and when in this thread's ring.  No locks, no allocation,
 * errno preserved. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <time.h>

#include "pt_maps.h"
#include "pt_sampler.h"
#include "pt_timer.h"

_Static_assert((unsigned)PT_UNWIND_TRUNCATED == (unsigned)PT_SREC_TRUNCATED &&
                   (unsigned)PT_UNWIND_DEPTH == (unsigned)PT_SREC_DEPTH,
               "the unwinder's flags are the record's flags");
#define PT_SAMPLER_REC_FLAGS (PT_SREC_TRUNCATED | PT_SREC_OFFSTACK | PT_SREC_DEPTH)

/* Async-signal-safe. */
unsigned pt_sampler_unwind(const void *ucontext, const struct pt_sampler_thread *self,
                           uint64_t *frames, unsigned max, unsigned *flags) {
    struct pt_regs regs;
    if (pt_arch_ucontext_regs(ucontext, &regs) != 0) { /* an architecture we cannot read */
        *flags |= PT_SREC_TRUNCATED;
        return 0;
    }
    if (regs.sp < self->stack_lo || regs.sp >= self->stack_hi) {
        frames[0] = regs.pc;
        *flags |= PT_SREC_OFFSTACK; /* sigaltstack or a coroutine stack: pc only */
        return 1;
    }
    /* The live stack from sp up is mapped: read it in place, each page once
     * probed (the program may have made one unreadable). */
    uintptr_t probed = regs.sp & ~(uintptr_t)7; /* bit 0: a page was unreadable */
    struct pt_memory mem = {regs.sp, self->stack_hi, (const unsigned char *)regs.sp, 1, &probed};
    const struct pt_cfi_set *set = __atomic_load_n(&pt_maps_cfi, __ATOMIC_ACQUIRE);
    unsigned n = pt_unwind_walk(set, &mem, &regs, frames, max, flags);
    *flags &= PT_SAMPLER_REC_FLAGS;
    if ((*flags & PT_SREC_TRUNCATED) && (probed & 1)) /* cut at a page it could not read */
        *flags |= PT_SREC_UNREADABLE;
    return n;
}

/* CLOCK_MONOTONIC in ns (the vDSO: no system call).  Async-signal-safe
 * (clock_gettime is on POSIX's list). */
static uint64_t pt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Note the sample's stack id, weight and time `now_ns` in the thread's ring; a
 * full ring drops the note (the sample is counted in the stack table anyway).
 * Async-signal-safe. */
static void pt_ring_put(const struct pt_sampler_thread *self, uint32_t id, uint64_t weight,
                        uint64_t now_ns) {
    pt_sampler_slot *slot = self->slot;
    uint64_t head = slot->head; /* only this thread writes head */
    uint64_t tail = __atomic_load_n(&slot->tail, __ATOMIC_ACQUIRE);
    __atomic_store_n(&slot->samples, slot->samples + 1, __ATOMIC_RELAXED);
    if (self->mask + 1 - (head - tail) < PT_SAMPLER_RECORD_WORDS) {
        __atomic_add_fetch(&slot->dropped, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&pt_sampler_file.smp->ring_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    self->ring[head & self->mask] = (uint64_t)id | (weight << 32);
    self->ring[(head + 1) & self->mask] = now_ns;
    __atomic_store_n(&slot->head, head + PT_SAMPLER_RECORD_WORDS, __ATOMIC_RELEASE);
}

/* When a handler next reads what the jitdump gained (pt_maps_try_jit): shared
 * by every thread's handler, so the process polls every PT_JIT_POLL_NS at
 * most, whichever thread's tick comes. */
static uint64_t pt_jit_next_ns;
#define PT_JIT_POLL_NS 100000000ull

/* Poll the jitdump if it is `now` time (one thread wins the slot).  Async-signal-safe. */
static void pt_jit_tick(uint64_t now) {
    if (pt_sampler_cfg.fp_only) return;
    uint64_t next = __atomic_load_n(&pt_jit_next_ns, __ATOMIC_RELAXED);
    if (now < next || !__atomic_compare_exchange_n(&pt_jit_next_ns, &next, now + PT_JIT_POLL_NS,
                                                   0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    pt_maps_try_jit(now);
}

/* SA_SIGINFO handler for the clocks' signal (pt_timer_signal).  Async-signal-safe. */
void pt_sampler_on_signal(int sig, siginfo_t *info, void *ucontext) {
    (void)sig;
    int saved_errno = errno;
    const struct pt_sampler_thread *self = &pt_sampler_self;
    if (self->slot != NULL && pt_timer_is_tick(info) && pt_sampler_file.hdr != NULL &&
        !(__atomic_load_n(&pt_sampler_file.hdr->control, __ATOMIC_RELAXED) & PT_CONTROL_PAUSED)) {
        if (self->ring == NULL) { /* no space for a ring: count the sample, unwind nothing */
            __atomic_add_fetch(&pt_sampler_file.hdr->dropped, 1, __ATOMIC_RELAXED);
            errno = saved_errno;
            return;
        }
        uint64_t frames[PT_SAMPLER_MAX_FRAMES];
        unsigned flags = 0;
        unsigned n = pt_sampler_unwind(ucontext, self, frames, PT_SAMPLER_MAX_FRAMES, &flags);
        uint64_t weight = pt_timer_weight(info); /* periods this one sample stands for */
        if (n > 0) {
            uint32_t id = pt_stacktab_count(&pt_sampler_file.stacks, self->tid, flags,
                                            frames, n, weight);
            uint64_t now = pt_now_ns(); /* one clock read serves both */
            pt_ring_put(self, id, weight, now);
            pt_jit_tick(now); /* tables of new generated code, for the next walks */
        }
    }
    errno = saved_errno;
}
