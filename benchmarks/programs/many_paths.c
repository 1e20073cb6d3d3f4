/* many_paths: a CPU-bound program with hundreds of thousands of distinct call
 * paths, for benchmarks/bench_scale.py.  A recursion picks one of six functions
 * at each of DEPTH levels (6^7 = 279,936 leaf paths; each level works a
 * little, so samples land on every level), chosen by a xorshift generator, so
 * a long run keeps meeting paths it has not met yet.
 *
 * usage: many_paths SECONDS     run for that long (wall clock)
 *        many_paths -r ROUNDS   do that much work (1,000 paths a round), however long
 * Prints the rounds done on stdout and its own CPU time, ns, on stderr at exit. */
#include <string.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DEPTH 7
static uint64_t rng = 88172645463325252ull;
static volatile uint64_t sink;

static inline uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static __attribute__((noinline)) void work(unsigned n) {
    uint64_t x = rng;
    for (unsigned i = 0; i < n; i++) x = x * 6364136223846793005ull + i;
    sink += x;
}

static void step(int depth);
#define LEVEL(k)                                                                               \
    static __attribute__((noinline)) void f##k(int depth) {                                    \
        work(200 + 40 * k);                                                                    \
        step(depth + 1);                                                                       \
        sink++;                                                                                \
    }
LEVEL(0) LEVEL(1) LEVEL(2) LEVEL(3) LEVEL(4) LEVEL(5)
static void (*const table[6])(int) = {f0, f1, f2, f3, f4, f5};

static __attribute__((noinline)) void step(int depth) {
    if (depth == DEPTH) {
        work(3000);
        return;
    }
    table[next() % 6](depth);
}

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv) {
    int by_rounds = argc > 2 && strcmp(argv[1], "-r") == 0;
    double seconds = argc > 1 && !by_rounds ? atof(argv[1]) : 10;
    unsigned long limit = by_rounds ? strtoul(argv[2], NULL, 10) : 0;
    struct timespec t0, cpu;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long rounds = 0;
    do {
        for (int i = 0; i < 1000; i++) step(0);
        rounds++;
    } while (by_rounds ? rounds < limit : since(&t0) < seconds);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    printf("%lu rounds\n", rounds);
    fprintf(stderr, "cpu_ns %lld\n", (long long)cpu.tv_sec * 1000000000ll + cpu.tv_nsec);
    return 0;
}
