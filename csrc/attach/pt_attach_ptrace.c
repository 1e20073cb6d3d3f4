/* proftui-attach, ptrace method: for machines where perf_event_open is denied.
 *
 * Every thread is PTRACE_SEIZEd (PTRACE_O_TRACECLONE follows new threads).
 *
 * Where it can, the target's own CPU-time timer picks the samples
 * (pt_attach_timer.c): ITIMER_PROF's SIGPROF stops the thread that was
 * running, where it ran; it is sampled there and the signal suppressed.  Each
 * sample stands for the thread's CPU time since its previous one (schedstat).
 * Otherwise (the file comment of pt_attach_timer.c says when) the helper polls:
 * at each tick of a timerfd, each thread that is running or runnable (state R
 * in /proc/PID/task/TID/status) and used CPU since its last sample (schedstat)
 * is PTRACE_INTERRUPTed, its registers (arch/pt_arch.h), frame-pointer chain
 * and stack are read with process_vm_readv (pt_attach_tasks.c; as much stack
 * as the walk needs: the thread is stopped), and it is continued at once; pt_attach_unwind.c
 * walks the copy with CFI.  Sleeping threads are never interrupted: waking
 * them would itself cost CPU time and make them look busy.
 *
 * Where a sample lands (issue 26): an interrupted thread stops at its next
 * return to user space, which is where it was only if it was on a CPU when
 * interrupted.  A thread /proc shows runnable may instead be waiting for a
 * CPU: after a preemption (it stops where it was preempted) or after a
 * wakeup (it stops in the system call it slept in, epoll_wait or a blocking
 * write: a place that used no CPU).  The kernel's counters tell them apart.
 * Every switch off a CPU is counted as voluntary (a sleep, or our own stop)
 * or involuntary (a preemption) and is followed by one arrival (schedstat's
 * third field), so a thread is on a CPU exactly when arrivals = voluntary +
 * involuntary + 1, and comparing the counters with those of our previous
 * look says how an off-CPU thread left its CPU.  A thread waiting after a
 * wakeup (as far as they tell) is not interrupted; one that goes to sleep between our look and its
 * stop (two voluntary switches) is continued and its sample dropped.  The
 * CPU time since a thread's previous sample stays with it for its next kept
 * sample: each kept sample stands for the CPU time since the previous one,
 * as a perf task-clock sample stands for its period.  The END-time WARN says
 * how many looks and stops were let go.  What this cannot fix: the helper
 * looks when it gets a CPU, and on a machine with few CPUs that moment
 * depends on the target (a thread in the kernel is not preempted until it
 * returns), so system calls still get more than their share there; perf
 * samples on the target's own CPU clock and has no such bias.
 *
 * Signals the target receives cause signal-delivery-stops: they are handed
 * back unchanged (PTRACE_CONT with the signal), SIGCHLD wakes us for that.
 * Detach: interrupt each thread, wait for the stop, PTRACE_DETACH.  If the
 * helper is killed outright, the kernel detaches for us.
 *
 * Ends of the target (issue 14): every traced thread's exit is reaped here
 * (waitpid(-1), never a blocking wait on one tid), because the kernel reports
 * the leader's exit, to us and then to its parent, only once every other
 * thread of the group has been reaped.  The target is alive while any of its
 * threads is: a leader that called pthread_exit is a zombie whose workers run
 * on; it is left untraced (the kernel refuses) and the group's exit status
 * comes from the last thread's exit report.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pt_attach.h"
#include "pt_attach_tasks.h"

#define PT_TRACE_MAX_THREADS 4096


/* Everything the ptrace method keeps: one instance (pt_tr), the helper is
 * single-threaded. */
