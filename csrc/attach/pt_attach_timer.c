/* proftui-attach, ptrace method: the target's own CPU-time timer decides
 * when and where samples are taken (issue 26).
 *
 * Polling /proc from the helper samples a thread when the helper gets a CPU,
 * which on a small machine depends on what the target is doing: system calls
 * got more than their share.  Instead, for the attach, the target is given
 * the clock gperftools' libprofiler uses: ITIMER_PROF, which the kernel
 * checks against the process's CPU time at each tick and signals to the
 * thread that is running.  That thread stops for us (a traced thread's
 * signal-delivery-stop) exactly where it ran, is sampled, and the signal is
 * suppressed.  SIGPROF is set to SIG_IGN for the attach: a traced thread
 * still stops for an ignored signal, and if the helper dies the signals are
 * harmless instead of fatal.
 *
 * Both settings are made by running a system call in a stopped thread of the
 * target, as a debugger calls a function in its inferior: the thread's
 * registers are saved, the call's memory arguments written below its stack
 * pointer (past the red zone), the registers pointed at a `syscall`
 * instruction in the target's own code (the vDSO or libc), one
 * PTRACE_SINGLESTEP runs it with the thread's signals blocked
 * (PTRACE_SETSIGMASK), the results are read back and the registers and mask
 * restored.  A system call the thread was stopped in restarts when it is
 * continued, as it would have after any ptrace-stop.  Only from a stop at the
 * thread's return to user space (the helper's interrupt, or a previous step's
 * trap): an event stop inside clone() or execve() is refused (pt_inject).  At
 * detach: the timer is stopped, a SIGPROF still pending is taken
 * (rt_sigtimedwait, zero timeout), and the target's own action for SIGPROF put
 * back.  When the helper turns to polling mid-attach the timer is only
 * stopped (pt_attach_timer_pause): SIGPROF stays ignored until the detach, so
 * a signal some thread already took cannot end the target.
 *
 * Not used (the caller polls instead, saying why): where the target handles
 * SIGPROF itself or already runs ITIMER_PROF, runs under a seccomp filter (an
 * unexpected system call could kill it), or on architectures without
 * PT_ARCH_INJECT; and from when a thread runs with SIGPROF blocked
 * (pt_attach_ptrace.c looks every 100 ms).  None of this is async-signal-safe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pt_attach.h"

#if PT_ARCH_INJECT

/* Bytes below the stack pointer left alone: the ABI's red zone, and some. */
#define PT_INJECT_BELOW_SP 256u
/* How long a thread may take to finish one injected system call. */
#define PT_INJECT_TIMEOUT_NS 5000000000ull

/* The kernel's struct sigaction for rt_sigaction (x86-64 layout). */
struct pt_kernel_sigaction {
    uint64_t handler, flags, restorer, mask;
};

/* The argument area written below the thread's stack pointer. */
struct pt_inject_area {
    struct itimerval timer_new, timer_old;
    struct pt_kernel_sigaction action_new, action_old;
    uint64_t sigset;
    struct timespec zero;
};

/* The helper's state for the timer: one instance, the helper is single-threaded. */
static struct {
    uint64_t syscall_pc;                   /* a `syscall` instruction in the target */
    struct pt_kernel_sigaction old_action; /* the target's SIGPROF action before ours */
    int running;                           /* our ITIMER_PROF runs in the target */
    int ignoring;                          /* SIGPROF is SIG_IGN, set by us, not yet put back */
    /* Armed during this attach: a SIGPROF from the kernel is ours, even after the
     * timer stopped (one a thread took just before is reported later). */
    int armed;
} pt_timer;

static uint64_t pt_timer_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A field ("SigCgt:", "Seccomp:") of /proc/TID/status in `base`; -1 if absent. */
static long long pt_status_field(pid_t tid, const char *key, int base) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    const char *at = strstr(buf, key);
    return at != NULL ? strtoll(at + strlen(key), NULL, base) : -1;
}

