/* proftui-attach, system-wide method (`proftui agent`): every process of the host.
 *
 * One cpu-clock event per CPU (pid -1), as `perf record -a` opens them, each
 * with its own ring; the idle task is excluded.  Samples carry the same user
 * registers, stack copy and user call chain as the perf method's
 * (pt_attach_ring.c), and each is unwound in its own process's address space
 * (pt_attach_unwind_use: states made at a process's first sample, freed after
 * it exits or execs).  Kernel threads have no user stack: their samples are
 * counted, not sent.  The helper's own process and `cfg->exclude` (proftui)
 * are left out.
 *
 * A thread is named in the stream by a task serial (TASK record): one per
 * thread and address space, so a tid reused by another process, or a process
 * after exec, never shares stacks with what came before.  PERF_RECORD_EXIT
 * ends a serial (and, for a leader, the process: its state is freed two drain
 * rounds later, when other CPUs' rings hold none of its samples any more),
 * PERF_RECORD_COMM with the exec flag ends every serial of the process and
 * its state, PERF_RECORD_MMAP2 of code marks its maps to be read again and is
 * kept for a process gone before they were read (pt_attach_mmaps.c).
 *
 * Exec, ordered by time: rings are drained one CPU after another, so a sample
 * taken before an exec may be read after it (on another CPU's ring), and a
 * process's maps, read at its first sample, may already be those of the
 * program it exec'd into.  Samples and records carry CLOCK_MONOTONIC times;
 * each round first scans every ring for exec records (the last two rounds'
 * are kept), then a sample walks with the state that held at its time: one
 * made before an exec the sample came after is ended first, and a sample from
 * before an exec whose state was (re)read after it is not walked with the new
 * program's maps but counted and said (its own are gone).  So is a sample
 * taken inside execve, after the exec's COMM record: the new program's memory
 * is in place but the registers are still the old program's until the kernel
 * starts the new one, so its pc lies in none of the new mappings.  A kernel
 * without use_clockid keeps the drain order, as before, and says so.
 *
 * The helper is single-threaded: file-level state in one instance (pt_sys).
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

#define PT_SYS_MAX_CPUS 1024
#define PT_SYS_STACK_BYTES 8192u  /* user stack each sample copies, as perf's dwarf mode */
#define PT_SYS_FORGET_ROUNDS 2       /* drain rounds between a process's exit and its state freed */
/* Counts sent (and proftui woken) once a second, not every 100 ms: a host agent
 * pushes every few seconds, and each wake-up of proftui costs ~0.1 ms of CPU here.
 * The rings are still drained every 100 ms: a new process's maps are best read
 * while it runs (every 300 ms, a shell that spun 0.1 s before its exec was read
 * only after it, its samples lost). */
#define PT_SYS_COUNTS_NS 1000000000ull

/* One thread seen in samples: its serial in the stream.  tid 0: an empty slot;
 * serial 0: a deleted one (probing goes on past it). */
struct pt_sys_task {
    pid_t tid, pid;
    uint32_t serial;
};

/* An exec seen in a ring: process `pid` became another program at `time`. */
struct pt_sys_exec {
    pid_t pid;
    uint64_t time, round;
};

/* A process that exited: its state is freed at round `at`. */
struct pt_sys_gone {
    pid_t pid;
    uint64_t at;
};

static struct {
    struct pt_perf_ring rings[PT_SYS_MAX_CPUS];
    int ncpus;
    size_t ring_pages;
    struct pt_sys_task *tasks; /* open addressing by tid, a power of two */
    size_t ntasks_cap, ntasks_used; /* used: live and deleted slots */
    uint32_t next_serial;
    struct pt_sys_gone *gone;
    size_t ngone, capgone;
    struct pt_sys_exec *execs; /* this round's and the last one's, in no order */
    size_t nexecs, capexecs;
    int timed; /* samples and records carry CLOCK_MONOTONIC times */
    uint64_t heads[PT_SYS_MAX_CPUS]; /* where each ring's drain of this round stops */
    uint64_t round;
    pid_t self, exclude;
    uint64_t samples, lost, kernel_threads, left_out, before_exec;
} pt_sys;

