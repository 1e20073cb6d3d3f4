/* Per-thread profiling clocks and the signal that delivers them (pt_timer.h).
 *
 *  - perf_event_open(PERF_COUNT_SW_TASK_CLOCK, pid=tid, cpu=-1) with
 *    F_SETOWN_EX(F_OWNER_TID)/F_SETSIG/O_ASYNC, so the overflow signal goes to
 *    that very thread; high resolution (hrtimer), allowed for self-profiling
 *    at perf_event_paranoid <= 2.  It counts kernel time too where the
 *    system allows it (exclude_kernel = 0: perf_event_paranoid <= 1,
 *    CAP_PERFMON or root): the signal is delivered on the return to user
 *    space, so time in a system call is charged to the user-space code that
 *    made it, as perf --user-callchains and gperftools do.  Elsewhere the
 *    flags say "user time only" (PT_TIMER_USER_ONLY);
 *  - fallback: timer_create(thread CPU clock, SIGEV_THREAD_ID), tick-bound
 *    (about 250 deliveries per second; si_overrun carries the rest); the
 *    thread CPU clock includes system time;
 *  - wall-clock mode: timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID).
 * The signal is SIGPROF unless the target owns it (a handler already set, or
 * -pg's profil()); then SIGVTALRM or a real-time signal, said in the flags.
 * Nothing here is async-signal-safe unless stated.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pt_env.h"
#include "pt_note.h"
#include "pt_timer.h"

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

/* The calling thread's registry entry and the alternate stack we gave it, in
 * initial-exec TLS (no lazy allocation on first use). */
struct pt_timer_thread {
    int reg;         /* registry index + 1; 0: not armed */
    void *altstack;  /* our sigaltstack (mmap), NULL if the thread had its own or none */
    size_t altstack_size;
};
static __thread struct pt_timer_thread pt_timer_self __attribute__((tls_model("initial-exec")));

/* The registry and its lock (never taken in signal context). */
static struct pt_armed pt_armed[PT_TIMER_MAX_THREADS];
static pthread_mutex_t pt_armed_lock = PTHREAD_MUTEX_INITIALIZER;
/* The process whose threads the registry lists (set by init and a followed fork
 * child): a vfork child sharing the registry is not it. */
static pid_t pt_armed_pid;
/* Settings and the handler, fixed by pt_timer_init. */
static struct pt_timer_config pt_cfg;
static void (*pt_handler)(int, siginfo_t *, void *);
static void (*pt_describe)(void);
/* PT_CLOCK_*: chosen once by pt_timer_init. */
static int pt_clock_kind;
/* 1 if perf events may count kernel time (exclude_kernel = 0); chosen once. */
static int pt_kernel_time;
/* Signals the target installed handlers for: never chosen again. */
static sigset_t pt_claimed;
/* Signal in use and whether ticking is on (pt_timer.h). */
PT_HIDDEN int pt_timer_signal;
PT_HIDDEN int pt_timer_on;
/* Bitmap of the fds that are our perf events, so close()/close_range() by a
 * target that closes "all" descriptors leave them alone. */
#define PT_FD_BITS 65536
static uint8_t pt_fd_ours[PT_FD_BITS / 8];

void pt_timer_config_from_env(struct pt_timer_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    long hz = pt_env_long("PROFTUI_FREQUENCY", PT_TIMER_DEFAULT_FREQUENCY);
    if (hz < 1) hz = 1;
    if (hz > PT_TIMER_MAX_FREQUENCY) hz = PT_TIMER_MAX_FREQUENCY;
    cfg->period_ns = 1000000000u / (uint64_t)hz;
    cfg->wall_clock = pt_env_is("PROFTUI_WALL_CLOCK", "1");
    cfg->force_timer = pt_env_is("PROFTUI_SAMPLER_CLOCK", "timer");
    cfg->user_only = pt_env_is("PROFTUI_SAMPLER_KERNEL", "0");
}

