/* The sampler's runtime file: one per process in $PROFTUI_DIR, mmapped
 * MAP_SHARED so the front end reads samples while the target runs and after
 * it dies.  Layout in proftui_wire_sampler.h.  Nothing here runs in signal
 * context. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "pt_runfile.h"
#include "pt_sampler.h"

/* The current process's file; zeroed in a fork child that is not followed. */
PT_HIDDEN struct pt_sampler_file pt_sampler_file;
/* Leading slots whose pages are backed (pt_runfile_reserve): claims never
 * look at the others, whose pages a full tmpfs could not supply even for a
 * read.  Grown under pt_grow_lock (thread start only; re-made by a fork
 * child's pt_sampler_file_create). */
static uint32_t pt_slots_ready;
static pthread_mutex_t pt_grow_lock = PTHREAD_MUTEX_INITIALIZER;
/* Where threads whose ring could not be backed write: never a sample (mask
 * 0, no ring), every one counted as dropped.  Process memory, not the file. */
static pt_sampler_slot pt_nospace_slot;

/* File bytes for rings of `ring_words` and a stack table of `entries` /
 * `frames`.  Async-signal-safe. */
static uint64_t pt_file_size(uint64_t ring_words, uint32_t entries, uint64_t frames) {
    uint64_t slot_size = sizeof(pt_sampler_slot) + 8 * ring_words;
    return PT_SAMPLER_SLOTS_OFFSET + PT_SAMPLER_NSLOTS * slot_size +
           (uint64_t)PT_MAPLOG_ENTRIES * sizeof(pt_map_entry) + pt_stacktab_size(entries, frames);
}

/* Create and map sampler.<pid>[.<n>].ptw (pt_runfile.h).  0, or -1 leaving
 * pt_sampler_file zero (a note says why).  Not async-signal-safe. */
