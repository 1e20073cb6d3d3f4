/* Definitions every proftui C runtime shares (csrc/common).
 *
 * Naming scheme of the C runtimes: `pt_` for what lives in csrc/common
 * (pt_cfi_*, pt_unwind_*, pt_runfile_*, pt_alloc), `pt_sampler_`,
 * `pt_attach_` and `pt_hook_` for what is private to one runtime.  Every
 * function's comment says whether it is async-signal-safe.
 */
#ifndef PT_COMMON_H
#define PT_COMMON_H

#include <stddef.h>

/* Internal symbols: never exported from the LD_PRELOADed libraries. */
#define PT_HIDDEN __attribute__((visibility("hidden")))

/* Anonymous memory outside the target's malloc (mmap), for tables a signal
 * handler may read.  NULL on failure.  Not async-signal-safe in name, but it
 * calls nothing but mmap. */
PT_HIDDEN void *pt_alloc(size_t bytes);

/* Return memory from pt_alloc (munmap).  Only where no reader can still hold
 * it.  Async-signal-safe. */
PT_HIDDEN void pt_free(void *p, size_t bytes);

#endif /* PT_COMMON_H */