static size_t pt_sys_slot(pid_t tid) {
    return ((uint32_t)tid * 2654435761u) & (pt_sys.ntasks_cap - 1);
}

/* The slot of `tid`, or of the empty slot where it would go (the table exists). */
static struct pt_sys_task *pt_sys_find(pid_t tid) {
    size_t i = pt_sys_slot(tid);
    while (pt_sys.tasks[i].tid != 0 && pt_sys.tasks[i].tid != tid)
        i = (i + 1) & (pt_sys.ntasks_cap - 1);
    return &pt_sys.tasks[i];
}

/* Make room (the table at most half used); -1 when memory runs out. */
static int pt_sys_grow(void) {
    if (pt_sys.ntasks_cap != 0 && 2 * (pt_sys.ntasks_used + 1) <= pt_sys.ntasks_cap) return 0;
    struct pt_sys_task *old = pt_sys.tasks;
    size_t oldcap = pt_sys.ntasks_cap, live = 0;
    for (size_t i = 0; i < oldcap; i++) live += old[i].serial != 0;
    size_t cap = 4096;
    while (cap < 4 * (live + 1)) cap *= 2;
    struct pt_sys_task *tasks = calloc(cap, sizeof *tasks);
    if (tasks == NULL) return -1;
    pt_sys.tasks = tasks;
    pt_sys.ntasks_cap = cap;
    pt_sys.ntasks_used = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].serial != 0) {
            *pt_sys_find(old[i].tid) = old[i];
            pt_sys.ntasks_used++;
        }
    free(old);
    return 0;
}

/* End `t`'s serial: GONE in the stream, the slot deleted. */
static void pt_sys_end_task(struct pt_sys_task *t) {
    pt_attach_out_task(t->serial, t->pid, t->tid, PT_ATTACH_THREAD_GONE);
    t->serial = 0; /* deleted: tid kept so probing goes on */
}

/* End every serial of process `pid` (exec) and forget its address space: the next
 * sample of it starts a new one. */
static void pt_sys_end_process(pid_t pid) {
    for (size_t i = 0; i < pt_sys.ntasks_cap; i++)
        if (pt_sys.tasks[i].serial != 0 && pt_sys.tasks[i].pid == pid)
            pt_sys_end_task(&pt_sys.tasks[i]);
    if (pt_attach_unwind_forget(pid))
        pt_attach_out_process(pid, PT_ATTACH_PROCESS_GONE, NULL, 0);
}

static void pt_sys_note_late_execs(void);

/* pid's execs in the list: the last before `time` and the first after (0 and
 * UINT64_MAX when none). */
static void pt_sys_execs_around(pid_t pid, uint64_t time, uint64_t *before, uint64_t *after) {
    *before = 0;
    *after = UINT64_MAX;
    for (size_t i = 0; i < pt_sys.nexecs; i++) {
        const struct pt_sys_exec *x = &pt_sys.execs[i];
        if (x->pid != pid) continue;
        if (x->time < time && x->time > *before) *before = x->time;
        if (x->time > time && x->time < *after) *after = x->time;
    }
}

/* Make pid's state the one of a sample taken at `time`: a state from before an exec
 * that came before the sample is ended, a new one is read.  1 when no maps of the
 * sample's own program are known (it came before an exec and only the new program's
 * were read, or after one whose mappings are not drained yet), or when it came after
 * an exec with a `pc` in none of the new program's mappings: taken inside execve,
 * after the new program's memory replaced the old but before its registers did (the
 * old program's pc and stack pointer, the new one's memory); not to be walked.  Else
 * 0, with *hold set when the walk must keep the maps it has (read before that exec). */
