/*
 * proftui_wire_hook.h - body of a hook runtime file (kind PT_KIND_HOOK),
 * written by csrc/hook/proftui_hook.c, decoded by collectors/runtime/wire_hook.py,
 * documented in docs/wire-format.md ("Hook body").
 *
 * Layout after the common pt_file_header (body_offset = 128):
 *
 *   0              128          320 = threads_offset   modules_offset  chunks_offset  nodes_offset
 *   +--------------+------------+----------------+---------------+--------------+-------------
 *   | pt_file_hdr  | pt_hook_hdr| pt_hook_thread | pt_hook_module| pt_hook_chunk| pt_hook_node
 *   |  (128 B)     |  (192 B)   |  x thread_cap  | x module_cap  |  x chunk_cap | x chunk_cap
 *   +--------------+------------+----------------+---------------+--------------+  x chunk_nodes
 *
 * The node pool is cut into chunks of chunk_nodes nodes.  A thread takes a
 * whole chunk with one atomic add on chunk_count and then bump-allocates
 * nodes in it alone, so no lock is ever taken.  Global node index =
 * chunk * chunk_nodes + index in chunk; a node's parent is such an index, or
 * PT_HOOK_ROOT for a thread's top-level calls.  A node never moves and its
 * fn/parent/module never change after publication, except that the
 * PT_HOOK_INLINED bit of `module` may be set later; the counters only grow.
 *
 * Publication (the front end reads while threads write):
 *   - chunk.count is stored with release semantics after the node is filled:
 *     trust only nodes [0, count) of a chunk;
 *   - module.start is stored last (release); entries with start 0 are not
 *     ready yet;
 *   - thread.tid is stored before the thread creates any node.
 *
 * Time comes one of two ways (the common header says which):
 *  - sampled (the default; period_ns > 0): each thread's clock (csrc/common/
 *    pt_timer.c) ticks every period_ns of its CPU time (wall time with
 *    PT_FLAG_WALL_CLOCK); the handler adds the tick's weight to the thread's
 *    current node, `ticks`, or `hook_ticks` when the interrupted code is the
 *    hook library's own; with no recorded call open, to the thread entry's
 *    counters.  self_ns = ticks * period_ns; the hooks read no clock.
 *    Ticks outside the hook library also count in the thread's pc table,
 *    per (node, interrupted pc): a node's ticks in code other than its own
 *    function's (a callee's prologue before its enter hook, an uninstrumented
 *    libc function, a PLT stub) can be told apart by the reader, as perf tells
 *    them apart, and give per-line costs.  The table is a few whole chunks of
 *    the node pool (pt_hook_thread.pcs_chunk), marked PT_HOOK_CHUNK_PCS in
 *    the chunk table with count 0, open addressing on (pc, node), at most
 *    PT_HOOK_PC_PROBES probes; ticks that find no slot count in pcs_dropped
 *    (they are still in the node's ticks).
 *  - timed (PROFTUI_TIMED=1; flags without PT_FLAG_COUNT_ONLY): two timestamps
 *    per call, raw ticks in incl/self: ns = ticks * ns_per_tick.  Compensation
 *    of the hooks' own cost is left to the reader: per node,
 *      self_ns = (self - calls * overhead_inner - child_calls * overhead_outer) * ns_per_tick
 *    where child_calls is the sum of the calls of the node's children.
 * With PT_FLAG_COUNT_ONLY and period_ns 0 the file has call counts only.
 */
#ifndef PROFTUI_WIRE_HOOK_H
#define PROFTUI_WIRE_HOOK_H

#include <stdint.h>

#include "proftui_wire.h"

#define PT_HOOK_ROOT 0xffffffffu   /* parent of a thread's outermost calls */
#define PT_HOOK_NAME_MAX 232       /* bytes of a module path, NUL included */
#define PT_HOOK_INLINED 0x80000000u /* node.module bit: calls of fn inlined into the
                                       parent's function (they ran in its frame) */
#define PT_HOOK_CHUNK_PCS 0x80000000u /* chunk.thread bit: the chunk is part of that
                                         thread's pc table, not nodes */
#define PT_HOOK_PC_PROBES 16u      /* slots a tick looks at in the pc table */