static void pt_fd_mark(int fd, int ours) {
    if (fd < 0 || fd >= PT_FD_BITS) return;
    if (ours) __atomic_or_fetch(&pt_fd_ours[fd / 8], (uint8_t)(1u << (fd % 8)), __ATOMIC_RELAXED);
    else __atomic_and_fetch(&pt_fd_ours[fd / 8], (uint8_t) ~(1u << (fd % 8)), __ATOMIC_RELAXED);
}

/* Async-signal-safe (a relaxed load). */
int pt_timer_owns_fd(int fd) {
    if (fd < 0 || fd >= PT_FD_BITS) return 0;
    return (__atomic_load_n(&pt_fd_ours[fd / 8], __ATOMIC_RELAXED) >> (fd % 8)) & 1;
}

int pt_timer_fds_in(unsigned first, unsigned last, int *fds, int max) {
    int n = 0;
    for (unsigned fd = first; fd <= last && fd < PT_FD_BITS && n < max; fd++)
        if (pt_timer_owns_fd((int)fd)) fds[n++] = (int)fd;
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

int pt_timer_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
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

int pt_timer_is_ours(void *handler) {
    return pt_handler != NULL && handler == (void *)pt_handler;
}

static int pt_mcount_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    int *found = data;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    uint64_t strtab = 0, strsz = 0;
    for (; dyn != NULL && dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_STRTAB) strtab = dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_STRSZ) strsz = dyn->d_un.d_val;
    }
    /* ld.so relocates these pointers in place on some ports and not others. */
    if (strtab != 0 && strtab < info->dlpi_addr) strtab += info->dlpi_addr;
    const char *s = (const char *)strtab, *end = s + strsz;
    for (; strtab != 0 && s < end; s += strlen(s) + 1)
        if (!strcmp(s, "mcount") || !strcmp(s, "_mcount") || !strcmp(s, "__fentry__")) *found = 1;
    return 1; /* the main program comes first: stop there */
}

/* 1 if the executable calls mcount (built with -pg: gmon's profil owns
 * SIGPROF through libc's internal sigaction, which no interposer sees). */
static int pt_main_uses_mcount(void) {
    int found = 0;
    dl_iterate_phdr(pt_mcount_cb, &found);
    return found;
}

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
        if (pt_timer_real_sigaction(s, NULL, &old) != 0) continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) return s;
    }
    return -1;
}

static int pt_install(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = pt_handler;
    /* SA_ONSTACK: on the thread's alternate stack (pt_altstack_on), so a tick
     * near the stack limit never overflows the target's stack. */
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return pt_timer_real_sigaction(sig, &sa, NULL);
}

/* Async-signal-safe (reads settings fixed at init). */
const char *pt_timer_clock_name(void) {
    return pt_clock_kind == PT_CLOCK_PERF ? "perf task-clock"
           : pt_cfg.wall_clock            ? "timer CLOCK_MONOTONIC (wall)"
                                          : "timer thread CPU clock";
}

/* Async-signal-safe (reads settings fixed at init). */
uint32_t pt_timer_flags(void) {
    uint32_t flags = pt_clock_kind == PT_CLOCK_PERF ? PT_TIMER_PERF : PT_TIMER_POSIX;
    if (pt_clock_kind == PT_CLOCK_PERF && !pt_kernel_time) flags |= PT_TIMER_USER_ONLY;
    if (PT_GET(pt_timer_signal) != SIGPROF) flags |= PT_TIMER_SIGNAL_MOVED;
    return flags;
}