struct pt_ptrace_state {
    struct pt_attach_thread threads[PT_TRACE_MAX_THREADS]; /* traced threads */
    int nthreads;
    uint64_t samples;    /* written */
    uint64_t looks;      /* at runnable threads with CPU time since their last sample */
    uint64_t woken;      /* of them, let go: waiting for a CPU after a wakeup */
    uint64_t stops;      /* of them, stopped */
    uint64_t slept;      /* of those, dropped: went to sleep before they stopped */
    /* Time the target's threads spent stopped by us (from the confirmed stop to
     * PTRACE_CONT), and the CPU time sampled. */
    uint64_t stopped_ns, cpu_ns;
    int exit_status, exit_signal, target_gone;
    /* The last exit seen of any thread: the group's status when the leader is not
     * traced (it had called pthread_exit before we attached).  In an exit_group
     * every thread reports the group's status. */
    int last_status, last_signal;
    /* The leader's exit was reaped: the kernel reports it last, the group is empty. */
    int leader_reaped;
    int timer;              /* 1: the target's ITIMER_PROF picks the samples (no polling) */
    int timer_used;         /* it did for some of the attach */
    uint64_t timer_signals; /* SIGPROF stops for us */
    uint64_t timer_idle;    /* of them, at a thread that had used no CPU since its last */
    int announced;          /* the header is out: new threads are reported as they come */
    uint64_t stack[PT_ATTACH_STACK_MAX / 8]; /* the stopped thread's stack copy */
};
static struct pt_ptrace_state pt_tr; /* zero-initialized (.bss): the -1s are set at start */


/* How long one thread may take to reach the stop we asked for before we give
 * up on it for this tick (its stop, if it comes later, is ended in pt_handle). */
#define PT_STOP_TIMEOUT_NS 200000000ull
/* How often the target's liveness (and, on the timer, its threads' signal
 * masks) are looked at. */
#define PT_CHECK_NS 100000000ull
/* How long to wait for the last threads' exit reports once the group is dead. */
#define PT_REAP_TIMEOUT_NS 1000000000ull

static struct pt_attach_thread *pt_find(pid_t tid) {
    for (int i = 0; i < pt_tr.nthreads; i++)
        if (pt_tr.threads[i].tid == tid) return &pt_tr.threads[i];
    return NULL;
}


static struct pt_attach_thread *pt_add(pid_t pid, pid_t tid) {
    struct pt_attach_thread *t = pt_find(tid);
    if (t != NULL || pt_tr.nthreads >= PT_TRACE_MAX_THREADS) return t;
    t = &pt_tr.threads[pt_tr.nthreads++];
    pt_task_open(t, pid, tid);
    if (pt_tr.announced) pt_attach_out_thread((uint32_t)tid, PT_ATTACH_THREAD_NEW, pid);
    return t;
}

static void pt_remove(pid_t pid, pid_t tid) {
    struct pt_attach_thread *t = pt_find(tid);
    if (t == NULL) return;
    pt_task_close(t);
    *t = pt_tr.threads[--pt_tr.nthreads];
    /* Before the header no thread was announced (pt_add), so none is said gone. */
    if (pt_tr.announced) pt_attach_out_thread((uint32_t)tid, PT_ATTACH_THREAD_GONE, pid);
}

/* Sample a stopped thread (pt_task_sample) into the one stack buffer.  Not
 * async-signal-safe. */
static void pt_sample(struct pt_attach_thread *t, const struct pt_regs *regs, uint64_t weight) {
    pt_task_sample(t, regs, weight, pt_tr.stack, sizeof pt_tr.stack);
    pt_tr.samples++;
}

static uint64_t pt_mono_ns(void);


/* A thread stopped by the target's timer: sample it where it ran, for the
 * CPU time since its previous sample.  The timer signals the thread that was
 * running, unless it blocks SIGPROF: a thread that used no CPU since its
 * last sample was not running, and is not sampled.  Not async-signal-safe. */
static void pt_timer_sample(struct pt_attach_thread *t) {
    uint64_t stop_at = pt_mono_ns();
    pt_tr.timer_signals++;
    uint64_t cpu_ns = pt_sched_cpu(t);
    if (cpu_ns == 0) return;
    struct pt_regs regs;
    if (cpu_ns <= t->cpu_ns || pt_arch_ptrace_regs(t->tid, &regs) != 0) {
        pt_tr.timer_idle++;
        return;
    }
    pt_sample(t, &regs, cpu_ns - t->cpu_ns);
    pt_tr.cpu_ns += cpu_ns - t->cpu_ns;
    t->cpu_ns = cpu_ns;
    pt_tr.stops++;
    pt_tr.stopped_ns += pt_mono_ns() - stop_at;
}

/* Handle one wait status of a traced thread.  `want_stop` means we interrupted
 * it and want it left stopped in the stop that causes (returns 1 then; every
 * other stop is handled and continued).  Not async-signal-safe. */