typedef struct pt_hook_header {  /* at body_offset */
    uint32_t node_size;          /*   0 sizeof(pt_hook_node) = 64 */
    uint32_t chunk_nodes;        /*   4 nodes per chunk */
    uint32_t chunk_capacity;     /*   8 chunks in the pool */
    uint32_t chunk_count;        /*  12 chunks handed out (atomic; clamp to capacity) */
    uint32_t thread_capacity;    /*  16 entries of the thread table */
    uint32_t thread_count;       /*  20 threads registered (atomic; clamp to capacity) */
    uint32_t module_capacity;    /*  24 entries of the module table */
    uint32_t module_count;       /*  28 module entries reserved (atomic; clamp) */
    uint64_t threads_offset;     /*  32 file offsets of the four tables */
    uint64_t chunks_offset;      /*  40 */
    uint64_t modules_offset;     /*  48 */
    uint64_t nodes_offset;       /*  56 */
    double ns_per_tick;          /*  64 IEEE-754; refined at clean exit */
    double overhead_inner;       /*  72 ticks per call inside a callee's interval */
    double overhead_outer;       /*  80 ticks per call left in the caller's self time */
    uint64_t tick_start;         /*  88 ticks when the file was created */
    uint64_t mono_start_ns;      /*  96 CLOCK_MONOTONIC then, ns */
    uint32_t generation;         /* 104 0, or n after the process's n-th exec */
    uint32_t max_depth;          /* 108 PROFTUI_MAX_DEPTH, 0 = unlimited */
    uint32_t filter_ranges;      /* 112 address ranges the name filters resolved to */
    uint32_t stack_capacity;     /* 116 shadow-stack entries per thread */
    uint64_t filtered_calls;     /* 120 calls not recorded because of filters/depth/pause */
    uint32_t timer_signal;       /* 128 signal of the clock's ticks (0: no clock) */
    uint32_t timer_flags;        /* 132 PT_HOOK_TIMER_* (csrc/common/pt_timer.h values) */
    uint64_t ticks_unplaced;     /* 136 ticks no node could take (a node index out of range) */
    uint8_t reserved[48];        /* 144 zero */
} pt_hook_header;

enum pt_hook_timer_flags {       /* pt_hook_header.timer_flags */
    PT_HOOK_TIMER_PERF = 1u << 0,         /* perf_event task-clock per thread */
    PT_HOOK_TIMER_POSIX = 1u << 1,        /* timer_create per thread (fallback or wall clock) */
    PT_HOOK_TIMER_SIGNAL_MOVED = 1u << 2, /* the target owns SIGPROF: another signal is used */
    PT_HOOK_TIMER_USER_ONLY = 1u << 5,    /* perf may not count kernel time here: user time only */
};

typedef struct pt_hook_thread {
    uint32_t tid;                /*   0 kernel thread id (0: slot not ready) */
    uint32_t state;              /*   4 1 running, 2 exited */
    char name[16];               /*   8 comm at registration, NUL-terminated */
    uint64_t max_depth;          /*  24 deepest shadow stack seen */
    uint64_t live;               /*  32 address, in the target, of the thread's pt_hook_live
                                        (0: none); read through /proc/<pid>/mem */
    uint64_t ticks;              /*  40 clock ticks while no recorded call was open */
    uint64_t hook_ticks;         /*  48 ... of them in the hook library (its first call) */
    uint32_t pcs_chunk;          /*  56 first chunk of its pc table (0xffffffff: none) */
    uint32_t pcs_entries;        /*  60 entries of the table (a power of two; 0: none) */
    uint64_t pcs_dropped;        /*  64 ticks the table had no slot for */
} pt_hook_thread;                /* 72 bytes */

typedef struct pt_hook_pc {      /* one entry of a thread's pc table */
    uint64_t pc;                 /*   0 interrupted address (0: empty); stored last (release) */
    uint32_t node;               /*   8 the node that was current, or PT_HOOK_ROOT */
    uint32_t count;              /*  12 ticks (weights) */
} pt_hook_pc;                    /* 16 bytes */

