/* The stack table of a run file (csrc/common; layout in proftui_wire_stacks.h).
 *
 * Samples are aggregated where they are made: the signal handler finds the
 * (thread, stack) entry by hash, creating it on first sight, and increments
 * its counters in place; the front end reads each new stack once and the
 * counters whenever it likes, so its cost follows the distinct stacks, not
 * the samples.
 *
 * Usage (in a runtime's file creation):
 *     uint64_t bytes = pt_stacktab_size();        ... reserve it in the file ...
 *     pt_stacktab_init(&tab, map, hdr, offset);  ... the header, the heads backed ...
 * and in the handler:
 *     uint32_t id = pt_stacktab_count(&tab, tid, flags, frames, n, weight);
 */
#ifndef PT_STACKTAB_H
#define PT_STACKTAB_H

#include <stdint.h>

#include "proftui_wire.h"
#include "proftui_wire_stacks.h"
#include "pt_common.h"

/* A stack table mapped in this process (zeroed: no table). */
struct pt_stacktab {
    unsigned char *base;       /* the run file's mapping */
    pt_file_header *hdr;       /* its common header: dropped, PT_FLAG_NO_SPACE */
    pt_stacktab_header *tab;   /* the table's header in the file */
    uint32_t *heads;
    pt_stack_entry *entries;
    uint64_t *frames;
    /* Bytes of entries and frames backed so far (grown with CAS by whichever
     * handler needs more).  Process memory: a fork child starts a new table. */
    uint64_t entries_backed;
    uint64_t frames_backed;
};

/* Bytes the table takes in the file, header included (mostly sparse).
 * Async-signal-safe. */
PT_HIDDEN uint64_t pt_stacktab_size(void);

/* Lay the table out at file offset `offset` of the mapping `base` (whose
 * common header is `hdr`) and back its header and heads; 0, or -1 when the
 * file system cannot back them (no table: every sample counts as dropped).
 * Async-signal-safe (one madvise), so a fork child may call it. */
PT_HIDDEN int pt_stacktab_init(struct pt_stacktab *t, void *base, pt_file_header *hdr,
                               uint64_t offset);

/* Count one sample of `weight` periods on thread `tid`'s stack frames[0..n)
 * (innermost first) with PT_SREC_* `flags`: its entry's id, or PT_STACK_NONE
 * when the stack found no room (counted in the table's and the file's
 * dropped).  Lock-free; only the thread `tid` may count for `tid`.
 * Async-signal-safe (no lock, no allocation; madvise when a new 64 KiB piece
 * of entries or frames must be backed). */
PT_HIDDEN uint32_t pt_stacktab_count(struct pt_stacktab *t, uint32_t tid, uint32_t flags,
                                     const uint64_t *frames, unsigned n, uint64_t weight);

#endif /* PT_STACKTAB_H */