static int pt_sys_before_exec(pid_t pid, uint64_t time, uint64_t pc, int *hold) {
    uint64_t before, after;
    pt_sys_execs_around(pid, time, &before, &after);
    int made = pt_attach_unwind_use(pid) == 1; /* pid's state the current one from here */
    uint64_t read = pt_attach_unwind_read_ns(pid);
    if (!made && read != 0 && read < before) { /* a state of the program before */
        pt_sys_end_process(pid);
        made = pt_attach_unwind_use(pid) == 1;
    }
    if (made) { /* read now: an exec just before? */
        pt_sys_note_late_execs();
        pt_sys_execs_around(pid, time, &before, &after);
    }
    if (before == 0 && after == UINT64_MAX) return 0; /* no exec around: what there is */
    read = pt_attach_unwind_read_ns(pid);
    /* No maps, or perf's mappings of a process gone by now as of a time before the
     * exec this sample came after (that exec's own mappings are not drained yet). */
    if (read == 0 || read < before) return 1;
    if (after == UINT64_MAX) return !pt_attach_unwind_pc_known(pc, 1); /* before != 0 */
    if (read > after) return 1;
    *hold = 1;
    return before != 0 && !pt_attach_unwind_pc_known(pc, 0);
}

static void pt_sys_sample(const uint64_t *body, size_t words) {
    static struct pt_perf_sample smp; /* ~1 KiB of frames: kept off the stack */
    if (pt_perf_parse_sample(body, words, pt_sys.timed, &smp) != 0) {
        pt_sys.kernel_threads++;
        return;
    }
    pid_t pid = (pid_t)smp.pid, tid = (pid_t)smp.tid;
    if (pid <= 0 || pid == pt_sys.self || pid == pt_sys.exclude) {
        pt_sys.left_out++;
        return;
    }
    int hold = 0;
    if (pt_sys.timed && pt_sys_before_exec(pid, smp.time, smp.regs.pc, &hold)) {
        pt_sys.before_exec++;
        return;
    }
    if (pt_sys_grow() != 0) {
        pt_sys.lost++;
        return;
    }
    struct pt_sys_task *t = pt_sys_find(tid);
    if (t->serial == 0 || t->pid != pid) {
        if (t->serial != 0) pt_sys_end_task(t); /* a tid of another process: reused */
        pt_attach_unwind_use(pid); /* a new process: its maps read and sent first */
        if (t->tid == 0) pt_sys.ntasks_used++;
        *t = (struct pt_sys_task){tid, pid, ++pt_sys.next_serial};
        pt_attach_out_task(t->serial, pid, tid, PT_ATTACH_THREAD_NEW);
    } else {
        pt_attach_unwind_use(pid);
    }
    pt_attach_unwind_hold_maps(hold);
    pt_attach_unwind_sample(t->serial, smp.period, &smp.regs, smp.stack, smp.nstack, 1, smp.ips,
                            smp.n);
    pt_attach_unwind_hold_maps(0);
    pt_sys.samples++;
}

static void pt_sys_exit(pid_t pid, pid_t tid) {
    if (pt_sys.ntasks_cap != 0) { /* else no sample came yet: no serial to end */
        struct pt_sys_task *t = pt_sys_find(tid);
        if (t->serial != 0 && t->pid == pid) pt_sys_end_task(t);
    }
    if (pid != tid) return;
    struct pt_sys_gone *gone = pt_attach_grow(pt_sys.gone, &pt_sys.capgone, pt_sys.ngone,
                                              sizeof *gone);
    if (gone == NULL) return; /* its state stays: memory, never a wrong walk */
    pt_sys.gone = gone;
    pt_sys.gone[pt_sys.ngone++] = (struct pt_sys_gone){pid, pt_sys.round + PT_SYS_FORGET_ROUNDS};
}

