/* ITIMER_PROF sampling inside a process, as gperftools' libprofiler does it:
 * the reference for what the kernel's CPU timer itself says, without ptrace.
 * benchmarks/bench_attach.py preloads it into the accuracy server beside
 * `perf record -p` (issue 26: the ptrace method samples on this same clock).
 *
 * LD_PRELOAD=itimer_preload.so ITIMER_OUT=FILE prog...: every SIGPROF records
 * the interrupted pc; at exit each pc is written to FILE as one line,
 * "pc-as-hex object-base-as-hex symbol-or-? object-path" (dladdr).  Only the process
 * that loaded it samples (a fork child keeps the handler but the timer is
 * not inherited, and it writes nothing).  Benchmark code: the handler stores
 * into a static array and nothing else.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#define ITIMER_MAX_PCS 1000000

/* The pcs the handler recorded, and the process that samples. */
static unsigned long itimer_pcs[ITIMER_MAX_PCS];
static volatile sig_atomic_t itimer_count;
static pid_t itimer_pid;

static void itimer_on_prof(int sig, siginfo_t *info, void *ucontext) {
    (void)sig, (void)info;
    if (itimer_count < ITIMER_MAX_PCS)
        itimer_pcs[itimer_count++] =
            (unsigned long)((ucontext_t *)ucontext)->uc_mcontext.gregs[REG_RIP];
}

static void itimer_write(void) {
    const char *out = getenv("ITIMER_OUT");
    if (getpid() != itimer_pid || out == NULL) return;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    FILE *f = fopen(out, "w");
    if (f == NULL) return;
    for (int i = 0; i < itimer_count; i++) {
        Dl_info dl;
        if (dladdr((void *)itimer_pcs[i], &dl) && dl.dli_fname != NULL)
            fprintf(f, "%lx %lx %s %s\n", itimer_pcs[i], (unsigned long)dl.dli_fbase,
                    dl.dli_sname != NULL ? dl.dli_sname : "?", dl.dli_fname);
    }
    fclose(f);
}

__attribute__((constructor)) static void itimer_start(void) {
    itimer_pid = getpid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = itimer_on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval every_ms = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &every_ms, NULL);
    atexit(itimer_write);
}
