/* The private run files of the LD_PRELOAD runtimes (csrc/common).
 *
 * Each process writes one file in the per-run directory $PROFTUI_DIR (mode
 * 0700, made by proftui):  <kind>.<pid>.ptw, or <kind>.<pid>.<n>.ptw (n = 1,
 * 2, ...) when an earlier image of the same pid (before an exec) owns the
 * name.  The file is created O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC with mode
 * 0600 (never someone else's file, never through a symlink) and sized once
 * with ftruncate, sparse: its layout (offsets, capacities) is fixed at
 * creation and the front end reads it with pread at those offsets.
 *
 * Address space: only what is used is mapped.  The file's head (its
 * headers and fixed tables) is mapped at creation; every table that grows
 * (pt_region below) is mapped in windows of doubling size as it fills, each
 * a mapping of its own that never moves (a signal handler may hold a pointer
 * into it).  So a target's VmSize grows with what the runtime holds, not
 * with the file's capacity (1.25 GiB for the sampler's stack table), and a
 * program that lowers its RLIMIT_AS keeps its memory.  A window that cannot
 * be mapped is said in one note (pt_note.h) and what would have gone there
 * is counted as dropped.  The file is reopened by path to map a window (an
 * O_CLOEXEC descriptor kept open could be closed or reused by the target);
 * a file that is not the one created (replaced under the runtime) is refused.
 *
 * File size: a file longer than RLIMIT_FSIZE raises SIGXFSZ in the target
 * (fatal by default), so the creators size theirs under pt_note_fsize_limit()
 * and say so (pt_note_fsize_cap); pt_runfile_create refuses a longer one.
 *
 * Space: a write to a page of a shared file mapping that the file system
 * cannot back (a full tmpfs or disk) raises SIGBUS in the writer, and on
 * tmpfs even a read of a hole allocates.  So no page is touched before it is
 * backed: the first `reserve` bytes (the headers) with posix_fallocate at
 * creation, every later region (a ring, a node chunk, a table entry) with
 * pt_runfile_reserve before its first use; what cannot be backed is counted
 * as dropped by the runtime (PT_FLAG_NO_SPACE), and the front end reads
 * the file with pread, which sees holes as zeros without allocating.
 *
 * Usage (constructor, or a fork child):
 *     if (pt_runfile_create(&rf, dir, "sampler", getpid(), size, head, reserve, &n) != 0)
 *         ... stay off (the note says why) ...
 *     pt_runfile_header_init(rf.hdr, PT_KIND_SAMPLER, size);  ... the kind's header ...
 *     pt_region_init(&entries, &rf, offset, sizeof(entry), 10, capacity, 0, PT_NOTE_...);
 *     pt_runfile_publish(rf.hdr);  the magic last: now the reader takes it
 *
 * Async-signal-safe: only open, fstat, ftruncate, posix_fallocate, mmap,
 * madvise, munmap, close, unlink and getrlimit are called and names are
 * formatted by hand (no snprintf), so a fork child of a multithreaded target
 * and a signal handler may call them.
 */
#ifndef PT_RUNFILE_H
#define PT_RUNFILE_H

#include <stddef.h>
#include <stdint.h>

#include "proftui_wire.h"
#include "pt_common.h"
#include "pt_note.h"

#define PT_RUNFILE_MAX_GENERATION 100u /* names tried: <kind>.<pid>.ptw ... .<99>.ptw */

/* One run file of this process (process memory: the target cannot change it). */
struct pt_runfile {
    char path[4096 + 64];  /* the file, reopened to map windows */
    uint64_t dev, ino;     /* its identity: a file replaced under us is not mapped */
    uint64_t size;         /* bytes (sparse beyond what is backed) */
    unsigned char *head;   /* the mapping of [0, head_len) */
    uint64_t head_len;
    pt_file_header *hdr;   /* == head */
};

/* Create, size and map `dir`/<kind>.<pid>[.<n>].ptw: `size` bytes long, its
 * first `head` bytes mapped read-write MAP_SHARED (all zero) and its first
 * `reserve` (<= head) backed with posix_fallocate; n goes to *generation (may
 * be NULL).  0, or -1 with nothing left behind and a note (pt_note.h) saying
 * why (also when `reserve` bytes cannot be backed or `size` is over
 * RLIMIT_FSIZE).  `dir` must be shorter than 4000 bytes and `kind` than 32.
 * Async-signal-safe. */
PT_HIDDEN int pt_runfile_create(struct pt_runfile *rf, const char *dir, const char *kind,
                                uint32_t pid, uint64_t size, uint64_t head, uint64_t reserve,
                                uint32_t *generation);

/* Map [offset, offset + len) of `rf` read-write MAP_SHARED as a mapping of
 * its own (page-aligned around it): the address of byte `offset`, or NULL
 * with errno set.  *map and *map_len receive what to munmap.
 * Async-signal-safe. */
PT_HIDDEN unsigned char *pt_runfile_map(const struct pt_runfile *rf, uint64_t offset,
                                        uint64_t len, void **map, size_t *map_len);

/* Unmap the head (regions unmap their own windows first).  Not in a handler. */
PT_HIDDEN void pt_runfile_unmap(struct pt_runfile *rf);

/* A file whose start-up parts could not all be mapped: unmap its head,
 * remove it, and note that the run file (`bytes` at start) could not be
 * mapped for `err`: the runtime stays off, said in one line.  Not in a handler. */
