/* The program's own clock for the time it blocks in fsync/fdatasync: the reference
 * for wall-clock profiles of storage-bound programs (benchmarks/bench_wall.py).
 *
 * LD_PRELOAD=fsync_clock_preload.so prog...: fsync and fdatasync are timed with
 * CLOCK_MONOTONIC around the real call; at exit the process prints to stderr
 * "fsync_clock: pid=P sync_s=S run_s=R" (time in the calls, time from this library's
 * constructor to its destructor).  Only the process that loaded it counts (a fork
 * child starts from zero and prints its own line).  Benchmark code, not the product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Nanoseconds spent in the sync calls, and when the process started (this library). */
static unsigned long long fsync_clock_ns, fsync_clock_start;

static unsigned long long fsync_clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

__attribute__((constructor)) static void fsync_clock_init(void) {
    fsync_clock_start = fsync_clock_now();
}

__attribute__((destructor)) static void fsync_clock_fini(void) {
    fprintf(stderr, "fsync_clock: pid=%d sync_s=%.6f run_s=%.6f\n", (int)getpid(),
            (double)fsync_clock_ns / 1e9,
            (double)(fsync_clock_now() - fsync_clock_start) / 1e9);
}

static int fsync_clock_timed(const char *name, int fd) {
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    unsigned long long t0 = fsync_clock_now();
    int rc = real(fd);
    __atomic_add_fetch(&fsync_clock_ns, fsync_clock_now() - t0, __ATOMIC_RELAXED);
    return rc;
}

int fsync(int fd) { return fsync_clock_timed("fsync", fd); }
int fdatasync(int fd) { return fsync_clock_timed("fdatasync", fd); }
