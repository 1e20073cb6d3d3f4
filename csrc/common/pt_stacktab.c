/* The stack table (see pt_stacktab.h and proftui_wire_stacks.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "pt_stacktab.h"

#define PT_ENTRIES_SHIFT 10 /* the first window: 1024 entries (48 KiB), then doubling */
#define PT_FRAMES_SHIFT 13  /* 8192 words (64 KiB) */
#define PT_ENTRIES_CHUNK (PT_STACKTAB_CHUNK / sizeof(pt_stack_entry))
#define PT_FRAMES_CHUNK (PT_STACKTAB_CHUNK / 8)
#define PT_MAX_CHAIN 256 /* links followed in one bucket (the target may have made a loop) */

/* Async-signal-safe. */
uint32_t pt_stacktab_index(uint32_t entries) {
    uint64_t heads = pt_pow2_floor(entries > 4 ? entries / 4 : 1);
    if (heads < 1024) heads = 1024;
    return heads > PT_STACKTAB_INDEX ? PT_STACKTAB_INDEX : (uint32_t)heads;
}

/* Async-signal-safe. */
uint64_t pt_stacktab_size(uint32_t entries, uint64_t frames) {
    return sizeof(pt_stacktab_header) + 4ull * pt_stacktab_index(entries) +
           (uint64_t)entries * sizeof(pt_stack_entry) + 8 * frames;
}

/* Async-signal-safe (mmap, madvise). */
int pt_stacktab_init(struct pt_stacktab *t, const struct pt_runfile *rf, uint64_t offset,
                     uint32_t entries, uint64_t frames) {
    memset(t, 0, sizeof *t);
    t->hdr = rf->hdr;
    uint32_t index = pt_stacktab_index(entries);
    uint64_t heads = offset + sizeof(pt_stacktab_header);
    uint64_t head_bytes = sizeof(pt_stacktab_header) + 4ull * index;
    void *map = NULL;
    size_t map_len = 0;
    unsigned char *p = pt_runfile_map(rf, offset, head_bytes, &map, &map_len);
    if (p == NULL) return -2;
    if (pt_runfile_reserve(p, head_bytes) != 0) {
        munmap(map, map_len);
        pt_runfile_no_space(rf->hdr);
        return -1;
    }
    pt_stacktab_header *tab = (pt_stacktab_header *)p;
    tab->index_offset = heads;
    tab->index_capacity = index;
    tab->entry_size = sizeof(pt_stack_entry);
    tab->entries_offset = heads + 4ull * index;
    tab->entries_capacity = entries;
    tab->frames_offset = tab->entries_offset + (uint64_t)entries * sizeof(pt_stack_entry);
    tab->frames_capacity = frames;
    pt_region_init(&t->entries, rf, tab->entries_offset, sizeof(pt_stack_entry),
                   PT_ENTRIES_SHIFT, entries, 0, PT_NOTE_STACKS);
    pt_region_init(&t->frames, rf, tab->frames_offset, 8, PT_FRAMES_SHIFT, frames,
                   PT_STACKTAB_MAX_FRAMES, PT_NOTE_STACKS);
    t->head_map = map;
    t->head_map_len = map_len;
    t->index_mask = index - 1;
    t->entries_cap = entries;
    t->frames_cap = frames;
    t->heads = (uint32_t *)(p + sizeof(pt_stacktab_header));
    __atomic_store_n(&t->tab, tab, __ATOMIC_RELEASE);
    return 0;
}

/* Async-signal-safe. */
uint64_t pt_stacktab_mapped(const struct pt_stacktab *t) {
    return t->head_map_len + pt_region_mapped(&t->entries) + pt_region_mapped(&t->frames);
}

/* Not in a handler. */
void pt_stacktab_unmap(struct pt_stacktab *t) {
    pt_region_unmap(&t->entries);
    pt_region_unmap(&t->frames);
    if (t->head_map != NULL) munmap(t->head_map, t->head_map_len);
    memset(t, 0, sizeof *t);
}

/* Make sure elements [0, end) of region `r` are backed, growing *backed a
 * chunk of `chunk` elements at a time; 0, or -1 (file system full, no
 * window).  Two handlers may back the same chunk: harmless (populating twice).
 * Async-signal-safe. */
static int pt_back(struct pt_region *r, uint64_t *backed, uint64_t end, uint64_t chunk) {
    uint64_t have = __atomic_load_n(backed, __ATOMIC_ACQUIRE);
    while (have < end) {
        uint64_t want = (end + chunk - 1) / chunk * chunk;
        if (want > r->capacity) want = r->capacity;
        if (pt_region_back(r, have, want) != 0) return -1;
        /* Lost the race to a bigger grower: its value stands. */
        if (__atomic_compare_exchange_n(backed, &have, want, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_ACQUIRE))
            have = want;
    }
    return 0;
}

/* Hash of the key: products of independent terms xor'ed (no multiply chain
 * through deep stacks), position-dependent through `+ i`, one mix at the
 * end.  Collisions cost a compare only.  Async-signal-safe. */
static inline uint64_t pt_key_hash(uint32_t tid, uint32_t flags, const uint64_t *frames,
                                   unsigned n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n ^ ((uint64_t)tid << 32) ^ ((uint64_t)flags << 16);
    for (unsigned i = 0; i < n; i++) h ^= (frames[i] + i) * 0xc2b2ae3d27d4eb4full;
    return pt_mix(h);
}

