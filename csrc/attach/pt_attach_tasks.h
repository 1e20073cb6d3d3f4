/* proftui-attach, ptrace method: one traced thread's record and what /proc says
 * about its scheduling (pt_attach_tasks.c).  Private to the ptrace method. */
#ifndef PT_ATTACH_TASKS_H
#define PT_ATTACH_TASKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pt_attach.h"

/* What /proc says about a thread's scheduling: schedstat, then status. */
struct pt_sched_view {
    uint64_t cpu_ns;                /* CPU time */
    uint64_t arrivals;              /* times put on a CPU (0 without CONFIG_SCHED_INFO) */
    int64_t voluntary, involuntary; /* context switches off a CPU; -1: unreadable */
    char state;                     /* 'R', 'S'...; 0: unreadable */
};

/* How a thread last left its CPU, as far as our looks could tell. */
enum { PT_LEFT_UNKNOWN, PT_LEFT_SLEPT, PT_LEFT_PREEMPTED };

struct pt_attach_thread {
    pid_t tid;
    int schedstat_fd;         /* /proc/PID/task/TID/schedstat, read each tick */
    int status_fd;            /* /proc/PID/task/TID/status: state, context switches */
    uint64_t cpu_ns;          /* CPU time at the previous kept sample */
    uint64_t need;            /* stack bytes its last whole walk needed: the next copy's size */
    struct pt_sched_view was; /* at our previous look (or stop) */
    int left;                 /* PT_LEFT_*: how it left its CPU before that look */
};

/* Fill `t` for thread `tid` of `pid`: its /proc files opened, its counters read
 * (CPU time so far is not sampled).  Not async-signal-safe. */
void pt_task_open(struct pt_attach_thread *t, pid_t pid, pid_t tid);
/* Close `t`'s /proc files.  Not async-signal-safe. */
void pt_task_close(struct pt_attach_thread *t);
/* Read `t`'s scheduling counters into `v`.  Not async-signal-safe. */
void pt_sched_read(const struct pt_attach_thread *t, struct pt_sched_view *v);
/* 1 if the counters are all there (schedstat's arrivals need CONFIG_SCHED_INFO). */
int pt_sched_known(const struct pt_sched_view *v);
/* 1 if the thread was on a CPU when read. */
int pt_sched_on_cpu(const struct pt_sched_view *v);
/* A thread's CPU time from its schedstat (0 if unreadable).  Not async-signal-safe. */
uint64_t pt_sched_cpu(const struct pt_attach_thread *t);
/* Of `threads[0, n)`, one that ran with SIGPROF blocked for a while (see the
 * definition), or NULL.  Not async-signal-safe. */
struct pt_attach_thread *pt_task_blocking_sigprof(struct pt_attach_thread *threads, int n,
                                                  uint64_t period_ns);
/* Sample stopped thread `t` for `weight` ns: its frame-pointer chain and a copy of
 * its stack into `stack` (`stack_bytes`), unwound and written by pt_attach_unwind.c.
 * Not async-signal-safe. */
void pt_task_sample(struct pt_attach_thread *t, const struct pt_regs *regs, uint64_t weight,
                    uint64_t *stack, size_t stack_bytes);

#endif
