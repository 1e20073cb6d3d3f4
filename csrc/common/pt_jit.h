/* Unwind tables of generated code, from the process's own jitdump file
 * (csrc/common: the sampler's through pt_maps.c, proftui-attach's target's).
 *
 * A JIT that follows perf's jitdump convention (CPython 3.13's -X perf_jit,
 * V8, the JVM and .NET agents) writes jit-PID.dump and maps it, so the file
 * is found among this process's own mappings (/proc/self/maps; proftui-attach
 * finds it in the target's and says so with pt_jit_use), never by its name
 * alone: a file in /tmp with our pid may be an earlier process's.  A
 * JIT_CODE_UNWINDING_INFO record holds .eh_frame then .eh_frame_hdr for the
 * JIT_CODE_LOAD that follows it, laid out as perf inject lays them out: the
 * code, .eh_frame at the code's address plus its size rounded up to 8, then
 * .eh_frame_hdr.  pt_cfi_build turns that into rows for [code, code + size).
 *
 * The file is read incrementally (whole records only; a record still being
 * written waits for the next poll), with the checks perf's maps get in the
 * front end (collectors/symbols/perfmap.py): O_NOFOLLOW, a regular file of
 * our effective user that no one else may write, a header naming our pid.
 * Nothing in it is trusted: every length is bounded, every table is built
 * from a private copy, and a table over an ELF object's code is dropped.
 * Generated code may be unmapped without a record, so tables are marked
 * PT_TABLE_GENERATED: the walk never reads code they cover.
 *
 * Each runtime is its own shared object, so this state is per runtime.
 */
#ifndef PT_JIT_H
#define PT_JIT_H

#include <stddef.h>
#include <stdint.h>

#include "pt_common.h"
#include "pt_unwind.h"

/* At most this many tables of generated code are kept, built in at most 64
 * MiB (code a JIT replaced keeps its table's memory: a published set may
 * still read it); past either, later code gets none, said once in the notes
 * ("cap what=jit"). */
#define PT_JIT_MAX_TABLES 65536

/* Read what the jitdump gained since the last poll.  Until the file is
 * found it is looked for 10 ms after the first poll, then twice as late each
 * time, up to every 5 s.  `covered(pc)` says whether an ELF object's code
 * holds pc (such tables are dropped).  1 if the tables changed (the caller
 * publishes a new set).  The caller holds the maps lock.  Async-signal-safe
 * (open, read, pread, fstat, close, mmap). */
PT_HIDDEN int pt_jit_poll(uint64_t now_ns, int (*covered)(uint64_t pc));

/* proftui-attach: the jitdump of a traced process is `path` (as we open it:
 * through /proc/PID/root), owned by `uid`, its header naming `pid` (the pid
 * the process knows itself by).  A new path starts over.  Not
 * async-signal-safe. */
PT_HIDDEN void pt_jit_use(const char *path, uint32_t uid, uint32_t pid);

/* The current tables, unsorted: *n of them.  Under the maps lock. */
PT_HIDDEN const struct pt_cfi_table *const *pt_jit_tables(size_t *n);

/* Fork child: the file is the parent's (a new pid): forget it and its tables. */
PT_HIDDEN void pt_jit_fork_child(void);

#endif /* PT_JIT_H */
