/* The CPU architecture seam: everything only one architecture has (register
 * access from a ucontext, perf_event register masks, ptrace register
 * structures, DWARF register numbers) lives in one header per architecture,
 * chosen here.  Each defines:
 *
 *   PT_ARCH_NAME          "x86-64", "aarch64", ...
 *   PT_ARCH_CFI           1 if the unwinder uses .eh_frame CFI rows here
 *   PT_ARCH_UNWIND_NOTE   "" or one line for the user saying what unwinding lacks
 *   PT_DW_FP, PT_DW_SP, PT_DW_RA   DWARF register numbers (CFI builds only)
 *   pt_arch_ucontext_regs(uc, regs)   0, or -1 when the pc cannot be read
 *   PT_ARCH_PERF_REGS     sample_regs_user mask (0: none), and
 *   pt_arch_perf_regs(words, n, regs)   decode them (ascending register order)
 *   pt_arch_ptrace_regs(tid, regs)    0, or -1 (errno set)
 *   PT_ARCH_INJECT        1 if a stopped thread can be made to run a system call
 *                         (then pt_arch_user_regs, PT_ARCH_SYSCALL_INSN and the
 *                         pt_arch_*_user_regs / pt_arch_syscall_* helpers)
 *
 * CFI unwinding is x86-64 only; elsewhere the runtimes build and sample with
 * frame pointers, and say so through PT_ARCH_UNWIND_NOTE.
 */
#ifndef PT_ARCH_H
#define PT_ARCH_H

#include <stdint.h>

/* The registers unwinding starts from. */
struct pt_regs {
    uintptr_t pc, sp, fp;
    uintptr_t lr; /* link register (aarch64); 0 where the return address is on the stack */
};

/* -DPT_ARCH_FORCE_GENERIC builds the fallback anywhere (to check it compiles). */
#if defined(PT_ARCH_FORCE_GENERIC)
#include "pt_arch_generic.h"
#elif defined(__x86_64__)
#include "pt_arch_x86_64.h"
#elif defined(__aarch64__)
#include "pt_arch_aarch64.h"
#else
#include "pt_arch_generic.h"
#endif

#endif /* PT_ARCH_H */
