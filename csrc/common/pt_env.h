/* The runtimes' environment: reading their PROFTUI_* settings, and keeping
 * proftui out of the environment a profiled program passes on (issue 26).
 *
 * Without --follow only the target itself is profiled, yet LD_PRELOAD and the
 * PROFTUI_* variables stayed in its environment: every program it ran loaded
 * the runtime (which then stayed idle) and saw the variables.  Each
 * preloaded runtime, once its constructor has read its own PROFTUI_*
 * settings, takes its library out of LD_PRELOAD; the last proftui runtime
 * to do so also removes the PROFTUI_* variables, and LD_PRELOAD if nothing
 * else is left in it.  The target's own environ is edited in place (strings
 * shortened, pointers moved down: no allocation, main's envp sees the same
 * array).  An exec by the target itself (a wrapper script that execs the
 * real program) still profiles the new image: the exec wrappers
 * (pt_exec.c) put the saved entries back for that one call.
 */
#ifndef PT_ENV_H
#define PT_ENV_H

#include <stddef.h>
#include <sys/types.h>

#include "pt_common.h"

/* The decimal value of variable `name`; `fallback` when it is unset, empty or
 * not a number.  Not async-signal-safe (getenv): constructors only. */
PT_HIDDEN long pt_env_long(const char *name, long fallback);
/* 1 if variable `name` is set to exactly `value`.  Not async-signal-safe (getenv):
 * constructors only. */
PT_HIDDEN int pt_env_is(const char *name, const char *value);

/* Save LD_PRELOAD and every PROFTUI_* entry (for pt_env_for_exec), then take
 * each LD_PRELOAD entry whose name contains `self` out of it and, when no
 * entry containing "proftui_" is left, remove the PROFTUI_* entries (and
 * LD_PRELOAD when empty) from environ.  Call once, from a constructor, after
 * reading the settings.  Not async-signal-safe. */
PT_HIDDEN void pt_env_scrub(const char *self);

/* Pointers `pt_env_for_exec` may add to an envp, and bytes it may need for a
 * merged LD_PRELOAD beside `envp`'s own; 0 and 0 when it changes nothing for
 * this process (nothing saved, or a child of the process that scrubbed).
 * Async-signal-safe. */
PT_HIDDEN size_t pt_env_extra_entries(void);
PT_HIDDEN size_t pt_env_merge_bytes(char *const *envp);

/* `envp` with the saved entries back, for an exec by the process that
 * scrubbed: written into `out` (room for `cap` pointers, NULL-terminated)
 * and `merged` (`merged_cap` bytes, for LD_PRELOAD: the saved entries, then
 * any `envp` adds).  Entries `envp` already has keep their values.  Returns
 * `envp` itself when nothing is to be added or the room is short.
 * Async-signal-safe. */
PT_HIDDEN char *const *pt_env_for_exec(char *const *envp, char **out, size_t cap, char *merged,
                                       size_t merged_cap);

#endif /* PT_ENV_H */