/* Count a drop (no entry for this sample).  Async-signal-safe. */
static uint32_t pt_drop(struct pt_stacktab *t) {
    pt_stacktab_header *tab = __atomic_load_n(&t->tab, __ATOMIC_ACQUIRE);
    if (tab != NULL) __atomic_add_fetch(&tab->dropped, 1, __ATOMIC_RELAXED);
    if (t->hdr != NULL) __atomic_add_fetch(&t->hdr->dropped, 1, __ATOMIC_RELAXED);
    return PT_STACK_NONE;
}

/* Entry `id` if it is backed (so mapped and written, or zero), else NULL: a
 * link read from the file is followed only this far.  Async-signal-safe. */
static inline pt_stack_entry *pt_entry_at(const struct pt_stacktab *t, uint32_t id) {
    if ((uint64_t)id >= __atomic_load_n(&t->entries_backed, __ATOMIC_ACQUIRE)) return NULL;
    return pt_region_peek(&t->entries, id);
}

/* Frames [at, at + n) if they are backed, else NULL (a position read from
 * the file).  Async-signal-safe. */
static inline const uint64_t *pt_frames_at(const struct pt_stacktab *t, uint64_t at,
                                           unsigned n) {
    uint64_t backed = __atomic_load_n(&t->frames_backed, __ATOMIC_ACQUIRE);
    if (at > backed || n > backed - at) return NULL;
    return pt_region_peek(&t->frames, at);
}

/* A new entry for the key, linked into bucket `b`; its id or PT_STACK_NONE.
 * Async-signal-safe. */
static uint32_t pt_insert(struct pt_stacktab *t, uint32_t b, uint64_t h, uint32_t tid,
                          uint32_t flags, const uint64_t *frames, unsigned n) {
    pt_stacktab_header *tab = t->tab;
    uint64_t at = __atomic_fetch_add(&t->frames_used, n, __ATOMIC_RELAXED);
    if (at + n > t->frames_cap || pt_back(&t->frames, &t->frames_backed, at + n,
                                          PT_FRAMES_CHUNK) != 0)
        return pt_drop(t);
    uint32_t id = __atomic_fetch_add(&t->entry_count, 1, __ATOMIC_RELAXED);
    if (id >= t->entries_cap ||
        pt_back(&t->entries, &t->entries_backed, (uint64_t)id + 1, PT_ENTRIES_CHUNK) != 0)
        return pt_drop(t); /* an id claimed but never READY: readers skip it */
    uint64_t *dst = pt_region_peek(&t->frames, at);
    pt_stack_entry *e = pt_region_peek(&t->entries, id);
    memcpy(dst, frames, n * sizeof *frames);
    e->hash = h;
    e->frames_at = at;
    e->tid = tid;
    e->nframes = (uint16_t)n;
    e->samples = 0;
    e->periods = 0;
    uint32_t head = __atomic_load_n(&t->heads[b], __ATOMIC_ACQUIRE);
    e->next = head;
    __atomic_store_n(&e->flags, (uint16_t)(flags | PT_STACK_READY), __ATOMIC_RELEASE);
    /* Published for the reader only: the runtime's own counts are above. */
    pt_publish_max64(&tab->frames_used, at + n);
    pt_publish_max32(&tab->entry_count, id + 1);
    /* Another thread linked its own entry first: chain behind it.  Our entry is
     * reachable only through this CAS, so `next` may still change. */
    while (!__atomic_compare_exchange_n(&t->heads[b], &head, id + 1, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_ACQUIRE))
        e->next = head;
    return id;
}

/* Async-signal-safe. */
uint32_t pt_stacktab_count(struct pt_stacktab *t, uint32_t tid, uint32_t flags,
                           const uint64_t *frames, unsigned n, uint64_t weight) {
    if (__atomic_load_n(&t->tab, __ATOMIC_ACQUIRE) == NULL || n == 0 ||
        n > PT_STACKTAB_MAX_FRAMES)
        return pt_drop(t);
    uint64_t h = pt_key_hash(tid, flags, frames, n);
    uint32_t b = (uint32_t)h & t->index_mask;
    pt_stack_entry *e = NULL;
    uint32_t id = PT_STACK_NONE;
    uint32_t link = __atomic_load_n(&t->heads[b], __ATOMIC_ACQUIRE);
    for (unsigned steps = 0; link != 0 && steps < PT_MAX_CHAIN; steps++) {
        pt_stack_entry *x = pt_entry_at(t, link - 1);
        if (x == NULL) break; /* not an entry we made: the target wrote it */
        if (x->hash == h && x->tid == tid && x->nframes == n &&
            (x->flags & ~PT_STACK_READY) == flags) {
            const uint64_t *f = pt_frames_at(t, x->frames_at, n);
            if (f != NULL && memcmp(f, frames, n * sizeof *frames) == 0) {
                id = link - 1;
                e = x;
                break;
            }
        }
        link = __atomic_load_n(&x->next, __ATOMIC_RELAXED);
    }
    if (e == NULL) {
        id = pt_insert(t, b, h, tid, flags, frames, n);
        if (id == PT_STACK_NONE) return id;
        e = pt_region_peek(&t->entries, id);
    }
    /* One writer per entry (its thread): plain increments, published relaxed. */
    __atomic_store_n(&e->samples, e->samples + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&e->periods, e->periods + weight, __ATOMIC_RELAXED);
    return id;
}