PT_HIDDEN void pt_runfile_discard(struct pt_runfile *rf, uint64_t bytes, int err);

/* Back the pages of [addr, addr + len) of a run file's mapping before their
 * first touch (madvise MADV_POPULATE_WRITE: an error instead of a SIGBUS
 * when the file system is full).  0, or -1 when they cannot be backed (the
 * caller drops what would have gone there).  On kernels before 5.14 it
 * cannot check and returns 0.  errno is preserved.  Async-signal-safe. */
PT_HIDDEN int pt_runfile_reserve(void *addr, uint64_t len);

/* Fill the common header of a new run file (proftui_wire.h): version, `kind`,
 * sizes, this process's pid and parent, the creation time; flags, period and
 * clock stay for the runtime.  Async-signal-safe. */
PT_HIDDEN void pt_runfile_header_init(pt_file_header *f, uint32_t kind, uint64_t file_size);

/* Make the file visible to the reader: the magic goes in last, with release
 * order after every header write.  Async-signal-safe. */
PT_HIDDEN void pt_runfile_publish(pt_file_header *f);

/* Say that the file system could not back part of the file (PT_FLAG_NO_SPACE,
 * an atomic or: any thread, any time).  Async-signal-safe. */
PT_HIDDEN void pt_runfile_no_space(pt_file_header *f);

/* ---- regions: a table of a run file, mapped in windows as it fills ----------- */

#define PT_REGION_WINDOWS 40

/* Elements of `elem` bytes at file offset `offset`, `capacity` of them.
 * Window k holds elements [(2^k - 1) << shift, (2^(k+1) - 1) << shift) and
 * maps `overlap` elements more (the next window's first ones, through the
 * same file pages), so a run of up to `overlap` + 1 elements that starts in
 * window k is contiguous there.  Everything here is process memory. */
struct pt_region {
    const struct pt_runfile *rf;
    uint64_t offset;
    uint64_t capacity;
    uint64_t overlap;
    uint32_t elem;
    uint32_t shift;
    enum pt_note_what what; /* named in the note when a window cannot be mapped */
    int populate;           /* back each window whole when it is mapped */
    int quiet;              /* a failure is not noted (the caller says it another way) */
    int failed;             /* a window could not be mapped: none is tried again */
    /* Per window, the address element 0 would have if the whole region were
     * mapped like it: element i of window k is at bias[k] + i * elem (one
     * load and an add on the hot paths); 0: not mapped.  Published last. */
    uintptr_t bias[PT_REGION_WINDOWS];
    void *map[PT_REGION_WINDOWS];          /* what to munmap, and its length */
    size_t map_len[PT_REGION_WINDOWS];
};

/* Describe a region (nothing is mapped yet).  Async-signal-safe. */
PT_HIDDEN void pt_region_init(struct pt_region *r, const struct pt_runfile *rf, uint64_t offset,
                              uint32_t elem, uint32_t shift, uint64_t capacity, uint64_t overlap,
                              enum pt_note_what what);

/* The window holding element i.  Async-signal-safe. */
static inline unsigned pt_region_window(const struct pt_region *r, uint64_t i) {
    return 63u - (unsigned)__builtin_clzll((i >> r->shift) + 1);
}

/* Element i's address if its window is mapped, else NULL (i < capacity).
 * Async-signal-safe. */
static inline void *pt_region_peek(const struct pt_region *r, uint64_t i) {
    uintptr_t b = __atomic_load_n(&r->bias[pt_region_window(r, i)], __ATOMIC_ACQUIRE);
    return b == 0 ? NULL : (void *)(b + (uintptr_t)i * r->elem);
}

/* Element i's address, its window mapped (and with `populate` backed) first:
 * NULL when i >= capacity or the window cannot be mapped (noted once,
 * PT_FLAG_NO_SPACE when it could not be backed).  Async-signal-safe. */
PT_HIDDEN void *pt_region_at(struct pt_region *r, uint64_t i);

/* Back elements [from, to) (mapping their windows): 0, or -1 (file system
 * full: PT_FLAG_NO_SPACE; or no window).  Async-signal-safe. */
PT_HIDDEN int pt_region_back(struct pt_region *r, uint64_t from, uint64_t to);

/* Bytes of address space the region's windows take now.  Async-signal-safe. */
PT_HIDDEN uint64_t pt_region_mapped(const struct pt_region *r);

/* Unmap every window (a fork child forgetting its parent's file).  Not in a
 * handler: nothing may still use them. */
PT_HIDDEN void pt_region_unmap(struct pt_region *r);

/* Raise *counter to at least `v` (a count published in the file for the
 * reader; the runtime keeps its own).  The target may have written anything
 * there: this never lowers it and never loops for long.  Async-signal-safe. */
static inline void pt_publish_max32(uint32_t *counter, uint32_t v) {
    uint32_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);
    while (cur < v && !__atomic_compare_exchange_n(counter, &cur, v, 1, __ATOMIC_RELEASE,
                                                   __ATOMIC_RELAXED)) {
    }
}

/* The same for a 64-bit count.  Async-signal-safe. */
static inline void pt_publish_max64(uint64_t *counter, uint64_t v) {
    uint64_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);
    while (cur < v && !__atomic_compare_exchange_n(counter, &cur, v, 1, __ATOMIC_RELEASE,
                                                   __ATOMIC_RELAXED)) {
    }
}

#endif /* PT_RUNFILE_H */
