/* The sampler's use of the shared per-thread clocks (csrc/common/pt_timer.c):
 * a thread is armed with a ring slot and its stack bounds, disarmed with its
 * CPU time, and the clock is described in the sampler's header.
 * Nothing here is async-signal-safe.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pt_sampler.h"
#include "pt_timer.h"

PT_TIMER_FLAGS_ARE(PT_SMP_PERF, PT_SMP_TIMER, PT_SMP_SIGNAL_MOVED, PT_SMP_USER_ONLY,
                   "the sampler's clock flags are the common timer's");
#define PT_SMP_CLOCK_BITS (PT_SMP_PERF | PT_SMP_TIMER | PT_SMP_SIGNAL_MOVED | PT_SMP_USER_ONLY)

/* The thread-exit hook: a key whose destructor disarms the thread. */
static pthread_key_t pt_exit_key;

/* Clock name, signal and clock flags into the header (again after a signal
 * move or in a fork child's new file). */
static void pt_describe(void) {
    if (pt_sampler_file.hdr == NULL) return;
    snprintf(pt_sampler_file.hdr->clock, sizeof pt_sampler_file.hdr->clock, "%s",
             pt_timer_clock_name());
    pt_sampler_file.smp->signal = (uint32_t)PT_GET(pt_timer_signal);
    pt_sampler_file.smp->sflags = (pt_sampler_file.smp->sflags & ~(uint32_t)PT_SMP_CLOCK_BITS) |
                                  pt_timer_flags();
}

static void pt_thread_exit_hook(void *value) {
    (void)value;
    pt_sampler_thread_disarm();
}

int pt_sampler_timer_init(void) {
    if (pthread_key_create(&pt_exit_key, pt_thread_exit_hook) != 0) return -1;
    struct pt_timer_config cfg = {pt_sampler_cfg.period_ns, pt_sampler_cfg.wall_clock,
                                  pt_sampler_cfg.force_timer, pt_sampler_cfg.user_only};
    if (pt_timer_init(&cfg, pt_sampler_on_signal, pt_describe) != 0) return -1;
    pt_describe();
    return 0;
}

/* Register and arm the calling thread: stack bounds, a ring slot, a clock.
 * 0, or -1 when this thread stays unsampled. */
int pt_sampler_thread_arm(void) {
    if (pt_sampler_file.hdr == NULL || pt_sampler_self.slot != NULL) return -1;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    pthread_attr_t attr;
    void *stack_addr = NULL;
    size_t stack_size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return -1;
    int got = pthread_attr_getstack(&attr, &stack_addr, &stack_size);
    pthread_attr_destroy(&attr);
    if (got != 0 || stack_addr == NULL) return -1;
    uint64_t *ring = NULL;
    pt_sampler_slot *slot = pt_sampler_slot_claim(tid, &ring);
    if (slot == NULL) return -1;
    pt_sampler_self.ring = ring;
    /* No ring (the file system is full): mask 0 makes every record a drop. */
    pt_sampler_self.mask = ring != NULL ? pt_sampler_file.ring_words - 1 : 0;
    pt_sampler_self.tid = (uint32_t)tid;
    pt_sampler_self.stack_lo = (uintptr_t)stack_addr;
    pt_sampler_self.stack_hi = (uintptr_t)stack_addr + stack_size;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pt_sampler_self.slot = slot; /* the handler may record from here on */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    int rc = pt_timer_thread_arm();
    if (rc != 0) {
        pt_sampler_self.slot = NULL;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        pt_sampler_slot_release(slot, 0, (const char[16]){0});
        if (rc == -2) __atomic_add_fetch(&pt_sampler_file.smp->threads_lost, 1, __ATOMIC_RELAXED);
        return -1;
    }
    pthread_setspecific(pt_exit_key, (void *)1); /* disarm at thread exit */
    return 0;
}

/* Stop sampling the calling thread and hand its slot back with its CPU time. */
void pt_sampler_thread_disarm(void) {
    pt_sampler_slot *slot = pt_sampler_self.slot;
    if (slot == NULL) return;
    pt_sampler_self.slot = NULL; /* from here the handler ignores late signals */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pt_timer_thread_disarm();
    struct timespec cpu;
    uint64_t cpu_ns = 0;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
    char comm[16] = {0};
    prctl(PR_GET_NAME, comm); /* writes at most 16 bytes, NUL included */
    pt_sampler_slot_release(slot, cpu_ns, comm);
}

/* Fork child: drop the parent's events; if followed (its new file is open),
 * describe the clock there and arm the calling thread again. */
void pt_sampler_timer_fork_child(int keep) {
    pt_sampler_self.slot = NULL;
    pt_timer_fork_child(keep);
    if (keep) {
        pt_describe();
        pt_sampler_thread_arm();
    }
}
