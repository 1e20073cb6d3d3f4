/* Per-thread sampling clocks and the signal that delivers them.
 *
 * Each sampled thread gets its own clock, so every thread is sampled in
 * proportion to its own CPU time (a process-wide ITIMER_PROF skews that):
 *  - perf_event_open(PERF_COUNT_SW_TASK_CLOCK, pid=tid, cpu=-1) with
 *    F_SETOWN_EX(F_OWNER_TID)/F_SETSIG/O_ASYNC, so the overflow signal goes to
 *    that very thread; high resolution (hrtimer), allowed for self-profiling
 *    at perf_event_paranoid <= 2.  It counts kernel time too where the
 *    system allows it (exclude_kernel = 0: perf_event_paranoid <= 1,
 *    CAP_PERFMON or root): the signal is delivered on the return to user
 *    space, so time in a system call is charged to the user-space frame that
 *    made it, as perf --user-callchains and gperftools do.  Elsewhere the
 *    header says "user time only" (PT_SMP_USER_ONLY);
 *  - fallback: timer_create(thread CPU clock, SIGEV_THREAD_ID), tick-bound
 *    (about 250 deliveries per second; si_overrun carries the rest); the
 *    thread CPU clock includes system time;
 *  - wall-clock mode: timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID).
 * The signal is SIGPROF unless the target owns it (a handler already set, or
 * -pg's profil()); then SIGVTALRM or a real-time signal, said in the header.
 * Nothing here is async-signal-safe.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pt_sampler.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

enum { PT_CLOCK_PERF = 1, PT_CLOCK_TIMER = 2 };

/* One armed thread; the registry lets a fork child drop the parent's events
 * and lets a signal move re-target every thread's clock. */
struct pt_armed {
    pid_t tid;       /* 0: entry unused */
    int fd;          /* perf event, -1 for timers */
    uint64_t id;     /* PERF_EVENT_IOC_ID, to never close an fd the target reused */
    timer_t timer;   /* POSIX timer when fd < 0 */
    clockid_t clock; /* the timer's clock (the thread's CPU clock, or monotonic) */
};

/* The registry and its lock (never taken in signal context). */
static struct pt_armed pt_armed[PT_MAX_THREADS];
static pthread_mutex_t pt_armed_lock = PTHREAD_MUTEX_INITIALIZER;
/* The process whose threads the registry lists (set by timer init and a
 * followed fork child): a vfork child sharing the registry is not it. */
static pid_t pt_armed_pid;
/* PT_CLOCK_*: chosen once by pt_sampler_timer_init. */
static int pt_clock_kind;
/* 1 if perf events may count kernel time (exclude_kernel = 0); chosen once. */
static int pt_kernel_time;
/* Signal in use; the handler never reads it, the interposers do. */
PT_HIDDEN volatile int pt_sampler_signal;
/* Signals the target installed handlers for: never chosen again. */
static sigset_t pt_claimed;
/* The thread-exit hook: a key whose destructor disarms the thread. */
static pthread_key_t pt_exit_key;
/* Bitmap of the fds that are our perf events, so close()/close_range() by a
 * target that closes "all" descriptors leave them alone. */
#define PT_FD_BITS 65536
static uint8_t pt_fd_ours[PT_FD_BITS / 8];

static void pt_fd_mark(int fd, int ours) {
    if (fd < 0 || fd >= PT_FD_BITS) return;
    if (ours) __atomic_or_fetch(&pt_fd_ours[fd / 8], (uint8_t)(1u << (fd % 8)), __ATOMIC_RELAXED);
    else __atomic_and_fetch(&pt_fd_ours[fd / 8], (uint8_t) ~(1u << (fd % 8)), __ATOMIC_RELAXED);
}

/* 1 if `fd` is one of our perf events.  Async-signal-safe (a relaxed load). */
int pt_sampler_timer_owns_fd(int fd) {
    if (fd < 0 || fd >= PT_FD_BITS) return 0;
    return (__atomic_load_n(&pt_fd_ours[fd / 8], __ATOMIC_RELAXED) >> (fd % 8)) & 1;
}

