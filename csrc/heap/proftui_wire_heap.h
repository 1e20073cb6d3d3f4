/*
 * proftui_wire_heap.h - the heap runtime's area of a runtime file (kind 4,
 * PT_KIND_HEAP), after the common 128-byte header of proftui_wire.h.
 * Documented in docs/wire-format.md ("Heap body"); decoded by
 * collectors/runtime/wire_heap.py.  Change the three together.
 *
 *   0        128              336  index_offset   buckets_offset   frames_offset   maplog_offset
 *   +--------+----------------+---------------+----------------+---------------+-------------
 *   | common | pt_heap_header | bucket index  | buckets ...    | frame pool    | map log
 *   +--------+----------------+---------------+----------------+---------------+-------------
 *
 * A bucket is one allocating call stack with its counters.  Buckets are
 * appended (bucket_count, release store after the bucket is filled) and
 * never move; the index (u32 per slot, bucket number + 1, 0 = empty) is the
 * runtime's hash table over them and of no use to a reader.  Bucket 0 is the
 * overflow bucket: allocations whose stack found no room (table or frame
 * pool full) are counted there, so totals stay right.  A bucket's frames are
 * `nframes` words at frame pool word `frames_index`, innermost first: the
 * return address into the allocating function, then its callers.
 *
 * Counters are updated with relaxed atomics while the target runs.  Byte
 * counters are bytes (in sampled mode: unbiased estimates); count counters
 * are counts times `count_scale` (1 in exact mode, 65536 in sampled mode,
 * where a sampled allocation stands for a fraction of blocks too).
 *
 * Map log entries are pt_map_entry (384 bytes, proftui_wire.h): executable
 * segments seen at start, dlopen and dlclose.
 */
#ifndef PROFTUI_WIRE_HEAP_H
#define PROFTUI_WIRE_HEAP_H

#include <stdint.h>

#define PT_HEAP_MAX_FRAMES 64
#define PT_HEAP_SAMPLED_SCALE 65536u

enum pt_heap_flags {
    PT_HEAP_SAMPLED = 1u << 0, /* Poisson sampling on bytes (sample_bytes mean) */
    PT_HEAP_CFI = 1u << 1,     /* DWARF CFI unwind tables were built */
    PT_HEAP_FOLLOW = 1u << 2,  /* forked children write their own files */
};

enum pt_heap_bucket_flags {
    PT_HBUCKET_READY = 1u << 0,     /* frames written: the reader may use it */
    PT_HBUCKET_TRUNCATED = 1u << 1, /* unwinding stopped early */
    PT_HBUCKET_DEPTH = 1u << 2,     /* deeper than PT_HEAP_MAX_FRAMES: outermost cut */
    PT_HBUCKET_OVERFLOW = 1u << 3,  /* bucket 0: stacks that found no room */
};

typedef struct pt_heap_header {
    uint32_t hflags;          /* PT_HEAP_* */
    uint32_t max_frames;      /* PT_HEAP_MAX_FRAMES */
    uint64_t sample_bytes;    /* mean bytes between samples; 0: exact (every allocation) */
    uint64_t count_scale;     /* count counters are counts * count_scale */
    uint64_t index_offset;    /* file offset of the bucket index (u32 slots) */
    uint32_t index_capacity;  /* slots (power of 2) */
    uint32_t bucket_capacity; /* buckets that fit */
    uint64_t buckets_offset;  /* file offset of bucket 0 */
    uint32_t bucket_size;     /* sizeof(pt_heap_bucket) = 80 */
    uint32_t bucket_count;    /* buckets published (release) */
    uint64_t frames_offset;   /* file offset of the frame pool (u64 words) */
    uint64_t frames_capacity; /* words */
    uint64_t frames_used;     /* words claimed */
    uint64_t maplog_offset;   /* file offset of map log entry 0 */
    uint32_t maplog_capacity;
    uint32_t maplog_count;    /* entries published (release) */
    uint64_t live_bytes;      /* whole process, now (weighted in sampled mode) */
    uint64_t peak_bytes;      /* highest live_bytes seen */
    uint64_t peak_snapshot;   /* live_bytes when the buckets' peak column was last copied */
    uint64_t peak_time_ns;    /* CLOCK_REALTIME of that copy */
    uint64_t live_blocks;     /* scaled by count_scale */
    uint64_t allocs;          /* allocations tracked (sampled mode: the sampled ones) */
    uint64_t frees;           /* frees of tracked blocks (exact mode; 0 when sampled) */
    uint64_t untracked_frees; /* frees of blocks never tracked (exact mode): made before
                                 start, by the bootstrap arena, a parent's in a fork child */
    uint64_t ptr_dropped;     /* allocations not tracked: pointer table full */
    uint64_t stack_dropped;   /* allocations counted in the overflow bucket */
    uint64_t boot_bytes;      /* bytes served by the bootstrap arena (dlsym) */
    uint64_t ptr_capacity;    /* pointer table entries (process memory) */
    uint64_t reserved[2];
} pt_heap_header;

_Static_assert(sizeof(pt_heap_header) == 208, "pt_heap_header is 208 bytes");

typedef struct pt_heap_bucket {
    uint64_t hash;          /* of the frames (runtime's lookup) */
    uint32_t frames_index;  /* first word in the frame pool */
    uint16_t nframes;       /* 0..PT_HEAP_MAX_FRAMES */
    uint16_t bflags;        /* PT_HBUCKET_* (READY written last, release) */
    uint64_t alloc_bytes;   /* bytes allocated here */
    uint64_t allocs;        /* allocations (scaled) */
    uint64_t live_bytes;    /* bytes allocated here and not freed yet */
    uint64_t live_blocks;   /* blocks (scaled) */
    uint64_t frees;         /* blocks freed (scaled) */
    uint64_t temporary;     /* freed right after their allocation, heaptrack's count (scaled) */
    uint64_t peak_bytes;    /* live_bytes when the whole heap last peaked */
    uint64_t peak_blocks;   /* live_blocks then (scaled) */
} pt_heap_bucket;

_Static_assert(sizeof(pt_heap_bucket) == 80, "pt_heap_bucket is 80 bytes");

#endif /* PROFTUI_WIRE_HEAP_H */
