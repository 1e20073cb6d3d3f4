/* proftui-attach, ptrace method: for machines where perf_event_open is denied.
 *
 * Every thread is PTRACE_SEIZEd (PTRACE_O_TRACECLONE follows new threads).
 * At each tick of a timerfd, each thread that is running or runnable (state R
 * in /proc/PID/task/TID/stat) and used CPU since its last sample (schedstat)
 * is PTRACE_INTERRUPTed, its registers (arch/pt_arch.h), frame-pointer chain
 * and top 4 KiB of stack are read with process_vm_readv, and it is continued
 * at once; pt_attach_unwind.c walks the copy with CFI.  The
 * sample weighs the CPU time the thread used since its previous sample.
 * Sleeping threads are never interrupted: waking them would itself cost CPU
 * time and make them look busy.
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
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pt_attach.h"

#define PT_TRACE_MAX_THREADS 4096

struct pt_attach_thread {
    pid_t tid;
    int schedstat_fd; /* /proc/PID/task/TID/schedstat, read each tick */
    int stat_fd;      /* /proc/PID/task/TID/stat, for the scheduler state */
    uint64_t cpu_ns;  /* CPU time at the previous sample */
    int stopped;      /* in a ptrace-stop we caused and have not ended yet */
};

/* Traced threads and counters: the helper is single-threaded. */
static struct pt_attach_thread pt_threads[PT_TRACE_MAX_THREADS];
static int pt_nthreads;
static uint64_t pt_tr_samples;
/* Time the target's threads spent stopped by us (from the confirmed stop to
 * PTRACE_CONT), and the CPU time sampled. */
static uint64_t pt_tr_stopped_ns, pt_tr_cpu_ns;
static int pt_exit_status = -1, pt_exit_signal = -1, pt_target_gone;
/* The last exit seen of any thread: the group's status when the leader is not
 * traced (it had called pthread_exit before we attached).  In an exit_group
 * every thread reports the group's status. */
static int pt_last_status = -1, pt_last_signal = -1;
/* The leader's exit was reaped: the kernel reports it last, the group is empty. */
static int pt_leader_reaped;

/* How long one thread may take to reach the stop we asked for before we give
 * up on it for this tick (its stop, if it comes later, is ended in pt_handle). */
#define PT_STOP_TIMEOUT_NS 200000000ull
/* How long to wait for the last threads' exit reports once the group is dead. */
#define PT_REAP_TIMEOUT_NS 1000000000ull

static struct pt_attach_thread *pt_find(pid_t tid) {
    for (int i = 0; i < pt_nthreads; i++)
        if (pt_threads[i].tid == tid) return &pt_threads[i];
    return NULL;
}

