/* proftui-attach: the out-of-process sampler for `proftui --pid N`.
 *
 * Stream format (documented in docs/attach-stream.md, decoded by
 * collectors/runtime/wire_attach.py).  The helper writes it to its stdout, a pipe
 * read by proftui.  All integers are native-endian (the reader runs on the
 * same machine); every record is a multiple of 8 bytes.
 *
 *   stream header, 32 bytes (pid 0 for the system-wide method):
 *     +0  char     magic[8]    "PTATTACH"
 *     +8  uint32_t version     PT_ATTACH_VERSION
 *     +12 uint32_t method      PT_ATTACH_METHOD_PERF | PT_ATTACH_METHOD_PTRACE
 *     +16 uint32_t pid         the target
 *     +20 uint32_t flags       PT_ATTACH_FLAG_*
 *     +24 uint64_t period_ns   sampling period
 *   then records, each starting with
 *     +0  uint32_t type        PT_ATTACH_REC_*
 *     +4  uint32_t size        whole record in bytes, header included
 *
 *   PT_ATTACH_REC_STACK   +8 u32 id, +12 u32 tid, +16 u32 flags (PT_UNWIND_* of
 *                  csrc/common/pt_unwind.h, PT_ATTACH_SAMPLE_*), +20 u32 nframes,
 *                  +24 u64 ips[nframes]   a stack seen for the first time, once:
 *                  innermost first, the interrupted user pc, then return
 *                  addresses, unwound by the helper with the common CFI unwinder
 *                  over a copy of the target's stack, continued by the
 *                  frame-pointer chain.  Ids count from 0.
 *   PT_ATTACH_REC_COUNTS  +8 u64 time (CLOCK_REALTIME ns), then per stack that moved:
 *                  u32 id, u32 samples, u64 weight_ns   the samples taken since the
 *                  last COUNTS (every PT_ATTACH_COUNTS_NS); a STACK precedes
 *                  the first COUNTS naming its id.
 *   PT_ATTACH_REC_THREAD  +8 u32 tid, +12 u32 flags (PT_THREAD_*), +16 char comm[16]
 *   PT_ATTACH_REC_MAPS    +8 u64 0   new executable mapping: re-read /proc/PID/maps
 *   PT_ATTACH_REC_LOST    +8 u64 count of samples dropped, +16 u32 where
 *                  (PT_ATTACH_LOST_RING: the kernel's perf ring was full;
 *                  PT_ATTACH_LOST_TABLE: the helper's stack table is full), +20 u32 0
 *   PT_ATTACH_REC_EXIT    +8 i32 status, +12 i32 signal (-1 when unknown): target gone
 *   PT_ATTACH_REC_WARN    +8 text, NUL-padded          a warning for meta.warnings
 *   PT_ATTACH_REC_ERROR   +8 text, NUL-padded          fatal; the helper exits 1
 *   PT_ATTACH_REC_END     +8 u64 samples, +16 u64 lost  detached cleanly, last record
 *   PT_ATTACH_REC_TASK    +8 u32 serial, +12 u32 pid, +16 u32 tid, +20 u32 flags
 *                  (PT_ATTACH_THREAD_*), +24 char comm[16]   system-wide method only:
 *                  the STACK records' `tid` field holds a task serial, one per
 *                  thread and address space (a new one after exec or tid reuse);
 *                  NEW comes before the first STACK naming it, GONE when it exits.
 *   PT_ATTACH_REC_PROCESS +8 u32 pid, +12 u32 flags (PT_ATTACH_PROCESS_*), +16 u32
 *                  exe bytes, +20 u32 maps bytes, +24 u64 mount namespace (inode of
 *                  /proc/PID/ns/mnt, 0 unknown), +32 exe path, then the executable
 *                  lines of /proc/PID/maps, NUL-padded   system-wide method only:
 *                  NEW (a process first sampled, or after its exec: TASKs from
 *                  here on belong to this address space), MAPS (its executable
 *                  mappings changed), GONE (it exited or exec'd; exe and maps empty).
 *   PT_ATTACH_REC_BUFFERS +8 u64 ring bytes per CPU (0: no ring, ptrace), +16 u32 rings,
 *                  +20 u32 stack bytes each perf sample copies (0: ptrace), +24 u64
 *                  stream buffer bytes, +32 u64 ring bytes asked (0: the default) —
 *                  right after the header, and again when perf's copies grow
 *   PT_ATTACH_REC_FORGET  +8 u32 stacks   system-wide method only, asked for by a
 *                  byte 'f' on the control pipe: every stack's counts were sent
 *                  before it, and the table is empty after it: ids start at 0
 *                  again, and each stack is announced again when next sampled.
 */
