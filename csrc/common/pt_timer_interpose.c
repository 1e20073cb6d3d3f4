/* Interposers that keep the profiling clocks of pt_timer.c working for the
 * target's lifetime, in every runtime that ticks (sampler, hook):
 *   sigaction/signal  a target that takes over our signal gets it; we move
 *   close, close_range, closefrom  a target closing "every fd" keeps ours open
 *   execve, execv, execvp, execvpe, execl, execlp, execle, fexecve  clocks stop
 *                   before the exec (a tick landing after it would kill the new image):
 *                   pt_exec_before/pt_exec_failed, the hooks of pt_exec.c
 * While pt_timer_on is 0 (no clock in this process) each one is the real call.
 * None of them is async-signal-safe except close(), which stays as safe as the
 * libc close() it wraps.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pt_exec.h"
#include "pt_timer.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define PT_INTERPOSE __attribute__((visibility("default"), no_instrument_function))

/* The real functions, resolved once by pt_timer_interpose_resolve (a runtime's
 * constructor) or on first use; close() never resolves in a call (it may run
 * in a signal handler) and makes the system call itself until then. */
static sighandler_t (*pt_real_signal)(int, sighandler_t);
static int (*pt_real_close)(int);
static int (*pt_real_close_range)(unsigned, unsigned, int);

/* Resolve the real functions.  Not async-signal-safe (dlsym): constructors. */
PT_HIDDEN void pt_timer_interpose_resolve(void) {
    if (pt_real_signal == NULL)
        pt_real_signal = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
    if (pt_real_close == NULL) pt_real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    if (pt_real_close_range == NULL)
        pt_real_close_range = (int (*)(unsigned, unsigned, int))dlsym(RTLD_NEXT, "close_range");
    struct sigaction old;
    pt_timer_real_sigaction(SIGPROF, NULL, &old); /* resolves it: a handler may call sigaction */
}

/* ---- sigaction / signal -------------------------------------------------------- */

/* What a target asking about our signal sees: the default it would have. */
static void pt_fake_default(struct sigaction *old) {
    if (old == NULL) return;
    memset(old, 0, sizeof *old);
    old->sa_handler = SIG_DFL;
    sigemptyset(&old->sa_mask);
}

PT_INTERPOSE int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!PT_GET(pt_timer_on) || sig != PT_GET(pt_timer_signal))
        return pt_timer_real_sigaction(sig, act, old);
    if (act == NULL) {
        pt_fake_default(old);
        return 0;
    }
    void *handler =
        (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction : (void *)act->sa_handler;
    if (pt_timer_is_ours(handler)) return pt_timer_real_sigaction(sig, act, old);
    if (handler == (void *)SIG_DFL) { /* "back to the default": it already looks so */
        pt_fake_default(old);
        return 0;
    }
    pt_timer_move_signal(); /* the target owns this signal from now on */
    int rc = pt_timer_real_sigaction(sig, act, NULL);
    if (rc == 0) pt_fake_default(old);
    return rc;
}

PT_INTERPOSE sighandler_t signal(int sig, sighandler_t handler) {
    pt_timer_interpose_resolve();
    if (pt_real_signal == NULL) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    if (!PT_GET(pt_timer_on) || sig != PT_GET(pt_timer_signal)) return pt_real_signal(sig, handler);
    if (handler == SIG_DFL) return SIG_DFL; /* it already looks like the default */
    pt_timer_move_signal();
    sighandler_t previous = pt_real_signal(sig, handler);
    return previous == SIG_ERR ? SIG_ERR : SIG_DFL;
}

/* ---- close / close_range / closefrom ------------------------------------------ */

/* Async-signal-safe, like the close() it wraps (no lock, no allocation). */
PT_INTERPOSE int close(int fd) {
    if (pt_timer_owns_fd(fd)) return 0; /* pretend: our perf event stays armed */
    int (*real)(int) = pt_real_close;
    if (real == NULL) return (int)syscall(SYS_close, fd);
    return real(fd);
}

static int pt_close_range_raw(unsigned first, unsigned last, int flags) {
    if (pt_real_close_range != NULL) return pt_real_close_range(first, last, flags);
    return (int)syscall(SYS_close_range, first, last, flags);
}

/* Close [first, last] except our perf events. */
PT_INTERPOSE int close_range(unsigned first, unsigned last, int flags) {
    pt_timer_interpose_resolve();
    if (flags & CLOSE_RANGE_CLOEXEC) return pt_close_range_raw(first, last, flags);
    int ours[64];
    int n = pt_timer_fds_in(first, last, ours, 64);
    unsigned from = first;
    for (int i = 0; i < n; i++) {
        if ((unsigned)ours[i] > from && pt_close_range_raw(from, (unsigned)ours[i] - 1, flags) != 0)
            return -1;
        from = (unsigned)ours[i] + 1;
    }
    if (from <= last && (n == 0 || (unsigned)ours[n - 1] < last))
        return pt_close_range_raw(from, last, flags);
    return 0;
}

PT_INTERPOSE void closefrom(int lowfd) {
    if (lowfd < 0) lowfd = 0;
    if (close_range((unsigned)lowfd, ~0u, 0) == 0) return;
    for (int fd = lowfd; fd < 65536; fd++) close(fd); /* close_range not in this kernel */
}

/* ---- exec (the wrappers themselves: pt_exec.c, shared with the heap runtime) ---- */

/* Pause every clock before an exec: a tick landing after the point of no
 * return would kill the new image.  Not async-signal-safe. */
void pt_exec_before(void) {
    if (PT_GET(pt_timer_on)) pt_timer_pause_all(1);
}

/* The exec failed: the clocks run again.  Not async-signal-safe. */
void pt_exec_failed(void) {
    if (PT_GET(pt_timer_on)) pt_timer_pause_all(0);
}