/* Our fds in [first, last] in increasing order, at most `max`; the count. */
int pt_sampler_timer_fds_in(unsigned first, unsigned last, int *fds, int max) {
    int n = 0;
    for (unsigned fd = first; fd <= last && fd < PT_FD_BITS && n < max; fd++)
        if (pt_sampler_timer_owns_fd((int)fd)) fds[n++] = (int)fd;
    return n;
}

/* Move a new fd out of the low numbers a target may expect to get from
 * open() (some assume 3 is next after closing everything). */
static int pt_fd_high(int fd) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur < 64) return fd;
    long base = lim.rlim_cur > 1400 ? 1000 : (long)(lim.rlim_cur * 3 / 4);
    int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
    if (high < 0) return fd;
    close(fd);
    return high;
}

static pid_t pt_gettid(void) { return (pid_t)syscall(SYS_gettid); }

int pt_sampler_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    static int (*real)(int, const struct sigaction *, struct sigaction *);
    if (real == NULL)
        real = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT,
                                                                                 "sigaction");
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(sig, act, old);
}

int pt_sampler_timer_is_ours(void *handler) { return handler == (void *)pt_sampler_on_signal; }

/* A signal whose disposition is still the default, other than `avoid`. */
static int pt_pick_signal(int avoid) {
    int candidates[64], n = 0;
    candidates[n++] = SIGPROF;
    candidates[n++] = SIGVTALRM;
    for (int s = SIGRTMIN + 8; s <= SIGRTMAX - 4 && n < 64; s++) candidates[n++] = s;
    for (int i = 0; i < n; i++) {
        int s = candidates[i];
        struct sigaction old;
        if (s == avoid || sigismember(&pt_claimed, s) == 1) continue;
        if (pt_sampler_real_sigaction(s, NULL, &old) != 0) continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) return s;
    }
    return -1;
}

static int pt_install(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = pt_sampler_on_signal;
    /* SA_ONSTACK: on the thread's alternate stack (pt_altstack_on), so a
     * sample near the stack limit never overflows the target's stack. */
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return pt_sampler_real_sigaction(sig, &sa, NULL);
}

static void pt_describe(void) {
    if (pt_sampler_file.hdr == NULL) return;
    const char *clock = pt_clock_kind == PT_CLOCK_PERF ? "perf task-clock"
                        : pt_sampler_cfg.wall_clock    ? "timer CLOCK_MONOTONIC (wall)"
                                                       : "timer thread CPU clock";
    snprintf(pt_sampler_file.hdr->clock, sizeof pt_sampler_file.hdr->clock, "%s", clock);
    pt_sampler_file.smp->signal = (uint32_t)pt_sampler_signal;
    pt_sampler_file.smp->sflags |= pt_clock_kind == PT_CLOCK_PERF ? PT_SMP_PERF : PT_SMP_TIMER;
    if (pt_clock_kind == PT_CLOCK_PERF && !pt_kernel_time)
        pt_sampler_file.smp->sflags |= PT_SMP_USER_ONLY;
    if (pt_sampler_signal != SIGPROF) pt_sampler_file.smp->sflags |= PT_SMP_SIGNAL_MOVED;
}

static int pt_perf_open(pid_t tid) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = pt_sampler_cfg.period_ns;
    attr.disabled = 1;
    attr.exclude_kernel = !pt_kernel_time; /* 1 is allowed at perf_event_paranoid 2 */
    attr.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void pt_thread_exit_hook(void *value) {
    (void)value;
    pt_sampler_thread_disarm();
}

/* Choose the clock and the signal, install the handler, describe both in the
 * header.  0, or -1 when nothing can sample. */
