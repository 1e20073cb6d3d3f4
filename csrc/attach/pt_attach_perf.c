/* proftui-attach, perf_event method: the kernel samples, we drain ring buffers.
 *
 * One task-clock event per existing thread and CPU with inherit=1, so threads
 * those threads create later are sampled too; events of one CPU share a ring.  PERF_RECORD_FORK tells us which threads
 * inheritance covers; a periodic rescan of /proc/PID/task opens events for
 * the rest.  Each sample carries the user registers and a copy of the user
 * stack (PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER), which
 * pt_attach_unwind.c walks with CFI, and the kernel's frame-pointer call
 * chain of user space (exclude_callchain_kernel) to continue where the copy
 * ends.  The copy starts at 8 KiB (perf's default for --call-graph dwarf);
 * a walk that runs off its end reads the rest of the stack from the target
 * (pt_attach_unwind.c checks that the frame at the seam is still there), and
 * the events are reopened with a copy as big as the deepest whole walk
 * needed, up to the 64 KiB the kernel allows (issue 26).  Kernel time is
 * counted where the system allows it (exclude_kernel = 0: perf_event_paranoid
 * <= 1, CAP_PERFMON or root); a sample taken in the kernel is charged to the
 * user-space frame that entered it, through the user registers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pt_attach.h"

/* Bytes of user stack a sample copies: the first size, and the most the
 * kernel allows (a record's size is a u16). */
#define PT_PERF_STACK_FIRST 8192u
#define PT_PERF_STACK_MAX 65528u
/* Words of the largest sample record (a record's size is a u16). */
#define PT_PERF_MAX_THREADS 4096
#define PT_PERF_MAX_CPUS 1024

/* One ring buffer per CPU (struct pt_perf_ring): the kernel refuses mmap on
 * inherited per-task (cpu = -1) events, so like `perf record -p` we open one
 * event per thread per CPU and point all events of a CPU at that CPU's ring
 * (SET_OUTPUT). */

/* Everything the perf method keeps: one instance (pt_pf), the helper is
 * single-threaded. */
struct pt_perf_state {
    struct pt_perf_ring rings[PT_PERF_MAX_CPUS];
    int ncpus;
    int *fds; /* open event fds */
    size_t nfds, capfds;
    pid_t known[PT_PERF_MAX_THREADS * 4]; /* every tid sampled (opened or inherited) */
    int nknown;
    uint64_t samples, lost;
    /* Data pages of each ring (a power of two), chosen from cfg->buffer_bytes and cut
     * down when the kernel refuses to lock that much (pt_perf_map). */
    size_t ring_pages;
    /* The rings' fds in poll(): ring c at ring_poll[c]; -1 once it hung up (its owning
     * thread exited and nothing inherited from it: POLLHUP would be reported forever). */
    int ring_poll[PT_PERF_MAX_CPUS];
    int kernel;    /* 0 once the kernel refused to count kernel time (exclude_kernel = 1) */
    int exit_seen; /* a thread exited: look at the group's liveness soon */
    uint32_t stack_bytes; /* user stack each sample copies (sample_stack_user) */
    uint64_t late, truncated, reopened; /* samples read further late, cut; reopens */
};
static struct pt_perf_state pt_pf; /* zero-initialized (.bss): the rest is set at start */

static int pt_known_has(pid_t tid) {
    for (int i = 0; i < pt_pf.nknown; i++)
        if (pt_pf.known[i] == tid) return 1;
    return 0;
}

static void pt_known_add(pid_t tid) {
    if (!pt_known_has(tid) && pt_pf.nknown < (int)(sizeof pt_pf.known / sizeof pt_pf.known[0]))
        pt_pf.known[pt_pf.nknown++] = tid;
}

static void pt_known_remove(pid_t tid) {
    for (int i = 0; i < pt_pf.nknown; i++)
        if (pt_pf.known[i] == tid) {
            pt_pf.known[i] = pt_pf.known[--pt_pf.nknown];
            return;
        }
}

static void pt_close_all(void) {
    for (size_t i = 0; i < pt_pf.nfds; i++) close(pt_pf.fds[i]);
    pt_pf.nfds = 0;
}

/* Open one thread's events, one per CPU; -1 with errno on failure.
 * Not async-signal-safe. */
