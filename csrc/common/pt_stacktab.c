/* The stack table (see pt_stacktab.h and proftui_wire_stacks.h). */
#define _GNU_SOURCE
#include <string.h>

#include "pt_runfile.h"
#include "pt_stacktab.h"

#define PT_HEADS_BYTES ((uint64_t)PT_STACKTAB_INDEX * 4)
#define PT_ENTRIES_BYTES ((uint64_t)PT_STACKTAB_ENTRIES * sizeof(pt_stack_entry))

/* Async-signal-safe. */
uint64_t pt_stacktab_size(void) {
    return sizeof(pt_stacktab_header) + PT_HEADS_BYTES + PT_ENTRIES_BYTES +
           8 * PT_STACKTAB_FRAMES;
}

/* Async-signal-safe (one madvise). */
int pt_stacktab_init(struct pt_stacktab *t, void *base, pt_file_header *hdr, uint64_t offset) {
    memset(t, 0, sizeof *t);
    uint64_t heads = offset + sizeof(pt_stacktab_header);
    if (pt_runfile_reserve(base, offset, sizeof(pt_stacktab_header) + PT_HEADS_BYTES) != 0) {
        pt_runfile_no_space(hdr);
        return -1;
    }
    unsigned char *b = base;
    pt_stacktab_header *tab = (pt_stacktab_header *)(b + offset);
    tab->index_offset = heads;
    tab->index_capacity = PT_STACKTAB_INDEX;
    tab->entry_size = sizeof(pt_stack_entry);
    tab->entries_offset = heads + PT_HEADS_BYTES;
    tab->entries_capacity = PT_STACKTAB_ENTRIES;
    tab->frames_offset = tab->entries_offset + PT_ENTRIES_BYTES;
    tab->frames_capacity = PT_STACKTAB_FRAMES;
    t->base = b;
    t->hdr = hdr;
    t->tab = tab;
    t->heads = (uint32_t *)(b + heads);
    t->entries = (pt_stack_entry *)(b + tab->entries_offset);
    t->frames = (uint64_t *)(b + tab->frames_offset);
    return 0;
}

/* Make sure [0, end) bytes of the region at file offset `offset` are backed,
 * growing *backed a chunk at a time; 0, or -1 when the file system is full.
 * Two handlers may back the same chunk: harmless (populating twice).
 * Async-signal-safe. */
static int pt_back(struct pt_stacktab *t, uint64_t *backed, uint64_t offset, uint64_t end) {
    uint64_t have = __atomic_load_n(backed, __ATOMIC_ACQUIRE);
    while (have < end) {
        uint64_t want = (end + PT_STACKTAB_CHUNK - 1) / PT_STACKTAB_CHUNK * PT_STACKTAB_CHUNK;
        if (pt_runfile_reserve(t->base, offset + have, want - have) != 0) {
            pt_runfile_no_space(t->hdr);
            return -1;
        }
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
    if (t->tab != NULL) __atomic_add_fetch(&t->tab->dropped, 1, __ATOMIC_RELAXED);
    if (t->hdr != NULL) __atomic_add_fetch(&t->hdr->dropped, 1, __ATOMIC_RELAXED);
    return PT_STACK_NONE;
}

/* A new entry for the key, linked into bucket `b`; its id or PT_STACK_NONE.
 * Async-signal-safe. */
static uint32_t pt_insert(struct pt_stacktab *t, uint32_t b, uint64_t h, uint32_t tid,
                          uint32_t flags, const uint64_t *frames, unsigned n) {
    pt_stacktab_header *tab = t->tab;
    uint64_t at = __atomic_fetch_add(&tab->frames_used, n, __ATOMIC_RELAXED);
    if (at + n > tab->frames_capacity ||
        pt_back(t, &t->frames_backed, tab->frames_offset, 8 * (at + n)) != 0)
        return pt_drop(t);
    uint32_t id = __atomic_fetch_add(&tab->entry_count, 1, __ATOMIC_RELAXED);
    if (id >= tab->entries_capacity ||
        pt_back(t, &t->entries_backed, tab->entries_offset,
                (uint64_t)(id + 1) * sizeof(pt_stack_entry)) != 0)
        return pt_drop(t); /* an id claimed but never READY: readers skip it */
    memcpy(&t->frames[at], frames, n * sizeof *frames);
    pt_stack_entry *e = &t->entries[id];
    e->hash = h;
    e->frames_at = at;
    e->tid = tid;
    e->nframes = (uint16_t)n;
    uint32_t head = __atomic_load_n(&t->heads[b], __ATOMIC_ACQUIRE);
    e->next = head;
    __atomic_store_n(&e->flags, (uint16_t)(flags | PT_STACK_READY), __ATOMIC_RELEASE);
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
    if (t->tab == NULL) return pt_drop(t);
    uint64_t h = pt_key_hash(tid, flags, frames, n);
    uint32_t b = (uint32_t)h & (t->tab->index_capacity - 1);
    uint32_t id = PT_STACK_NONE;
    for (uint32_t link = __atomic_load_n(&t->heads[b], __ATOMIC_ACQUIRE); link != 0;) {
        const pt_stack_entry *e = &t->entries[link - 1];
        if (e->hash == h && e->tid == tid && e->nframes == n &&
            (e->flags & ~PT_STACK_READY) == flags &&
            memcmp(&t->frames[e->frames_at], frames, n * sizeof *frames) == 0) {
            id = link - 1;
            break;
        }
        link = e->next;
    }
    if (id == PT_STACK_NONE) id = pt_insert(t, b, h, tid, flags, frames, n);
    if (id == PT_STACK_NONE) return id;
    /* One writer per entry (its thread): plain increments, published relaxed. */
    pt_stack_entry *e = &t->entries[id];
    __atomic_store_n(&e->samples, e->samples + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&e->periods, e->periods + weight, __ATOMIC_RELAXED);
    return id;
}