int pt_sampler_timer_init(void) {
    pt_armed_pid = getpid();
    sigemptyset(&pt_claimed);
    if (pthread_key_create(&pt_exit_key, pt_thread_exit_hook) != 0) return -1;
    pt_clock_kind = PT_CLOCK_TIMER;
    if (!pt_sampler_cfg.wall_clock && !pt_sampler_cfg.force_timer) {
        pt_kernel_time = !pt_sampler_cfg.user_only;
        int fd = pt_perf_open(pt_gettid());
        if (fd < 0 && pt_kernel_time) { /* kernel time not allowed: user time only */
            pt_kernel_time = 0;
            fd = pt_perf_open(pt_gettid());
        }
        if (fd >= 0) {
            close(fd);
            pt_clock_kind = PT_CLOCK_PERF;
        }
    }
    int sig = SIGPROF;
    struct sigaction old;
    if (pt_sampler_main_uses_mcount() ||
        (pt_sampler_real_sigaction(SIGPROF, NULL, &old) == 0 &&
         ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)))
        sig = pt_pick_signal(SIGPROF);
    if (sig < 0 || pt_install(sig) != 0) return -1;
    pt_sampler_signal = sig;
    pt_describe();
    return 0;
}

/* Start this thread's clock; the entry gets fd/timer.  0 or -1. */
static int pt_start_clock(struct pt_armed *e, pid_t tid) {
    e->fd = -1;
    if (pt_clock_kind == PT_CLOCK_PERF) {
        int fd = pt_perf_open(tid);
        if (fd >= 0) fd = pt_fd_high(fd);
        if (fd >= 0) {
            struct f_owner_ex owner = {F_OWNER_TID, tid};
            if (fcntl(fd, F_SETOWN_EX, &owner) == 0 &&
                fcntl(fd, F_SETSIG, pt_sampler_signal) == 0 &&
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) == 0 &&
                ioctl(fd, PERF_EVENT_IOC_ID, &e->id) == 0 &&
                ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0) {
                e->fd = fd;
                pt_fd_mark(fd, 1);
                return 0;
            }
            close(fd);
        }
        /* perf refused this thread (fd limit, seccomp): fall back for it. */
    }
    if (pt_sampler_cfg.wall_clock) e->clock = CLOCK_MONOTONIC;
    else if (pthread_getcpuclockid(pthread_self(), &e->clock) != 0) return -1;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = pt_sampler_signal;
    sev.sigev_notify_thread_id = tid;
    if (timer_create(e->clock, &sev, &e->timer) != 0) return -1;
    struct itimerspec its;
    its.it_interval.tv_sec = (time_t)(pt_sampler_cfg.period_ns / 1000000000u);
    its.it_interval.tv_nsec = (long)(pt_sampler_cfg.period_ns % 1000000000u);
    its.it_value = its.it_interval;
    if (timer_settime(e->timer, 0, &its, NULL) != 0) {
        timer_delete(e->timer);
        return -1;
    }
    return 0;
}

/* Stop an entry's clock; closes the perf fd only if it is still our event. */
static void pt_stop_clock(struct pt_armed *e) {
    if (e->fd >= 0) {
        uint64_t id = 0;
        pt_fd_mark(e->fd, 0);
        if (ioctl(e->fd, PERF_EVENT_IOC_ID, &id) == 0 && id == e->id) close(e->fd);
        e->fd = -1;
    } else {
        timer_delete(e->timer);
    }
}

/* Give the calling thread an alternate signal stack for the handler, unless
 * it has one already (the program's own, or inherited over fork: kept as
 * is).  A guard page below it.  Thread start only, never in the handler.
 * Not async-signal-safe (sysconf). */
static void pt_altstack_on(void) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
    size_t size = PT_ALTSTACK_SIZE;
    long min = sysconf(_SC_MINSIGSTKSZ); /* the kernel's signal frame (AVX-512, AMX) */
    if (min > 0 && (size_t)min * 4 > size) size = ((size_t)min * 4 + 4095) & ~(size_t)4095;
    unsigned char *p = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return;
    mprotect(p, 4096, PROT_NONE); /* an overflow faults instead of writing below */
    stack_t ss = {.ss_sp = p + 4096, .ss_flags = 0, .ss_size = size};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(p, size + 4096);
        return;
    }
    pt_sampler_self.altstack = p;
    pt_sampler_self.altstack_size = size + 4096;
}

/* Thread exit: drop our alternate stack if it is still the thread's (a
 * program that installed its own since keeps it; ours then stays mapped,
 * as the program may switch back to it).  Never while on it: the handler
 * does not call this.  Not async-signal-safe. */