static int pt_copy(pid_t tid, uint64_t remote_addr, void *local_buf, size_t len, int write) {
    struct iovec local = {local_buf, len}, remote = {(void *)remote_addr, len};
    ssize_t done = write ? process_vm_writev(tid, &local, 1, &remote, 1, 0)
                         : process_vm_readv(tid, &local, 1, &remote, 1, 0);
    return done == (ssize_t)len ? 0 : -1;
}

/* Find a `syscall` instruction in the target's executable mappings, the vDSO
 * first.  0, or -1. */
static int pt_find_syscall(pid_t pid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    for (int pass = 0; pass < 2; pass++) {
        FILE *maps = fopen(path, "re");
        if (maps == NULL) return -1;
        while (fgets(line, sizeof line, maps) != NULL) {
            unsigned long long lo, hi;
            char perms[8];
            if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) != 3 || perms[2] != 'x') continue;
            if ((strstr(line, "[vdso]") != NULL) != (pass == 0)) continue;
            static unsigned char chunk[65536];
            for (uint64_t at = lo; at < hi && at < lo + (4u << 20); at += sizeof chunk - 1) {
                size_t len = hi - at < sizeof chunk ? (size_t)(hi - at) : sizeof chunk;
                if (pt_copy(pid, at, chunk, len, 0) != 0) break;
                const unsigned char *hit = memmem(chunk, len, PT_ARCH_SYSCALL_INSN, 2);
                if (hit != NULL) {
                    pt_timer.syscall_pc = at + (uint64_t)(hit - chunk);
                    fclose(maps);
                    return 0;
                }
            }
        }
        fclose(maps);
    }
    return -1;
}

/* Wait for `tid`'s next report only (other threads' reports stay queued for
 * the main loop), up to PT_INJECT_TIMEOUT_NS.  0, or -1. */