static int pt_handle(const struct pt_attach_config *cfg, pid_t tid, int status, int want_stop) {
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        /* Reaping every thread's exit is what lets the leader's exit reach
         * its parent: the kernel reports a leader only once its group is empty. */
        pt_tr.last_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pt_tr.last_signal = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
        if (tid == cfg->pid) {
            pt_tr.target_gone = pt_tr.leader_reaped = 1;
            pt_tr.exit_status = pt_tr.last_status;
            pt_tr.exit_signal = pt_tr.last_signal;
        }
        pt_remove(cfg->pid, tid);
        return 0;
    }
    if (!WIFSTOPPED(status)) return 0;
    int sig = WSTOPSIG(status), event = status >> 16;
    struct pt_attach_thread *t = pt_find(tid);
    if (t == NULL) t = pt_add(cfg->pid, tid); /* a new thread's first stop can come first */
    /* A clone or exec event stops the thread inside that system call, which
     * finishes (and sets its result register) when the thread goes on: never
     * the stop asked for, whose registers must be the thread's own at its
     * return to user space (a system call run there by pt_attach_timer.c would
     * get clone's result for its number).  pt_stop_thread asks again. */
    if (event == PTRACE_EVENT_CLONE) {
        unsigned long child = 0;
        if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &child) == 0) pt_add(cfg->pid, (pid_t)child);
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        return 0;
    }
    if (event == PTRACE_EVENT_EXEC) {
        /* execve: the other threads are gone, the execing one now has the
         * leader's tid (the former tid is in the event message; the leader
         * reports no death), and the address space is new. */
        unsigned long former = 0;
        if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &former) == 0 && (pid_t)former != tid)
            pt_remove(cfg->pid, (pid_t)former);
        pt_remove(cfg->pid, tid); /* its /proc fds were the old leader's */
        pt_add(cfg->pid, tid);
        pt_attach_unwind_maps_changed();
        pt_attach_out_u64(PT_ATTACH_REC_MAPS, 0);
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        return 0;
    }
    if (event == PTRACE_EVENT_STOP) {
        if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
            ptrace(PTRACE_LISTEN, tid, NULL, NULL); /* group-stop: stay stopped as asked */
            return 0;
        }
        if (want_stop) return 1;
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        return 0;
    }
    if (event != 0) { /* another event we did not ask for */
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        return 0;
    }
    /* Signal-delivery-stop: our timer's SIGPROF is sampled and suppressed,
     * anything else passed on untouched. */
    if (sig == SIGPROF && pt_attach_timer_signal(tid)) {
        if (pt_tr.timer) pt_timer_sample(t); /* else one in flight when the timer stopped */
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        return 0;
    }
    ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
    return 0;
}

/* Handle every pending tracee state change without blocking.  Not async-signal-safe. */
static void pt_reap(const struct pt_attach_config *cfg) {
    int status;
    pid_t tid;
    while ((tid = waitpid(-1, &status, WNOHANG | __WALL)) > 0) pt_handle(cfg, tid, status, 0);
}

static uint64_t pt_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep until a tracee changes state (SIGCHLD, which main blocks) or `ns`
 * pass.  SIGCHLD only wakes the main loop, which looks at every tracee anyway,
 * so taking it here loses nothing.  Not async-signal-safe. */
static void pt_wait_chld(uint64_t ns) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    sigtimedwait(&set, NULL, &ts);
}

/* Interrupt `tid` and wait until it is in the stop that causes, at its
 * return to user space, handling every other thread's state changes
 * meanwhile (a clone or exec event of `tid` is handled and `tid` interrupted
 * again).  Never a blocking waitpid() on one tid: when the group exits, the
 * leader's report waits until every other thread has been reaped, by us, so
 * that wait would deadlock (issue 14).  0 once stopped; -1 if it exited, sits
 * in a group-stop (unless `detaching`: a detach may start from there and
 * leaves it stopped), or did not stop within PT_STOP_TIMEOUT_NS.  Not
 * async-signal-safe. */
