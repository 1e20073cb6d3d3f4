/* proftui_sampler internals: the LD_PRELOAD stack sampler (default mode).
 *
 * Files, one job each:
 *   proftui_sampler.c      constructor (reads PROFTUI_* once), exit, fork, and the
 *                          interposers: pthread_create, dlopen, dlclose, sigaction, signal
 *   pt_sampler_file.c      the shared-memory runtime file: create, slots, map log
 *   pt_sampler_timer.c     arming threads (slot, stack) on the common per-thread clocks
 *   pt_sampler_handler.c   the signal handler: unwind, count in the stack table, note
 *                          the stack and the time in the thread's ring
 *   pt_sampler_maps.c      dl_iterate_phdr: map log entries and CFI table publishing
 * and from csrc/common: pt_timer.c + pt_timer_interpose.c (the per-thread
 * clocks, signal choice, and the sigaction/close/exec interposers that keep
 * them working), pt_unwind.c (the walk), pt_cfi.c (.eh_frame -> rows,
 * outside the handler), pt_stacktab.c (the stack table), pt_maps.c (objects,
 * map log), pt_runfile.c (the file's creation), pt_mem.c.
 *
 * Every function says whether it is async-signal-safe.  Only the handler,
 * the unwinder and the ring writer run in signal context.
 */
#ifndef PT_SAMPLER_H
#define PT_SAMPLER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "proftui_wire.h"
#include "proftui_wire_sampler.h"
#include "pt_common.h"
#include "pt_maps.h"
#include "pt_stacktab.h"
#include "pt_unwind.h"
#define PT_DEFAULT_BUFFER (32u << 20) /* bytes of rings per process (16 bytes a sample) */
#define PT_MAX_BUFFER (64ull << 30)   /* the most: --buffer's limit */
#define PT_MIN_RING_WORDS 2048        /* 16 KiB */
#define PT_TINY_RING_WORDS 512        /* 4 KiB: the floor on a nearly full run directory */

/* Settings read once from the environment by the constructor. */
struct pt_sampler_config {
    uint64_t period_ns;    /* sampling period */
    uint64_t buffer_bytes; /* ring budget per process */
    int wall_clock;        /* CLOCK_MONOTONIC timers instead of CPU time */
    int follow_children;   /* forked children get their own file */
    int force_timer;       /* PROFTUI_SAMPLER_CLOCK=timer: skip perf_event */
    int fp_only;           /* PROFTUI_SAMPLER_UNWIND=fp: skip CFI tables */
    int user_only;         /* PROFTUI_SAMPLER_KERNEL=0: never count kernel time */
    char dir[4096];        /* PROFTUI_DIR */
};

/* Per-thread sampling state, in initial-exec TLS so the handler can reach it
 * without calling anything. */
struct pt_sampler_thread {
    pt_sampler_slot *slot; /* NULL: this thread is not sampled (handler returns) */
    uint64_t *ring;
    uint64_t mask;      /* ring_words - 1 */
    uint32_t tid;       /* the stack table's key (never read back from the slot) */
    uintptr_t stack_lo; /* [stack_lo, stack_hi): the thread's stack */
    uintptr_t stack_hi;
};

/* The current process's runtime file (zeroed when sampling is off).  The
 * layout's numbers are kept here: the target may overwrite the file's
 * headers, and nothing is ever addressed through what they say. */
struct pt_sampler_file {
    struct pt_runfile rf;      /* the file and its head (the two headers) */
    pt_file_header *hdr;
    pt_sampler_header *smp;
    uint32_t nslots;           /* PT_SAMPLER_NSLOTS */
    uint32_t ring_words;       /* per slot, a power of two */
    struct pt_region slots;    /* pt_sampler_slot + ring, mapped as threads claim them */
    struct pt_stacktab stacks; /* every distinct (thread, stack) and its counts */
    struct pt_maplog maplog;   /* the loaded objects' log */
};

/* Globals, each written only outside signal context (constructor, fork
 * child, signal moves) and read by the handler. */
extern PT_HIDDEN struct pt_sampler_config pt_sampler_cfg;
extern PT_HIDDEN struct pt_sampler_file pt_sampler_file;
extern PT_HIDDEN __thread struct pt_sampler_thread pt_sampler_self
    __attribute__((tls_model("initial-exec")));

/* pt_sampler_file.c - none async-signal-safe unless stated. */
PT_HIDDEN int pt_sampler_file_create(pid_t pid); /* 0 or -1 (sampling stays off) */
PT_HIDDEN void pt_sampler_file_forget(void);     /* fork child: drop the parent's map */
PT_HIDDEN pt_sampler_slot *pt_sampler_slot_claim(pid_t tid, uint64_t **ring); /* NULL when full */
PT_HIDDEN void pt_sampler_slot_release(pt_sampler_slot *slot, uint64_t cpu_ns,
                                       const char *comm);
PT_HIDDEN void pt_sampler_no_space(void); /* PT_FLAG_NO_SPACE; async-signal-safe */

/* pt_sampler_timer.c - the sampler's use of csrc/common/pt_timer.c; none
 * async-signal-safe. */
PT_HIDDEN int pt_sampler_timer_init(void);            /* choose signal + clock, install handler */
PT_HIDDEN int pt_sampler_thread_arm(void);            /* calling thread: slot, stack, timer; 0 ok */
PT_HIDDEN void pt_sampler_thread_disarm(void);        /* calling thread: stop, release slot */
PT_HIDDEN void pt_sampler_timer_fork_child(int keep); /* drop inherited events; re-arm if keep */

/* pt_sampler_handler.c - async-signal-safe: the handler, and the
 * interrupted stack of this thread through the common unwinder
 * (csrc/common/pt_unwind.h). */
PT_HIDDEN void pt_sampler_on_signal(int sig, siginfo_t *info, void *ucontext);
PT_HIDDEN unsigned pt_sampler_unwind(const void *ucontext, const struct pt_sampler_thread *self,
                                     uint64_t *frames, unsigned max, unsigned *flags);

/* pt_sampler_maps.c - not async-signal-safe (take a mutex, call dl_iterate_phdr).
 * The handler searches the CFI tables common/pt_maps.c publishes (pt_maps_cfi). */
PT_HIDDEN void pt_sampler_maps_refresh(int log_all); /* log new objects, publish CFI tables */
PT_HIDDEN void pt_sampler_maps_fork_child(void);     /* reset the lock after fork */

#endif /* PT_SAMPLER_H */