static int pt_perf_open(const struct pt_attach_config *cfg, pid_t tid) {
    struct perf_event_attr attr;
    pt_perf_attr(&attr, PERF_COUNT_SW_TASK_CLOCK, cfg->period_ns, pt_pf.stack_bytes,
                 pt_pf.kernel, pt_pf.ring_pages);
    attr.inherit = 1; /* threads those threads create are sampled too */
    int opened = 0;
    for (int cpu = 0; cpu < pt_pf.ncpus; cpu++) {
        int fd = (int)syscall(SYS_perf_event_open, &attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0 && (errno == EACCES || errno == EPERM) && !attr.exclude_kernel && opened == 0 &&
            pt_pf.nfds == 0) {
            /* Kernel time needs perf_event_paranoid <= 1 or CAP_PERFMON: user time only. */
            pt_pf.kernel = 0;
            attr.exclude_kernel = 1;
            fd = (int)syscall(SYS_perf_event_open, &attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        }
        if (fd < 0) {
            if (errno == ENODEV) continue; /* an offline CPU */
            return -1;
        }
        int *fds = pt_attach_grow(pt_pf.fds, &pt_pf.capfds, pt_pf.nfds, sizeof *fds);
        if (fds == NULL) {
            close(fd);
            return -1; /* errno ENOMEM */
        }
        pt_pf.fds = fds;
        pt_pf.fds[pt_pf.nfds++] = fd;
        struct pt_perf_ring *ring = &pt_pf.rings[cpu];
        if (ring->fd < 0) {
            if (pt_ring_map(ring, fd, &pt_pf.ring_pages) != 0) return -1;
        } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring->fd) != 0) {
            return -1;
        }
        opened++;
    }
    if (opened == 0) {
        errno = ENODEV;
        return -1;
    }
    pt_known_add(tid);
    return 0;
}

/* Turn one PERF_RECORD_SAMPLE body into a stream record.  Not async-signal-safe. */
static void pt_perf_sample(const struct pt_attach_config *cfg, const uint64_t *body, size_t words) {
    static struct pt_perf_sample smp; /* ~1 KiB of frames: kept off the stack */
    if (pt_perf_parse_sample(body, words, 0, &smp) != 0 || (pid_t)smp.pid != cfg->pid) return;
    pt_attach_unwind_sample(smp.tid, smp.period, &smp.regs, smp.stack, smp.nstack, 1, smp.ips,
                            smp.n);
    pt_pf.samples++;
}

/* One record of a ring (pt_ring_drain's handler; `arg` the config).  Not
 * async-signal-safe. */
static void pt_perf_record(const struct perf_event_header *hdr, const uint64_t *body,
                           size_t words, void *arg) {
    const struct pt_attach_config *cfg = arg;
    switch (hdr->type) {
    case PERF_RECORD_SAMPLE: pt_perf_sample(cfg, body, words); break;
    case PERF_RECORD_LOST:
        if (words >= 2) {
            pt_pf.lost += body[1];
            pt_attach_out_lost(body[1], PT_ATTACH_LOST_RING);
        }
        break;
    case PERF_RECORD_FORK: /* pid, ppid, tid, ptid: a thread inheritance covers */
        if (words >= 2 && (pid_t)(uint32_t)body[0] == cfg->pid) {
            pid_t tid = (pid_t)(uint32_t)body[1];
            if (!pt_known_has(tid)) {
                pt_known_add(tid);
                pt_attach_out_thread((uint32_t)tid, PT_ATTACH_THREAD_NEW, cfg->pid);
            }
        }
        break;
    case PERF_RECORD_EXIT:
        if (words >= 2 && (pid_t)(uint32_t)body[0] == cfg->pid) {
            pid_t tid = (pid_t)(uint32_t)body[1];
            pt_known_remove(tid);
            pt_pf.exit_seen = 1;
            pt_attach_out_thread((uint32_t)tid, PT_ATTACH_THREAD_GONE, cfg->pid);
        }
        break;
    case PERF_RECORD_COMM: /* a thread renamed itself */
        if (words >= 1 && (pid_t)(uint32_t)body[0] == cfg->pid)
            pt_attach_out_thread((uint32_t)(body[0] >> 32), 0, cfg->pid);
        break;
    case PERF_RECORD_MMAP:
        pt_attach_unwind_maps_changed();
        pt_attach_out_u64(PT_ATTACH_REC_MAPS, 0);
        break;
    default: break;
    }
}

/* Consume everything in one ring.  Not async-signal-safe. */
static void pt_perf_drain(const struct pt_attach_config *cfg, struct pt_perf_ring *ev) {
    pt_ring_drain(ev, pt_perf_record, (void *)cfg);
}

/* Open events for threads neither opened nor inherited yet.  Not async-signal-safe. */
static void pt_perf_rescan(const struct pt_attach_config *cfg) {
    static pid_t tids[PT_PERF_MAX_THREADS];
    int n = pt_attach_list_tasks(cfg->pid, tids, PT_PERF_MAX_THREADS);
    for (int i = 0; i < n; i++) {
        if (pt_known_has(tids[i])) continue;
        if (pt_perf_open(cfg, tids[i]) == 0)
            pt_attach_out_thread((uint32_t)tids[i], PT_ATTACH_THREAD_NEW, cfg->pid);
    }
}

