/* The private run files of the LD_PRELOAD runtimes (csrc/common).
 *
 * Each process writes one file in the per-run directory $PROFTUI_DIR (mode
 * 0700, made by proftui):  <kind>.<pid>.ptw, or <kind>.<pid>.<n>.ptw (n = 1,
 * 2, ...) when an earlier image of the same pid (before an exec) owns the
 * name.  The file is created O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC with mode
 * 0600 (never someone else's file, never through a symlink), sized with
 * ftruncate (sparse) and mapped MAP_SHARED; on any failure it is unlinked.
 *
 * Usage (constructor, or a fork child):
 *     uint32_t n;
 *     void *map = pt_runfile_create(dir, "sampler", getpid(), size, &n);
 *     if (map == NULL) ... stay off ...
 *
 * Async-signal-safe: only open, ftruncate, mmap, close and unlink are called
 * and the name is formatted by hand (no snprintf), so a fork child of a
 * multithreaded target may call it.
 */
#ifndef PT_RUNFILE_H
#define PT_RUNFILE_H

#include <stdint.h>

#include "pt_common.h"

#define PT_RUNFILE_MAX_GENERATION 100u /* names tried: <kind>.<pid>.ptw ... .<99>.ptw */

/* Create, size and map `dir`/<kind>.<pid>[.<n>].ptw read-write MAP_SHARED.
 * Returns the mapping of `size` bytes (all zero) and stores n in
 * *generation (may be NULL), or returns NULL with nothing left behind.
 * `dir` must be shorter than 4000 bytes and `kind` than 32.  Async-signal-safe. */
PT_HIDDEN void *pt_runfile_create(const char *dir, const char *kind, uint32_t pid, uint64_t size,
                                  uint32_t *generation);

#endif /* PT_RUNFILE_H */
