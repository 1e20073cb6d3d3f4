/* The heap runtime's run file (layout in proftui_wire_heap.h) and the
 * loaded objects: a map log entry per executable segment (so the front end
 * resolves addresses after the target ended, dlclose'd code included) and
 * the CFI tables the unwinder searches.  Nothing here runs in an allocation
 * fast path except pt_heap_maps_changed (every few thousand allocations). */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pt_heap.h"
#include "pt_runfile.h"

PT_HIDDEN struct pt_heap_file pt_heap_file;
PT_HIDDEN const struct pt_cfi_set *volatile pt_heap_cfi_current;
PT_HIDDEN uintptr_t pt_heap_self_lo, pt_heap_self_hi;

/* Largest power of two <= n (n >= 1).  Async-signal-safe. */
static uint64_t pt_pow2_floor(uint64_t n) {
    uint64_t p = 1;
    while (p <= n / 2) p *= 2;
    return p;
}

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
    uint64_t size = maplog_off + PT_HEAP_MAPLOG_ENTRIES * sizeof(pt_heap_map_entry);
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
    heap->maplog_capacity = PT_HEAP_MAPLOG_ENTRIES;
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
    pt_runfile_publish(hdr); /* the magic last */
    return 0;
}

/* Fork child: never write into the parent's file.  Not async-signal-safe. */
void pt_heap_file_forget(void) {
    if (pt_heap_file.base != NULL) munmap(pt_heap_file.base, pt_heap_file.size);
    memset(&pt_heap_file, 0, sizeof pt_heap_file);
}

/* ---- loaded objects ------------------------------------------------------------ */

#define PT_MAX_OBJECTS 4096
#define PT_MAX_SEGS 4

/* One object seen by dl_iterate_phdr (identified by load bias and name). */
struct pt_object {
    uint64_t base;
    char name[312];
    int alive;
    int nsegs;
    uint64_t seg_start[PT_MAX_SEGS], seg_end[PT_MAX_SEGS], seg_off[PT_MAX_SEGS];
    uint8_t build_id[32];
    uint32_t build_id_len;
    struct pt_cfi_table *cfi;
};

/* Objects ever seen (pt_alloc'd once, never freed), the lock serializing
 * refreshes, the executable's path, and dl_iterate_phdr's load/unload
 * counters at the last refresh (pt_heap_maps_changed compares them). */
static struct pt_object *pt_objects;
static int pt_nobjects;
static pthread_mutex_t pt_maps_lock = PTHREAD_MUTEX_INITIALIZER;
static char pt_exe_path[312];
static unsigned long long pt_seen_adds, pt_seen_subs;

/* Append one map log entry (under pt_maps_lock). */
static void pt_maplog_append(const struct pt_object *o, int seg, uint32_t event) {
    pt_heap_header *heap = pt_heap_file.heap;
    if (heap == NULL) return;
    uint32_t n = heap->maplog_count;
    uint64_t off = heap->maplog_offset + (uint64_t)n * sizeof(pt_heap_map_entry);
    if (n >= heap->maplog_capacity ||
        pt_runfile_reserve(pt_heap_file.base, off, sizeof(pt_heap_map_entry)) != 0) {
        if (n < heap->maplog_capacity) pt_runfile_no_space(pt_heap_file.hdr);
        __atomic_add_fetch(&pt_heap_file.hdr->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    pt_heap_map_entry *e = (pt_heap_map_entry *)(pt_heap_file.base + off);
    e->start = o->seg_start[seg];
    e->end = o->seg_end[seg];
    e->offset = o->seg_off[seg];
    e->base = o->base;
    e->event = event;
    e->build_id_len = o->build_id_len;
    memcpy(e->build_id, o->build_id, sizeof e->build_id);
    memcpy(e->path, o->name, sizeof e->path);
    __atomic_store_n(&heap->maplog_count, n + 1, __ATOMIC_RELEASE);
}

static void pt_log_object(const struct pt_object *o, uint32_t event) {
    if (o->name[0] != '/') return; /* the vDSO: no file the front end can open */
    for (int i = 0; i < o->nsegs; i++) pt_maplog_append(o, i, event);
}

/* The GNU build-id note of an object, from its PT_NOTE segments. */
static void pt_read_build_id(struct dl_phdr_info *info, struct pt_object *o) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_filesz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *nh;
            const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                o->build_id_len = nh->n_descsz < 32 ? nh->n_descsz : 32;
                memcpy(o->build_id, desc, o->build_id_len);
                return;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

static int pt_on_object(struct dl_phdr_info *info, size_t size, void *data) {
    int *changed = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        pt_seen_adds = info->dlpi_adds;
        pt_seen_subs = info->dlpi_subs;
    }
    const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : pt_exe_path;
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].base == info->dlpi_addr && strcmp(pt_objects[i].name, name) == 0) {
            pt_objects[i].alive = 1;
            return 0;
        }
    if (pt_nobjects >= PT_MAX_OBJECTS) return 0;
    struct pt_object *o = &pt_objects[pt_nobjects++];
    memset(o, 0, sizeof *o);
    o->base = info->dlpi_addr;
    size_t len = strlen(name);
    if (len >= sizeof o->name) len = sizeof o->name - 1;
    memcpy(o->name, name, len);
    o->alive = 1;
    const void *eh_hdr = NULL;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_EH_FRAME) eh_hdr = (const void *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uint64_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (start < lo) lo = start;
        if (end > hi) hi = end;
        if (o->nsegs < PT_MAX_SEGS) {
            o->seg_start[o->nsegs] = start;
            o->seg_end[o->nsegs] = end;
            o->seg_off[o->nsegs] = ph->p_offset;
            o->nsegs++;
        }
    }
    uintptr_t self = (uintptr_t)&pt_heap_maps_refresh;
    if (self >= lo && self < hi) {
        pt_heap_self_lo = lo;
        pt_heap_self_hi = hi;
    }
    pt_read_build_id(info, o);
    pt_log_object(o, PT_HMAP_LOAD);
    if (eh_hdr != NULL && lo < hi && !pt_heap_cfg.fp_only) {
        struct pt_cfi_source src = {eh_hdr, (uint64_t)(uintptr_t)eh_hdr, (const unsigned char *)0,
                                    (const unsigned char *)UINTPTR_MAX};
        o->cfi = pt_cfi_build(&src, lo, hi);
    }
    *changed = 1;
    return 0;
}

