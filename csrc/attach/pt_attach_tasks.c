/* proftui-attach, ptrace method: the traced threads' /proc files and what they
 * say about each thread's scheduling (CPU time, state, context switches, the
 * signal mask).  See pt_attach_ptrace.c's file comment for how they are used. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pt_attach_tasks.h"

/* The first stack copy of a thread not yet walked whole, and the slack added
 * to what the last whole walk needed. */
#define PT_STACK_FIRST 8192u
#define PT_STACK_SLACK 1024u

/* The CPU time a thread found running with SIGPROF blocked must have used
 * since the timer last sampled it before the timer gives way to polling:
 * this many periods, and at least PT_BLOCKED_MIN_NS. */
#define PT_BLOCKED_PERIODS 50u
#define PT_BLOCKED_MIN_NS 100000000ull

void pt_task_open(struct pt_attach_thread *t, pid_t pid, pid_t tid) {
    memset(t, 0, sizeof *t);
    t->tid = tid;
    char path[80];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    t->schedstat_fd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    t->status_fd = open(path, O_RDONLY | O_CLOEXEC);
    pt_sched_read(t, &t->was);
    t->cpu_ns = t->was.cpu_ns;
    t->left = PT_LEFT_UNKNOWN;
}

/* Read a thread's scheduling counters: schedstat first, then status (so a
 * switch between the two reads shows it off its CPU, never on it).
 * Not async-signal-safe. */
