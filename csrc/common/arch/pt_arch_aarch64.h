/* aarch64: frame records {x29, x30} only (no CFI rows yet).  Included
 * through pt_arch.h only. */
#ifndef PT_ARCH_AARCH64_H
#define PT_ARCH_AARCH64_H

#include <asm/perf_regs.h>
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <ucontext.h>

#define PT_ARCH_NAME "aarch64"
#define PT_ARCH_CFI 0
#define PT_ARCH_UNWIND_NOTE                                                                        \
    "CFI unwinding is x86-64 only: on aarch64 stacks are walked through frame pointers"

/* Async-signal-safe. */
static inline int pt_arch_ucontext_regs(const void *ucontext, struct pt_regs *r) {
    const ucontext_t *uc = ucontext;
    r->pc = (uintptr_t)uc->uc_mcontext.pc;
    r->sp = (uintptr_t)uc->uc_mcontext.sp;
    r->fp = (uintptr_t)uc->uc_mcontext.regs[29];
    r->lr = (uintptr_t)uc->uc_mcontext.regs[30];
    return 0;
}

/* Ascending order: x29, lr, sp, pc. */
#define PT_ARCH_PERF_REGS                                                                          \
    ((1ull << PERF_REG_ARM64_X29) | (1ull << PERF_REG_ARM64_LR) | (1ull << PERF_REG_ARM64_SP) |    \
     (1ull << PERF_REG_ARM64_PC))
#define PT_ARCH_PERF_NREGS 4

/* Async-signal-safe. */
static inline void pt_arch_perf_regs(const uint64_t *words, struct pt_regs *r) {
    r->fp = (uintptr_t)words[0];
    r->lr = (uintptr_t)words[1];
    r->sp = (uintptr_t)words[2];
    r->pc = (uintptr_t)words[3];
}

/* Async-signal-safe (one syscall). */
static inline int pt_arch_ptrace_regs(pid_t tid, struct pt_regs *r) {
    struct user_regs_struct regs; /* glibc's name for the kernel's user_pt_regs */
    struct iovec iov = {&regs, sizeof regs};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov) != 0) return -1;
    r->pc = regs.pc;
    r->sp = regs.sp;
    r->fp = regs.regs[29];
    r->lr = regs.regs[30];
    return 0;
}

/* No system call injection here: attach's ptrace method polls (pt_attach_timer.c). */
#define PT_ARCH_INJECT 0

#endif /* PT_ARCH_AARCH64_H */