static int pt_by_lo(const void *a, const void *b) {
    const struct pt_cfi_table *x = *(const struct pt_cfi_table *const *)a;
    const struct pt_cfi_table *y = *(const struct pt_cfi_table *const *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Swap in a table set of the live objects; the old one is leaked on purpose
 * (another thread's walk may still read it). */
static void pt_publish(void) {
    size_t n = 0;
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].alive && pt_objects[i].cfi != NULL) n++;
    struct pt_cfi_set *set = pt_alloc(sizeof *set + n * sizeof set->tables[0]);
    if (set == NULL) return;
    set->n = 0;
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].alive && pt_objects[i].cfi != NULL)
            set->tables[set->n++] = pt_objects[i].cfi;
    qsort(set->tables, set->n, sizeof set->tables[0], pt_by_lo);
    __atomic_store_n(&pt_heap_cfi_current, set, __ATOMIC_RELEASE);
    if (set->n > 0 && pt_heap_file.heap != NULL)
        __atomic_fetch_or(&pt_heap_file.heap->hflags, (uint32_t)PT_HEAP_CFI, __ATOMIC_RELAXED);
}

/* Log objects that came or went since the last call and publish their unwind
 * tables; log_all: a new file (fork child) logs every live object again.
 * Called with the caller's busy flag set (dl_iterate_phdr and qsort may
 * allocate).  Not async-signal-safe. */
void pt_heap_maps_refresh(int log_all) {
    pthread_mutex_lock(&pt_maps_lock);
    if (pt_objects == NULL) {
        pt_objects = pt_alloc(PT_MAX_OBJECTS * sizeof *pt_objects);
        ssize_t len = readlink("/proc/self/exe", pt_exe_path, sizeof pt_exe_path - 1);
        pt_exe_path[len > 0 ? len : 0] = '\0';
    }
    if (pt_objects == NULL) {
        pthread_mutex_unlock(&pt_maps_lock);
        return;
    }
    int known = pt_nobjects, changed = log_all;
    static unsigned char was_alive[PT_MAX_OBJECTS]; /* under pt_maps_lock */
    for (int i = 0; i < known; i++) {
        was_alive[i] = (unsigned char)pt_objects[i].alive;
        pt_objects[i].alive = 0;
        if (log_all && was_alive[i]) pt_log_object(&pt_objects[i], PT_HMAP_LOAD);
    }
    dl_iterate_phdr(pt_on_object, &changed);
    for (int i = 0; i < known; i++)
        if (was_alive[i] && !pt_objects[i].alive) {
            pt_log_object(&pt_objects[i], PT_HMAP_UNLOAD);
            changed = 1;
        }
    if (changed) pt_publish();
    pthread_mutex_unlock(&pt_maps_lock);
}

static int pt_counts_cb(struct dl_phdr_info *info, size_t size, void *data) {
    int *changed = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *changed = info->dlpi_adds != pt_seen_adds || info->dlpi_subs != pt_seen_subs;
    return 1; /* the counters are the same in every entry: one is enough */
}

/* 1 if objects were loaded or unloaded since the last refresh (glibc's
 * dl_iterate_phdr counters; no dlopen interposer, so a library's own
 * RUNPATH/$ORIGIN lookups stay untouched).  Not async-signal-safe. */
int pt_heap_maps_changed(void) {
    int changed = 0;
    dl_iterate_phdr(pt_counts_cb, &changed);
    return changed;
}

/* Fork child: the lock may have been held by a thread that does not exist here. */
void pt_heap_maps_fork_child(void) { pthread_mutex_init(&pt_maps_lock, NULL); }