/* One record of a ring (pt_ring_drain's handler). */
static void pt_sys_record(const struct perf_event_header *hdr, const uint64_t *body,
                          size_t words, void *arg) {
    (void)arg;
    switch (hdr->type) {
    case PERF_RECORD_SAMPLE: pt_sys_sample(body, words); break;
    case PERF_RECORD_LOST:
        if (words >= 2) {
            pt_sys.lost += body[1];
            pt_attach_out_lost(body[1], PT_ATTACH_LOST_RING);
        }
        break;
    case PERF_RECORD_EXIT: /* pid, ppid, tid, ptid, time */
        if (words >= 2) pt_sys_exit((pid_t)(uint32_t)body[0], (pid_t)(uint32_t)body[1]);
        break;
    case PERF_RECORD_COMM: /* pid, tid, comm, [pid|tid, time]: an exec, a new address space */
        if (words >= 1 && (hdr->misc & PERF_RECORD_MISC_COMM_EXEC)) {
            pid_t pid = (pid_t)(uint32_t)body[0];
            uint64_t read = pt_attach_unwind_read_ns(pid);
            /* A state read after the exec (a later sample on another CPU made it) stays. */
            if (!pt_sys.timed || read == 0 || read < body[words - 1]) pt_sys_end_process(pid);
            pt_attach_mmaps_exec(pid);
        }
        break;
    case PERF_RECORD_MMAP2: /* pid|tid, addr, len, pgoff, maj|min, ino, ino_generation,
                             * prot|flags, filename (NUL-padded), sample_id */
        if (words >= 9 && !(hdr->misc & PERF_RECORD_MISC_MMAP_DATA)) {
            pid_t pid = (pid_t)(uint32_t)body[0];
            pt_attach_unwind_maps_changed_of(pid);
            if (!(hdr->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
                char path[256];
                size_t room = 8 * (words - 8) < sizeof path ? 8 * (words - 8) : sizeof path;
                memcpy(path, body + 8, room);
                path[room - 1] = '\0';
                pt_attach_mmaps_note(pid, body[1], body[2], body[3], (uint32_t)body[4],
                                     (uint32_t)(body[4] >> 32), body[5], path,
                                     pt_sys.timed ? body[words - 1] : 0);
            }
        }
        break;
    default: break;
    }
}

/* A COMM record of a ring's scan: an exec is noted (pt_ring_scan's handler). */
static void pt_sys_note_exec(const struct perf_event_header *hdr, const uint64_t *body,
                             size_t words, void *arg) {
    (void)arg;
    if (!(hdr->misc & PERF_RECORD_MISC_COMM_EXEC) || words < 3) return;
    struct pt_sys_exec *execs = pt_attach_grow(pt_sys.execs, &pt_sys.capexecs, pt_sys.nexecs,
                                               sizeof *execs);
    if (execs == NULL) return; /* the drain order then, as without times */
    pt_sys.execs = execs;
    pt_sys.execs[pt_sys.nexecs++] =
        (struct pt_sys_exec){(pid_t)(uint32_t)body[0], body[words - 1], pt_sys.round};
}

/* Consume every ring up to where it stood when the round began, the round's execs
 * (and the last round's) known first. */
static void pt_sys_drain_all(void) {
    size_t kept = 0;
    for (size_t i = 0; i < pt_sys.nexecs; i++)
        if (pt_sys.execs[i].round + 1 >= pt_sys.round) pt_sys.execs[kept++] = pt_sys.execs[i];
    pt_sys.nexecs = kept;
    for (int c = 0; c < pt_sys.ncpus; c++) {
        struct pt_perf_ring *ring = &pt_sys.rings[c];
        if (ring->fd < 0) continue;
        pt_sys.heads[c] = pt_ring_head(ring);
        if (pt_sys.timed)
            pt_ring_scan(ring, ring->meta->data_tail, pt_sys.heads[c], PERF_RECORD_COMM,
                         pt_sys_note_exec, NULL);
    }
    for (int c = 0; c < pt_sys.ncpus; c++)
        if (pt_sys.rings[c].fd >= 0)
            pt_ring_drain_to(&pt_sys.rings[c], pt_sys.heads[c], pt_sys_record, NULL);
}

/* The execs written to the rings since this round's scan (an exec may come between
 * that scan and a maps read), noted too. */
static void pt_sys_note_late_execs(void) {
    for (int c = 0; c < pt_sys.ncpus; c++) {
        struct pt_perf_ring *ring = &pt_sys.rings[c];
        if (ring->fd >= 0)
            pt_ring_scan(ring, pt_sys.heads[c], pt_ring_head(ring), PERF_RECORD_COMM,
                         pt_sys_note_exec, NULL);
    }
}

/* Free the states of processes that exited PT_SYS_FORGET_ROUNDS rounds ago. */
static void pt_sys_forget_gone(void) {
    size_t kept = 0;
    for (size_t i = 0; i < pt_sys.ngone; i++) {
        if (pt_sys.gone[i].at > pt_sys.round) {
            pt_sys.gone[kept++] = pt_sys.gone[i];
            continue;
        }
        if (pt_attach_unwind_forget(pt_sys.gone[i].pid)) /* else never sampled: unknown */
            pt_attach_out_process(pt_sys.gone[i].pid, PT_ATTACH_PROCESS_GONE, NULL, 0);
    }
    pt_sys.ngone = kept;
}

static void pt_sys_close(void) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int c = 0; c < pt_sys.ncpus; c++) {
        if (pt_sys.rings[c].fd < 0) continue;
        munmap(pt_sys.rings[c].meta, pt_sys.rings[c].size + page);
        close(pt_sys.rings[c].fd);
        pt_sys.rings[c].fd = -1;
    }
}

