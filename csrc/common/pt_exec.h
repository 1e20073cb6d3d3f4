/* The exec family, interposed by the preloaded runtimes (sampler and heap:
 * each links pt_exec.c).  Around the real call each runtime runs its own
 * hooks (the sampler stops its clocks: a sample landing after the point of no
 * return would kill the new image), and an exec by the process that took
 * proftui out of its environment (pt_env.h) gets the saved entries back, so
 * the new image of the target is profiled as before.  With both runtimes
 * preloaded the first one's wrapper runs and calls the next (RTLD_NEXT).
 */
#ifndef PT_EXEC_H
#define PT_EXEC_H

#include "pt_common.h"

/* Defined by each runtime linking pt_exec.c.  Not async-signal-safe. */
PT_HIDDEN void pt_exec_before(void); /* the exec is about to happen */
PT_HIDDEN void pt_exec_failed(void); /* it returned: undo pt_exec_before */

#endif /* PT_EXEC_H */
