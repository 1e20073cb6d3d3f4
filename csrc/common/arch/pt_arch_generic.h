/* Any other architecture: the runtimes build, but cannot read registers, so
 * samples carry no stack (the sampler records nothing; attach says so).
 * Included through pt_arch.h only. */
#ifndef PT_ARCH_GENERIC_H
#define PT_ARCH_GENERIC_H

#include <errno.h>
#include <sys/types.h>

#define PT_ARCH_NAME "unknown"
#define PT_ARCH_CFI 0
#define PT_ARCH_UNWIND_NOTE "stack sampling supports x86-64 (CFI) and aarch64 (frame pointers) only"

/* Async-signal-safe. */
static inline int pt_arch_ucontext_regs(const void *ucontext, struct pt_regs *r) {
    (void)ucontext;
    r->pc = r->sp = r->fp = r->lr = 0;
    return -1;
}

#define PT_ARCH_PERF_REGS 0ull
#define PT_ARCH_PERF_NREGS 0

static inline void pt_arch_perf_regs(const uint64_t *words, struct pt_regs *r) {
    (void)words;
    r->pc = r->sp = r->fp = r->lr = 0;
}

static inline int pt_arch_ptrace_regs(pid_t tid, struct pt_regs *r) {
    (void)tid;
    r->pc = r->sp = r->fp = r->lr = 0;
    errno = ENOSYS;
    return -1;
}

/* No system call injection here: attach's ptrace method polls (pt_attach_timer.c). */
#define PT_ARCH_INJECT 0

#endif /* PT_ARCH_GENERIC_H */
