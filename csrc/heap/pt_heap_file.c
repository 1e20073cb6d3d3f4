/* The heap runtime's run file (layout in proftui_wire_heap.h) and the
 * loaded objects: a map log entry per executable segment (so the front end
 * resolves addresses after the target ended, dlclose'd code included) and
 * the CFI tables the unwinder searches (the object table itself is
 * csrc/common/pt_maps.c, shared with the sampler).  Nothing here runs in an allocation
 * fast path except pt_heap_maps_try_refresh (after a load, never waiting). */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pt_heap.h"
#include "pt_maps.h"
#include "pt_runfile.h"

PT_HIDDEN struct pt_heap_file pt_heap_file;

/* Create heap.<pid>[.<n>].ptw sized from the buffer budget: an eighth for
 * buckets, a quarter for frames.  The headers, the bucket index (hashed: any
 * page may be touched) and the buckets (the peak copy reads every claimed
 * bucket, even one whose writer has not got to it yet) are backed now; each
 * frame run and map log entry is backed before its first write.  Not
 * async-signal-safe in name; it calls only what pt_runfile_create does, so a
 * fork child may call it. */
int pt_heap_file_create(void) {
    uint64_t budget = pt_heap_cfg.buffer_bytes;
    uint64_t buckets = pt_pow2_floor(budget / 8 / sizeof(pt_heap_bucket) + 1);
    if (buckets < 1024) buckets = 1024;
    if (buckets > (1u << 24)) buckets = 1u << 24; /* a pointer entry holds 24 bits */
    uint64_t index_cap = 2 * buckets;
    uint64_t frames = budget / 4 / 8;
    if (frames < 16 * buckets) frames = 16 * buckets;
    if (frames > 0xffffffffu) frames = 0xffffffffu;
    uint64_t index_off = 384; /* 128 + 208, rounded to 64 */
    uint64_t buckets_off = (index_off + 4 * index_cap + 4095) & ~(uint64_t)4095;
    uint64_t frames_off = buckets_off + buckets * sizeof(pt_heap_bucket);
    uint64_t maplog_off = (frames_off + 8 * frames + 63) & ~(uint64_t)63;
    uint64_t size = maplog_off + PT_MAPLOG_ENTRIES * sizeof(pt_map_entry);
    void *map = pt_runfile_create(pt_heap_cfg.dir, "heap", (uint32_t)getpid(), size, frames_off,
                                  NULL);
    if (map == NULL) return -1;
    madvise(map, size, MADV_RANDOM); /* no read-ahead zero-filling of the sparse file */
    pt_file_header *hdr = map;
    pt_heap_header *heap = (pt_heap_header *)((unsigned char *)map + sizeof *hdr);
    pt_runfile_header_init(hdr, PT_KIND_HEAP, size);
    memcpy(hdr->clock, "CLOCK_REALTIME", 15);
    heap->hflags = (pt_heap_cfg.sample_bytes ? PT_HEAP_SAMPLED : 0) |
                   (pt_heap_cfg.follow_children ? PT_HEAP_FOLLOW : 0);
    heap->max_frames = PT_HEAP_MAX_FRAMES;
    heap->sample_bytes = pt_heap_cfg.sample_bytes;
    heap->count_scale = pt_heap_cfg.sample_bytes ? PT_HEAP_SAMPLED_SCALE : 1;
    heap->index_offset = index_off;
    heap->index_capacity = (uint32_t)index_cap;
    heap->bucket_capacity = (uint32_t)buckets;
    heap->buckets_offset = buckets_off;
    heap->bucket_size = sizeof(pt_heap_bucket);
    heap->frames_offset = frames_off;
    heap->frames_capacity = frames;
    heap->maplog_offset = maplog_off;
    heap->maplog_capacity = PT_MAPLOG_ENTRIES;
    pt_heap_bucket *overflow = (pt_heap_bucket *)((unsigned char *)map + buckets_off);
    overflow->bflags = PT_HBUCKET_READY | PT_HBUCKET_OVERFLOW;
    heap->bucket_count = 1;
    pt_heap_file.hdr = hdr;
    pt_heap_file.heap = heap;
    pt_heap_file.base = map;
    pt_heap_file.size = size;
    pt_heap_file.index = (uint32_t *)((unsigned char *)map + index_off);
    pt_heap_file.buckets = overflow;
    pt_heap_file.frames = (uint64_t *)((unsigned char *)map + frames_off);
    pt_heap_file.maplog = (struct pt_maplog){map, hdr, maplog_off, PT_MAPLOG_ENTRIES,
                                             &heap->maplog_count};
    pt_runfile_publish(hdr); /* the magic last */
    return 0;
}

/* Fork child: never write into the parent's file.  Not async-signal-safe. */
void pt_heap_file_forget(void) {
    if (pt_heap_file.base != NULL) munmap(pt_heap_file.base, pt_heap_file.size);
    memset(&pt_heap_file, 0, sizeof pt_heap_file);
}

/* ---- loaded objects ------------------------------------------------------------ */

/* Refresh the "CFI in use" header flag after a refresh.  Async-signal-safe. */
static void pt_heap_note_cfi(void) {
    const struct pt_cfi_set *set = __atomic_load_n(&pt_maps_cfi, __ATOMIC_ACQUIRE);
    if (set != NULL && set->n > 0 && pt_heap_file.heap != NULL)
        __atomic_fetch_or(&pt_heap_file.heap->hflags, (uint32_t)PT_HEAP_CFI, __ATOMIC_RELAXED);
}

/* Log objects that came or went since the last call and publish their unwind
 * tables (csrc/common/pt_maps.c); log_all: a new file (fork child) logs every
 * live object again.  Called with the caller's busy flag set.  Not
 * async-signal-safe (it waits for a refresh under way). */
void pt_heap_maps_refresh(int log_all) {
    pt_maps_refresh(&pt_heap_file.maplog, pt_heap_cfg.fp_only, log_all);
    pt_heap_note_cfi();
}

/* The same from a tracked allocation, which may be in a signal handler:
 * -1 without waiting when another refresh holds the lock.  Busy flag set.
 * Async-signal-safe but for glibc's loader lock (pt_maps.h). */
int pt_heap_maps_try_refresh(void) {
    if (pt_maps_try_refresh(&pt_heap_file.maplog, pt_heap_cfg.fp_only) != 0) return -1;
    pt_heap_note_cfi();
    return 0;
}