static int pt_stop_thread(const struct pt_attach_config *cfg, pid_t tid, int detaching) {
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0) return -1;
    uint64_t deadline = pt_mono_ns() + PT_STOP_TIMEOUT_NS;
    for (;;) {
        int status;
        pid_t r = waitpid(-1, &status, WNOHANG | __WALL);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1; /* ECHILD: nothing is traced any more */
        if (r > 0) {
            int mine = r == tid;
            int event = WIFSTOPPED(status) ? status >> 16 : 0;
            int event_stop = event == PTRACE_EVENT_STOP;
            if (mine && detaching && event_stop) return 0;
            if (pt_handle(cfg, r, status, mine)) return 0;
            if (mine && (pt_find(tid) == NULL || event_stop)) return -1; /* exited, group-stop */
            /* A clone or exec stop may have taken the place of our interrupt's:
             * ask again (a second stop, if both come, is continued by pt_handle). */
            if (mine && (event == PTRACE_EVENT_CLONE || event == PTRACE_EVENT_EXEC))
                ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
            continue;
        }
        uint64_t now = pt_mono_ns();
        if (now >= deadline) return -1;
        pt_wait_chld(deadline - now < 10000000ull ? deadline - now : 10000000ull);
    }
}

/* Reap the exit of every traced thread once the group is dead, waiting up
 * to PT_REAP_TIMEOUT_NS.  Not async-signal-safe. */
static void pt_reap_all(const struct pt_attach_config *cfg) {
    uint64_t deadline = pt_mono_ns() + PT_REAP_TIMEOUT_NS;
    for (;;) {
        pt_reap(cfg);
        uint64_t now = pt_mono_ns();
        if (pt_tr.nthreads == 0 || pt_tr.leader_reaped || now >= deadline) return;
        pt_wait_chld(deadline - now < 10000000ull ? deadline - now : 10000000ull);
    }
}

/* Whether a runnable thread is worth interrupting now (`now`: just read):
 * not when it is off its CPU and the only switches since our previous look
 * were sleeps (it was woken and waits where it slept: see the file comment);
 * a busy server both sleeps and is preempted between looks, and then which
 * came last is unknown: yes.  Updates what the thread remembers of our
 * looks.  Without the counters (an old kernel), yes.  Not async-signal-safe. */
static int pt_worth_stopping(struct pt_attach_thread *t, const struct pt_sched_view *now) {
    const struct pt_sched_view *was = &t->was;
    int known = pt_sched_known(now) && pt_sched_known(was);
    if (known && now->voluntary > was->voluntary && now->involuntary == was->involuntary)
        t->left = PT_LEFT_SLEPT;
    else if (known && now->involuntary > was->involuntary && now->voluntary == was->voluntary)
        t->left = PT_LEFT_PREEMPTED;
    else if (!known || now->voluntary != was->voluntary || now->involuntary != was->involuntary)
        t->left = PT_LEFT_UNKNOWN; /* both kinds since the last look: which came last? */
    t->was = *now;
    if (!pt_sched_known(now) || pt_sched_on_cpu(now)) return 1;
    return t->left != PT_LEFT_SLEPT;
}

/* One sampling tick over all threads.  Not async-signal-safe. */
static void pt_tick(const struct pt_attach_config *cfg) {
    for (int i = 0; i < pt_tr.nthreads; i++) {
        struct pt_attach_thread *t = &pt_tr.threads[i];
        struct pt_sched_view look;
        pt_sched_read(t, &look);
        if (look.cpu_ns <= t->cpu_ns || look.state != 'R') { /* no CPU since, or asleep */
            pt_worth_stopping(t, &look);
            continue;
        }
        pt_tr.looks++;
        if (!pt_worth_stopping(t, &look)) {
            pt_tr.woken++; /* where it waits used no CPU: look again next tick */
            continue;
        }
        pid_t tid = t->tid;
        if (pt_stop_thread(cfg, tid, 0) != 0) continue;
        uint64_t stop_at = pt_mono_ns(); /* stopped from here until PTRACE_CONT */
        t = pt_find(tid);                /* the table may have grown while we waited */
        if (t == NULL) continue;
        /* The registers first: PTRACE_GETREGS returns once the thread is off its
         * CPU, so its switch into the stop is counted when we read. */
        struct pt_regs regs;
        if (pt_arch_ptrace_regs(tid, &regs) == 0) {
            struct pt_sched_view stopped;
            pt_sched_read(t, &stopped);
            pt_tr.stops++;
            if (pt_sched_known(&stopped) && stopped.voluntary > look.voluntary + 1) {
                pt_tr.slept++; /* slept, then stopped where it slept: its CPU time waits */
            } else if (stopped.cpu_ns > t->cpu_ns) {
                pt_sample(t, &regs, stopped.cpu_ns - t->cpu_ns);
                pt_tr.cpu_ns += stopped.cpu_ns - t->cpu_ns;
                t->cpu_ns = stopped.cpu_ns;
            }
            t->was = stopped;
            t->left = PT_LEFT_SLEPT; /* our stop: after PTRACE_CONT it waits like a woken one */
        }
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        pt_tr.stopped_ns += pt_mono_ns() - stop_at;
    }
}