static int pt_wait_tid(pid_t tid, int *status) {
    uint64_t deadline = pt_timer_now_ns() + PT_INJECT_TIMEOUT_NS;
    for (unsigned spins = 0;; spins++) {
        pid_t r = waitpid(tid, status, __WALL | WNOHANG);
        if (r == tid) return 0;
        if (r < 0 && errno != EINTR) return -1;
        if (pt_timer_now_ns() >= deadline) return -1;
        if (spins < 100) {
            sched_yield();
        } else {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

static void pt_send_again(pid_t tid, const int *sigs, int n) {
    for (int i = 0; i < n; i++) syscall(SYS_tkill, tid, sigs[i]);
}

/* 1 if the signal `tid` is stopped for was raised by the kernel (a trap, a
 * timer), not sent by a process. */
static int pt_kernel_signal(pid_t tid) {
    siginfo_t info;
    return ptrace(PTRACE_GETSIGINFO, tid, NULL, &info) == 0 && info.si_code > 0;
}

/* Run system call `nr` in the ptrace-stopped thread `tid`.  `area` is copied
 * below its stack pointer first and back after; the args whose bit is set in
 * `area_args` are offsets into it, passed as addresses.  The thread is left
 * stopped with its registers restored.  0 with *result set, or -1 (*out says
 * whether the thread exited or has a signal to be given when continued). */
static int pt_inject(pid_t tid, long nr, const uint64_t args[4], unsigned area_args,
                     struct pt_inject_area *area, long *result, struct pt_attach_inject_out *out) {
    /* Only from a stop at the thread's return to user space (our interrupt's, or
     * the trap of a previous step): an event stop inside clone or execve would
     * finish that call on the way out and overwrite the number we set. */
    siginfo_t stop_info;
    if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &stop_info) != 0) return -1;
    if (stop_info.si_code > 0xff && stop_info.si_code >> 8 != PTRACE_EVENT_STOP) return -1;
    pt_arch_user_regs saved, regs;
    if (pt_arch_get_user_regs(tid, &saved) != 0) return -1;
    uint64_t base = (pt_arch_user_sp(&saved) - PT_INJECT_BELOW_SP - sizeof *area) & ~15ull;
    if (pt_copy(tid, base, area, sizeof *area, 1) != 0) return -1;
    uint64_t real_args[4];
    for (int i = 0; i < 4; i++) real_args[i] = (area_args >> i & 1) ? base + args[i] : args[i];
    regs = saved;
    pt_arch_syscall_regs(&regs, pt_timer.syscall_pc, nr, real_args);
    if (pt_arch_set_user_regs(tid, &regs) != 0) return -1;
    /* Block the thread's signals for the step (not SIGTRAP: the kernel would
     * unblock it and reset its action to deliver the step's trap).  A signal
     * that arrives meanwhile stays queued, with its siginfo, for when the
     * thread's own mask is back; unblocked, each queued one (a flood of
     * real-time signals on a loaded machine) stops the step before the
     * instruction runs. */
    uint64_t own_mask = 0, step_mask = ~(1ull << (SIGTRAP - 1));
    int masked = ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof own_mask, &own_mask) == 0 &&
                 ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof step_mask, &step_mask) == 0;
    /* Signals beyond the first that arrive meanwhile (unmasked: a kernel
     * without PTRACE_SETSIGMASK), sent again once the registers are back (sent
     * at once, each would stop the next step again). */
    int again[16], nagain = 0;
    for (int tries = 0;; tries++) {
        int status;
        if (ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL) != 0 || pt_wait_tid(tid, &status) != 0)
            return -1; /* the thread is gone or wedged: nothing left to restore */
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            out->gone = 1;
            out->status = status;
            return -1;
        }
        if (!WIFSTOPPED(status)) continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (pt_arch_get_user_regs(tid, &regs) != 0) return -1;
        /* The step's own trap (the kernel's SIGTRAP) is never handed to the
         * target, whose default action for it is to dump core. */
        int trap = event == 0 && sig == SIGTRAP && pt_kernel_signal(tid);
        uint64_t pc = pt_arch_user_pc(&regs);
        if (trap && pc == pt_timer.syscall_pc + 2) break;
        if (trap && pc != pt_timer.syscall_pc) { /* not where we put it: give up, restore */
            pt_arch_set_user_regs(tid, &saved);
            if (masked) ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof own_mask, &own_mask);
            pt_send_again(tid, again, nagain);
            return -1;
        }
        /* Stopped before the instruction ran: at an event, a trap reported before
         * it, or for a signal.  Our timer's SIGPROF is dropped, as always; any
         * other signal is handed back when the thread is continued, or (a second
         * one meanwhile) sent again. */
        int ours = trap || (sig == SIGPROF && pt_attach_timer_signal(tid));
        if (event == 0 && !ours) {
            if (out->pending_sig == 0)
                out->pending_sig = sig;
            else
                again[nagain++] = sig;
        }
        if (tries >= 15) { /* 16 steps at most: `again` has room for each */
            pt_arch_set_user_regs(tid, &saved);
            if (masked) ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof own_mask, &own_mask);
            pt_send_again(tid, again, nagain);
            return -1;
        }
    }
    *result = pt_arch_syscall_result(&regs);
    int copied = pt_copy(tid, base, area, sizeof *area, 0);
    int restored = pt_arch_set_user_regs(tid, &saved);
    if (masked && ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof own_mask, &own_mask) != 0)
        restored = -1;
    pt_send_again(tid, again, nagain);
    return restored != 0 ? -1 : copied;
}

/* The result of a call that could not be run (the thread did not complete it). */
#define PT_NOT_RUN (-4096L)

/* rt_sigaction(SIGPROF, action, old) in the stopped thread `tid` (`old` may be
 * NULL): 0, -errno, or PT_NOT_RUN. */