static int pt_perf_open(pid_t tid) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = pt_cfg.period_ns;
    attr.disabled = 1;
    attr.exclude_kernel = !pt_kernel_time; /* 1 is allowed at perf_event_paranoid 2 */
    attr.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int pt_timer_init(const struct pt_timer_config *cfg, void (*handler)(int, siginfo_t *, void *),
                  void (*describe)(void)) {
    pt_cfg = *cfg;
    pt_handler = handler;
    pt_describe = describe;
    pt_armed_pid = getpid();
    sigemptyset(&pt_claimed);
    pt_clock_kind = PT_CLOCK_TIMER;
    if (!pt_cfg.wall_clock && !pt_cfg.force_timer) {
        pt_kernel_time = !pt_cfg.user_only;
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
    if (pt_main_uses_mcount() ||
        (pt_timer_real_sigaction(SIGPROF, NULL, &old) == 0 &&
         ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)))
        sig = pt_pick_signal(SIGPROF);
    if (sig < 0 || pt_install(sig) != 0) return -1;
    PT_SET(pt_timer_signal, sig);
    PT_SET(pt_timer_on, 1);
    return 0;
}

static void pt_set_interval(struct itimerspec *its) {
    its->it_interval.tv_sec = (time_t)(pt_cfg.period_ns / 1000000000u);
    its->it_interval.tv_nsec = (long)(pt_cfg.period_ns % 1000000000u);
    its->it_value = its->it_interval;
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
                fcntl(fd, F_SETSIG, PT_GET(pt_timer_signal)) == 0 &&
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
    if (pt_cfg.wall_clock) e->clock = CLOCK_MONOTONIC;
    else if (pthread_getcpuclockid(pthread_self(), &e->clock) != 0) return -1;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = PT_GET(pt_timer_signal);
    sev.sigev_notify_thread_id = tid;
    if (timer_create(e->clock, &sev, &e->timer) != 0) return -1;
    struct itimerspec its;
    pt_set_interval(&its);
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
 * is).  A guard page below it.  Thread start only, never in the handler. */
static void pt_altstack_on(void) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
    size_t size = PT_TIMER_ALTSTACK_SIZE;
    long min = sysconf(_SC_MINSIGSTKSZ); /* the kernel's signal frame (AVX-512, AMX) */
    if (min > 0 && (size_t)min * 4 > size) size = ((size_t)min * 4 + 4095) & ~(size_t)4095;
    unsigned char *p = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) { /* the handler runs on the thread's own stack, as before */
        pt_note_map_failure(PT_NOTE_ALTSTACK, size + 4096, errno);
        return;
    }
    mprotect(p, 4096, PROT_NONE); /* an overflow faults instead of writing below */
    stack_t ss = {.ss_sp = p + 4096, .ss_flags = 0, .ss_size = size};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(p, size + 4096);
        return;
    }
    pt_timer_self.altstack = p;
    pt_timer_self.altstack_size = size + 4096;
}

/* Thread exit: drop our alternate stack if it is still the thread's (a
 * program that installed its own since keeps it; ours then stays mapped,
 * as the program may switch back to it).  Never while on it: the handler
 * does not call this. */
static void pt_altstack_off(void) {
    unsigned char *p = pt_timer_self.altstack;
    if (p == NULL) return;
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && (unsigned char *)cur.ss_sp == p + 4096 &&
        !(cur.ss_flags & SS_ONSTACK)) {
        stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
        if (sigaltstack(&off, NULL) == 0) munmap(p, pt_timer_self.altstack_size);
    }
    pt_timer_self.altstack = NULL;
}

int pt_timer_thread_arm(void) {
    if (!PT_GET(pt_timer_on) || pt_timer_self.reg != 0) return -1;
    pid_t tid = pt_gettid();
    pthread_mutex_lock(&pt_armed_lock);
    int reg = -1;
    for (int i = 0; i < PT_TIMER_MAX_THREADS; i++)
        if (pt_armed[i].tid == 0) {
            reg = i;
            break;
        }
    if (reg < 0) {
        pthread_mutex_unlock(&pt_armed_lock);
        return -2;
    }
    pt_altstack_on(); /* before the first signal can come */
    pt_armed[reg].tid = tid;
    if (pt_start_clock(&pt_armed[reg], tid) != 0) {
        pt_armed[reg].tid = 0;
        pthread_mutex_unlock(&pt_armed_lock);
        pt_altstack_off();
        return -1;
    }
    pt_timer_self.reg = reg + 1;
    pthread_mutex_unlock(&pt_armed_lock);
    return 0;
}