static uint64_t pt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Close every event and unmap every ring: the next pt_perf_open builds them
 * anew.  Not async-signal-safe. */
static void pt_perf_close_rings(void) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    pt_close_all();
    for (int c = 0; c < pt_pf.ncpus; c++) {
        if (pt_pf.rings[c].fd >= 0) munmap(pt_pf.rings[c].meta, pt_pf.rings[c].size + page);
        pt_pf.rings[c] = (struct pt_perf_ring){-1, NULL, NULL, 0};
    }
    pt_pf.nknown = 0;
}

/* Open events for every thread of the target.  0, or -1 with errno (and the
 * thread in *failed) when one fails for another reason than having exited.
 * Not async-signal-safe. */
static int pt_perf_open_all(const struct pt_attach_config *cfg, pid_t *failed) {
    static pid_t tids[PT_PERF_MAX_THREADS];
    int n = pt_attach_list_tasks(cfg->pid, tids, PT_PERF_MAX_THREADS);
    if (n <= 0) {
        errno = ESRCH;
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (pt_perf_open(cfg, tids[i]) == 0 || errno == ESRCH) continue; /* ESRCH: exited */
        *failed = tids[i];
        return -1;
    }
    return 0;
}

/* Poll the rings just opened and say what they are (a BUFFERS record).
 * Not async-signal-safe. */
static void pt_perf_rings_ready(const struct pt_attach_config *cfg) {
    uint32_t nrings = 0;
    for (int c = 0; c < pt_pf.ncpus; c++) {
        pt_pf.ring_poll[c] = pt_pf.rings[c].fd;
        nrings += pt_pf.rings[c].fd >= 0;
    }
    pt_attach_out_buffers(pt_pf.ring_pages * (uint64_t)sysconf(_SC_PAGESIZE), nrings,
                          cfg->buffer_bytes, pt_pf.stack_bytes);
}

/* Grow the stack copy when walks ran off its end since the last call: reopen
 * every event with a copy as big as the deepest whole walk needed (with a
 * quarter to spare; twice the copy when no walk finished), up to the kernel's
 * limit.  With the default rings (no --buffer), the rings grow with the
 * copies so they hold as many samples as before.  Not async-signal-safe. */
static void pt_perf_resize(const struct pt_attach_config *cfg) {
    struct pt_attach_unwind_stats st = pt_attach_unwind_take_stats();
    pt_pf.late += st.extended;
    pt_pf.truncated += st.truncated;
    if (st.short_copies == 0 || pt_pf.stack_bytes >= PT_PERF_STACK_MAX) return;
    uint64_t want = st.max_need > pt_pf.stack_bytes ? st.max_need + st.max_need / 4
                                                    : 2 * (uint64_t)pt_pf.stack_bytes;
    want = (want + 4095) & ~(uint64_t)4095;
    if (want > PT_PERF_STACK_MAX) want = PT_PERF_STACK_MAX;
    for (int c = 0; c < pt_pf.ncpus; c++)
        if (pt_pf.rings[c].fd >= 0) pt_perf_drain(cfg, &pt_pf.rings[c]);
    pt_perf_close_rings();
    uint32_t before = pt_pf.stack_bytes;
    pt_pf.stack_bytes = (uint32_t)want;
    if (cfg->buffer_bytes == 0) { /* the default rings: keep their room in samples */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t room = pt_pf.ring_pages * page / (before + 1024u);
        while (pt_pf.ring_pages < PT_PERF_MAX_PAGES / 64 &&
               pt_pf.ring_pages * page / (pt_pf.stack_bytes + 1024u) < room)
            pt_pf.ring_pages *= 2; /* halved again by pt_perf_open if the kernel says no */
    }
    pid_t failed = 0;
    if (pt_perf_open_all(cfg, &failed) != 0 && pt_pf.nknown == 0)
        pt_attach_out_text(PT_ATTACH_REC_WARN, "reopening perf events with a %u KiB stack copy "
                           "failed (%s): no more samples", pt_pf.stack_bytes >> 10,
                           strerror(errno));
    pt_pf.reopened++;
    pt_perf_rings_ready(cfg);
}

