/* Memory for the walk: anonymous mappings for unwind tables (outside the
 * target's malloc), and the probe of a live stack's pages. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pt_common.h"
#include "pt_unwind.h"

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

/* The futex the probe would requeue waiters to: it only ever asks for none,
 * and nothing waits here. */
static uint32_t pt_probe_sink;

/* Async-signal-safe (futex; errno restored). */
int pt_probe_pages(const struct pt_memory *m, uintptr_t end) {
    if (*m->probed & 1) return 0; /* a page below `end` could not be read already */
    int saved_errno = errno, ok = 1;
    while (*m->probed < end) {
        uintptr_t page = *m->probed & ~(uintptr_t)4095; /* 4 KiB steps suit any page size */
        /* Wake 0 and requeue 0 waiters if the word is 0: no effect, read or not. */
        long r = syscall(SYS_futex, (uint32_t *)page, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)0,
                         &pt_probe_sink, 0);
        if (r < 0 && errno == EFAULT) {
            *m->probed = page | 1;
            ok = 0;
            break;
        }
        *m->probed = page + 4096 < m->hi ? page + 4096 : m->hi;
    }
    errno = saved_errno;
    return ok;
}