/* CPU time of a thread in ns, 0 if unreadable.  Not async-signal-safe. */
static uint64_t pt_cpu_ns(const struct pt_attach_thread *t) {
    char buf[96];
    ssize_t n = pread(t->schedstat_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    return strtoull(buf, NULL, 10);
}

/* Whether the thread is running or runnable.  Not async-signal-safe. */
static int pt_runnable(const struct pt_attach_thread *t) {
    char buf[512];
    ssize_t n = pread(t->stat_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 1; /* unknown: let the CPU time decide */
    buf[n] = '\0';
    const char *end = strrchr(buf, ')');
    return end != NULL && end[1] == ' ' && end[2] == 'R';
}

static void pt_close_thread(struct pt_attach_thread *t) {
    if (t->schedstat_fd >= 0) close(t->schedstat_fd);
    if (t->stat_fd >= 0) close(t->stat_fd);
}

static struct pt_attach_thread *pt_add(pid_t pid, pid_t tid) {
    struct pt_attach_thread *t = pt_find(tid);
    if (t != NULL || pt_nthreads >= PT_TRACE_MAX_THREADS) return t;
    t = &pt_threads[pt_nthreads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    char path[80];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    t->schedstat_fd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    t->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    t->cpu_ns = t->schedstat_fd >= 0 ? pt_cpu_ns(t) : 0;
    pt_attach_out_thread((uint32_t)tid, PT_ATTACH_THREAD_NEW, pid);
    return t;
}

static void pt_remove(pid_t pid, pid_t tid) {
    struct pt_attach_thread *t = pt_find(tid);
    if (t == NULL) return;
    pt_close_thread(t);
    *t = pt_threads[--pt_nthreads];
    pt_attach_out_thread((uint32_t)tid, PT_ATTACH_THREAD_GONE, pid);
}

/* Registers, the frame-pointer chain and a copy of the stack of a stopped
 * thread; unwound and written by pt_attach_unwind.c.  Not async-signal-safe. */
static void pt_sample(struct pt_attach_thread *t, uint64_t weight) {
    struct pt_regs regs;
    if (pt_arch_ptrace_regs(t->tid, &regs) != 0) return;
    uint64_t ips[PT_ATTACH_MAX_FRAMES];
    uint32_t n = 0;
    ips[n++] = regs.pc;
    uint64_t fp = regs.fp, sp = regs.sp;
    while (n < PT_ATTACH_MAX_FRAMES) {
        /* A caller's frame lies above ours on a downward-growing stack. */
        if (fp < sp || fp - sp > (64u << 20) || (fp & 7) != 0) break;
        uint64_t pair[2];
        struct iovec local = {pair, sizeof pair}, remote = {(void *)fp, sizeof pair};
        if (process_vm_readv(t->tid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof pair) break;
        if (pair[1] < 4096) break;
        ips[n++] = pair[1];
        sp = fp + 16;
        fp = pair[0];
    }
    /* The stack from sp up, for the CFI walk.  One iovec per page: a partial
     * read stops at the first unmapped page, not at zero. */
    uint64_t stack[PT_ATTACH_STACK_WORDS];
    struct iovec local = {stack, sizeof stack}, remote[PT_ATTACH_STACK_WORDS * 8 / 4096 + 1];
    int nremote = 0;
    uint64_t at = regs.sp, end = regs.sp + sizeof stack;
    while (at < end && nremote < (int)(sizeof remote / sizeof remote[0])) {
        uint64_t page_end = (at | 4095u) + 1;
        uint64_t stop = page_end < end ? page_end : end;
        remote[nremote].iov_base = (void *)at;
        remote[nremote].iov_len = stop - at;
        nremote++;
        at = stop;
    }
    ssize_t got = process_vm_readv(t->tid, &local, 1, remote, (unsigned long)nremote, 0);
    uint32_t nstack = got > 0 ? (uint32_t)(got / 8) : 0;
    pt_attach_unwind_sample((uint32_t)t->tid, weight, &regs, stack, nstack, ips, n);
    pt_tr_samples++;
}

/* Handle one wait status of a traced thread.  `want_stop` means we interrupted
 * it and want it left stopped (returns 1 then).  Not async-signal-safe. */
static int pt_handle(const struct pt_attach_config *cfg, pid_t tid, int status, int want_stop) {
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        /* Reaping every thread's exit is what lets the leader's exit reach
         * its parent: the kernel reports a leader only once its group is empty. */
        pt_last_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pt_last_signal = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
        if (tid == cfg->pid) {
            pt_target_gone = pt_leader_reaped = 1;
            pt_exit_status = pt_last_status;
            pt_exit_signal = pt_last_signal;
        }
        pt_remove(cfg->pid, tid);
        return 0;
    }
    if (!WIFSTOPPED(status)) return 0;
    int sig = WSTOPSIG(status), event = status >> 16;
    struct pt_attach_thread *t = pt_find(tid);
    if (t == NULL) t = pt_add(cfg->pid, tid); /* a new thread's first stop can come first */
    if (event == PTRACE_EVENT_CLONE) {
        unsigned long child = 0;
        if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &child) == 0) pt_add(cfg->pid, (pid_t)child);
        if (want_stop) return 1;
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
        if (want_stop) return 1;
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
    /* Signal-delivery-stop: pass the signal on untouched. */
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

/* Interrupt `tid` and wait until it is in a ptrace-stop, handling every other
 * thread's state changes meanwhile.  Never a blocking waitpid() on one tid:
 * when the group exits, the leader's report waits until every other thread
 * has been reaped, by us, so that wait would deadlock (issue 14).  0 once
 * stopped; -1 if it exited, sits in a group-stop (unless `detaching`: a
 * detach may start from there and leaves it stopped), or did not stop within
 * PT_STOP_TIMEOUT_NS.  Not async-signal-safe. */
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
            int event_stop = WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP;
            if (mine && detaching && event_stop) return 0;
            if (pt_handle(cfg, r, status, mine)) return 0;
            if (mine && (pt_find(tid) == NULL || event_stop)) return -1; /* exited, group-stop */
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
        if (pt_nthreads == 0 || pt_leader_reaped || now >= deadline) return;
        pt_wait_chld(deadline - now < 10000000ull ? deadline - now : 10000000ull);
    }
}

/* One sampling tick over all threads.  Not async-signal-safe. */
static void pt_tick(const struct pt_attach_config *cfg) {
    for (int i = 0; i < pt_nthreads; i++) {
        struct pt_attach_thread *t = &pt_threads[i];
        uint64_t cpu = pt_cpu_ns(t);
        if (cpu <= t->cpu_ns || !pt_runnable(t)) continue; /* not on a CPU: nothing to see */
        pid_t tid = t->tid;
        if (pt_stop_thread(cfg, tid, 0) != 0) continue;
        uint64_t stop_at = pt_mono_ns(); /* stopped from here until PTRACE_CONT */
        t = pt_find(tid);                /* the table may have grown while we waited */
        if (t == NULL) continue;
        pt_sample(t, cpu - t->cpu_ns);
        pt_tr_cpu_ns += cpu - t->cpu_ns;
        t->cpu_ns = cpu;
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        pt_tr_stopped_ns += pt_mono_ns() - stop_at;
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
                if (pt_nthreads == 0 && errno != ESRCH) return -1;
                continue;
            }
            pt_add(cfg->pid, tids[i]);
            added++;
        }
        if (added == 0) break;
    }
    if (pt_nthreads == 0) {
        errno = first_errno ? first_errno : ESRCH;
        return -1;
    }
    return 0;
}

