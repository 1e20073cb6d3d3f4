/* Per-thread profiling clocks and the signal that delivers their ticks, shared by
 * the sampler (csrc/sampler) and the hook runtime (csrc/hook): one implementation.
 *
 * Each armed thread gets its own clock, so every thread is ticked in
 * proportion to its own CPU time (a process-wide ITIMER_PROF skews that):
 * perf_event task-clock per thread where allowed, else timer_create on the
 * thread's CPU clock, or CLOCK_MONOTONIC for wall-clock profiling.  The
 * signal is SIGPROF unless the target owns it; pt_timer_interpose.c keeps it
 * so for the target's lifetime (sigaction/signal, close*, exec*).
 *
 * The caller supplies the SA_SIGINFO handler; the handler may use the inline
 * helpers below (async-signal-safe).  Everything else here is not
 * async-signal-safe unless its comment says so.
 */
#ifndef PT_TIMER_H
#define PT_TIMER_H

#include <signal.h>
#include <stdint.h>

#include "pt_common.h"

#define PT_TIMER_DEFAULT_FREQUENCY 1000
#define PT_TIMER_MAX_FREQUENCY 10000
#define PT_TIMER_MAX_THREADS 4096          /* armed-thread registry (fork, signal moves) */
#define PT_TIMER_ALTSTACK_SIZE (64u << 10) /* the handler's signal stack per thread */

/* What a runtime's header says about the clock (the sampler's PT_SMP_* bits and
 * the hook's timer_flags use these values; both static-assert it). */
enum pt_timer_flags {
    PT_TIMER_PERF = 1u << 0,         /* perf_event task-clock per thread */
    PT_TIMER_POSIX = 1u << 1,        /* timer_create per thread (fallback or wall clock) */
    PT_TIMER_SIGNAL_MOVED = 1u << 2, /* the target owns SIGPROF: another signal is used */
    PT_TIMER_USER_ONLY = 1u << 5,    /* perf may not count kernel time here: user time only */
};

/* A runtime header's own names for the flags above must have their values: a
 * compile-time check, one per runtime (a flag added here changes every check). */
#define PT_TIMER_FLAGS_ARE(perf, posix, signal_moved, user_only, message)                         \
    _Static_assert((unsigned)(perf) == (unsigned)PT_TIMER_PERF &&                                  \
                       (unsigned)(posix) == (unsigned)PT_TIMER_POSIX &&                            \
                       (unsigned)(signal_moved) == (unsigned)PT_TIMER_SIGNAL_MOVED &&              \
                       (unsigned)(user_only) == (unsigned)PT_TIMER_USER_ONLY,                      \
                   message)

/* Settings, read once from the environment (pt_timer_config_from_env). */
struct pt_timer_config {
    uint64_t period_ns; /* PROFTUI_FREQUENCY (default 1000 Hz, at most 10 kHz) */
    int wall_clock;     /* PROFTUI_WALL_CLOCK=1: CLOCK_MONOTONIC timers */
    int force_timer;    /* PROFTUI_SAMPLER_CLOCK=timer: skip perf_event (tests, benchmarks) */
    int user_only;      /* PROFTUI_SAMPLER_KERNEL=0: never count kernel time */
};

/* The signal in use (0 before init); the interposers and handlers read it. */
extern PT_HIDDEN int pt_timer_signal;
/* 1 once pt_timer_init succeeded in this process (0 again in an unfollowed fork
 * child): the interposers pass everything through while it is 0. */
extern PT_HIDDEN int pt_timer_on;

/* Read PROFTUI_FREQUENCY, PROFTUI_WALL_CLOCK, PROFTUI_SAMPLER_CLOCK and
 * PROFTUI_SAMPLER_KERNEL.  Constructor only (getenv). */
PT_HIDDEN void pt_timer_config_from_env(struct pt_timer_config *cfg);

/* Choose the clock and the signal, install `handler` (SA_SIGINFO, on the
 * alternate stack).  `describe` (may be NULL) is called whenever the signal
 * changes (a move), so the runtime's header can say so.  0, or -1 when
 * nothing can tick. */
PT_HIDDEN int pt_timer_init(const struct pt_timer_config *cfg,
                            void (*handler)(int, siginfo_t *, void *), void (*describe)(void));

/* Give the calling thread an alternate signal stack and start its clock.
 * 0; -1 when this thread stays unticked; -2 when the registry is full. */
PT_HIDDEN int pt_timer_thread_arm(void);
/* Stop the calling thread's clock and drop the alternate stack we gave it. */
PT_HIDDEN void pt_timer_thread_disarm(void);
/* 1 if the calling thread's clock runs. */
PT_HIDDEN int pt_timer_thread_armed(void);

/* Fork child: close the perf events inherited from the parent's threads and
 * forget the registry; unless `keep`, stop ticking in this process.  The
 * caller arms the calling thread again if it keeps ticking. */
PT_HIDDEN void pt_timer_fork_child(int keep);
/* Stop (1) or restart (0) every armed clock, around exec. */
PT_HIDDEN void pt_timer_pause_all(int pause);
/* The target claimed pt_timer_signal: move every clock to another.  0 or -1. */
PT_HIDDEN int pt_timer_move_signal(void);
/* Resolve the real functions pt_timer_interpose.c wraps (dlsym): a runtime's
 * constructor calls it so that close() never has to.  Not async-signal-safe. */
PT_HIDDEN void pt_timer_interpose_resolve(void);
/* 1 if `handler` is the one pt_timer_init installed. */
PT_HIDDEN int pt_timer_is_ours(void *handler);
/* sigaction() of the next object (libc), bypassing our interposer. */
PT_HIDDEN int pt_timer_real_sigaction(int sig, const struct sigaction *act,
                                      struct sigaction *old);
/* 1 if `fd` is one of our perf events.  Async-signal-safe. */
PT_HIDDEN int pt_timer_owns_fd(int fd);
/* Our fds in [first, last], increasing, at most `max`; the count. */
PT_HIDDEN int pt_timer_fds_in(unsigned first, unsigned last, int *fds, int max);

/* The clock's name for a file header ("perf task-clock", ...).  Async-signal-safe. */
PT_HIDDEN const char *pt_timer_clock_name(void);
/* PT_TIMER_* bits describing the clock and signal.  Async-signal-safe. */
PT_HIDDEN uint32_t pt_timer_flags(void);

/* Is this signal a tick of ours (perf overflow or our POSIX timer), rather than
 * a kill() or a leftover of a signal the target now owns?  Async-signal-safe. */
static inline __attribute__((no_instrument_function)) int pt_timer_is_tick(const siginfo_t *info)
{
    return info->si_code == SI_TIMER || info->si_code == POLL_IN || info->si_code == POLL_HUP;
}

/* Periods one tick stands for: a POSIX CPU timer fires at most once per kernel
 * tick and si_overrun says how many periods it skipped.  Async-signal-safe. */
static inline __attribute__((no_instrument_function)) uint64_t pt_timer_weight(const siginfo_t *info)
{
    return 1 + (info->si_code == SI_TIMER && info->si_overrun > 0 ? (uint64_t)info->si_overrun : 0);
}

#endif /* PT_TIMER_H */