/* Open and map one event per online CPU.  0, or -1 with errno. */
static int pt_sys_open(const struct pt_attach_config *cfg, int *kernel) {
    struct perf_event_attr attr;
    pt_perf_attr(&attr, PERF_COUNT_SW_CPU_CLOCK, cfg->period_ns, PT_SYS_STACK_BYTES, *kernel,
                 pt_sys.ring_pages);
    attr.exclude_idle = 1;
    attr.mmap2 = 1; /* with device and inode: pt_attach_mmaps.c */
    attr.comm_exec = 1;
    attr.sample_type |= PERF_SAMPLE_TIME; /* records' too, by sample_id_all */
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC; /* the clock a maps read is timed with */
    pt_sys.timed = 1;
    int opened = 0;
    for (int cpu = 0; cpu < pt_sys.ncpus; cpu++) {
        int fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0 && errno == EINVAL && pt_sys.timed && opened == 0) {
            pt_sys.timed = 0; /* a kernel before use_clockid (4.1): the drain order */
            attr.sample_type &= ~(uint64_t)PERF_SAMPLE_TIME;
            attr.use_clockid = 0;
            fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        }
        if (fd < 0 && (errno == EACCES || errno == EPERM) && !attr.exclude_kernel && opened == 0) {
            *kernel = 0; /* user time only, if that is allowed */
            attr.exclude_kernel = 1;
            fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        }
        if (fd < 0) {
            if (errno == ENODEV) continue; /* an offline CPU */
            return -1;
        }
        if (pt_ring_map(&pt_sys.rings[cpu], fd, &pt_sys.ring_pages) != 0) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        opened++;
    }
    if (opened == 0) {
        errno = ENODEV;
        return -1;
    }
    return 0;
}