#ifndef PT_ATTACH_H
#define PT_ATTACH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pt_unwind.h"

#define PT_ATTACH_MAGIC "PTATTACH"
#define PT_ATTACH_VERSION 5u
#define PT_ATTACH_MAX_FRAMES 127
/* The most stack one sample's walk reads (a copy read further when it ends too early). */
#define PT_ATTACH_STACK_MAX (1u << 20)
/* SAMPLE flag beside PT_UNWIND_*: the outer frames were read from the live stack
 * after the sample, past the end of its copy (perf; the frame at the seam checked). */
#define PT_ATTACH_SAMPLE_LATE (1u << 16)
/* SAMPLE flag: the stack's memory could not be read at the sample (perf's copy
 * came empty, or ptrace's read failed: a page being migrated, swapped out or
 * protected), so only the frame-pointer chain taken then is known, and it did
 * not reach the outermost frame. */
#define PT_ATTACH_SAMPLE_NO_STACK (1u << 17)
/* How often the counts of the stacks that moved are sent (COUNTS): the
 * timeline's resolution, and proftui's work stays per stack, not per sample. */
#define PT_ATTACH_COUNTS_NS 100000000ull

enum { PT_ATTACH_METHOD_PERF = 1, PT_ATTACH_METHOD_PTRACE = 2, PT_ATTACH_METHOD_SYSTEM = 3 };

enum pt_attach_flags {
    PT_ATTACH_FLAG_CFI = 1u << 0,         /* stacks are unwound with .eh_frame CFI (x86-64) */
    PT_ATTACH_FLAG_KERNEL_TIME = 1u << 1, /* samples count kernel time too */
    PT_ATTACH_FLAG_TARGET_TIMER = 1u << 2, /* ptrace: the target's ITIMER_PROF picks the samples */
};

enum {
    /* 1 was SAMPLE (one record per sample) up to version 3 */
    PT_ATTACH_REC_THREAD = 2,
    PT_ATTACH_REC_MAPS = 3,
    PT_ATTACH_REC_LOST = 4,
    PT_ATTACH_REC_EXIT = 5,
    PT_ATTACH_REC_WARN = 6,
    PT_ATTACH_REC_ERROR = 7,
    PT_ATTACH_REC_END = 8,
    PT_ATTACH_REC_BUFFERS = 9,
    PT_ATTACH_REC_STACK = 10,
    PT_ATTACH_REC_COUNTS = 11,
    PT_ATTACH_REC_TASK = 12,
    PT_ATTACH_REC_PROCESS = 13,
    PT_ATTACH_REC_FORGET = 14,
};

enum { PT_ATTACH_PROCESS_NEW = 1, PT_ATTACH_PROCESS_MAPS = 2, PT_ATTACH_PROCESS_GONE = 4 };

enum { PT_ATTACH_LOST_RING = 1, PT_ATTACH_LOST_TABLE = 2 };

enum { PT_ATTACH_THREAD_NEW = 1, PT_ATTACH_THREAD_GONE = 2 };