void pt_sched_read(const struct pt_attach_thread *t, struct pt_sched_view *v) {
    static const char state_key[] = "\nState:\t", vol_key[] = "\nvoluntary_ctxt_switches:\t",
                      invol_key[] = "\nnonvoluntary_ctxt_switches:\t";
    char buf[2048];
    *v = (struct pt_sched_view){0, 0, -1, -1, 0};
    ssize_t n = t->schedstat_fd >= 0 ? pread(t->schedstat_fd, buf, 95, 0) : -1;
    if (n > 0) {
        buf[n] = '\0';
        char *end;
        v->cpu_ns = strtoull(buf, &end, 10);
        strtoull(end, &end, 10); /* time spent waiting on a runqueue */
        v->arrivals = strtoull(end, NULL, 10);
    }
    n = t->status_fd >= 0 ? pread(t->status_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return;
    buf[n] = '\0';
    const char *state = strstr(buf, state_key);
    const char *vol = strstr(buf, vol_key), *invol = strstr(buf, invol_key);
    if (state != NULL) v->state = state[sizeof state_key - 1];
    if (vol != NULL) v->voluntary = strtoll(vol + sizeof vol_key - 1, NULL, 10);
    if (invol != NULL) v->involuntary = strtoll(invol + sizeof invol_key - 1, NULL, 10);
}

/* 1 if the counters are all there (schedstat's arrivals need CONFIG_SCHED_INFO). */
int pt_sched_known(const struct pt_sched_view *v) {
    return v->arrivals > 0 && v->voluntary >= 0 && v->involuntary >= 0;
}

/* 1 if the thread was on a CPU when read: each switch off a CPU is followed
 * by one arrival (see the file comment). */
int pt_sched_on_cpu(const struct pt_sched_view *v) {
    return v->arrivals == (uint64_t)(v->voluntary + v->involuntary) + 1;
}

void pt_task_close(struct pt_attach_thread *t) {
    if (t->schedstat_fd >= 0) close(t->schedstat_fd);
    if (t->status_fd >= 0) close(t->status_fd);
}

/* A thread's CPU time from its schedstat (0 if unreadable).  Not async-signal-safe. */
uint64_t pt_sched_cpu(const struct pt_attach_thread *t) {
    char buf[96];
    ssize_t n = t->schedstat_fd >= 0 ? pread(t->schedstat_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return 0;
    buf[n] = '\0';
    return strtoull(buf, NULL, 10);
}

/* 1 if the thread runs (State R) with SIGPROF blocked (SigBlk), one read of
 * its status: the timer cannot sample it where it runs and would signal some
 * other thread instead.  Not async-signal-safe. */
static int pt_runs_blocking_sigprof(const struct pt_attach_thread *t) {
    static const char state_key[] = "\nState:\t", key[] = "\nSigBlk:\t";
    char buf[2048];
    ssize_t n = t->status_fd >= 0 ? pread(t->status_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *state = strstr(buf, state_key), *at = strstr(buf, key);
    if (state == NULL || state[sizeof state_key - 1] != 'R') return 0;
    return at != NULL && (strtoull(at + sizeof key - 1, NULL, 16) >> (SIGPROF - 1) & 1);
}

/* A thread that ran with SIGPROF blocked for a while: found running (State R)
 * with SIGPROF blocked, having used at least PT_BLOCKED_PERIODS sampling
 * periods (and PT_BLOCKED_MIN_NS) of CPU time since the timer last sampled it
 * (a thread that lets the signal in gets one for about every period of its
 * CPU time).  The mask alone says little: glibc's pthread_create blocks every
 * signal around clone(), and under ptrace a thread that starts threads in a
 * loop is found blocking at most looks, yet it is sampled between (measured
 * on 200 pthread_create in a row: at most 65 ms of CPU time unsampled, beside
 * two busy loops on 2 CPUs).  NULL if none.  Not async-signal-safe. */
struct pt_attach_thread *pt_task_blocking_sigprof(struct pt_attach_thread *threads, int n,
                                                  uint64_t period_ns) {
    uint64_t enough = PT_BLOCKED_PERIODS * period_ns;
    if (enough < PT_BLOCKED_MIN_NS) enough = PT_BLOCKED_MIN_NS;
    for (int i = 0; i < n; i++) {
        struct pt_attach_thread *t = &threads[i];
        uint64_t cpu_ns = pt_sched_cpu(t);
        if (cpu_ns >= t->cpu_ns + enough && pt_runs_blocking_sigprof(t)) {
            return t;
        }
    }
    return NULL;
}

/* Registers, the frame-pointer chain and a copy of the stack of a stopped
 * thread; unwound and written by pt_attach_unwind.c, which reads more stack
 * if the copy ends too early.  `regs` were read already; `stack` is the copy's buffer.  Not
 * async-signal-safe. */
void pt_task_sample(struct pt_attach_thread *t, const struct pt_regs *regs, uint64_t weight,
                    uint64_t *stack, size_t stack_bytes) {
    uint64_t ips[PT_ATTACH_MAX_FRAMES];
    uint32_t n = 0;
    ips[n++] = regs->pc;
    uint64_t fp = regs->fp, sp = regs->sp;
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
    /* The stack from sp up, as much as this thread's last whole walk needed.
     * One iovec per page: a partial read stops at the first unmapped page. */
    uint64_t want = t->need ? t->need + PT_STACK_SLACK : PT_STACK_FIRST;
    if (want > stack_bytes) want = stack_bytes;
    struct iovec local = {stack, (size_t)want}, remote[PT_ATTACH_STACK_MAX / 4096 + 1];
    unsigned long nremote = 0;
    uint64_t at = regs->sp, end = regs->sp + want;
    while (at < end && nremote < sizeof remote / sizeof remote[0]) {
        uint64_t page_end = (at | 4095u) + 1;
        uint64_t stop = page_end < end ? page_end : end;
        remote[nremote++] = (struct iovec){(void *)at, (size_t)(stop - at)};
        at = stop;
    }
    ssize_t got = process_vm_readv(t->tid, &local, 1, remote, nremote, 0);
    uint32_t nstack = got > 0 ? (uint32_t)(got / 8) : 0;
    uint64_t need = pt_attach_unwind_sample((uint32_t)t->tid, weight, regs, stack, nstack,
                                            0, ips, n);
    if (need) t->need = need;
}
