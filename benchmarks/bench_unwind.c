/* Cost of one stack walk by the C runtimes' one unwinder (csrc/common), without
 * the kernel's signal delivery around it (which dominates a sample's cost and
 * hides the difference): frame-pointer chain vs CFI rows on the live stack
 * (the sampler's handler), and CFI rows over a 4 KiB copy of the stack, the
 * way proftui-attach walks each sample ("cfi-copy", copy included).
 *
 * Linked with the sampler's sources by benchmarks/bench_sampler.py; builds the
 * CFI tables of this process the way the preloaded runtime does, captures a
 * context DEPTH calls deep with getcontext(), and unwinds it N times each way.
 * "leaf-cold" and "leaf-warm" time one-frame walks from pcs spread over the
 * biggest object (libc here), with the tables flushed from every cache first
 * and again warm: the lookup of a row, which a walk does once per frame.
 * Prints: "<mode> <frames> <ns per unwind>".  Then, for scale, what the
 * kernel charges per delivered signal here (perf task-clock at 10 kHz, empty
 * handler): "signal <count> <ns per signal>".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>
#include <x86intrin.h>

#include "pt_maps.h"
#include "pt_sampler.h"

#define N 200000

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

__attribute__((noinline)) static void run(const char *mode, const ucontext_t *uc, const struct pt_sampler_thread *self) {
    uint64_t frames[PT_SAMPLER_MAX_FRAMES];
    unsigned flags = 0, n = 0;
    double t0 = now_ns();
    for (int i = 0; i < N; i++) n = pt_sampler_unwind(uc, self, frames, PT_SAMPLER_MAX_FRAMES, &flags);
    double t1 = now_ns();
    printf("%s %u %.1f\n", mode, n, (t1 - t0) / N);
}

static void flush_bytes(const void *p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) _mm_clflush((const char *)p + off);
}

/* Every table's rows and bucket index, and the set, out of every cache. */
static void flush_tables(const struct pt_cfi_set *set) {
    for (size_t i = 0; i < set->n; i++) {
        const struct pt_cfi_table *t = set->tables[i];
        flush_bytes(t->rows, t->nrows * sizeof *t->rows);
        if (t->bucket_start != NULL) flush_bytes(t->bucket_start, pt_cfi_bucket_bytes(t->hi - t->lo));
        flush_bytes(t, sizeof *t);
    }
    flush_bytes(set, sizeof *set + set->n * sizeof set->tables[0]);
    _mm_mfence();
}

#define N_LEAF 20000

/* One-frame walks from pcs spread over the biggest object's code (a stack of
 * zeros ends each walk after its first lookup), in batches of 64: "leaf-cold"
 * with every table flushed from cache before the batch, "leaf-warm" the same
 * batch again.  A sampled program's leaf pc differs from tick to tick, and
 * its handler runs once per tick: on a busy machine it finds the rows cold. */
__attribute__((noinline)) static void run_leaves(const struct pt_cfi_set *set) {
    const struct pt_cfi_table *big = set->tables[0];
    for (size_t i = 1; i < set->n; i++)
        if (set->tables[i]->nrows > big->nrows) big = set->tables[i];
    if (big->nrows == 0) return;
    static uint64_t zeros[64];
    uint64_t frames[PT_SAMPLER_MAX_FRAMES], pcs[64], first = big->lo + big->rows[0].pc;
    unsigned flags = 0, n = 0;
    double cold = 0, warm = 0;
    srand(1);
    for (int batch = 0; batch < N_LEAF / 64; batch++) {
        for (int k = 0; k < 64; k++) pcs[k] = first + (uint64_t)rand() % (big->hi - first);
        flush_tables(set);
        for (int pass = 0; pass < 2; pass++) {
            double t0 = now_ns();
            for (int k = 0; k < 64; k++) {
                struct pt_regs regs = {.pc = pcs[k], .sp = (uintptr_t)zeros, .fp = 0};
                struct pt_memory mem = {(uintptr_t)zeros, (uintptr_t)(zeros + 64),
                                        (const unsigned char *)zeros, 1};
                n = pt_unwind_walk(set, &mem, &regs, frames, PT_SAMPLER_MAX_FRAMES, &flags);
            }
            *(pass == 0 ? &cold : &warm) += now_ns() - t0;
        }
    }
    printf("leaf-cold %u %.1f\n", n, cold / N_LEAF);
    printf("leaf-warm %u %.1f\n", n, warm / N_LEAF);
}