/* Everything the sampling loops need; filled by main (proftui_attach.c). */
struct pt_attach_config {
    pid_t pid;
    uint64_t period_ns;
    int control_fd; /* stdin: EOF or a byte means "detach now"; 'f': forget the stacks */
    int signal_fd;  /* signalfd for SIGINT/SIGTERM/SIGHUP (and SIGCHLD for ptrace) */
    uint64_t buffer_bytes; /* total perf ring size asked (--buffer); 0: the default */
    pid_t exclude;         /* system-wide: a process left out besides the helper (proftui) */
};

/* Output (pt_attach_out.c).  None of these is async-signal-safe; the helper
 * has no signal handlers (signals arrive through a signalfd). */
void pt_attach_out_header(uint32_t method, pid_t pid, uint64_t period_ns, uint32_t flags);
/* Count one sample in the stack table (sent with the next COUNTS). */
void pt_attach_out_sample(uint32_t tid, uint64_t weight_ns, uint32_t flags, const uint64_t *ips,
                          uint32_t n);
void pt_attach_out_thread(uint32_t tid, uint32_t flags, pid_t pid);
void pt_attach_out_u64(uint32_t type, uint64_t value);
/* System-wide method: a task serial's thread (comm read from /proc when NEW), and a
 * process's address space (exe read from /proc; `maps` its executable lines). */
void pt_attach_out_task(uint32_t serial, pid_t pid, pid_t tid, uint32_t flags);
void pt_attach_out_process(pid_t pid, uint32_t flags, const char *maps, size_t maps_len);
/* The same for a process already gone: its executable `exe` and, when its files were
 * found under the helper's own paths (pt_attach_mmaps_text), the helper's namespace. */
void pt_attach_out_gone_process(pid_t pid, const char *exe, const char *maps, size_t maps_len,
                                int own_namespace);
void pt_attach_out_lost(uint64_t count, uint32_t where); /* PT_ATTACH_LOST_* */
/* The buffers in use: `ring_bytes` per ring (0 without rings), `rings` of them,
 * the bytes of user stack each perf sample copies (0: ptrace, which reads what
 * each walk needs). */
void pt_attach_out_buffers(uint64_t ring_bytes, uint32_t rings, uint64_t asked,
                           uint32_t stack_bytes);