/* Seize every thread, re-listing until no new one appears.  -1 with errno if
 * not even one could be seized.  Not async-signal-safe. */
static int pt_seize_all(const struct pt_attach_config *cfg) {
    static pid_t tids[PT_TRACE_MAX_THREADS];
    long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
    int first_errno = 0;
    for (int round = 0; round < 10; round++) {
        int n = pt_attach_list_tasks(cfg->pid, tids, PT_TRACE_MAX_THREADS), added = 0;
        if (n <= 0) {
            errno = ESRCH;
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (pt_find(tids[i]) != NULL) continue;
            /* A leader that called pthread_exit is a zombie while its group
             * runs on; the kernel refuses to trace it (EPERM), and it has
             * nothing left to sample. */
            char state = pt_attach_task_state(cfg->pid, tids[i]);
            if (state == 'Z' || state == 'X') continue;
            if (ptrace(PTRACE_SEIZE, tids[i], NULL, (void *)opts) != 0) {
                if (first_errno == 0) first_errno = errno;
                if (pt_tr.nthreads == 0 && errno != ESRCH) return -1;
                continue;
            }
            pt_add(cfg->pid, tids[i]);
            added++;
        }
        if (added == 0) break;
    }
    if (pt_tr.nthreads == 0) {
        errno = first_errno ? first_errno : ESRCH;
        return -1;
    }
    return 0;
}

/* Detach from every thread, each from a ptrace-stop (a group-stopped thread
 * stays stopped).  One that cannot be stopped (a zombie leader whose group
 * runs on) is detached by the kernel when the helper exits.  Not async-signal-safe. */
static void pt_detach_all(const struct pt_attach_config *cfg) {
    while (pt_tr.nthreads > 0) {
        pid_t tid = pt_tr.threads[pt_tr.nthreads - 1].tid;
        /* A zombie (a leader after pthread_exit) never stops: the kernel lets
         * it go when the helper exits.  A signal in flight was passed on by
         * pt_handle while we waited for the others. */
        char state = pt_attach_task_state(cfg->pid, tid);
        if (state != 'Z' && state != 'X' && pt_stop_thread(cfg, tid, 1) == 0)
            ptrace(PTRACE_DETACH, tid, NULL, NULL);
        struct pt_attach_thread *t = pt_find(tid);
        if (t != NULL) {
            pt_task_close(t);
            *t = pt_tr.threads[--pt_tr.nthreads];
        }
    }
}


/* Continue a thread an injection left stopped, or account for its exit. */
static void pt_after_inject(const struct pt_attach_config *cfg, pid_t tid,
                            const struct pt_attach_inject_out *out) {
    if (out->gone)
        pt_handle(cfg, tid, out->status, 0);
    else
        ptrace(PTRACE_CONT, tid, NULL, (void *)(long)out->pending_sig);
}

/* Start the target's CPU timer through one of its threads (unless
 * PROFTUI_ATTACH_POLL is set: benchmarks compare the two clocks).  0, or -1
 * with `why`.  Not async-signal-safe. */
static int pt_timer_start(const struct pt_attach_config *cfg, char *why, size_t why_len) {
    const char *poll_env = getenv("PROFTUI_ATTACH_POLL");
    if (poll_env != NULL && poll_env[0] != '\0' && strcmp(poll_env, "0") != 0) {
        snprintf(why, why_len, "PROFTUI_ATTACH_POLL is set");
        return -1;
    }
    pid_t tid = pt_tr.threads[0].tid;
    if (pt_stop_thread(cfg, tid, 0) != 0) {
        snprintf(why, why_len, "thread %d did not stop", (int)tid);
        return -1;
    }
    struct pt_attach_inject_out out = {0, 0, 0};
    int rc = pt_attach_timer_arm(tid, cfg->period_ns, why, why_len, &out);
    pt_after_inject(cfg, tid, &out);
    return rc;
}

/* Run `change` (pt_attach_timer_pause or _disarm) through the first thread
 * that stops and completes it.  0, or -1.  Not async-signal-safe. */