/* The attach helper's walk: copy 4 KiB from sp, unwind over the copy. */
/* noinline (like run): their arrays must not grow deep()'s frame past the copy. */
__attribute__((noinline)) static void run_copy(const ucontext_t *uc, const struct pt_sampler_thread *self,
                     const struct pt_cfi_set *set) {
    uint64_t frames[PT_SAMPLER_MAX_FRAMES], stack[512];
    unsigned flags = 0, n = 0;
    struct pt_regs regs;
    pt_arch_ucontext_regs(uc, &regs);
    size_t bytes = self->stack_hi - regs.sp < sizeof stack ? self->stack_hi - regs.sp : sizeof stack;
    double t0 = now_ns();
    for (int i = 0; i < N; i++) {
        memcpy(stack, (const void *)regs.sp, bytes);
        struct pt_memory mem = {regs.sp, regs.sp + bytes, (const unsigned char *)stack};
        n = pt_unwind_walk(set, &mem, &regs, frames, PT_SAMPLER_MAX_FRAMES, &flags);
    }
    double t1 = now_ns();
    printf("cfi-copy %u %.1f\n", n, (t1 - t0) / N);
}

/* The walks, from a context captured here: its own frame holds the ucontext,
 * so deep()'s frames stay small and a 4 KiB copy holds all of them. */
__attribute__((noinline)) static int capture(const struct pt_sampler_thread *self) {
    ucontext_t uc;
    getcontext(&uc);
    const struct pt_cfi_set *tables = pt_maps_cfi;
    run("cfi", &uc, self);
    if (tables != NULL) run_leaves(tables);
    run_copy(&uc, self, tables);
    pt_maps_cfi = NULL; /* no rows: the handler walks frame pointers */
    run("fp", &uc, self);
    pt_maps_cfi = tables;
    return 0;
}

__attribute__((noinline)) static int deep(int depth, const struct pt_sampler_thread *self) {
    volatile int after = depth; /* read after the call: gcc cannot make the recursion a loop */
    if (depth > 0) return deep(depth - 1, self) + after;
    return capture(self);
}

static volatile long signals;

static void on_signal(int sig) {
    (void)sig;
    signals++;
}

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* CPU time of a fixed loop, optionally under 10 kHz perf task-clock signals. */
static double loop_cpu(int with_signals) {
    int fd = -1;
    if (with_signals) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_TASK_CLOCK;
        a.sample_period = 100000;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        a.disabled = 1;
        pid_t tid = (pid_t)syscall(SYS_gettid);
        fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, 0);
        if (fd < 0) return -1;
        struct f_owner_ex owner = {F_OWNER_TID, tid};
        fcntl(fd, F_SETOWN_EX, &owner);
        fcntl(fd, F_SETSIG, SIGVTALRM);
        fcntl(fd, F_SETFL, O_ASYNC);
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    }
    double t0 = cpu_ns();
    volatile double x = 0;
    for (long i = 0; i < 150000000L; i++) x += i * 0.5;
    double t1 = cpu_ns();
    if (fd >= 0) close(fd);
    return t1 - t0;
}

static void signal_cost(void) {
    signal(SIGVTALRM, on_signal);
    double best_plain = 1e18, best_signals = 1e18;
    long count = 0;
    for (int round = 0; round < 3; round++) {
        double plain = loop_cpu(0);
        long before = signals;
        double with = loop_cpu(1);
        if (with < 0) return;
        if (plain < best_plain) best_plain = plain;
        if (with < best_signals) best_signals = with, count = signals - before;
    }
    if (count > 0) printf("signal %ld %.1f\n", count, (best_signals - best_plain) / count);
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 20;
    pt_sampler_maps_refresh(0);
    pthread_attr_t attr;
    void *addr;
    size_t size;
    pthread_getattr_np(pthread_self(), &attr);
    pthread_attr_getstack(&attr, &addr, &size);
    struct pt_sampler_thread self = {.stack_lo = (uintptr_t)addr,
                                     .stack_hi = (uintptr_t)addr + size};
    deep(depth, &self);
    signal_cost();
    return 0;
}
