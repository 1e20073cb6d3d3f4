/* The private run files of the LD_PRELOAD runtimes (csrc/common).
 *
 * Each process writes one file in the per-run directory $PROFTUI_DIR (mode
 * 0700, made by proftui):  <kind>.<pid>.ptw, or <kind>.<pid>.<n>.ptw (n = 1,
 * 2, ...) when an earlier image of the same pid (before an exec) owns the
 * name.  The file is created O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC with mode
 * 0600 (never someone else's file, never through a symlink), sized with
 * ftruncate and mapped MAP_SHARED; on any failure it is unlinked.
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
 *     uint32_t n;
 *     void *map = pt_runfile_create(dir, "sampler", getpid(), size, headers, &n);
 *     if (map == NULL) ... stay off ...
 *     pt_runfile_header_init(map, PT_KIND_SAMPLER, size);  ... the kind's header ...
 *     pt_runfile_publish(map);  the magic last: now the reader takes it
 *
 * Async-signal-safe: only open, ftruncate, posix_fallocate, mmap, madvise,
 * close and unlink are called
 * and the name is formatted by hand (no snprintf), so a fork child of a
 * multithreaded target may call it.
 */
#ifndef PT_RUNFILE_H
#define PT_RUNFILE_H

#include <stdint.h>

#include "proftui_wire.h"
#include "pt_common.h"

#define PT_RUNFILE_MAX_GENERATION 100u /* names tried: <kind>.<pid>.ptw ... .<99>.ptw */

/* Create, size and map `dir`/<kind>.<pid>[.<n>].ptw read-write MAP_SHARED,
 * with its first `reserve` bytes backed (posix_fallocate).  Returns the
 * mapping of `size` bytes (all zero) and stores n in *generation (may be
 * NULL), or returns NULL with nothing left behind (also when `reserve`
 * bytes cannot be backed).  `dir` must be shorter than 4000 bytes and `kind`
 * than 32.  Async-signal-safe. */
PT_HIDDEN void *pt_runfile_create(const char *dir, const char *kind, uint32_t pid, uint64_t size,
                                  uint64_t reserve, uint32_t *generation);

/* Back the pages of [offset, offset + len) of mapping `map` before their
 * first touch (madvise MADV_POPULATE_WRITE: an error instead of a SIGBUS
 * when the file system is full).  0, or -1 when they cannot be backed (the
 * caller drops what would have gone there).  On kernels before 5.14 it
 * cannot check and returns 0.  errno is preserved.  Async-signal-safe. */
PT_HIDDEN int pt_runfile_reserve(void *map, uint64_t offset, uint64_t len);

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

#endif /* PT_RUNFILE_H */