static void pt_altstack_off(void) {
    unsigned char *p = pt_sampler_self.altstack;
    if (p == NULL) return;
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && (unsigned char *)cur.ss_sp == p + 4096 &&
        !(cur.ss_flags & SS_ONSTACK)) {
        stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
        if (sigaltstack(&off, NULL) == 0) munmap(p, pt_sampler_self.altstack_size);
    }
    pt_sampler_self.altstack = NULL;
}

/* Register and arm the calling thread: stack bounds, a ring slot, a clock.
 * 0, or -1 when this thread stays unsampled. */
int pt_sampler_thread_arm(void) {
    if (pt_sampler_file.hdr == NULL || pt_sampler_self.slot != NULL) return -1;
    pid_t tid = pt_gettid();
    pthread_attr_t attr;
    void *stack_addr = NULL;
    size_t stack_size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return -1;
    int got = pthread_attr_getstack(&attr, &stack_addr, &stack_size);
    pthread_attr_destroy(&attr);
    if (got != 0 || stack_addr == NULL) return -1;
    uint64_t *ring = NULL;
    pt_sampler_slot *slot = pt_sampler_slot_claim(tid, &ring);
    if (slot == NULL) return -1;
    pthread_mutex_lock(&pt_armed_lock);
    int reg = -1;
    for (int i = 0; i < PT_MAX_THREADS; i++)
        if (pt_armed[i].tid == 0) {
            reg = i;
            break;
        }
    if (reg < 0) {
        pthread_mutex_unlock(&pt_armed_lock);
        pt_sampler_slot_release(slot, 0);
        __atomic_add_fetch(&pt_sampler_file.smp->threads_lost, 1, __ATOMIC_RELAXED);
        return -1;
    }
    pt_sampler_self.ring = ring;
    /* No ring (the file system is full): mask 0 makes every record a drop. */
    pt_sampler_self.mask = ring != NULL ? pt_sampler_file.smp->ring_words - 1 : 0;
    pt_sampler_self.stack_lo = (uintptr_t)stack_addr;
    pt_sampler_self.stack_hi = (uintptr_t)stack_addr + stack_size;
    pt_sampler_self.reg = reg;
    pt_altstack_on(); /* before the first signal can come */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pt_sampler_self.slot = slot; /* the handler may record from here on */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pt_armed[reg].tid = tid;
    if (pt_start_clock(&pt_armed[reg], tid) != 0) {
        pt_armed[reg].tid = 0;
        pthread_mutex_unlock(&pt_armed_lock);
        pt_sampler_self.slot = NULL;
        pt_sampler_self.reg = -1;
        pt_altstack_off();
        pt_sampler_slot_release(slot, 0);
        return -1;
    }
    pthread_mutex_unlock(&pt_armed_lock);
    pthread_setspecific(pt_exit_key, (void *)1); /* disarm at thread exit */
    return 0;
}

/* Stop sampling the calling thread and hand its slot back with its CPU time. */
void pt_sampler_thread_disarm(void) {
    pt_sampler_slot *slot = pt_sampler_self.slot;
    if (slot == NULL) return;
    pt_sampler_self.slot = NULL; /* from here the handler ignores late signals */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_lock(&pt_armed_lock);
    if (pt_sampler_self.reg >= 0) {
        pt_stop_clock(&pt_armed[pt_sampler_self.reg]);
        pt_armed[pt_sampler_self.reg].tid = 0;
    }
    pthread_mutex_unlock(&pt_armed_lock);
    pt_sampler_self.reg = -1;
    pt_altstack_off();
    struct timespec cpu;
    uint64_t cpu_ns = 0;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
    pt_sampler_slot_release(slot, cpu_ns);
}

/* Fork child: the registry lists the parent's threads, whose perf fds the
 * child inherited (POSIX timers are not inherited): close them.  Then arm the
 * calling thread again if the child is followed (its new file is open). */
