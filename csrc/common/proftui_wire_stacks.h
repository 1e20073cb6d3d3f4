/*
 * proftui_wire_stacks.h - a stack table in a runtime file: each distinct
 * (thread, call stack) stored once with its counters, incremented in place
 * (docs/wire-format.md, "Stack table"; decoded by
 * collectors/runtime/wire_stacks.py; written by csrc/common/pt_stacktab.c).
 * Change the three together.
 *
 *   header_offset                                                          
 *   +--------------------+---------------+---------------------+-------------------
 *   | pt_stacktab_header | bucket heads  | entries ...         | frame pool ...
 *   | (64 bytes)         | u32 x index_  | pt_stack_entry x    | u64 words
 *   |                    |   capacity    |   entries_capacity  |
 *   +--------------------+---------------+---------------------+-------------------
 *
 * An entry's id is its index.  Ids are claimed with fetch_add on
 * entry_count; an entry is complete once PT_STACK_READY is set in its flags
 * (release store after the frames and fields are written), so a reader takes
 * entries [seen, entry_count) that are READY and looks again later at the
 * others.  Entries never move and their key fields never change; only the
 * counters grow.  Each entry belongs to one thread (its tid is part of the
 * key), so its counters have one writer: relaxed stores, read racily and
 * monotonic.
 *
 * The heads (u32: entry id + 1, 0 = empty) and each entry's `next` are the
 * runtime's chained hash index, of no use to a reader.  Entries and frames are
 * backed (pt_runfile_reserve) in PT_STACKTAB_CHUNK pieces as they fill, and
 * mapped into the target in windows of doubling size: the table grows with
 * what it holds; only a full run directory, a window the target's address
 * space cannot take, or the capacities drop a sample, counted in `dropped`.
 * The capacities are the constants below unless the target's RLIMIT_FSIZE
 * is lower (the table header says what they are).
 */
#ifndef PROFTUI_WIRE_STACKS_H
#define PROFTUI_WIRE_STACKS_H

#include <stdint.h>

#define PT_STACKTAB_INDEX (1u << 18)      /* bucket heads at most: 1 MiB, backed at creation */
#define PT_STACKTAB_ENTRIES (1u << 22)    /* distinct (thread, stack) pairs */
#define PT_STACKTAB_FRAMES (1ull << 27)   /* frame pool words (1 GiB, sparse) */
#define PT_STACKTAB_CHUNK (64u << 10)     /* entries and frames are backed 64 KiB at a time */
#define PT_STACK_NONE 0xffffffffu         /* "no stack" id: the sample found no room */
#define PT_STACKTAB_MAX_FRAMES 128        /* frames of one entry at most */

enum pt_stack_flags {
    /* bits 0..3: the sample record's PT_SREC_* (truncated, off-stack, too deep, unreadable) */
    PT_STACK_READY = 1u << 15, /* frames and fields written: the reader may use it */
};

typedef struct pt_stacktab_header {
    uint64_t index_offset;     /* file offset of the bucket heads (u32 each) */
    uint32_t index_capacity;   /* heads (power of 2) */
    uint32_t entry_size;       /* sizeof(pt_stack_entry) = 48 */
    uint64_t entries_offset;   /* file offset of entry 0 */
    uint32_t entries_capacity; /* entries that fit */
    uint32_t entry_count;      /* ids claimed (an entry is usable once READY) */
    uint64_t frames_offset;    /* file offset of the frame pool */
    uint64_t frames_capacity;  /* words */
    uint64_t frames_used;      /* words claimed */
    uint64_t dropped;          /* samples whose stack found no room (capacity, no space) */
} pt_stacktab_header;

_Static_assert(sizeof(pt_stacktab_header) == 64, "pt_stacktab_header is 64 bytes");

typedef struct pt_stack_entry {
    uint64_t hash;      /* of tid, flags and frames (the runtime's lookup) */
    uint64_t frames_at; /* first word in the frame pool */
    uint32_t next;      /* runtime's chain: next entry id + 1 in this bucket, 0 = end */
    uint32_t tid;       /* the thread whose samples these are */
    uint16_t nframes;   /* 1..PT_STACKTAB_MAX_FRAMES, innermost first */
    uint16_t flags;     /* PT_SREC_* | PT_STACK_READY */
    uint32_t reserved;
    uint64_t samples;   /* signals that landed on this stack */
    uint64_t periods;   /* sampling periods they stand for (a timer's overruns add) */
} pt_stack_entry;

_Static_assert(sizeof(pt_stack_entry) == 48, "pt_stack_entry is 48 bytes");

#endif /* PROFTUI_WIRE_STACKS_H */
