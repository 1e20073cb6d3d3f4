/* deep_paths: nearly every sample a new call path.  A recursion DEPTH levels deep
 * (default 500) picks one of four functions at each level by a xorshift generator,
 * then spins at the bottom; so each sampled stack is ~DEPTH frames and almost never
 * seen before (4^500 paths).  For benchmarks/bench_deep.py (issue 33).
 *
 * usage: deep_paths CPU_SECONDS [DEPTH]
 * Prints the descents made on stdout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t rng = 88172645463325252ull;
static volatile uint64_t sink;
static int depth_max = 500;

static inline uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static __attribute__((noinline)) void bottom(void) {
    uint64_t x = rng;
    for (unsigned i = 0; i < 20000; i++) x = x * 6364136223846793005ull + i;
    sink += x;
}

static void step(int depth);
#define LEVEL(k)                                                                               \
    static __attribute__((noinline)) void d##k(int depth) {                                    \
        step(depth + 1);                                                                       \
        sink++;                                                                                \
    }
LEVEL(0) LEVEL(1) LEVEL(2) LEVEL(3)
static void (*const table[4])(int) = {d0, d1, d2, d3};

static __attribute__((noinline)) void step(int depth) {
    if (depth >= depth_max) {
        bottom();
        return;
    }
    table[next() % 4](depth);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.5;
    if (argc > 2) depth_max = atoi(argv[2]);
    double until = cpu_s() + seconds;
    unsigned long descents = 0;
    while (cpu_s() < until) {
        step(0);
        descents++;
    }
    printf("descents %lu\n", descents);
    return 0;
}
