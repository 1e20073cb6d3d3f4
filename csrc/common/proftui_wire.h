/*
 * proftui_wire.h - the one binary format between the C runtime and the
 * Python front end (collectors/runtime/wire.py).  Documented field by field in
 * docs/wire-format.md; change the three together and bump PT_WIRE_VERSION.
 *
 * Every runtime file lives in the per-run directory ($PROFTUI_DIR, 0700),
 * is created O_CREAT|O_EXCL|O_NOFOLLOW with mode 0600, one file per process
 * (a forked child opens its own); the runtime maps it MAP_SHARED and writes,
 * the front end reads it with pread while the target runs and after it
 * crashes.  No page is touched before it is backed (docs/runtime-safety.md).  All integers are little-endian, naturally aligned.
 *
 * File layout:
 *
 *   0                 64                128             body_offset
 *   +-----------------+-----------------+---------------+----------------
 *   | pt_file_header (128 bytes)        | kind-specific | records ...
 *   +-----------------+-----------------+---------------+----------------
 *
 * pt_file_header:
 *   off  size  field
 *     0     8  magic        "PROFTUI\0"
 *     8     4  version      PT_WIRE_VERSION
 *    12     4  kind         PT_KIND_HOOK | PT_KIND_SAMPLER | PT_KIND_ATTACH | PT_KIND_HEAP
 *    16     4  header_size  sizeof(pt_file_header) = 128
 *    20     4  pid          process that owns the file
 *    24     4  ppid         its parent at creation (fork tree)
 *    28     4  flags        PT_FLAG_* (set by the runtime; NO_SPACE with an atomic or)
 *    32     8  start_ns     CLOCK_REALTIME at file creation, ns
 *    40     8  period_ns    sampling period of the clock's ticks (0: none)
 *    48     8  body_offset  where the kind-specific area starts
 *    56     8  file_size    total bytes mapped
 *    64     8  dropped      records lost because a table/ring was full;
 *                           monotonic, updated with relaxed atomics
 *    72     4  control      written by the FRONT END: PT_CONTROL_* bits
 *    76     4  state        PT_STATE_*: running, exited cleanly
 *    80    32  clock        NUL-terminated clock name ("tsc", "perf task-clock",
 *                           "CLOCK_MONOTONIC", "timer_create CLOCK_THREAD_CPUTIME_ID")
 *   112    16  reserved     zero
 */
#ifndef PROFTUI_WIRE_H
#define PROFTUI_WIRE_H

#include <stdint.h>

#define PT_WIRE_MAGIC "PROFTUI" /* 7 chars + NUL = 8 bytes */
#define PT_WIRE_VERSION 5u /* 5: 80-byte sampler slots (the name at exit); 4: hook ticks
                              (64-byte nodes, 72-byte thread entries, pc tables); 3: sampler
                              stack table; 2: 40-byte hook thread entries */

enum pt_kind {
    PT_KIND_HOOK = 1,    /* -finstrument-functions runtime (proftui_hook) */
    PT_KIND_SAMPLER = 2, /* LD_PRELOAD stack sampler (proftui_sampler) */
    PT_KIND_ATTACH = 3,  /* reserved: attach streams over a pipe, see docs/attach-stream.md */
    PT_KIND_HEAP = 4,    /* LD_PRELOAD heap profiler (proftui_heap) */
};

enum pt_flags {
    PT_FLAG_COUNT_ONLY = 1u << 0, /* hook: no timestamps were taken (times, if any, are
                                     sampled: period_ns > 0) */
    PT_FLAG_WALL_CLOCK = 1u << 1, /* sampler, hook: the clock ticks wall time, not CPU time */
    PT_FLAG_NO_SPACE = 1u << 2,   /* the run directory could not back part of the file:
                                     what did not fit is counted in `dropped` (atomic or) */
};

enum pt_control {
    PT_CONTROL_PAUSED = 1u << 0, /* front end asks the runtime to stop recording */
};

enum pt_state {
    PT_STATE_RUNNING = 0,
    PT_STATE_EXITED = 1, /* set by the runtime's exit path; absent after a crash or SIGKILL */
};

typedef struct pt_file_header {
    char magic[8];
    uint32_t version;
    uint32_t kind;
    uint32_t header_size;
    uint32_t pid;
    uint32_t ppid;
    uint32_t flags;
    uint64_t start_ns;
    uint64_t period_ns;
    uint64_t body_offset;
    uint64_t file_size;
    uint64_t dropped;
    uint32_t control;
    uint32_t state;
    char clock[32];
    uint8_t reserved[16];
} pt_file_header;

_Static_assert(sizeof(pt_file_header) == 128, "pt_file_header is 128 bytes on the wire");

/* Map log entry (384 bytes), shared by the sampler and heap runtimes: one per
 * executable PT_LOAD segment of every object loaded at start or by dlopen,
 * and again with PT_MAP_UNLOAD when dlclose unloads it, so code of unloaded
 * libraries still resolves.  A runtime's header says where its log is, how
 * many entries fit (PT_MAPLOG_ENTRIES) and how many are published (count,
 * release store after the entry is written).
 *   +0  u64 start, +8 u64 end       runtime address range of the segment
 *   +16 u64 offset                  file offset mapped at `start`
 *   +24 u64 base                    the object's load bias (dlpi_addr)
 *   +32 u32 event                   PT_MAP_LOAD | PT_MAP_UNLOAD
 *   +36 u32 build_id_len            bytes used in build_id
 *   +40 u8  build_id[32]
 *   +72 char path[312]              NUL-terminated; "[vdso]" for the vDSO */
#define PT_MAPLOG_ENTRIES 1024

enum pt_map_event {
    PT_MAP_LOAD = 1,
    PT_MAP_UNLOAD = 2,
};

typedef struct pt_map_entry {
    uint64_t start;
    uint64_t end;
    uint64_t offset;
    uint64_t base;
    uint32_t event;
    uint32_t build_id_len;
    uint8_t build_id[32];
    char path[312];
} pt_map_entry;

_Static_assert(sizeof(pt_map_entry) == 384, "pt_map_entry is 384 bytes");

/* Kind-specific layouts follow in their own headers, each documented in
 * docs/wire-format.md: proftui_wire_hook.h, proftui_wire_sampler.h (with the
 * stack table of proftui_wire_stacks.h), proftui_wire_heap.h. */

#endif /* PROFTUI_WIRE_H */
