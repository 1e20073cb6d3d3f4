/* The stack table of a run file (csrc/common; layout in proftui_wire_stacks.h).
 *
 * Samples are aggregated where they are made: the signal handler finds the
 * (thread, stack) entry by hash, creating it on first sight, and increments
 * its counters in place; the front end reads each new stack once and the
 * counters whenever it likes, so its cost follows the distinct stacks, not
 * the samples.
 *
 * The file reserves the table's capacity (sparse); the runtime maps its
 * entries and frames in windows as they fill (pt_region, pt_runfile.h), so
 * the target's address space grows with the stacks held, not with the
 * capacity.  Every bound (capacities, counts, what is backed and mapped) is
 * kept here in process memory: the counts in the file's table header are
 * only published for the reader, and what the target may have written over
 * (a bucket head, an entry's link, its frames' position) is checked against
 * these bounds before it is followed.
 *
 * Usage (in a runtime's file creation):
 *     uint64_t bytes = pt_stacktab_size(entries, frames);  ... reserve it in the file ...
 *     pt_stacktab_init(&tab, &rf, offset, entries, frames);  ... header, heads mapped ...
 * and in the handler:
 *     uint32_t id = pt_stacktab_count(&tab, tid, flags, frames, n, weight);
 */
#ifndef PT_STACKTAB_H
#define PT_STACKTAB_H

#include <stdint.h>

#include "proftui_wire.h"
#include "proftui_wire_stacks.h"
#include "pt_common.h"
#include "pt_runfile.h"

/* A stack table mapped in this process (zeroed: no table). */
struct pt_stacktab {
    pt_file_header *hdr;      /* the file's common header: dropped, PT_FLAG_NO_SPACE */
    pt_stacktab_header *tab;  /* the table's header in the file (published counts) */
    uint32_t *heads;          /* bucket heads (mapped with the header) */
    void *head_map;           /* that mapping, to unmap */
    size_t head_map_len;
    uint32_t index_mask;      /* heads - 1 */
    uint32_t entries_cap;     /* capacities, fixed at creation */
    uint64_t frames_cap;
    /* Claimed and backed so far (grown with atomics by whichever handler needs
     * more); process memory: a fork child starts a new table. */
    uint32_t entry_count;
    uint64_t frames_used;
    uint64_t entries_backed;  /* entries */
    uint64_t frames_backed;   /* words */
    struct pt_region entries; /* pt_stack_entry */
    struct pt_region frames;  /* u64 words; a stack's run is contiguous (overlap) */
};

/* Bucket heads for a table of `entries` entries.  Async-signal-safe. */
PT_HIDDEN uint32_t pt_stacktab_index(uint32_t entries);

/* Bytes a table of `entries` entries and `frames` frame words takes in the
 * file, header and heads included (mostly sparse).  Async-signal-safe. */
PT_HIDDEN uint64_t pt_stacktab_size(uint32_t entries, uint64_t frames);

/* Lay the table out at file offset `offset` of run file `rf` and map and
 * back its header and heads; 0, -1 when they cannot be backed (no table:
 * every sample counts as dropped, PT_FLAG_NO_SPACE), or -2 with errno set
 * when they cannot be mapped (not noted: the caller says so).
 * Async-signal-safe (mmap, madvise), so a fork child may call it. */
PT_HIDDEN int pt_stacktab_init(struct pt_stacktab *t, const struct pt_runfile *rf,
                               uint64_t offset, uint32_t entries, uint64_t frames);

/* Count one sample of `weight` periods on thread `tid`'s stack frames[0..n)
 * (innermost first, n <= 128) with PT_SREC_* `flags`: its entry's id, or
 * PT_STACK_NONE when the stack found no room (counted in the table's and the
 * file's dropped).  Lock-free; only the thread `tid` may count for `tid`.
 * Async-signal-safe (no lock, no allocation; mmap when a window is first
 * needed, madvise when a new piece of entries or frames must be backed). */
PT_HIDDEN uint32_t pt_stacktab_count(struct pt_stacktab *t, uint32_t tid, uint32_t flags,
                                     const uint64_t *frames, unsigned n, uint64_t weight);

/* Address space the table takes now (header, heads and windows).  Async-signal-safe. */
PT_HIDDEN uint64_t pt_stacktab_mapped(const struct pt_stacktab *t);

/* Unmap the table (a fork child forgetting its parent's file).  Not in a handler. */
PT_HIDDEN void pt_stacktab_unmap(struct pt_stacktab *t);

#endif /* PT_STACKTAB_H */
