/*
 * pt_hook_table.c - adding to a thread's (parent node, fn) -> node table: the
 * new node in the thread's chunk of the pool, the table grown (doubled, the old
 * one retired) when a third of its lanes are used.  Finding a key is the hooks'
 * own work (pt_find in proftui_hook.c); this is the first sight of a calling
 * context, off the fast paths.  Nothing here is compiled with
 * -finstrument-functions; every function is also marked no_instrument_function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>

#include "pt_hook.h"

/* Mark PT_LANE_SHARED every lane of (fn's low half, parent): another function
 * with that low half is about to join them.  Whether there was one.
 * Async-signal-safe. */
static PT_NOINST int pt_mark_shared(pt_hook_tstate *t, uintptr_t fn, uint32_t parent)
{
    uint32_t mask = t->hash_mask;
    uint32_t i = (uint32_t)(pt_hash((uint32_t)fn, parent) >> t->hash_shift);
    int found = 0;
    for (uint32_t k = 0; k <= mask; k++) {
        pt_bucket *b = &t->hash[(i + k) & mask];
        for (unsigned m = pt_bucket_match(b, (uint32_t)fn, parent); m; m &= m - 1) {
            unsigned j = (unsigned)__builtin_ctz(m);
            b->word[j] |= PT_LANE_SHARED | PT_LANE_OFF;
            found = 1;
        }
        if (b->parent2[PT_BUCKET_SLOTS - 1] == 0)
            break;
    }
    return found;
}

/* Put (fnlo, parent) -> node (`word` its lane's word) into `table` (mask
 * `mask`, shift `shift`): the first free lane from its bucket on.  The other
 * fields go in before `parent2`, which makes the lane visible.
 * Async-signal-safe. */
static PT_NOINST void pt_hash_put(pt_bucket *table, uint32_t mask, uint32_t shift,
                                  uint32_t fnlo, uint32_t parent, uint32_t node, uint32_t word)
{
    uint32_t i = (uint32_t)(pt_hash(fnlo, parent) >> shift);
    for (;; i = (i + 1) & mask) {
        pt_bucket *b = &table[i & mask];
        for (unsigned k = 0; k < PT_BUCKET_SLOTS; k++) {
            if (b->parent2[k] == 0) {
                b->fnlo[k] = fnlo;
                b->node[k] = node;
                b->word[k] = word;
                __atomic_signal_fence(__ATOMIC_SEQ_CST);
                __atomic_store_n(&b->parent2[k], parent + 2, __ATOMIC_RELAXED);
                return;
            }
        }
    }
}

/* mmap a zeroed table of `buckets` buckets.  Async-signal-safe. */
PT_NOINST pt_bucket *pt_hash_alloc(uint32_t buckets)
{
    size_t bytes = (size_t)buckets * sizeof(pt_bucket);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        pt_note_map_failure(PT_NOTE_HASH, bytes, errno);
        return NULL;
    }
    return p;
}

/* Bytes of the thread's table.  Async-signal-safe. */
PT_NOINST size_t pt_hash_bytes(const pt_hook_tstate *t)
{
    return (size_t)(t->hash_mask + 1) * sizeof(pt_bucket);
}

/* Double the table when a third of its lanes are used (few keys then find
 * their bucket full).  Returns 0 if it cannot take one more key.  The old
 * table is retired whole, not emptied: an enter interrupted by the signal
 * handler whose hooks grew it may still be searching it.  Async-signal-safe
 * (mmap). */