/*
 * Calls still open.  Finished calls are in the nodes; a call that has not
 * returned yet (main, a loop running for minutes) is only on the thread's
 * shadow stack, in the target's private memory.  The reader may read it
 * there, racing the thread, to show live time: every value is a hint to be
 * checked (anode below the node count, ts not in the future).
 *
 * `live` points at this prefix of the thread's state: */
typedef struct pt_hook_live {
    uint64_t guard;              /*   0 nonzero: in a hook or not recording */
    uint32_t depth;              /*   8 index of the top entry; entries 1..depth are open */
    uint32_t cap;                /*  12 entries of the stack */
    uint64_t stack;              /*  16 address of entry 0 (a sentinel) */
    uint64_t setup;              /*  24 ticks left out of this thread's clock: an entry's
                                        elapsed time is now - setup - ts */
} pt_hook_live;                  /* 32 bytes */

/* ...and `stack` at an array of these (only the fields the reader uses are named): */
typedef struct pt_hook_open_entry {
    uint64_t fn;                 /*   0 function address */
    uint64_t slot_;              /*   8 */
    uint64_t ts;                 /*  16 ticks (thread clock) at entry */
    uint64_t child;              /*  24 ticks of finished recorded callees */
    uint32_t up;                 /*  32 index of the entry its time counts under */
    uint32_t anchor_;            /*  36 */
    uint32_t anode;              /*  40 its node (when recorded) */
    uint32_t rdepth_;            /*  44 */
    uint32_t flags;              /*  48 bit 31: not recorded (no node; its time stays in
                                        its caller's) */
    uint32_t ra_;                /*  52 */
    uint32_t site_;              /*  56 */
    uint32_t pad_;               /*  60 */
} pt_hook_open_entry;            /* 64 bytes */

typedef struct pt_hook_chunk {
    uint32_t thread;             /* owning thread slot; | PT_HOOK_CHUNK_PCS: pc table */
    uint32_t count;              /* nodes published (release store) */
} pt_hook_chunk;                 /* 8 bytes */

typedef struct pt_hook_module {
    uint64_t start;              /*   0 lowest runtime address (0: not ready) */
    uint64_t end;                /*   8 end of the highest PT_LOAD segment */
    uint64_t bias;               /*  16 runtime address - link-time address */
    char path[PT_HOOK_NAME_MAX]; /*  24 as the loader names it; main program resolved */
} pt_hook_module;                /* 256 bytes */

typedef struct pt_hook_node {
    uint64_t fn;                 /*   0 runtime address of the function */
    uint32_t parent;             /*   8 global node index or PT_HOOK_ROOT */
    uint32_t module;             /*  12 module table index + 1, 0 unknown; | PT_HOOK_INLINED */
    uint64_t calls;              /*  16 entries counted */
    uint64_t incl;               /*  24 timed: inclusive ticks of finished calls */
    uint64_t self;               /*  32 timed: exclusive ticks of finished calls */
    uint64_t ticks;              /*  40 sampled: clock ticks while this was the current node */
    uint64_t hook_ticks;         /*  48 ... of them inside the hook library ([instrumentation]) */
    uint32_t off_;               /*  56 the runtime's own: the function's return-address slot
                                        minus the enter hook's CFA (never read by the reader) */
    uint32_t self_;              /*  60 the runtime's own: this node's index (checked before
                                        use: the target may overwrite it) */
} pt_hook_node;                  /* 64 bytes: one cache line, all the enter hook touches */

_Static_assert(sizeof(pt_hook_header) == 192, "pt_hook_header is 192 bytes");
_Static_assert(sizeof(pt_hook_thread) == 72, "pt_hook_thread is 72 bytes");
_Static_assert(sizeof(pt_hook_pc) == 16, "pt_hook_pc is 16 bytes");
_Static_assert(sizeof(pt_hook_live) == 32, "pt_hook_live is 32 bytes");
_Static_assert(sizeof(pt_hook_open_entry) == 64, "pt_hook_open_entry is 64 bytes");
_Static_assert(sizeof(pt_hook_chunk) == 8, "pt_hook_chunk is 8 bytes");
_Static_assert(sizeof(pt_hook_module) == 256, "pt_hook_module is 256 bytes");
_Static_assert(sizeof(pt_hook_node) == 64, "pt_hook_node is 64 bytes");

#endif /* PROFTUI_WIRE_HOOK_H */
