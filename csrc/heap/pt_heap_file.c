/* The heap runtime's run file (layout in proftui_wire_heap.h) and the
 * loaded objects: a map log entry per executable segment (so the front end
 * resolves addresses after the target ended, dlclose'd code included) and
 * the CFI tables the unwinder searches (the object table itself is
 * csrc/common/pt_maps.c, shared with the sampler).  Nothing here runs in an allocation
 * fast path except pt_heap_maps_try_refresh (after a load, never waiting). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pt_heap.h"
#include "pt_maps.h"
#include "pt_runfile.h"

#define PT_HEAP_INDEX_OFFSET 384 /* 128 + 208, rounded to 64 */

PT_HIDDEN struct pt_heap_file pt_heap_file;

/* The layout of a file for a budget of `budget` bytes: an eighth for
 * buckets, a quarter for frames.  Its size.  Async-signal-safe. */
static uint64_t pt_heap_layout(uint64_t budget, uint64_t *buckets, uint64_t *frames,
                               uint64_t *buckets_off, uint64_t *frames_off, uint64_t *maplog_off) {
    *buckets = pt_pow2_floor(budget / 8 / sizeof(pt_heap_bucket) + 1);
    if (*buckets < 1024) *buckets = 1024;
    if (*buckets > (1u << 24)) *buckets = 1u << 24; /* a pointer entry holds 24 bits */
    *frames = budget / 4 / 8;
    if (*frames < 16 * *buckets) *frames = 16 * *buckets;
    if (*frames > 0xffffffffu) *frames = 0xffffffffu;
    uint64_t index_cap = 2 * *buckets;
    *buckets_off = (PT_HEAP_INDEX_OFFSET + 4 * index_cap + 4095) & ~(uint64_t)4095;
    *frames_off = *buckets_off + *buckets * sizeof(pt_heap_bucket);
    *maplog_off = (*frames_off + 8 * *frames + 63) & ~(uint64_t)63;
    return *maplog_off + PT_MAPLOG_ENTRIES * sizeof(pt_map_entry);
}

/* Create heap.<pid>[.<n>].ptw sized from the buffer budget.  The headers
 * and the bucket index (hashed: any page may be touched) are mapped and
 * backed now; the buckets in windows, each backed whole when mapped (the
 * peak copy reads every claimed bucket, even one whose writer has not got
 * to it yet); each frame run and map log entry is mapped and backed before
 * its first write.  0, or -1 (a note says why).  Not async-signal-safe in
 * name; it calls only what pt_runfile_create does, so a fork child may
 * call it. */
int pt_heap_file_create(void) {
    uint64_t budget = pt_heap_cfg.buffer_bytes, buckets, frames, buckets_off, frames_off,
             maplog_off;
    uint64_t wanted = pt_heap_layout(budget, &buckets, &frames, &buckets_off, &frames_off,
                                     &maplog_off);
    /* RLIMIT_FSIZE: a longer file would kill the target (SIGXFSZ): a smaller
     * budget, said in a note. */
    uint64_t size = wanted, limit = pt_note_fsize_limit();
    while (size > limit && budget > (1u << 20)) {
        budget /= 2;
        size = pt_heap_layout(budget, &buckets, &frames, &buckets_off, &frames_off, &maplog_off);
    }
    struct pt_heap_file *f = &pt_heap_file;
    if (pt_runfile_create(&f->rf, pt_heap_cfg.dir, "heap", (uint32_t)getpid(), size, buckets_off,
                          buckets_off, NULL) != 0)
        return -1;
    if (size < wanted) pt_note_fsize_cap(size);
    pt_file_header *hdr = f->rf.hdr;
    pt_heap_header *heap = (pt_heap_header *)(f->rf.head + sizeof *hdr);
    pt_region_init(&f->buckets, &f->rf, buckets_off, sizeof(pt_heap_bucket), 10, buckets, 0,
                   PT_NOTE_BUCKETS);
    f->buckets.populate = 1;
    pt_region_init(&f->frames, &f->rf, frames_off, 8, 13, frames, PT_HEAP_MAX_FRAMES,
                   PT_NOTE_BUCKETS);
    f->buckets.quiet = 1; /* no overflow bucket: the file goes, one note says why */
    pt_heap_bucket *overflow = pt_region_at(&f->buckets, 0);
    f->buckets.quiet = 0;
    if (overflow == NULL) {
        int err = errno;
        pt_region_unmap(&f->buckets);
        pt_runfile_discard(&f->rf, buckets_off + 1024 * sizeof(pt_heap_bucket), err);
        memset(f, 0, sizeof *f);
        return -1;
    }
    pt_runfile_header_init(hdr, PT_KIND_HEAP, size);
    memcpy(hdr->clock, "CLOCK_REALTIME", 15);
    heap->hflags = (pt_heap_cfg.sample_bytes ? PT_HEAP_SAMPLED : 0) |
                   (pt_heap_cfg.follow_children ? PT_HEAP_FOLLOW : 0);
    heap->max_frames = PT_HEAP_MAX_FRAMES;
    heap->sample_bytes = pt_heap_cfg.sample_bytes;
    heap->count_scale = pt_heap_cfg.sample_bytes ? PT_HEAP_SAMPLED_SCALE : 1;
    heap->index_offset = PT_HEAP_INDEX_OFFSET;
    heap->index_capacity = (uint32_t)(2 * buckets);
    heap->bucket_capacity = (uint32_t)buckets;
    heap->buckets_offset = buckets_off;
    heap->bucket_size = sizeof(pt_heap_bucket);
    heap->frames_offset = frames_off;
    heap->frames_capacity = frames;
    heap->maplog_offset = maplog_off;
    heap->maplog_capacity = PT_MAPLOG_ENTRIES;
    overflow->bflags = PT_HBUCKET_READY | PT_HBUCKET_OVERFLOW;
    heap->bucket_count = 1;
    f->hdr = hdr;
    f->heap = heap;
    f->index = (uint32_t *)(f->rf.head + PT_HEAP_INDEX_OFFSET);
    f->index_mask = (uint32_t)(2 * buckets - 1);
    f->bucket_cap = (uint32_t)buckets;
    f->frames_cap = frames;
    f->bucket_count = 1;
    f->frames_used = 0;
    pt_maplog_init(&f->maplog, &f->rf, maplog_off, &heap->maplog_count);
    pt_runfile_publish(hdr); /* the magic last */
    return 0;
}

/* Fork child: never write into the parent's file.  Not async-signal-safe. */
void pt_heap_file_forget(void) {
    struct pt_heap_file *f = &pt_heap_file;
    pt_region_unmap(&f->buckets);
    pt_region_unmap(&f->frames);
    pt_region_unmap(&f->maplog.entries);
    pt_runfile_unmap(&f->rf);
    memset(f, 0, sizeof *f);
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