int pt_sampler_file_create(pid_t pid) {
    uint64_t ring_words = pt_pow2_floor(pt_sampler_cfg.buffer_bytes / 8 / PT_SAMPLER_NSLOTS);
    if (ring_words < PT_MIN_RING_WORDS) ring_words = PT_MIN_RING_WORDS;
    /* A nearly full run directory: rings small enough that a few threads'
     * fit in a quarter of the free space (a ring still holds two deepest
     * records).  What does not fit later is dropped and counted. */
    struct statfs fs;
    int shrunk = 0; /* rings made smaller for lack of space: their overflows count as such */
    if (statfs(pt_sampler_cfg.dir, &fs) == 0 && fs.f_bsize > 0) {
        uint64_t fit = pt_pow2_floor((uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize / 4 / 8 + 1);
        if (fit < PT_TINY_RING_WORDS) fit = PT_TINY_RING_WORDS;
        if (ring_words > fit) {
            ring_words = fit;
            shrunk = 1;
        }
    }
    /* RLIMIT_FSIZE: a longer file would kill the target (SIGXFSZ).  A smaller
     * stack table first, then smaller rings; said in a note. */
    uint32_t entries = PT_STACKTAB_ENTRIES;
    uint64_t frames = PT_STACKTAB_FRAMES, limit = pt_note_fsize_limit();
    uint64_t wanted = pt_file_size(ring_words, entries, frames);
    while (pt_file_size(ring_words, entries, frames) > limit &&
           (entries > 4096 || ring_words > PT_TINY_RING_WORDS)) {
        if (entries > 4096) {
            entries /= 2;
            frames /= 2;
        } else {
            ring_words /= 2;
        }
    }
    uint64_t slot_size = sizeof(pt_sampler_slot) + 8 * ring_words;
    uint64_t slots_offset = PT_SAMPLER_SLOTS_OFFSET;
    uint64_t maplog_offset = slots_offset + PT_SAMPLER_NSLOTS * slot_size;
    uint64_t stacks_offset = maplog_offset + (uint64_t)PT_MAPLOG_ENTRIES * sizeof(pt_map_entry);
    uint64_t size = stacks_offset + pt_stacktab_size(entries, frames);
    /* Only the headers are mapped and backed now; each slot when a thread
     * claims it, each map log entry when it is appended, the stack table's
     * heads now and its entries and frames as they fill. */
    struct pt_sampler_file *f = &pt_sampler_file;
    if (pt_runfile_create(&f->rf, pt_sampler_cfg.dir, "sampler", (uint32_t)pid, size,
                          slots_offset, slots_offset, NULL) != 0)
        return -1;
    if (size < wanted) pt_note_fsize_cap(size);
    pt_slots_ready = 0;
    pthread_mutex_init(&pt_grow_lock, NULL); /* a fork child: another thread may have held it */
    pt_file_header *hdr = f->rf.hdr;
    pt_sampler_header *smp = (pt_sampler_header *)(f->rf.head + sizeof *hdr);
    pt_runfile_header_init(hdr, PT_KIND_SAMPLER, size);
    hdr->flags = (pt_sampler_cfg.wall_clock ? PT_FLAG_WALL_CLOCK : 0) |
                 (shrunk ? PT_FLAG_NO_SPACE : 0);
    hdr->period_ns = pt_sampler_cfg.period_ns;
    smp->nslots = PT_SAMPLER_NSLOTS;
    smp->ring_words = (uint32_t)ring_words;
    smp->slots_offset = slots_offset;
    smp->slot_size = slot_size;
    smp->maplog_offset = maplog_offset;
    smp->maplog_capacity = PT_MAPLOG_ENTRIES;
    smp->requested_ns = pt_sampler_cfg.period_ns;
    smp->stacks_offset = stacks_offset;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    smp->start_mono_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    f->nslots = PT_SAMPLER_NSLOTS;
    f->ring_words = (uint32_t)ring_words;
    pt_region_init(&f->slots, &f->rf, slots_offset, (uint32_t)slot_size, 0, PT_SAMPLER_NSLOTS, 0,
                   PT_NOTE_RING);
    /* No room for the table's heads: the file stays, every sample counts as
     * dropped.  No address space for them: the sampler stays off, one note. */
    if (pt_stacktab_init(&f->stacks, &f->rf, stacks_offset, entries, frames) == -2) {
        pt_runfile_discard(&f->rf, slots_offset + pt_stacktab_index(entries) * 4ull + 64, errno);
        memset(f, 0, sizeof *f);
        return -1;
    }
    pt_maplog_init(&f->maplog, &f->rf, maplog_offset, &smp->maplog_count);
    if (pt_sampler_cfg.follow_children) smp->sflags |= PT_SMP_FOLLOW;
    pt_runfile_publish(hdr); /* the magic last: never a half-initialized header */
    f->smp = smp;
    __atomic_store_n(&f->hdr, hdr, __ATOMIC_RELEASE);
    return 0;
}

/* Fork child: forget (unmap) the parent's file so nothing writes into it.
 * Not async-signal-safe. */
void pt_sampler_file_forget(void) {
    struct pt_sampler_file *f = &pt_sampler_file;
    pt_stacktab_unmap(&f->stacks);
    pt_region_unmap(&f->slots);
    pt_region_unmap(&f->maplog.entries);
    pt_runfile_unmap(&f->rf);
    memset(f, 0, sizeof *f);
}

/* Slot i (below pt_slots_ready: mapped and backed).  Not async-signal-safe
 * in name only. */
static pt_sampler_slot *pt_slot_at(uint32_t i) {
    return pt_region_peek(&pt_sampler_file.slots, i);
}

/* Say in the header that the file system could not back part of the file.
 * Async-signal-safe. */
void pt_sampler_no_space(void) {
    pt_runfile_no_space(pt_sampler_file.hdr);
}

/* Map and back one more slot (the next never-used one) so claims may look
 * at it; 0, -1 when all are, or -2 when it cannot be (the file system is
 * full, or the target's address space).  Not
 * async-signal-safe (a mutex). */
static int pt_slot_grow(uint32_t seen) {
    int rc = 0;
    pthread_mutex_lock(&pt_grow_lock);
    uint32_t ready = __atomic_load_n(&pt_slots_ready, __ATOMIC_ACQUIRE);
    if (ready == seen) { /* nobody grew it meanwhile */
        if (ready >= pt_sampler_file.nslots) {
            rc = -1;
        } else if (pt_region_back(&pt_sampler_file.slots, ready, ready + 1) != 0) {
            rc = -2; /* file system full (PT_FLAG_NO_SPACE) or no address space (noted) */
        } else {
            __atomic_store_n(&pt_slots_ready, ready + 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&pt_grow_lock);
    return rc;
}

/* Claim a slot for thread `tid`: a never-used one, or one whose thread exited
 * and whose ring the front end drained.  NULL (and threads_lost++) when none;
 * when another slot cannot be mapped or backed, the no-space slot (no ring:
 * the thread's samples are counted as dropped).  Not async-signal-safe (slots
 * are claimed with CAS, backed under a mutex). */
pt_sampler_slot *pt_sampler_slot_claim(pid_t tid, uint64_t **ring) {
    if (pt_sampler_file.smp == NULL) return NULL;
    for (uint32_t i = 0;; i++) {
        uint32_t ready = __atomic_load_n(&pt_slots_ready, __ATOMIC_ACQUIRE);
        if (i >= ready) {
            int grown = pt_slot_grow(ready);
            if (grown == -1) break;
            if (grown == -2) {
                *ring = NULL;
                return &pt_nospace_slot;
            }
            i--; /* look at slot i again (a new one, or grown by another thread) */
            continue;
        }
        pt_sampler_slot *slot = pt_slot_at(i);
        uint32_t state = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
        if (state == PT_SLOT_EXITED) {
            uint64_t head = __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE);
            uint64_t tail = __atomic_load_n(&slot->tail, __ATOMIC_ACQUIRE);
            if (head != tail) continue; /* the front end has not read it all yet */
        } else if (state != PT_SLOT_FREE) {
            continue;
        }
        /* 3 = claiming: neither free nor readable while the fields change. */
        if (!__atomic_compare_exchange_n(&slot->state, &state, 3u, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            continue;
        __atomic_add_fetch(&slot->gen, 1, __ATOMIC_RELEASE); /* readers drop what they saw */
        slot->tid = (uint32_t)tid;
        slot->samples = 0;
        slot->dropped = 0;
        slot->cpu_ns = 0;
        memset(slot->comm, 0, sizeof slot->comm);
        __atomic_store_n(&slot->tail, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->head, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->state, (uint32_t)PT_SLOT_ACTIVE, __ATOMIC_RELEASE);
        *ring = (uint64_t *)(slot + 1);
        return slot;
    }
    __atomic_add_fetch(&pt_sampler_file.smp->threads_lost, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* The thread owning `slot` ended after `cpu_ns` of CPU time, named `comm`
 * (16 bytes, NUL-padded).  Not async-signal-safe. */
void pt_sampler_slot_release(pt_sampler_slot *slot, uint64_t cpu_ns, const char *comm) {
    memcpy(slot->comm, comm, sizeof slot->comm);
    slot->cpu_ns = cpu_ns;
    __atomic_store_n(&slot->state, (uint32_t)PT_SLOT_EXITED, __ATOMIC_RELEASE);
}