static int pt_timer_change(const struct pt_attach_config *cfg,
                           int (*change)(pid_t, struct pt_attach_inject_out *)) {
    for (int i = 0; i < pt_tr.nthreads; i++) {
        pid_t tid = pt_tr.threads[i].tid;
        char state = pt_attach_task_state(cfg->pid, tid);
        if (state == 'Z' || state == 'X' || pt_stop_thread(cfg, tid, 0) != 0) continue;
        struct pt_attach_inject_out out = {0, 0, 0};
        int rc = change(tid, &out);
        pt_after_inject(cfg, tid, &out);
        if (rc == 0) return 0;
    }
    return -1;
}

/* Remove the target's CPU timer and put its SIGPROF action back before
 * detaching.  0, or -1.  Not async-signal-safe. */
static int pt_timer_stop(const struct pt_attach_config *cfg) {
    return pt_timer_change(cfg, pt_attach_timer_disarm);
}

/* Poll from now on when a thread that blocks SIGPROF runs: the timer would
 * signal (and wake) another thread instead.  The timer is stopped but SIGPROF
 * stays ignored until the detach: a signal a thread took just before is then
 * harmless even if it slipped past us.  Not async-signal-safe. */
static void pt_timer_check_masks(const struct pt_attach_config *cfg, int tfd,
                                 const struct itimerspec *ticks) {
    const struct pt_attach_thread *blocking =
        pt_task_blocking_sigprof(pt_tr.threads, pt_tr.nthreads, cfg->period_ns);
    if (blocking == NULL) return;
    pid_t tid = blocking->tid;
    int removed = pt_timer_change(cfg, pt_attach_timer_pause) == 0;
    pt_tr.timer = 0;
    timerfd_settime(tfd, 0, ticks, NULL);
    pt_attach_out_text(PT_ATTACH_REC_WARN,
                       "ptrace: thread %d blocks SIGPROF while it runs, so the target's CPU "
                       "timer cannot sample it: sampling by looking at the threads from here "
                       "on%s",
                       (int)tid, removed ? "" : " (the timer could not be stopped: its "
                                                "signals are dropped until the detach)");
}

