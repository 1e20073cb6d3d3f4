/* Definitions every proftui C runtime shares (csrc/common).
 *
 * Naming scheme of the C runtimes: `pt_` for what lives in csrc/common
 * (pt_cfi_*, pt_unwind_*, pt_runfile_*, pt_alloc), `pt_sampler_`,
 * `pt_attach_` and `pt_hook_` for what is private to one runtime.  Every
 * function's comment says whether it is async-signal-safe.
 */
#ifndef PT_COMMON_H
#define PT_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Internal symbols: never exported from the LD_PRELOADed libraries. */
#define PT_HIDDEN __attribute__((visibility("hidden")))

/* Anonymous memory outside the target's malloc (mmap), for tables a signal
 * handler may read.  NULL on failure.  Not async-signal-safe in name, but it
 * calls nothing but mmap. */
PT_HIDDEN void *pt_alloc(size_t bytes);

/* Return memory from pt_alloc (munmap).  Only where no reader can still hold
 * it.  Async-signal-safe. */
PT_HIDDEN void pt_free(void *p, size_t bytes);

/* Flags and values shared between threads and signal handlers are read and
 * written with relaxed atomics (one plain instruction each on x86-64 and
 * arm64: free on the fast paths), never through `volatile`, so every shared
 * access says what it is.  Async-signal-safe. */
#define PT_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define PT_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* Largest power of two <= n (n >= 1).  Async-signal-safe. */
static inline uint64_t pt_pow2_floor(uint64_t n) {
    uint64_t p = 1;
    while (p <= n / 2) p *= 2;
    return p;
}

/* A 64-bit mix (murmur3's finalizer half): hash table slots from keys and
 * frame chains.  Async-signal-safe. */
static inline uint64_t pt_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

#endif /* PT_COMMON_H */