static long pt_sigprof_action(pid_t tid, const struct pt_kernel_sigaction *action,
                              struct pt_kernel_sigaction *old, struct pt_attach_inject_out *out) {
    struct pt_inject_area area;
    memset(&area, 0, sizeof area);
    area.action_new = *action;
    long rc = PT_NOT_RUN;
    uint64_t args[4] = {SIGPROF, offsetof(struct pt_inject_area, action_new),
                        offsetof(struct pt_inject_area, action_old), 8};
    if (old == NULL) args[2] = 0;
    if (pt_inject(tid, SYS_rt_sigaction, args, old != NULL ? 6 : 2, &area, &rc, out) != 0)
        return PT_NOT_RUN;
    if (old != NULL) *old = area.action_old;
    return rc;
}

/* setitimer(ITIMER_PROF, value, old) in the stopped thread `tid` (`old` may be
 * NULL): 0, -errno, or PT_NOT_RUN. */
static long pt_prof_timer(pid_t tid, const struct itimerval *value, struct itimerval *old,
                          struct pt_attach_inject_out *out) {
    struct pt_inject_area area;
    memset(&area, 0, sizeof area);
    area.timer_new = *value;
    long rc = PT_NOT_RUN;
    uint64_t args[4] = {ITIMER_PROF, offsetof(struct pt_inject_area, timer_new),
                        offsetof(struct pt_inject_area, timer_old), 0};
    if (old == NULL) args[2] = 0;
    if (pt_inject(tid, SYS_setitimer, args, old != NULL ? 6 : 2, &area, &rc, out) != 0)
        return PT_NOT_RUN;
    if (old != NULL) *old = area.timer_old;
    return rc;
}

int pt_attach_timer_arm(pid_t tid, uint64_t period_ns, char *why, size_t why_len,
                        struct pt_attach_inject_out *out) {
    /* `tid`'s /proc entries, not the leader's: a leader that called pthread_exit
     * is a zombie whose maps are empty. */
    long long caught = pt_status_field(tid, "\nSigCgt:\t", 16);
    long long seccomp = pt_status_field(tid, "\nSeccomp:\t", 10);
    if (caught > 0 && (caught >> (SIGPROF - 1) & 1)) {
        snprintf(why, why_len, "the target handles SIGPROF itself");
        return -1;
    }
    if (seccomp > 0) {
        snprintf(why, why_len, "the target runs under a seccomp filter");
        return -1;
    }
    if (pt_timer.syscall_pc == 0 && pt_find_syscall(tid) != 0) {
        snprintf(why, why_len, "no system call instruction was found in the target's code");
        return -1;
    }
    const struct pt_kernel_sigaction ignore = {(uint64_t)(uintptr_t)SIG_IGN, 0, 0, 0};
    struct pt_kernel_sigaction old_action;
    long rc = pt_sigprof_action(tid, &ignore, &old_action, out);
    if (rc == 0) pt_timer.old_action = old_action;
    if (rc != 0) {
        snprintf(why, why_len, "a system call could not be run in the target (rt_sigaction: %s)",
                 rc > PT_NOT_RUN ? strerror((int)-rc) : "the thread did not complete it");
        return -1;
    }
    uint64_t old_handler = pt_timer.old_action.handler;
    if (old_handler != (uint64_t)(uintptr_t)SIG_DFL && old_handler != (uint64_t)(uintptr_t)SIG_IGN) {
        pt_sigprof_action(tid, &pt_timer.old_action, NULL, out);
        snprintf(why, why_len, "the target handles SIGPROF itself");
        return -1;
    }
    struct timeval period = {(time_t)(period_ns / 1000000000ull),
                             (suseconds_t)(period_ns % 1000000000ull / 1000)};
    if (period.tv_sec == 0 && period.tv_usec == 0) period.tv_usec = 1;
    const struct itimerval every = {period, period};
    struct itimerval before;
    memset(&before, 0, sizeof before);
    int set_failed = pt_prof_timer(tid, &every, &before, out) != 0;
    int theirs = !set_failed && (before.it_value.tv_sec || before.it_value.tv_usec);
    if (set_failed || theirs) {
        if (theirs) pt_prof_timer(tid, &before, NULL, out); /* the target's own: give it back */
        pt_sigprof_action(tid, &pt_timer.old_action, NULL, out);
        snprintf(why, why_len, theirs ? "the target runs its own ITIMER_PROF"
                                      : "setitimer could not be run in the target");
        return -1;
    }
    pt_timer.running = pt_timer.ignoring = pt_timer.armed = 1;
    return 0;
}

