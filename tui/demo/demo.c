/* proftui demo: a small program with a known shape of work.
 *
 * main runs a few rounds of three jobs: render (about half the time, in two
 * helpers), physics (about a third) and audio (the rest), plus a recursive
 * fib and a hashing loop, so every pane has something to show: a flat
 * profile with a clear winner, a call tree a few levels deep, hot source lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink; /* keeps the optimizer from deleting the work */

NOINLINE static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

NOINLINE static uint64_t spin(uint64_t iterations)
{
    uint64_t acc = 1;
    for (uint64_t i = 0; i < iterations; i++)
        acc = acc * 6364136223846793005ULL + i; /* the hot line */
    return acc;
}

NOINLINE static uint64_t rasterize(int round) { return spin(3000000 + round); }
NOINLINE static uint64_t shade(int round) { return spin(2000000 + round); }

NOINLINE static uint64_t render(int round)
{
    return rasterize(round) ^ shade(round);
}

NOINLINE static uint64_t physics(int round)
{
    uint64_t acc = 0;
    for (int i = 0; i < 400000; i++)
        acc += mix((uint64_t)i + (uint64_t)round);
    return acc + spin(1500000);
}

NOINLINE static uint64_t fib(int n)
{
    return n < 2 ? (uint64_t)n : fib(n - 1) + fib(n - 2);
}

NOINLINE static uint64_t audio(int round)
{
    return fib(22) + spin(400000 + round);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 400;
    for (int round = 0; round < rounds; round++) {
        sink += render(round);
        sink += physics(round);
        sink += audio(round);
    }
    printf("demo: %d rounds, checksum %llu\n", rounds, (unsigned long long)sink);
    return 0;
}
