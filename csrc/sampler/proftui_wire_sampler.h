/*
 * proftui_wire_sampler.h - the sampler's area of a runtime file (kind 2,
 * PT_KIND_SAMPLER), after the common 128-byte header of proftui_wire.h.
 * Documented in docs/wire-format.md ("Sampler body"); decoded by
 * collectors/runtime/wire_sampler.py.  Change the three together.
 *
 *   0        128               256           maplog_offset     stacks_offset
 *   +--------+-----------------+-------------+---------------+------------+------------------
 *   | common | pt_sampler_     | slot 0 ...  | map log       | stack table (proftui_wire_
 *   |        | header (128)    | slot n-1    | entries       | stacks.h): every distinct
 *   |        |                 |             |               | (thread, stack) + counters
 *   +--------+-----------------+-------------+---------------+------------+------------------
 *
 * The handler unwinds, counts the sample in its (thread, stack) entry of the
 * stack table (the totals: exact, never lost while the table has room) and
 * writes a two-word record into the thread's ring saying which stack and
 * when (the order in time: live deltas and the timeline).  A full ring drops
 * the record, not the sample: its counts are in the table.
 *
 * Each slot is one thread's single-producer / single-consumer ring:
 *
 *   slot:  pt_sampler_slot (64 bytes) | uint64_t ring[ring_words]
 *
 * The producer is the thread's signal handler: it writes a record at `head`
 * (indices count words and never wrap; the ring index is head % ring_words)
 * and then publishes head with a release store.  The consumer is the front
 * end: it reads head (acquire), copies records in [tail, head), then stores
 * tail.  A record that does not fit in ring_words - (head - tail) is dropped
 * and counted in the slot's `dropped`.  A slot whose thread exited (state 2)
 * and whose ring the front end drained (tail == head) may be reused by a new
 * thread: the runtime bumps `gen` first, so a reader that sees gen change
 * discards what it read.
 *
 * Record (two 8-byte words):
 *   word 0   bits 0..31  stack id (entry of the stack table; PT_STACK_NONE:
 *                        the stack found no room, the sample is dropped)
 *            bits 32..63 weight: periods this sample stands for (>= 1)
 *   word 1   CLOCK_MONOTONIC of the sample, ns
 *
 * Map log entries: pt_map_entry (proftui_wire.h).
 */
#ifndef PROFTUI_WIRE_SAMPLER_H
#define PROFTUI_WIRE_SAMPLER_H

#include <stdint.h>

#include "proftui_wire_stacks.h"

#define PT_SAMPLER_MAX_FRAMES 128

enum pt_sampler_flags {
    PT_SMP_PERF = 1u << 0,         /* perf_event task-clock (or cpu-clock) per thread */
    PT_SMP_TIMER = 1u << 1,        /* timer_create per thread (fallback or wall clock) */
    PT_SMP_SIGNAL_MOVED = 1u << 2, /* the target owns SIGPROF: another signal is used */
    PT_SMP_CFI = 1u << 3,          /* DWARF CFI unwind tables were built */
    PT_SMP_FOLLOW = 1u << 4,       /* forked children write their own files */
    PT_SMP_USER_ONLY = 1u << 5,    /* perf may not count kernel time here: user time only */
};

enum pt_sampler_slot_state {
    PT_SLOT_FREE = 0,
    PT_SLOT_ACTIVE = 1,
    PT_SLOT_EXITED = 2,
};

enum pt_sampler_record_flags {
    PT_SREC_TRUNCATED = 1u << 0, /* unwinding stopped early (garbage, no info, bound) */
    PT_SREC_OFFSTACK = 1u << 1,  /* the stack pointer was outside the thread's stack */
    PT_SREC_DEPTH = 1u << 2,     /* deeper than PT_SAMPLER_MAX_FRAMES: the outermost are cut */
    PT_SREC_UNREADABLE = 1u << 3, /* with TRUNCATED: it stopped at a stack page the program
                                   * made unreadable (the walk probes each page first) */
};

typedef struct pt_sampler_header {
    uint32_t signal;          /* signal delivering samples (SIGPROF unless moved) */
    uint32_t sflags;          /* PT_SMP_* */
    uint32_t nslots;          /* thread slots */
    uint32_t ring_words;      /* ring capacity per slot, in 8-byte words (power of 2) */
    uint64_t slots_offset;    /* file offset of slot 0 */
    uint64_t slot_size;       /* bytes per slot: 80 + 8 * ring_words */
    uint64_t maplog_offset;   /* file offset of map log entry 0 */
    uint32_t maplog_capacity; /* entries that fit */
    uint32_t maplog_count;    /* entries published (release store after writing) */
    uint64_t threads_lost;    /* threads that found no free slot (not sampled) */
    uint64_t requested_ns;    /* period the user asked for; header period_ns is in effect */
    uint64_t start_mono_ns;   /* CLOCK_MONOTONIC when the file was made (records' clock) */
    uint64_t stacks_offset;   /* file offset of the stack table's header */
    uint64_t ring_lost;       /* records a full ring could not take (their samples counted) */
    uint64_t reserved[5];
} pt_sampler_header;

_Static_assert(sizeof(pt_sampler_header) == 128, "pt_sampler_header is 128 bytes");

#define PT_SAMPLER_SLOTS_OFFSET 256 /* common header + sampler header */
#define PT_SAMPLER_NSLOTS 128       /* threads sampled at once per process */
#define PT_SAMPLER_RECORD_WORDS 2

typedef struct pt_sampler_slot {
    uint32_t state;   /* PT_SLOT_*: written by the runtime */
    uint32_t tid;     /* thread writing this slot */
    uint64_t head;    /* words written (runtime, release) */
    uint64_t tail;    /* words consumed (front end) */
    uint64_t samples; /* samples taken (records written or not) */
    uint64_t dropped; /* records a full ring could not take (samples still counted) */
    uint64_t cpu_ns;  /* thread CPU time when it exited (0 while running) */
    uint32_t gen;     /* bumped when the slot is reused by another thread */
    uint32_t reserved0;
    uint64_t reserved1;
    /* The thread's name when it exited (PR_GET_NAME; empty while it runs): a thread
     * that ends between two drains is gone from /proc before the front end looks. */
    char comm[16];
} pt_sampler_slot;

_Static_assert(sizeof(pt_sampler_slot) == 80, "pt_sampler_slot is 80 bytes");

#endif /* PROFTUI_WIRE_SAMPLER_H */
