/* x86-64: CFI unwinding (rsp/rbp-based CFA, return address at CFA-8).
 * Included through pt_arch.h only. */
#ifndef PT_ARCH_X86_64_H
#define PT_ARCH_X86_64_H

#include <asm/perf_regs.h>
#include <errno.h>
#include <stddef.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <ucontext.h>

#define PT_ARCH_NAME "x86-64"
#define PT_ARCH_CFI 1
#define PT_ARCH_UNWIND_NOTE ""

enum { PT_DW_FP = 6 /* rbp */, PT_DW_SP = 7 /* rsp */, PT_DW_RA = 16 };

/* Async-signal-safe. */
static inline int pt_arch_ucontext_regs(const void *ucontext, struct pt_regs *r) {
    const ucontext_t *uc = ucontext;
    r->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    r->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    r->fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
    r->lr = 0;
    return 0;
}

/* The rt_sigreturn trampoline a signal handler returns into (glibc's and
 * musl's __restore_rt): `mov $15,%rax; syscall`.  When the walk reaches it,
 * sp is the address of the ucontext_t the kernel pushed, whose registers are
 * the interrupted code's (pt_unwind.c steps through it). */
#define PT_ARCH_SIGRETURN 1
#define PT_ARCH_SIGRETURN_CODE "\x48\xc7\xc0\x0f\x00\x00\x00\x0f\x05"
#define PT_ARCH_SIGRETURN_LEN 9
#define PT_ARCH_UC_PC offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP])
#define PT_ARCH_UC_SP offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP])
#define PT_ARCH_UC_FP offsetof(ucontext_t, uc_mcontext.gregs[REG_RBP])

/* perf dumps the masked registers in ascending order: bp, sp, ip. */
#define PT_ARCH_PERF_REGS                                                                          \
    ((1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP))
#define PT_ARCH_PERF_NREGS 3

/* Async-signal-safe. */
static inline void pt_arch_perf_regs(const uint64_t *words, struct pt_regs *r) {
    r->fp = (uintptr_t)words[0];
    r->sp = (uintptr_t)words[1];
    r->pc = (uintptr_t)words[2];
    r->lr = 0;
}

/* A ptrace-stopped thread's registers.  Async-signal-safe (one syscall). */
static inline int pt_arch_ptrace_regs(pid_t tid, struct pt_regs *r) {
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0) return -1;
    r->pc = regs.rip;
    r->sp = regs.rsp;
    r->fp = regs.rbp;
    r->lr = 0;
    return 0;
}

/* System call injection into a ptrace-stopped thread (the attach helper's
 * CPU timer, csrc/attach/pt_attach_timer.c): the whole register set, and a
 * `syscall` instruction to point it at.  orig_rax -1 keeps the kernel from
 * restarting, on the way out of the stop, a system call the thread was
 * stopped in; restoring the saved set restarts it as it would have been. */
#define PT_ARCH_INJECT 1
#define PT_ARCH_SYSCALL_INSN "\x0f\x05"
typedef struct user_regs_struct pt_arch_user_regs;

static inline int pt_arch_get_user_regs(pid_t tid, pt_arch_user_regs *r) {
    return ptrace(PTRACE_GETREGS, tid, NULL, r) == 0 ? 0 : -1;
}

static inline int pt_arch_set_user_regs(pid_t tid, const pt_arch_user_regs *r) {
    return ptrace(PTRACE_SETREGS, tid, NULL, r) == 0 ? 0 : -1;
}

static inline uint64_t pt_arch_user_sp(const pt_arch_user_regs *r) { return r->rsp; }
static inline uint64_t pt_arch_user_pc(const pt_arch_user_regs *r) { return r->rip; }

/* Point `r` at the instruction `pc` to run system call `nr` with `args`. */
static inline void pt_arch_syscall_regs(pt_arch_user_regs *r, uint64_t pc, long nr,
                                        const uint64_t args[4]) {
    r->rip = pc;
    r->rax = (unsigned long long)nr;
    r->orig_rax = (unsigned long long)-1;
    r->rdi = args[0];
    r->rsi = args[1];
    r->rdx = args[2];
    r->r10 = args[3];
}

static inline long pt_arch_syscall_result(const pt_arch_user_regs *r) { return (long)r->rax; }

#endif /* PT_ARCH_X86_64_H */