static PT_NOINST int pt_hash_grow(pt_hook_tstate *t)
{
    uint64_t lanes = (uint64_t)(t->hash_mask + 1) * PT_BUCKET_SLOTS;
    if ((uint64_t)(t->hash_count + 1) * 3 <= lanes)
        return 1;
    uint32_t n = (t->hash_mask + 1) * 2;
    pt_bucket *h = n && t->nretired < sizeof t->retired / sizeof t->retired[0]
                       ? pt_hash_alloc(n) : NULL;
    if (!h)
        return (uint64_t)t->hash_count + 1 < lanes;
    uint32_t shift = t->hash_shift - 1;
    for (uint32_t i = 0; i <= t->hash_mask; i++) {
        const pt_bucket *b = &t->hash[i];
        for (unsigned k = 0; k < PT_BUCKET_SLOTS; k++)
            if (b->parent2[k])
                pt_hash_put(h, n - 1, shift, b->fnlo[k], b->parent2[k] - 2, b->node[k],
                            b->word[k]);
    }
    t->retired[t->nretired++] = (__typeof__(t->retired[0])){t->hash, pt_hash_bytes(t)};
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->hash = h;  /* mask and shift after it: a reader of the old table with */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  /* the new mask would read past it */
    t->hash_mask = n - 1;
    t->hash_shift = shift;
    return 1;
}

/* A new node in this thread's chunk; PT_NONE (counted as dropped) when the
 * pool is full (or its next window cannot be mapped: noted).  The chunk
 * size, the pool's capacity and the counts are the runtime's own, never the
 * header's.  Async-signal-safe. */
static PT_NOINST uint32_t pt_new_node(pt_hook_tstate *t, uint32_t parent, uintptr_t fn)
{
    if (t->pool_full)
        goto drop;
    if (t->chunk == PT_NONE || t->used >= PT_CHUNK_NODES) {
        uint32_t c = pt_hook_chunks_claim(1);
        /* Map and back the chunk's nodes and table entry before touching them:
         * a full file system or address space then ends this thread's
         * recording, never the process. */
        if (c == PT_NONE || pt_hook_reserve(&pt_g.chunks[c], sizeof(pt_hook_chunk)) != 0 ||
            pt_region_back(&pt_g.nodes, (uint64_t)c * PT_CHUNK_NODES,
                           (uint64_t)(c + 1) * PT_CHUNK_NODES) != 0) {
            t->pool_full = 1;
            goto drop;
        }
        pt_g.chunks[c].thread = t->slot;
        t->chunk = c;
        t->used = 0;
    }
    uint32_t index = t->chunk * PT_CHUNK_NODES + t->used;
    pt_hook_node *n = pt_node(index);
    n->fn = fn;
    n->parent = parent;
    n->module = pt_module_of(fn);
    n->calls = n->incl = n->self = n->ticks = n->hook_ticks = 0;
    n->off_ = 0;
    n->self_ = index;
    t->used++;
    __atomic_store_n(&pt_g.chunks[t->chunk].count, t->used, __ATOMIC_RELEASE);
    return index;
drop:
    __atomic_fetch_add(&pt_g.hdr->dropped, 1, __ATOMIC_RELAXED);
    return PT_NONE;
}

/* Add (parent, fn) to the thread's table with a new node, growing the table
 * first when it is a third full.  0 when no node can be made (pool or table
 * full: counted as dropped).  The time it takes is the thread's setup, not
 * its calls' (timed mode).  Async-signal-safe. */
PT_NOINST int pt_hash_add(pt_hook_tstate *t, uint32_t parent, uintptr_t fn)
{
    uint64_t t0 = pt_g.timed ? pt_ticks() : 0;
    int added = 0;
    if (!pt_hash_grow(t)) {
        __atomic_fetch_add(&pt_g.hdr->dropped, 1, __ATOMIC_RELAXED);
    } else {
        uint32_t node = pt_new_node(t, parent, fn);
        if (node != PT_NONE) {
            int shared = pt_mark_shared(t, fn, parent);
            pt_hash_put(t->hash, t->hash_mask, t->hash_shift, (uint32_t)fn, parent, node,
                        pt_lane_word(fn, PT_LANE_OFF, 0, shared));
            t->hash_count++;
            added = 1;
        }
    }
    if (pt_g.timed)
        t->setup += pt_ticks() - t0;
    return added;
}