/* The ptrace method: see the file comment.  Not async-signal-safe. */
int pt_attach_ptrace_run(const struct pt_attach_config *cfg) {
    pt_tr.exit_status = pt_tr.exit_signal = pt_tr.last_status = pt_tr.last_signal = -1;
    /* schedstat's CPU time includes the kernel's, and a thread in a system
     * call is interrupted at its user-space entry: kernel time is counted. */
    uint32_t flags = pt_attach_unwind_init(cfg->pid) | PT_ATTACH_FLAG_KERNEL_TIME;
    if (pt_seize_all(cfg) != 0) {
        pt_attach_out_header(PT_ATTACH_METHOD_PTRACE, cfg->pid, cfg->period_ns, flags);
        /* The header is out, so explain through the stream and on stderr. */
        int saved = errno;
        pt_attach_out_text(PT_ATTACH_REC_ERROR, "ptrace(PTRACE_SEIZE, %d): %s", (int)cfg->pid,
                           strerror(saved));
        pt_attach_out_flush();
        fprintf(stderr, "ptrace(PTRACE_SEIZE, %d): %s\n", (int)cfg->pid, strerror(saved));
        errno = saved;
        return -1;
    }
    char why[160] = "";
    pt_tr.timer = pt_tr.timer_used = pt_timer_start(cfg, why, sizeof why) == 0;
    if (pt_tr.timer) flags |= PT_ATTACH_FLAG_TARGET_TIMER;
    pt_attach_out_header(PT_ATTACH_METHOD_PTRACE, cfg->pid, cfg->period_ns, flags);
    pt_attach_out_buffers(0, 0, cfg->buffer_bytes, 0); /* no kernel ring: samples are taken in line */
    pt_tr.announced = 1;
    for (int i = 0; i < pt_tr.nthreads; i++)
        pt_attach_out_thread((uint32_t)pt_tr.threads[i].tid, PT_ATTACH_THREAD_NEW, cfg->pid);
    if (!pt_tr.timer)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "ptrace: sampling by looking at the threads %.0f times a second, "
                           "not on the target's own CPU clock (%s): system calls may get more "
                           "than their share on a busy machine",
                           1e9 / (double)cfg->period_ns, why);
    pt_attach_out_flush();
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {
        .it_interval = {(time_t)(cfg->period_ns / 1000000000ull),
                        (long)(cfg->period_ns % 1000000000ull)},
        .it_value = {(time_t)(cfg->period_ns / 1000000000ull),
                     (long)(cfg->period_ns % 1000000000ull)},
    };
    if (!pt_tr.timer) timerfd_settime(tfd, 0, &its, NULL); /* the timer needs no ticks */
    uint64_t next_check = pt_mono_ns() + PT_CHECK_NS;
    for (;;) {
        struct pollfd pfd[3] = {
            {cfg->control_fd, POLLIN, 0}, {cfg->signal_fd, POLLIN, 0}, {tfd, POLLIN, 0}};
        int r = poll(pfd, 3, 100);
        int chld = 0;
        int stop = r > 0 && pt_attach_check_control(cfg, pfd[0].revents, pfd[1].revents,
                                                     &chld, NULL);
        pt_reap(cfg); /* cheap, and SIGCHLD can coalesce: always look */
        if (pfd[2].revents & POLLIN) {
            uint64_t expirations;
            if (read(tfd, &expirations, sizeof expirations) > 0) pt_tick(cfg);
            pt_reap(cfg);
        }
        if (pt_mono_ns() >= next_check) {
            next_check = pt_mono_ns() + PT_CHECK_NS;
            if (!pt_attach_target_alive(cfg->pid)) pt_tr.target_gone = 1;
            if (pt_tr.timer && !pt_tr.target_gone) pt_timer_check_masks(cfg, tfd, &its);
        }
        pt_attach_out_flush();
        if (stop || pt_tr.target_gone || pt_tr.nthreads == 0 || pt_attach_out_broken()) break;
    }
    close(tfd);
    if (pt_tr.nthreads == 0) pt_tr.target_gone = 1; /* every thread exited */
    if (pt_tr.target_gone) {
        pt_reap_all(cfg);
        if (pt_tr.exit_status < 0 && pt_tr.exit_signal < 0) { /* the leader was not traced */
            pt_tr.exit_status = pt_tr.last_status;
            pt_tr.exit_signal = pt_tr.last_signal;
        }
        pt_attach_out_exit(pt_tr.exit_status, pt_tr.exit_signal);
    } else {
        if (pt_tr.timer_used && pt_timer_stop(cfg) != 0)
            pt_attach_out_text(PT_ATTACH_REC_WARN,
                               "ptrace: the CPU timer set in the target could not be removed: "
                               "it keeps running and SIGPROF stays ignored there");
        pt_detach_all(cfg);
    }
    /* Say how many looks and stops did not land in running code (issue 26). */
    if (pt_tr.woken + pt_tr.slept > 0)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "ptrace: of %llu looks at a runnable thread, %llu (%.1f%%) found it "
                           "waiting for a CPU after a wakeup and %llu (%.1f%%) found it going to "
                           "sleep (in a system call such as epoll_wait) before it stopped: those "
                           "places used no CPU, so no sample was kept there; the thread's CPU "
                           "time went to its next sample",
                           (unsigned long long)pt_tr.looks, (unsigned long long)pt_tr.woken,
                           100.0 * (double)pt_tr.woken / (double)pt_tr.looks,
                           (unsigned long long)pt_tr.slept,
                           100.0 * (double)pt_tr.slept / (double)pt_tr.looks);
    if (pt_tr.timer_used)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "ptrace: samples were taken where the target's own CPU timer "
                           "(ITIMER_PROF, set for the attach and removed at detach; SIGPROF was "
                           "ignored meanwhile) stopped a thread: %llu signals, %llu of them at a "
                           "thread that had not run since its last sample (not kept)",
                           (unsigned long long)pt_tr.timer_signals,
                           (unsigned long long)pt_tr.timer_idle);
    /* Say what the stops cost the target (issue 13), however small: every ptrace
     * sample stops a thread, and a tracer short of CPU makes fewer, cheaper stops.
     * A lower bound: the stop may begin before our waitpid() returns. */
    if (pt_tr.cpu_ns > 0 && pt_tr.stopped_ns > 0)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "ptrace stopped the target's threads for at least %.1f ms in all "
                           "(%.0f%% of the CPU time sampled): the target ran that much slower",
                           (double)pt_tr.stopped_ns / 1e6,
                           100.0 * (double)pt_tr.stopped_ns / (double)pt_tr.cpu_ns);
    pt_attach_out_end(pt_tr.samples, 0);
    return 0;
}
