/* Memory for unwind tables: anonymous mappings, outside the target's malloc. */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "pt_common.h"

/* Not async-signal-safe by contract (see pt_common.h). */
void *pt_alloc(size_t bytes) {
    void *p =
        mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Async-signal-safe (munmap). */
void pt_free(void *p, size_t bytes) {
    if (p != NULL) munmap(p, bytes ? bytes : 1);
}