/* Look for a `syscall` instruction again: the target may have exec'd a new
 * image since the arm.  0, or -1. */
static int pt_refind_syscall(pid_t tid) {
    pt_timer.syscall_pc = 0;
    return pt_find_syscall(tid);
}

/* Stop our ITIMER_PROF (syscall_pc found).  0, or -1. */
static int pt_timer_off(pid_t tid, struct pt_attach_inject_out *out) {
    const struct itimerval off = {{0, 0}, {0, 0}};
    if (pt_timer.running && pt_prof_timer(tid, &off, NULL, out) != 0) return -1;
    pt_timer.running = 0;
    return 0;
}

int pt_attach_timer_pause(pid_t tid, struct pt_attach_inject_out *out) {
    if (!pt_timer.running) return 0;
    if (pt_refind_syscall(tid) != 0) return -1;
    return pt_timer_off(tid, out);
}

int pt_attach_timer_disarm(pid_t tid, struct pt_attach_inject_out *out) {
    if (!pt_timer.running && !pt_timer.ignoring) return 0;
    if (pt_refind_syscall(tid) != 0 || pt_timer_off(tid, out) != 0) return -1;
    /* A SIGPROF the timer queued before it stopped would, once SIGPROF is no
     * longer ignored, end the target: take it now.  (One another thread took
     * already is reported to the helper, which drops it: pt_attach_timer_signal.) */
    struct pt_inject_area area;
    memset(&area, 0, sizeof area);
    area.sigset = 1ull << (SIGPROF - 1);
    long rc = PT_NOT_RUN;
    uint64_t take[4] = {offsetof(struct pt_inject_area, sigset), 0,
                        offsetof(struct pt_inject_area, zero), 8};
    if (pt_inject(tid, SYS_rt_sigtimedwait, take, 5, &area, &rc, out) != 0) return -1;
    struct pt_kernel_sigaction current;
    if (pt_sigprof_action(tid, &pt_timer.old_action, &current, out) != 0) return -1;
    pt_timer.ignoring = 0;
    if (current.handler != (uint64_t)(uintptr_t)SIG_IGN) /* set by the target meanwhile */
        pt_sigprof_action(tid, &current, NULL, out);     /* (an exec'd program, say): keep it */
    return 0;
}

int pt_attach_timer_signal(pid_t tid) {
    siginfo_t info;
    return pt_timer.armed && ptrace(PTRACE_GETSIGINFO, tid, NULL, &info) == 0 &&
           info.si_code == SI_KERNEL;
}

#else /* !PT_ARCH_INJECT */

int pt_attach_timer_arm(pid_t tid, uint64_t period_ns, char *why, size_t why_len,
                        struct pt_attach_inject_out *out) {
    (void)tid, (void)period_ns, (void)out;
    snprintf(why, why_len, "system calls cannot be run in the target on %s", PT_ARCH_NAME);
    return -1;
}

int pt_attach_timer_pause(pid_t tid, struct pt_attach_inject_out *out) {
    (void)tid, (void)out;
    return -1;
}

int pt_attach_timer_disarm(pid_t tid, struct pt_attach_inject_out *out) {
    (void)tid, (void)out;
    return -1;
}

int pt_attach_timer_signal(pid_t tid) {
    (void)tid;
    return 0;
}

#endif