void pt_attach_out_exit(int32_t status, int32_t signal);
void pt_attach_out_text(uint32_t type, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pt_attach_out_end(uint64_t samples, uint64_t lost);
void pt_attach_out_defer_warning(const char *text); /* emitted right after the header */
/* Send the counts when PT_ATTACH_COUNTS_NS passed since the last, then write
 * what the pipe takes now without waiting. */
void pt_attach_out_flush(void);
/* Counts every `interval_ns` instead, and the stream written only with them (or
 * when a quarter of the buffer is used): proftui woken less often. */
void pt_attach_out_batch(uint64_t interval_ns);
int pt_attach_out_broken(void); /* 1 once the reader went away (EPIPE) */
/* Send every pending count, empty the stack table and say so (FORGET): 1 when
 * done, 0 when the reader is too far behind to take it now (try again later). */
int pt_attach_out_forget(void);

/* The stack table (pt_attach_stacks.c): one entry per distinct stack, its
 * counts pending until the writer takes them. */
struct pt_attach_stack {
    uint32_t id, tid, flags, nframes;
    uint64_t offset;    /* of its frames in the table's arena */
    uint64_t hash;
    uint64_t samples;   /* pending: since the counts were last taken */
    uint64_t weight_ns; /* pending */
    int announced;      /* its STACK record is out */
};
/* Count one sample; 0, or -1 when the table cannot grow (the sample is lost). */
int pt_attach_stacks_count(uint32_t tid, uint32_t flags, const uint64_t *ips, uint32_t n,
                           uint64_t weight_ns);
size_t pt_attach_stacks_moved(void); /* stacks with pending counts */
struct pt_attach_stack *pt_attach_stacks_moved_at(size_t i); /* in first-moved order */
const uint64_t *pt_attach_stacks_frames(const struct pt_attach_stack *s);
void pt_attach_stacks_taken(size_t count); /* the first `count` moved stacks were sent */
/* Empty the table and free its memory (no counts may be pending); the ids it gave. */
uint32_t pt_attach_stacks_forget(void);

/* Helpers shared by both methods (proftui_attach.c). */
int pt_attach_target_alive(pid_t pid);           /* 0 once every thread is a zombie or gone */
char pt_attach_task_state(pid_t pid, pid_t tid); /* 'R', 'S', 'Z'...; tid 0: the leader */
/* Room for one more item in the growable array `items` (*cap items of `size`
 * bytes, `count` used): doubled (from 64) when full.  Returns the array,
 * perhaps moved, or NULL (ENOMEM) leaving `items` as it was. */
void *pt_attach_grow(void *items, size_t *cap, size_t count, size_t size);
pid_t pt_attach_live_task(pid_t pid); /* pid, or a live thread once the leader is a zombie */
/* Consume control/signal input after poll(); 1 when the helper must detach.
 * Sets *got_chld when SIGCHLD arrived (ptrace: tracee state changed), and
 * *got_forget when the control pipe asked to forget the stacks ('f'; given
 * NULL, every byte means detach). */
int pt_attach_check_control(const struct pt_attach_config *cfg, short revents_control,
                            short revents_signal, int *got_chld, int *got_forget);
int pt_attach_list_tasks(pid_t pid, pid_t *tids, int max); /* threads of pid; -1 on error */

/* Unwinding (pt_attach_unwind.c): the target's executable mappings and
 * their CFI rows, read from /proc/PID/maps and the files themselves.  None
 * is async-signal-safe. */
uint32_t pt_attach_unwind_init(pid_t pid); /* read the maps now; PT_ATTACH_FLAG_CFI or 0 */
void pt_attach_unwind_maps_changed(void);  /* new code was mapped: re-read before the next walk */
/* The system-wide method: states per process.  _system sets up (flags as _init);
 * _use makes pid's state the one walked (1: made now, maps read and sent; 0: known;
 * -1: no memory, walked without tables); _forget frees it (exit, exec; 0: it had
 * none). */
uint32_t pt_attach_unwind_system(void);
int pt_attach_unwind_use(pid_t pid);
int pt_attach_unwind_forget(pid_t pid);
void pt_attach_unwind_maps_changed_of(pid_t pid);
/* CLOCK_MONOTONIC ns of pid's last maps read (or the time perf's mappings it was made
 * from describe), 0 when the helper holds no state of it or no code mapping in it. */
uint64_t pt_attach_unwind_read_ns(pid_t pid);
/* 1: walks re-read no maps (a sample from before an exec the maps now show), 0: they may. */
void pt_attach_unwind_hold_maps(int hold);
/* 1 if `pc` lies in an executable mapping of the state walked now (`may_reread`: the
 * maps read again first when they changed or miss it, at most every 50 ms). */
int pt_attach_unwind_pc_known(uint64_t pc, int may_reread);
size_t pt_attach_unwind_processes(void); /* states held now */
/* Read again the maps of every process whose mappings were never found (gone before
 * its first read, and perf's MMAP2 records of it were drained only after). */
void pt_attach_unwind_retry_unread(void);
/* Unwind one sample and write it: `regs` are the user registers, `stack`
 * the nstack words copied from regs->sp up, `fp_ips` the frame-pointer chain
 * (kernel call chain or the ptrace walk, innermost first).  Where the copy
 * ends before the outermost frame, the stack is read further from the target
 * (up to PT_ATTACH_STACK_MAX): at once when the thread is stopped (`ran_on`
 * 0, ptrace), or, when it ran on since the copy (perf), only if the copy's
 * last words are unchanged.  Returns the bytes of stack above regs->sp the
 * walk needed (0: it did not reach the outermost frame). */
uint64_t pt_attach_unwind_sample(uint32_t tid, uint64_t weight_ns, const struct pt_regs *regs,
                                 const uint64_t *stack, uint32_t nstack, int ran_on,
                                 const uint64_t *fp_ips, uint32_t nfp);
/* What the walks met since the last call (counts), for sizing perf's copies
 * and for the notes. */
struct pt_attach_unwind_stats {
    uint64_t samples;      /* walked */
    uint64_t short_copies; /* whose copy ended before the outermost frame */
    uint64_t extended;     /* of those, finished by reading further */
    uint64_t seam_changed; /* not read further: the thread had left the frame at the seam */
    uint64_t truncated;    /* written without their outermost frames */
    uint64_t max_need;     /* the most stack bytes a whole walk needed */
};
struct pt_attach_unwind_stats pt_attach_unwind_take_stats(void);

/* The ptrace method's clock (pt_attach_timer.c): ITIMER_PROF run in the
 * target, SIGPROF ignored there meanwhile.  Each call runs system calls in
 * the ptrace-stopped thread `tid` and leaves it stopped; `out` says what to
 * do with it next. */
struct pt_attach_inject_out {
    int pending_sig; /* a signal that arrived meanwhile: give it with PTRACE_CONT */
    int gone;        /* the thread exited: `status` is its wait status */
    int status;
};
/* 0 once the timer runs; -1 with `why` (a clause) and the target untouched. */
int pt_attach_timer_arm(pid_t tid, uint64_t period_ns, char *why, size_t why_len,
                        struct pt_attach_inject_out *out);
/* Stop the timer for the rest of the attach; SIGPROF stays ignored (a signal
 * already on its way must not be fatal) until the disarm.  0, or -1. */
int pt_attach_timer_pause(pid_t tid, struct pt_attach_inject_out *out);
/* Stop the timer (if it still runs), take a SIGPROF still pending, restore the
 * target's action.  0 (also when nothing was set), or -1; may be tried again
 * through another thread, each step done once. */
int pt_attach_timer_disarm(pid_t tid, struct pt_attach_inject_out *out);
/* 1 if the SIGPROF `tid` is stopped for came from the kernel after our timer
 * was set in this attach: ours, to be dropped, even after the timer stopped
 * (a thread may have taken it just before).  The arm made sure the target
 * runs no ITIMER_PROF of its own. */
int pt_attach_timer_signal(pid_t tid);

/* The two methods: 0 after a clean detach, -1 if attaching failed (errno set,
 * nothing written yet so the caller can fall back). */
int pt_attach_perf_run(const struct pt_attach_config *cfg, int quiet_fail);
int pt_attach_ptrace_run(const struct pt_attach_config *cfg);
/* Every process of the host (pt_attach_system.c): -1 when the per-CPU events cannot
 * be opened (errno set, a line on stderr, nothing written yet). */
int pt_attach_system_run(const struct pt_attach_config *cfg);

struct perf_event_mmap_page; /* linux/perf_event.h */
/* The code mappings perf reported (pt_attach_mmaps.c), for a process gone before its
 * /proc/PID/maps was read.  _note keeps one (MMAP2), _exec forgets a process's
 * earlier ones; _text: its mappings as /proc/PID/maps lines (malloc'd, NULL when
 * none), only of files the same path names here (same device and inode), and in
 * `exe` the program's path when its exec was seen ("" otherwise).  `time`: the
 * record's CLOCK_MONOTONIC ns (0 unknown); _text's *as_of: the latest time of the
 * mappings it used, the moment its text describes. */
void pt_attach_mmaps_note(pid_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t maj,
                          uint32_t min, uint64_t ino, const char *path, uint64_t time);
void pt_attach_mmaps_exec(pid_t pid);
char *pt_attach_mmaps_text(pid_t pid, size_t *len, char *exe, size_t exe_size,
                           uint64_t *as_of);

struct perf_event_mmap_page; /* linux/perf_event.h */
/* Perf ring buffers and sample records (pt_attach_ring.c), shared by the perf and
 * system-wide methods. */
struct pt_perf_ring {
    int fd;                            /* the event owning the ring, -1 if none */
    struct perf_event_mmap_page *meta; /* the ring's control page */
    unsigned char *data;               /* the ring itself */
    uint64_t size;                     /* bytes in the ring, a power of two */
};
struct perf_event_attr; /* linux/perf_event.h */
/* The event both methods open: a software clock (`config`) every `period_ns`, with
 * the user call chain, registers and `stack_bytes` of user stack; kernel time unless
 * `kernel` is 0; task, mmap and comm records; woken at a quarter of the ring. */
void pt_perf_attr(struct perf_event_attr *attr, uint64_t config, uint64_t period_ns,
                  uint32_t stack_bytes, int kernel, size_t ring_pages);
/* Default data pages per ring: 512 KiB with 4 KiB pages (plus the control page, the
 * 516 KiB per CPU that kernel.perf_event_mlock_kb lets any user lock), ~120 samples
 * with their 4 KiB stack copies; fewer on machines with many CPUs. */
#define PT_PERF_DEFAULT_PAGES 128
#define PT_PERF_MIN_PAGES 8
#define PT_PERF_MAX_PAGES 65536
/* CPUs a ring is opened for: those configured, 1 to `most`. */
int pt_ring_cpus(int most);
/* Data pages per ring: the asked total (bytes over every CPU's ring) split per CPU
 * and rounded down to a power of two, or the default. */
size_t pt_ring_pages(uint64_t asked, int ncpus);
/* Map event `fd`'s ring: 1 control page + *pages data pages, halved while the
 * kernel refuses to lock that much (later rings then get the smaller size).
 * 0, or -1 with errno. */
int pt_ring_map(struct pt_perf_ring *ring, int fd, size_t *pages);
/* Copy `len` bytes at ring offset `off`, handling wrap-around. */
void pt_ring_copy(const struct pt_perf_ring *ev, uint64_t off, void *dst, size_t len);
struct perf_event_header; /* linux/perf_event.h */
/* One record of a ring: its header and its body (`words` u64 after the header). */
typedef void (*pt_ring_handler)(const struct perf_event_header *hdr, const uint64_t *body,
                                size_t words, void *arg);
/* Hand every record between the ring's tail and head to `handle`, then give their
 * space back to the kernel; a record smaller than its header (corrupt) ends the batch. */
void pt_ring_drain(struct pt_perf_ring *ev, pt_ring_handler handle, void *arg);
/* The ring's head now: where a scan and the drain after it both stop. */
uint64_t pt_ring_head(const struct pt_perf_ring *ev);
/* Hand the records of `type` from offset `from` (a record's start: the tail, or a
 * head read before) up to `head` to `handle`, giving nothing back (the others are
 * only stepped over). */
void pt_ring_scan(const struct pt_perf_ring *ev, uint64_t from, uint64_t head, uint32_t type,
                  pt_ring_handler handle, void *arg);
/* pt_ring_drain up to `head` (from pt_ring_head) instead of the head now. */
void pt_ring_drain_to(struct pt_perf_ring *ev, uint64_t head, pt_ring_handler handle, void *arg);
/* One PERF_RECORD_SAMPLE body of the sample_type both methods ask for. */
struct pt_perf_sample {
    uint32_t pid, tid;
    uint64_t time; /* CLOCK_MONOTONIC ns, with PERF_SAMPLE_TIME (else 0) */
    uint64_t period;
    struct pt_regs regs;   /* pc 0: none came */
    const uint64_t *stack; /* the copy of the user stack from regs.sp, nstack words */
    uint32_t nstack;
    uint64_t ips[PT_ATTACH_MAX_FRAMES]; /* the user call chain, innermost first */
    uint32_t n;
};
/* 0, or -1 when the record has no user context at all (a kernel thread's).  `timed`:
 * the event asked for PERF_SAMPLE_TIME too. */
int pt_perf_parse_sample(const uint64_t *body, size_t words, int timed,
                         struct pt_perf_sample *out);

#endif