int pt_attach_system_run(const struct pt_attach_config *cfg) {
    pt_sys.self = getpid();
    pt_sys.exclude = cfg->exclude;
    pt_sys.ncpus = pt_ring_cpus(PT_SYS_MAX_CPUS);
    pt_sys.ring_pages = pt_ring_pages(cfg->buffer_bytes, pt_sys.ncpus);
    for (int c = 0; c < pt_sys.ncpus; c++) pt_sys.rings[c].fd = -1;
    int kernel = 1;
    const char *want_kernel = getenv("PROFTUI_ATTACH_KERNEL"); /* "0": user time only */
    if (want_kernel != NULL && strcmp(want_kernel, "0") == 0) kernel = 0;
    if (pt_sys_open(cfg, &kernel) != 0) {
        int saved = errno;
        pt_sys_close();
        if (saved == EACCES || saved == EPERM) {
            int paranoid = -9;
            FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
            if (f != NULL) {
                if (fscanf(f, "%d", &paranoid) != 1) paranoid = -9;
                fclose(f);
            }
            fprintf(stderr, "sampling every process needs root or CAP_PERFMON "
                            "(kernel.perf_event_paranoid is %d; without the capability it "
                            "must be -1)\n", paranoid);
        } else if (saved == ENOENT || saved == ENOSYS || saved == ENODEV) {
            fprintf(stderr, "perf_event is not available here (%s): the kernel has no "
                            "cpu-clock events for this system\n", strerror(saved));
        } else {
            fprintf(stderr, "perf_event_open(every process): %s\n", strerror(saved));
        }
        errno = saved;
        return -1;
    }
    uint32_t flags = pt_attach_unwind_system();
    if (kernel) flags |= PT_ATTACH_FLAG_KERNEL_TIME;
    pt_attach_out_batch(PT_SYS_COUNTS_NS);
    pt_attach_out_header(PT_ATTACH_METHOD_SYSTEM, 0, cfg->period_ns, flags);
    uint32_t nrings = 0;
    for (int c = 0; c < pt_sys.ncpus; c++) nrings += pt_sys.rings[c].fd >= 0;
    pt_attach_out_buffers(pt_sys.ring_pages * (uint64_t)sysconf(_SC_PAGESIZE), nrings,
                          cfg->buffer_bytes, PT_SYS_STACK_BYTES);
    pt_attach_out_flush();

    static struct pollfd pfd[2 + PT_SYS_MAX_CPUS]; /* too big for the stack */
    int forget = 0; /* proftui asked to forget the stacks: done once the reader takes it */
    for (;;) {
        pfd[0] = (struct pollfd){cfg->control_fd, POLLIN, 0};
        pfd[1] = (struct pollfd){cfg->signal_fd, POLLIN, 0};
        for (int c = 0; c < pt_sys.ncpus; c++)
            pfd[2 + c] = (struct pollfd){pt_sys.rings[c].fd, POLLIN, 0};
        /* Woken by a quarter-full ring or every 100 ms, not more often. */
        int r = poll(pfd, 2 + (nfds_t)pt_sys.ncpus, (int)(PT_ATTACH_COUNTS_NS / 1000000u));
        int stop = r > 0 && pt_attach_check_control(cfg, pfd[0].revents, pfd[1].revents, NULL,
                                                     &forget);
        pt_sys_drain_all();
        pt_sys.round++;
        pt_attach_unwind_retry_unread();
        pt_sys_forget_gone();
        pt_attach_unwind_take_stats(); /* the walks' counts are for the perf method's resize */
        pt_attach_out_flush();
        if (forget && !stop && pt_attach_out_forget()) forget = 0;
        if (stop || pt_attach_out_broken()) break;
    }
    pt_sys_drain_all();
    pt_sys_close();
    if (pt_sys.kernel_threads > 0)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "%llu %s taken in kernel threads, which have no user "
                           "stack: not in the profile",
                           (unsigned long long)pt_sys.kernel_threads,
                           pt_sys.kernel_threads == 1 ? "sample was" : "samples were");
    if (pt_sys.before_exec > 0)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "%llu %s taken just before, during or after their "
                           "process's exec, when the helper knew only the other program's "
                           "maps: not in the profile (their own were gone)",
                           (unsigned long long)pt_sys.before_exec,
                           pt_sys.before_exec == 1 ? "sample was" : "samples were");
    if (!pt_sys.timed)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "this kernel gives samples no CLOCK_MONOTONIC time (use_clockid): "
                           "a sample taken just before its process exec'd may be unwound "
                           "with the maps of the program it became");
    pt_attach_out_end(pt_sys.samples, pt_sys.lost);
    return 0;
}
