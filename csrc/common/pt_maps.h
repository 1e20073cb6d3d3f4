/* The loaded objects of the process a runtime is preloaded into (csrc/common),
 * shared by the sampler and the heap runtime.
 *
 * pt_maps_refresh walks dl_iterate_phdr, remembers every object ever seen
 * (load bias + name), hands each executable segment of one that came or went
 * to the runtime's map log (pt_maplog_append, so
 * the front end still resolves a dlclose'd object's code by name), builds the
 * CFI rows of each new object and publishes the set of the live ones for the
 * unwinder (pt_maps_cfi).  The vDSO is unwound through (its CFI is built) but
 * not logged: there is no file behind it the front end could open.
 *
 * Each runtime is its own shared object, so this state is per runtime.
 */
#ifndef PT_MAPS_H
#define PT_MAPS_H

#include <stdint.h>

#include "proftui_wire.h"
#include "pt_common.h"
#include "pt_runfile.h"
#include "pt_unwind.h"

/* One executable segment of an object, as the map logs record it. */
struct pt_maps_segment {
    uint64_t start, end; /* runtime addresses */
    uint64_t offset;     /* file offset of `start` */
    uint64_t base;       /* the object's load bias */
    const uint8_t *build_id;
    uint32_t build_id_len; /* <= 32 */
    const char *path;      /* absolute path (NUL-terminated, < 312 bytes) */
};

/* Where a runtime's map log lives in its run file (proftui_wire.h: pt_map_entry).
 * Process memory but for `count`, which is only published there. */
struct pt_maplog {
    pt_file_header *hdr;       /* the file's common header: dropped, PT_FLAG_NO_SPACE */
    struct pt_region entries;  /* PT_MAPLOG_ENTRIES of them, mapped as they are appended */
    uint32_t used;             /* entries appended (under the maps lock) */
    uint32_t *count;           /* the runtime header's published count (for the reader) */
};

/* Lay out a map log of PT_MAPLOG_ENTRIES at file offset `offset` of `rf`,
 * published through `count` (nothing is mapped yet).  Async-signal-safe. */
PT_HIDDEN void pt_maplog_init(struct pt_maplog *log, const struct pt_runfile *rf,
                              uint64_t offset, uint32_t *count);

/* Append one segment to `log`: its page is mapped and backed first; an entry
 * that does not fit, cannot be mapped or cannot be backed is counted in
 * `dropped`.  Callers serialize (the maps lock).  Not async-signal-safe. */
PT_HIDDEN void pt_maplog_append(struct pt_maplog *log, const struct pt_maps_segment *seg,
                                uint32_t event);

/* The live objects' CFI tables, replaced whole (atomic pointer swap, read
 * with acquire) on each change; old sets are never freed, because a walk on
 * another thread or in a signal handler may still read them.  NULL before
 * the first refresh. */
extern PT_HIDDEN const struct pt_cfi_set *volatile pt_maps_cfi;
/* [lo, hi) of the executable code of the runtime's own object (0, 0 until
 * the first refresh): the heap runtime leaves these frames out of stacks. */
extern PT_HIDDEN uintptr_t pt_maps_self_lo, pt_maps_self_hi;

/* Log objects that came or went since the last call, build the new ones'
 * CFI rows (none with fp_only) and publish the live set; log_all (a new file
 * in a fork child) logs every live object again.  Serialized by a mutex.
 * Not async-signal-safe. */
PT_HIDDEN void pt_maps_refresh(struct pt_maplog *log, int fp_only, int log_all);

/* pt_maps_refresh (not log_all) unless another refresh holds the lock: then
 * nothing is done and -1 returned (the caller tries again later).  Never
 * waits on our lock and never allocates with malloc, so it may run in a
 * signal handler; dl_iterate_phdr still takes glibc's (recursive) loader
 * lock for the walk.  0 when it ran. */
PT_HIDDEN int pt_maps_try_refresh(struct pt_maplog *log, int fp_only);

/* Read what the process's jitdump gained (pt_jit.h) and publish the set
 * again if generated code got tables.  Skipped (-1) when another refresh
 * holds the lock.  Never waits, never allocates with malloc: for a signal
 * handler.  0 when it ran. */
PT_HIDDEN int pt_maps_try_jit(uint64_t now_ns);

/* 1 if one of the code addresses pcs[0..n) (pcs[0] a pc, the rest return
 * addresses) lies in no object the last refresh saw, but in a loaded object
 * (glibc's _dl_find_object; with an older glibc any unknown address counts):
 * something was loaded since, by dlopen or by glibc itself (NSS, iconv,
 * libgcc_s).  Lock-free, no system call.  Async-signal-safe. */
PT_HIDDEN int pt_maps_unknown(const uint64_t *pcs, unsigned n);

/* Fork child: the lock may have been held by a thread that is gone.  Not
 * async-signal-safe. */
PT_HIDDEN void pt_maps_fork_child(void);

#endif /* PT_MAPS_H */