void pt_timer_thread_disarm(void) {
    if (pt_timer_self.reg == 0) return;
    pthread_mutex_lock(&pt_armed_lock);
    pt_stop_clock(&pt_armed[pt_timer_self.reg - 1]);
    pt_armed[pt_timer_self.reg - 1].tid = 0;
    pthread_mutex_unlock(&pt_armed_lock);
    pt_timer_self.reg = 0;
    pt_altstack_off();
}

int pt_timer_thread_armed(void) { return pt_timer_self.reg != 0; }

/* The registry lists the parent's threads, whose perf fds the child inherited
 * (POSIX timers are not inherited): close them. */
void pt_timer_fork_child(int keep) {
    pt_timer_self.reg = 0; /* the forking thread's entry is the parent's */
    pthread_mutex_init(&pt_armed_lock, NULL); /* another thread may have held it */
    for (int i = 0; i < PT_TIMER_MAX_THREADS; i++) {
        if (pt_armed[i].tid != 0 && pt_armed[i].fd >= 0) {
            uint64_t id = 0;
            pt_fd_mark(pt_armed[i].fd, 0);
            if (ioctl(pt_armed[i].fd, PERF_EVENT_IOC_ID, &id) == 0 && id == pt_armed[i].id)
                close(pt_armed[i].fd);
        }
        pt_armed[i].tid = 0;
    }
    pt_armed_pid = getpid();
    if (!keep) PT_SET(pt_timer_on, 0);
}

/* Stop or restart every armed thread's clock around an exec: a clock left
 * running fires between exec's point of no return and the new image's
 * constructor, whose SIGPROF is back to the default action (terminate).
 * Pausing also discards a tick already pending (SIG_IGN then our handler
 * again). */
void pt_timer_pause_all(int pause) {
    /* A vfork child shares our memory and fds but must not stop the
     * parent's clocks (it never restarts them if its exec succeeds). */
    if (getpid() != pt_armed_pid) return;
    pthread_mutex_lock(&pt_armed_lock);
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (!pause) pt_set_interval(&its);
    for (int i = 0; i < PT_TIMER_MAX_THREADS; i++) {
        struct pt_armed *e = &pt_armed[i];
        if (e->tid == 0) continue;
        if (e->fd >= 0) ioctl(e->fd, pause ? PERF_EVENT_IOC_DISABLE : PERF_EVENT_IOC_ENABLE, 0);
        else timer_settime(e->timer, 0, &its, NULL);
    }
    pthread_mutex_unlock(&pt_armed_lock);
    if (pause && PT_GET(pt_timer_signal) > 0) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        pt_timer_real_sigaction(PT_GET(pt_timer_signal), &ign, NULL); /* drops what is pending */
        pt_install(PT_GET(pt_timer_signal));
    }
}

int pt_timer_move_signal(void) {
    int old_sig = PT_GET(pt_timer_signal);
    sigaddset(&pt_claimed, old_sig);
    int sig = pt_pick_signal(old_sig);
    if (sig < 0 || pt_install(sig) != 0) return -1;
    pthread_mutex_lock(&pt_armed_lock);
    PT_SET(pt_timer_signal, sig);
    for (int i = 0; i < PT_TIMER_MAX_THREADS; i++) {
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
            pt_set_interval(&its);
            if (timer_create(e->clock, &sev, &e->timer) == 0) {
                timer_settime(e->timer, 0, &its, NULL);
                timer_delete(old_timer);
            }
        }
    }
    pthread_mutex_unlock(&pt_armed_lock);
    if (pt_describe != NULL) pt_describe();
    return 0;
}
