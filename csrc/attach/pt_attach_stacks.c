/* proftui-attach: the helper's stack table (issue 23).
 *
 * One job: aggregate samples where they are made.  Each distinct (thread,
 * unwind flags, address chain) gets an id the first time it is seen; a sample
 * only adds to its stack's pending counts.  The writer (pt_attach_out.c)
 * announces each stack once (STACK record) and sends the pending counts of
 * the stacks that moved every PT_ATTACH_COUNTS_NS (COUNTS record), so the
 * stream and proftui's work follow the distinct stacks, not the samples.
 * The helper is one thread with no signal handlers: plain malloc is fine.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "pt_attach.h"

/* Beyond these the table stops growing and new stacks are dropped (counted):
 * 4M stacks or 64M frame words (512 MiB) is far past any real profile. */
#define PT_STACKS_MAX (1u << 22)
#define PT_STACKS_MAX_WORDS (1ull << 26)

/* The table: entries by id, their frames in one arena, an open-addressing
 * hash of ids (0 = empty slot, else id + 1) and the ids whose counts moved
 * since they were last taken, in first-moved order.  The helper's one
 * stack table, so file-level state (single-threaded). */
static struct {
    struct pt_attach_stack *entries;
    size_t nentries, entries_cap;
    uint64_t *words;
    size_t nwords, words_cap;
    uint32_t *slots;
    size_t nslots; /* a power of two, at least twice nentries */
    uint32_t *dirty;
    size_t ndirty, dirty_cap;
} pt_st;

static uint64_t pt_stacks_hash(uint32_t tid, uint32_t flags, const uint64_t *ips, uint32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)tid << 32 | flags);
    for (uint32_t i = 0; i < n; i++) {
        h ^= ips[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ^ n;
}

static int pt_stacks_same(const struct pt_attach_stack *s, uint32_t tid, uint32_t flags,
                          const uint64_t *ips, uint32_t n) {
    return s->tid == tid && s->flags == flags && s->nframes == n &&
           memcmp(pt_st.words + s->offset, ips, 8 * (size_t)n) == 0;
}

/* Double the hash (or make the first one); -1 when memory runs out. */
static int pt_stacks_rehash(void) {
    size_t nslots = pt_st.nslots ? 2 * pt_st.nslots : 4096;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (slots == NULL) return -1;
    for (size_t id = 0; id < pt_st.nentries; id++) {
        const struct pt_attach_stack *s = &pt_st.entries[id];
        size_t i = (size_t)s->hash & (nslots - 1);
        while (slots[i] != 0) i = (i + 1) & (nslots - 1);
        slots[i] = (uint32_t)id + 1;
    }
    free(pt_st.slots);
    pt_st.slots = slots;
    pt_st.nslots = nslots;
    return 0;
}

/* The id of a new stack, its frames copied in; -1 when the table is full. */
static int64_t pt_stacks_insert(uint64_t hash, uint32_t tid, uint32_t flags, const uint64_t *ips,
                                uint32_t n) {
    if (pt_st.nentries >= PT_STACKS_MAX || pt_st.nwords + n > PT_STACKS_MAX_WORDS) return -1;
    if (2 * (pt_st.nentries + 1) > pt_st.nslots && pt_stacks_rehash() != 0) return -1;
    void *grown = pt_attach_grow(pt_st.entries, &pt_st.entries_cap, pt_st.nentries,
                                 sizeof *pt_st.entries);
    if (grown == NULL) return -1;
    pt_st.entries = grown;
    while (pt_st.nwords + n > pt_st.words_cap) {
        size_t cap = pt_st.words_cap ? 2 * pt_st.words_cap : 1u << 16;
        uint64_t *words = realloc(pt_st.words, cap * sizeof *words);
        if (words == NULL) return -1;
        pt_st.words = words;
        pt_st.words_cap = cap;
    }
    uint32_t id = (uint32_t)pt_st.nentries++;
    pt_st.entries[id] = (struct pt_attach_stack){
        .id = id, .tid = tid, .flags = flags, .nframes = n, .offset = pt_st.nwords, .hash = hash};
    memcpy(pt_st.words + pt_st.nwords, ips, 8 * (size_t)n);
    pt_st.nwords += n;
    size_t i = (size_t)hash & (pt_st.nslots - 1);
    while (pt_st.slots[i] != 0) i = (i + 1) & (pt_st.nslots - 1);
    pt_st.slots[i] = id + 1;
    return id;
}

int pt_attach_stacks_count(uint32_t tid, uint32_t flags, const uint64_t *ips, uint32_t n,
                           uint64_t weight_ns) {
    uint64_t hash = pt_stacks_hash(tid, flags, ips, n);
    int64_t id = -1;
    if (pt_st.nslots > 0) {
        for (size_t i = (size_t)hash & (pt_st.nslots - 1); pt_st.slots[i] != 0;
             i = (i + 1) & (pt_st.nslots - 1)) {
            const struct pt_attach_stack *s = &pt_st.entries[pt_st.slots[i] - 1];
            if (s->hash == hash && pt_stacks_same(s, tid, flags, ips, n)) {
                id = s->id;
                break;
            }
        }
    }
    if (id < 0) id = pt_stacks_insert(hash, tid, flags, ips, n);
    if (id < 0) return -1;
    struct pt_attach_stack *s = &pt_st.entries[id];
    if (s->samples == 0) { /* not in the dirty list yet */
        void *grown = pt_attach_grow(pt_st.dirty, &pt_st.dirty_cap, pt_st.ndirty,
                                     sizeof *pt_st.dirty);
        if (grown == NULL) return -1;
        pt_st.dirty = grown;
        pt_st.dirty[pt_st.ndirty++] = (uint32_t)id;
    }
    s->samples++;
    s->weight_ns += weight_ns;
    return 0;
}

size_t pt_attach_stacks_moved(void) { return pt_st.ndirty; }

struct pt_attach_stack *pt_attach_stacks_moved_at(size_t i) {
    return &pt_st.entries[pt_st.dirty[i]];
}

const uint64_t *pt_attach_stacks_frames(const struct pt_attach_stack *s) {
    return pt_st.words + s->offset;
}

void pt_attach_stacks_taken(size_t count) {
    for (size_t i = 0; i < count; i++) {
        struct pt_attach_stack *s = &pt_st.entries[pt_st.dirty[i]];
        s->samples = 0;
        s->weight_ns = 0;
    }
    memmove(pt_st.dirty, pt_st.dirty + count, (pt_st.ndirty - count) * sizeof *pt_st.dirty);
    pt_st.ndirty -= count;
}

uint32_t pt_attach_stacks_forget(void) {
    uint32_t ids = (uint32_t)pt_st.nentries;
    free(pt_st.entries);
    free(pt_st.words);
    free(pt_st.slots);
    free(pt_st.dirty);
    memset(&pt_st, 0, sizeof pt_st);
    return ids;
}