void pt_sampler_timer_fork_child(int keep) {
    pt_sampler_self.slot = NULL;
    pt_sampler_self.reg = -1;
    pthread_mutex_init(&pt_armed_lock, NULL); /* another thread may have held it */
    for (int i = 0; i < PT_MAX_THREADS; i++) {
        if (pt_armed[i].tid != 0 && pt_armed[i].fd >= 0) {
            uint64_t id = 0;
            pt_fd_mark(pt_armed[i].fd, 0);
            if (ioctl(pt_armed[i].fd, PERF_EVENT_IOC_ID, &id) == 0 && id == pt_armed[i].id)
                close(pt_armed[i].fd);
        }
        pt_armed[i].tid = 0;
    }
    pt_armed_pid = getpid();
    if (keep) {
        pt_describe();
        pt_sampler_thread_arm();
    }
}

/* Stop (pause = 1) or restart (0) every armed thread's clock, around an
 * exec: a clock left running fires between exec's point of no return and
 * the new image's constructor, whose SIGPROF is back to the default action
 * (terminate).  Pausing also discards a sample already pending (SIG_IGN
 * then our handler again).  Not async-signal-safe (a mutex). */
void pt_sampler_timer_pause_all(int pause) {
    /* A vfork child shares our memory and fds but must not stop the
     * parent's clocks (it never restarts them if its exec succeeds). */
    if (getpid() != pt_armed_pid) return;
    pthread_mutex_lock(&pt_armed_lock);
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (!pause) {
        its.it_interval.tv_sec = (time_t)(pt_sampler_cfg.period_ns / 1000000000u);
        its.it_interval.tv_nsec = (long)(pt_sampler_cfg.period_ns % 1000000000u);
        its.it_value = its.it_interval;
    }
    for (int i = 0; i < PT_MAX_THREADS; i++) {
        struct pt_armed *e = &pt_armed[i];
        if (e->tid == 0) continue;
        if (e->fd >= 0) ioctl(e->fd, pause ? PERF_EVENT_IOC_DISABLE : PERF_EVENT_IOC_ENABLE, 0);
        else timer_settime(e->timer, 0, &its, NULL);
    }
    pthread_mutex_unlock(&pt_armed_lock);
    if (pause && pt_sampler_signal > 0) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        pt_sampler_real_sigaction(pt_sampler_signal, &ign, NULL); /* drops what is pending */
        pt_install(pt_sampler_signal);
    }
}

/* The target installed its own disposition for pt_sampler_signal: move every thread's
 * clock to another signal first.  0, or -1 (then sampling stops). */
int pt_sampler_timer_move_signal(void) {
    int old_sig = pt_sampler_signal;
    sigaddset(&pt_claimed, old_sig);
    int sig = pt_pick_signal(old_sig);
    if (sig < 0 || pt_install(sig) != 0) return -1;
    pthread_mutex_lock(&pt_armed_lock);
    pt_sampler_signal = sig;
    for (int i = 0; i < PT_MAX_THREADS; i++) {
        struct pt_armed *e = &pt_armed[i];
        if (e->tid == 0) continue;
        if (e->fd >= 0) {
            fcntl(e->fd, F_SETSIG, sig);
        } else {
            /* A POSIX timer's signal is fixed at creation: make a new one on
             * the same clock (the thread's CPU clock id works from any thread). */
            timer_t old_timer = e->timer;
            struct sigevent sev;
            memset(&sev, 0, sizeof sev);
            sev.sigev_notify = SIGEV_THREAD_ID;
            sev.sigev_signo = sig;
            sev.sigev_notify_thread_id = e->tid;
            struct itimerspec its;
            its.it_interval.tv_sec = (time_t)(pt_sampler_cfg.period_ns / 1000000000u);
            its.it_interval.tv_nsec = (long)(pt_sampler_cfg.period_ns % 1000000000u);
            its.it_value = its.it_interval;
            if (timer_create(e->clock, &sev, &e->timer) == 0) {
                timer_settime(e->timer, 0, &its, NULL);
                timer_delete(old_timer);
            }
        }
    }
    pthread_mutex_unlock(&pt_armed_lock);
    pt_describe();
    return 0;
}
