/* Loaded objects for the sampler: the one object table, map log and CFI
 * publishing live in csrc/common/pt_maps.c; this file points them at the
 * sampler's map log and sets the file's CFI flag.  Runs at start,
 * after dlopen/dlclose and in a followed fork child; never in signal context. */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>

#include "pt_maps.h"
#include "pt_sampler.h"

/* See which objects came and went since the last call; log them and publish
 * their unwind tables.  log_all: a new file (fork child) logs every live
 * object again.  Not async-signal-safe. */
void pt_sampler_maps_refresh(int log_all) {
    pt_maps_refresh(&pt_sampler_file.maplog, pt_sampler_cfg.fp_only, log_all);
    const struct pt_cfi_set *set = __atomic_load_n(&pt_maps_cfi, __ATOMIC_ACQUIRE);
    if (set != NULL && set->n > 0 && pt_sampler_file.smp != NULL)
        pt_sampler_file.smp->sflags |= PT_SMP_CFI;
}

/* Fork child: the lock may have been held by a thread that does not exist here. */
void pt_sampler_maps_fork_child(void) { pt_maps_fork_child(); }