/* Detach from every thread, each from a ptrace-stop (a group-stopped thread
 * stays stopped).  One that cannot be stopped (a zombie leader whose group
 * runs on) is detached by the kernel when the helper exits.  Not async-signal-safe. */
static void pt_detach_all(const struct pt_attach_config *cfg) {
    while (pt_nthreads > 0) {
        pid_t tid = pt_threads[pt_nthreads - 1].tid;
        /* A zombie (a leader after pthread_exit) never stops: the kernel lets
         * it go when the helper exits.  A signal in flight was passed on by
         * pt_handle while we waited for the others. */
        char state = pt_attach_task_state(cfg->pid, tid);
        if (state != 'Z' && state != 'X' && pt_stop_thread(cfg, tid, 1) == 0)
            ptrace(PTRACE_DETACH, tid, NULL, NULL);
        struct pt_attach_thread *t = pt_find(tid);
        if (t != NULL) {
            pt_close_thread(t);
            *t = pt_threads[--pt_nthreads];
        }
    }
}

/* The ptrace method: see the file comment.  Not async-signal-safe. */
int pt_attach_ptrace_run(const struct pt_attach_config *cfg) {
    /* schedstat's CPU time includes the kernel's, and a thread in a system
     * call is interrupted at its user-space entry: kernel time is counted. */
    uint32_t flags = pt_attach_unwind_init(cfg->pid) | PT_ATTACH_FLAG_KERNEL_TIME;
    pt_attach_out_header(PT_ATTACH_METHOD_PTRACE, cfg->pid, cfg->period_ns, flags);
    pt_attach_out_buffers(0, 0, cfg->buffer_bytes); /* no kernel ring: samples are taken in line */
    if (pt_seize_all(cfg) != 0) {
        /* The header is out, so explain through the stream and on stderr. */
        int saved = errno;
        pt_attach_out_text(PT_ATTACH_REC_ERROR, "ptrace(PTRACE_SEIZE, %d): %s", (int)cfg->pid,
                           strerror(saved));
        pt_attach_out_flush();
        fprintf(stderr, "ptrace(PTRACE_SEIZE, %d): %s\n", (int)cfg->pid, strerror(saved));
        errno = saved;
        return -1;
    }
    pt_attach_out_flush();
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {
        .it_interval = {(time_t)(cfg->period_ns / 1000000000ull),
                        (long)(cfg->period_ns % 1000000000ull)},
        .it_value = {(time_t)(cfg->period_ns / 1000000000ull),
                     (long)(cfg->period_ns % 1000000000ull)},
    };
    timerfd_settime(tfd, 0, &its, NULL);
    int ticks_since_check = 0;
    for (;;) {
        struct pollfd pfd[3] = {
            {cfg->control_fd, POLLIN, 0}, {cfg->signal_fd, POLLIN, 0}, {tfd, POLLIN, 0}};
        int r = poll(pfd, 3, 100);
        int chld = 0;
        int stop = r > 0 && pt_attach_check_control(cfg, pfd[0].revents, pfd[1].revents, &chld);
        pt_reap(cfg); /* cheap, and SIGCHLD can coalesce: always look */
        if (pfd[2].revents & POLLIN) {
            uint64_t expirations;
            if (read(tfd, &expirations, sizeof expirations) > 0) pt_tick(cfg);
            pt_reap(cfg);
        }
        if (++ticks_since_check >= 10 || r == 0) {
            ticks_since_check = 0;
            if (!pt_attach_target_alive(cfg->pid)) pt_target_gone = 1;
        }
        pt_attach_out_flush();
        if (stop || pt_target_gone || pt_nthreads == 0 || pt_attach_out_broken()) break;
    }
    close(tfd);
    if (pt_nthreads == 0) pt_target_gone = 1; /* every thread exited */
    if (pt_target_gone) {
        pt_reap_all(cfg);
        if (pt_exit_status < 0 && pt_exit_signal < 0) { /* the leader was not traced */
            pt_exit_status = pt_last_status;
            pt_exit_signal = pt_last_signal;
        }
        pt_attach_out_exit(pt_exit_status, pt_exit_signal);
    } else {
        pt_detach_all(cfg);
    }
    /* Say what the stops cost the target (issue 13), however small: every ptrace
     * sample stops a thread, and a tracer short of CPU makes fewer, cheaper stops.
     * A lower bound: the stop may begin before our waitpid() returns. */
    if (pt_tr_cpu_ns > 0 && pt_tr_stopped_ns > 0)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "ptrace stopped the target's threads for at least %.1f ms in all "
                           "(%.0f%% of the CPU time sampled): the target ran that much slower",
                           (double)pt_tr_stopped_ns / 1e6,
                           100.0 * (double)pt_tr_stopped_ns / (double)pt_tr_cpu_ns);
    pt_attach_out_end(pt_tr_samples, 0);
    return 0;
}