/* The perf_event method: see the file comment.  Not async-signal-safe. */
int pt_attach_perf_run(const struct pt_attach_config *cfg, int quiet_fail) {
    pt_pf.kernel = 1;
    pt_pf.stack_bytes = PT_PERF_STACK_FIRST;
    const char *kernel = getenv("PROFTUI_ATTACH_KERNEL"); /* "0": user time only (tests) */
    if (kernel != NULL && strcmp(kernel, "0") == 0) pt_pf.kernel = 0;
    pt_pf.ncpus = pt_ring_cpus(PT_PERF_MAX_CPUS);
    pt_pf.ring_pages = pt_ring_pages(cfg->buffer_bytes, pt_pf.ncpus);
    for (int c = 0; c < pt_pf.ncpus; c++) pt_pf.rings[c].fd = -1;
    pid_t failed = 0;
    if (pt_perf_open_all(cfg, &failed) != 0) {
        int saved = errno;
        pt_perf_close_rings();
        if (!quiet_fail && saved == ESRCH)
            fprintf(stderr, "process %d does not exist\n", (int)cfg->pid);
        else if (!quiet_fail)
            fprintf(stderr, "perf_event_open(tid %d): %s\n", (int)failed, strerror(saved));
        errno = saved;
        return -1;
    }
    if (pt_pf.nknown == 0) {
        errno = ESRCH;
        if (!quiet_fail) fprintf(stderr, "process %d has exited\n", (int)cfg->pid);
        return -1;
    }
    uint32_t flags = pt_attach_unwind_init(cfg->pid);
    if (pt_pf.kernel) flags |= PT_ATTACH_FLAG_KERNEL_TIME;
    pt_attach_out_header(PT_ATTACH_METHOD_PERF, cfg->pid, cfg->period_ns, flags);
    pt_perf_rings_ready(cfg);
    for (int i = 0; i < pt_pf.nknown; i++)
        pt_attach_out_thread((uint32_t)pt_pf.known[i], PT_ATTACH_THREAD_NEW, cfg->pid);
    pt_attach_out_flush();

    uint64_t next_check = pt_now_ns();
    int exited = 0;
    static struct pollfd pfd[2 + PT_PERF_MAX_CPUS]; /* too big for the stack */
    for (;;) {
        pfd[0] = (struct pollfd){cfg->control_fd, POLLIN, 0};
        pfd[1] = (struct pollfd){cfg->signal_fd, POLLIN, 0};
        for (int c = 0; c < pt_pf.ncpus; c++) pfd[2 + c] = (struct pollfd){pt_pf.ring_poll[c], POLLIN, 0};
        int r = poll(pfd, 2 + (nfds_t)pt_pf.ncpus, 20);
        int stop = r > 0 && pt_attach_check_control(cfg, pfd[0].revents, pfd[1].revents,
                                                     NULL, NULL);
        for (int c = 0; r > 0 && c < pt_pf.ncpus; c++)
            if (pfd[2 + c].revents & (POLLHUP | POLLERR | POLLNVAL))
                pt_pf.ring_poll[c] = -1; /* drained by the timer from now on */
        for (int c = 0; c < pt_pf.ncpus; c++)
            if (pt_pf.rings[c].fd >= 0) pt_perf_drain(cfg, &pt_pf.rings[c]);
        pt_perf_resize(cfg);
        uint64_t now = pt_now_ns();
        if (pt_pf.exit_seen) { /* its exit record precedes its zombie state: look again soon */
            pt_pf.exit_seen = 0;
            if (next_check > now + 10000000ull) next_check = now + 10000000ull;
        }
        if (now >= next_check) {
            next_check = now + 200000000ull;
            if (!pt_attach_target_alive(cfg->pid)) {
                exited = 1;
            } else {
                pt_perf_rescan(cfg);
            }
        }
        pt_attach_out_flush();
        if (stop || exited || pt_attach_out_broken()) break;
    }
    /* Closing the events is the whole detach: the target never noticed us. */
    for (int c = 0; c < pt_pf.ncpus; c++)
        if (pt_pf.rings[c].fd >= 0) pt_perf_drain(cfg, &pt_pf.rings[c]);
    pt_perf_close_rings();
    struct pt_attach_unwind_stats st = pt_attach_unwind_take_stats();
    pt_pf.late += st.extended;
    pt_pf.truncated += st.truncated;
    if (pt_pf.reopened || pt_pf.late)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "deep stacks: samples copied %u KiB of user stack at the end (%u KiB "
                           "at first; the perf events were reopened %llu time%s as deeper stacks "
                           "were seen); %llu samples read their outer frames from the live "
                           "stack past their copy",
                           pt_pf.stack_bytes >> 10, PT_PERF_STACK_FIRST >> 10,
                           (unsigned long long)pt_pf.reopened, pt_pf.reopened == 1 ? "" : "s",
                           (unsigned long long)pt_pf.late);
    if (exited) pt_attach_out_exit(-1, -1);
    pt_attach_out_end(pt_pf.samples, pt_pf.lost);
    return 0;
}
