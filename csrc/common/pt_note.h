/* One-line notes from a preloaded runtime to the front end (csrc/common).
 *
 * When a runtime cannot make a mapping it wants (its run file, a window of
 * it, unwind tables, a shadow stack, an alternate signal stack), it must not
 * write to the target's stderr, and the front end must not guess the cause.
 * So it appends one line to $PROFTUI_DIR/<kind>.<pid>.note:
 *
 *     map what=<region> bytes=<n> errno=<e> as=<kB|inf> fsize=<kB|inf> nofile=<n|inf>
 *
 * (as and fsize: RLIMIT_AS and RLIMIT_FSIZE in KiB at that moment; nofile:
 * RLIMIT_NOFILE), and, when a file-size limit made it size its run file
 * smaller than it wanted:
 *
 *     fsize what=file bytes=<size made> fsize=<kB>
 *
 * Each region is noted once per process (the first failure: later ones of
 * the same region are counted where the data goes, as drops).  The front end
 * (collectors/runtime/notes.py) turns each line into one warning.  The file
 * is opened O_APPEND for each line and closed: a line is one write, and
 * nothing stays open for the target to trip over.
 *
 * Each runtime is its own shared object, so this state is per runtime.
 */
#ifndef PT_NOTE_H
#define PT_NOTE_H

#include <stdint.h>

#include "pt_common.h"

/* The regions a note may name (bits of the once-per-process mask). */
enum pt_note_what {
    PT_NOTE_FILE = 0,     /* the run file itself (the runtime stays off) */
    PT_NOTE_RING,         /* sampler: a thread's ring */
    PT_NOTE_STACKS,       /* sampler: the stack table's entries or frames */
    PT_NOTE_MAPLOG,       /* sampler, heap: the map log */
    PT_NOTE_UNWIND,       /* sampler, heap: DWARF CFI unwind tables */
    PT_NOTE_ALTSTACK,     /* sampler, hook clock: an alternate signal stack */
    PT_NOTE_NODES,        /* hook: the node pool */
    PT_NOTE_SHADOW,       /* hook: a thread's shadow stack */
    PT_NOTE_HASH,         /* hook: a thread's calling-context hash */
    PT_NOTE_BUCKETS,      /* heap: the bucket table or frame pool */
    PT_NOTE_POINTERS,     /* heap: the pointer table */
    PT_NOTE_COUNT
};

/* Where notes go: `dir` ($PROFTUI_DIR, copied; < 4000 bytes) and the
 * runtime's file kind ("sampler", "hook", "heap").  Constructor only, before
 * any note.  Not async-signal-safe. */
PT_HIDDEN void pt_note_init(const char *dir, const char *kind);

/* A mapping of `bytes` for region `what` failed with `err` (an errno): one
 * line, the first time for this region in this process.  Async-signal-safe
 * (getrlimit, open, write, close; errno preserved). */
PT_HIDDEN void pt_note_map_failure(enum pt_note_what what, uint64_t bytes, int err);

/* The run file was made `bytes` long instead of what the runtime wanted,
 * to stay under RLIMIT_FSIZE: one line.  Async-signal-safe. */
PT_HIDDEN void pt_note_fsize_cap(uint64_t bytes);

/* A runtime kept `count` items of `what` (a short word, "jit": tables of
 * generated code) in at most `bytes` and keeps no more: one line,
 *     cap what=<what> count=<n> bytes=<n>
 * Async-signal-safe. */
PT_HIDDEN void pt_note_cap(const char *what, uint64_t count, uint64_t bytes);

/* The largest file this process may make (RLIMIT_FSIZE's soft limit; a
 * longer ftruncate would raise SIGXFSZ, which kills by default).
 * UINT64_MAX when unlimited.  Async-signal-safe. */
PT_HIDDEN uint64_t pt_note_fsize_limit(void);

/* Fork child: a new process, whose failures are noted again.  Async-signal-safe. */
PT_HIDDEN void pt_note_fork_child(void);

/* Append decimal `v` at `p` (up to 20 characters, no NUL); returns the end.
 * For the runtimes' file names and notes.  Async-signal-safe. */
PT_HIDDEN char *pt_decimal(char *p, uint64_t v);

#endif /* PT_NOTE_H */
