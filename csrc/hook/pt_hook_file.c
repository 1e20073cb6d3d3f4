/*
 * pt_hook_file.c - the hook runtime's options, shared-memory file, clock and
 * module table (layout in proftui_wire_hook.h, docs/wire-format.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pt_hook.h"
#include "pt_runfile.h"

#define PT_DEFAULT_BUFFER (64ull << 20)
#define PT_MIN_BUFFER (1ull << 20)
#define PT_MAX_BUFFER (16ull << 30)

/* Parse a decimal environment value; `fallback` if absent or bad.  Constructor only. */
static PT_NOINST uint64_t pt_env_u64(const char *name, uint64_t fallback)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    return (errno || *end) ? fallback : (uint64_t)v;
}

/* Read PROFTUI_* once.  Not async-signal-safe (getenv, strdup): constructor only. */
PT_NOINST void pt_options_read(pt_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->dir = getenv("PROFTUI_DIR");
    opt->buffer_bytes = pt_env_u64("PROFTUI_BUFFER_BYTES", PT_DEFAULT_BUFFER);
    if (opt->buffer_bytes < PT_MIN_BUFFER)
        opt->buffer_bytes = PT_MIN_BUFFER;
    if (opt->buffer_bytes > PT_MAX_BUFFER)
        opt->buffer_bytes = PT_MAX_BUFFER;
    opt->count_only = pt_env_u64("PROFTUI_COUNT_ONLY", 0) != 0;
    opt->timed = pt_env_u64("PROFTUI_TIMED", 0) != 0;
    pt_timer_config_from_env(&opt->timer);
    const char *clock = getenv("PROFTUI_CLOCK");
    opt->force_monotonic = clock && strcmp(clock, "monotonic") == 0;
    opt->max_depth = (uint32_t)pt_env_u64("PROFTUI_MAX_DEPTH", 0);
    const char *inc = getenv("PROFTUI_INCLUDE");
    const char *exc = getenv("PROFTUI_EXCLUDE");
    opt->include = (inc && *inc) ? strdup(inc) : NULL;
    opt->exclude = (exc && *exc) ? strdup(exc) : NULL;
}

/* CLOCK_MONOTONIC in ns.  Async-signal-safe. */
static PT_NOINST uint64_t pt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The fallback clock: CLOCK_MONOTONIC, one tick = 1 ns.  Async-signal-safe. */
PT_NOINST uint64_t pt_ticks_slow(void)
{
    return pt_mono_ns();
}

/* Whether the kernel reports an invariant TSC (constant_tsc and nonstop_tsc:
 * same rate on every core, through frequency changes and idle states).
 * Reads /proc/cpuinfo: constructor only. */
static PT_NOINST int pt_tsc_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
    /* Static, not on the stack: the first hook call may come deep in a
     * recursion near the stack limit (docs/runtime-safety.md).  Init runs once. */
    static char buf[16384];
    int fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *flags = strstr(buf, "\nflags");
    if (!flags)
        return 0;
    char *eol = strchr(flags + 1, '\n');
    if (eol)
        *eol = '\0';
    return strstr(flags, " constant_tsc") && strstr(flags, " nonstop_tsc");
#else
    return 0;
#endif
}

/* Choose the clock and measure ticks per ns against CLOCK_MONOTONIC over ~2 ms.
 * Constructor / first-hook only. */
PT_NOINST void pt_clock_calibrate(void)
{
    pt_g.use_tsc = !pt_g.opt.force_monotonic && pt_tsc_invariant();
    pt_g.ns_per_tick = 1.0;
    if (!pt_g.use_tsc) {
        pt_g.tick0 = pt_g.mono0 = pt_mono_ns();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    uint64_t m0 = pt_mono_ns(), t0 = __rdtsc(), m1, t1;
    do {
        m1 = pt_mono_ns();
        t1 = __rdtsc();
    } while (m1 - m0 < 2000000ull);
    if (t1 <= t0) {  /* a TSC that does not move is no clock */
        pt_g.use_tsc = 0;
        pt_g.tick0 = pt_g.mono0 = pt_mono_ns();
        return;
    }
    pt_g.ns_per_tick = (double)(m1 - m0) / (double)(t1 - t0);
    pt_g.tick0 = t0;
    pt_g.mono0 = m0;
#endif
}

/* Re-derive ns_per_tick over the whole run (exact for the final profile).
 * Async-signal-safe. */
PT_NOINST void pt_clock_refine(void)
{
    if (!pt_g.use_tsc || !pt_g.hook)
        return;
    uint64_t m1 = pt_mono_ns(), t1 = pt_ticks();
    if (m1 - pt_g.mono0 < 50000000ull || t1 <= pt_g.tick0)
        return;  /* too short to beat the start-up measurement */
    pt_g.ns_per_tick = (double)(m1 - pt_g.mono0) / (double)(t1 - pt_g.tick0);
    pt_g.hook->ns_per_tick = pt_g.ns_per_tick;
}

/* Create, size, map and initialise this process's file; publish the magic
 * last so a reader never sees a half-written header.  Returns 0 on success
 * (-1: a note says why).  Only the head (headers, thread, module and chunk
 * tables) is mapped here; the node pool in windows as chunks are taken.
 * Async-signal-safe (used by the fork child handler). */
PT_NOINST int pt_hook_file_create(void)
{
    uint64_t size = pt_g.opt.buffer_bytes;
    uint64_t threads_off = 128 + sizeof(pt_hook_header);
    uint64_t modules_off = threads_off + PT_THREAD_CAP * sizeof(pt_hook_thread);
    uint64_t chunks_off = modules_off + PT_MODULE_CAP * sizeof(pt_hook_module);
    uint64_t chunk_bytes = PT_CHUNK_NODES * sizeof(pt_hook_node) + sizeof(pt_hook_chunk);
    /* RLIMIT_FSIZE: a longer file would kill the target (SIGXFSZ): a smaller
     * pool, said in a note. */
    uint64_t limit = pt_note_fsize_limit(), wanted = size;
    if (size > limit)
        size = limit;
    if (size < chunks_off + 4 * chunk_bytes + 64)
        size = chunks_off + 4 * chunk_bytes + 64;  /* over a tiny limit: refused below */
    uint64_t nchunks = (size - chunks_off - 64) / chunk_bytes;
    if (nchunks > (PT_NONE - 1) / PT_CHUNK_NODES)
        nchunks = (PT_NONE - 1) / PT_CHUNK_NODES;
    uint64_t nodes_off = (chunks_off + nchunks * sizeof(pt_hook_chunk) + 63) & ~63ull;
    size = nodes_off + nchunks * PT_CHUNK_NODES * sizeof(pt_hook_node);

    /* hook.<pid>[.<n>].ptw, created like every runtime file (pt_runfile.h);
     * only the headers are backed now, tables and chunks when first used. */
    if (pt_runfile_create(&pt_g.rf, pt_g.opt.dir, "hook", (uint32_t)getpid(), size, nodes_off,
                          threads_off, &pt_g.generation) != 0)
        return -1;
    if (size < wanted && wanted > limit)
        pt_note_fsize_cap(size);
    pt_g.module_limit = PT_MODULE_CAP;
    uint8_t *base = pt_g.rf.head;
    pt_g.hdr = pt_g.rf.hdr;
    pt_g.hook = (pt_hook_header *)(base + 128);
    pt_g.threads = (pt_hook_thread *)(base + threads_off);
    pt_g.modules = (pt_hook_module *)(base + modules_off);
    pt_g.chunks = (pt_hook_chunk *)(base + chunks_off);
    pt_region_init(&pt_g.nodes, &pt_g.rf, nodes_off, sizeof(pt_hook_node), PT_NODES_SHIFT,
                   nchunks * PT_CHUNK_NODES, 0, PT_NOTE_NODES);
    pt_g.chunk_cap = (uint32_t)nchunks;
    pt_g.node_cap = (uint32_t)nchunks * PT_CHUNK_NODES;
    pt_g.chunk_next = pt_g.thread_next = pt_g.module_next = 0;

    pt_hook_header *h = pt_g.hook;
    h->node_size = sizeof(pt_hook_node);
    h->chunk_nodes = PT_CHUNK_NODES;
    h->chunk_capacity = (uint32_t)nchunks;
    h->thread_capacity = PT_THREAD_CAP;
    h->module_capacity = PT_MODULE_CAP;
    h->threads_offset = threads_off;
    h->chunks_offset = chunks_off;
    h->modules_offset = modules_off;
    h->nodes_offset = nodes_off;
    h->ns_per_tick = pt_g.ns_per_tick;
    h->overhead_inner = pt_g.overhead_inner;
    h->overhead_outer = pt_g.overhead_outer;
    h->tick_start = pt_g.tick0;
    h->mono_start_ns = pt_g.mono0;
    h->generation = pt_g.generation;
    h->max_depth = pt_g.max_depth;
    h->stack_capacity = PT_STACK_CAP;

    pt_file_header *f = pt_g.hdr;
    pt_runfile_header_init(f, PT_KIND_HOOK, size);
    f->flags = pt_g.timed ? 0 : PT_FLAG_COUNT_ONLY;
    const char *clock = pt_g.timed ? (pt_g.use_tsc ? "tsc" : "CLOCK_MONOTONIC") : "none (count only)";
    strncpy(f->clock, clock, sizeof f->clock - 1);
    pt_hook_tick_describe();  /* a ticking clock's name, period and signal instead */
    return 0;
}

/* Fork child: unmap the parent's file (its node windows, then its head).
 * Nothing of this thread may use them any more.  Not in a handler. */
PT_NOINST void pt_hook_file_forget(void)
{
    pt_region_unmap(&pt_g.nodes);
    pt_runfile_unmap(&pt_g.rf);
    pt_g.hdr = NULL;
    pt_g.hook = NULL;
    pt_g.node_cap = 0;
}

/* Back [addr, addr + len) of the file's mapping before its first touch; on
 * failure say so in the header (PT_FLAG_NO_SPACE) and return -1: the caller
 * drops what would have gone there.  Async-signal-safe. */
PT_NOINST int pt_hook_reserve(void *addr, uint64_t len)
{
    if (pt_runfile_reserve(addr, len) == 0)
        return 0;
    pt_runfile_no_space(pt_g.hdr);
    return -1;
}

/* Hand out `k` (a power of two <= 8) consecutive chunks starting at a
 * multiple of k, so they lie in one window of the pool (whose windows start
 * at multiples of 8 chunks); chunks skipped for the alignment stay unused
 * (count 0).  The first one, or PT_NONE when the pool is full.  The count the
 * reader sees is published after.  Async-signal-safe. */
PT_NOINST uint32_t pt_hook_chunks_claim(uint32_t k)
{
    uint32_t cur = __atomic_load_n(&pt_g.chunk_next, __ATOMIC_RELAXED), start;
    do {
        start = (cur + k - 1) & ~(k - 1);
        if (start >= pt_g.chunk_cap || k > pt_g.chunk_cap - start)
            return PT_NONE;
    } while (!__atomic_compare_exchange_n(&pt_g.chunk_next, &cur, start + k, 1,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    pt_publish_max32(&pt_g.hook->chunk_count, start + k);
    return start;
}

/* ---- module table ----------------------------------------------------------- */

struct pt_hook_find {
    uintptr_t address;  /* 0: record every object */
    uint32_t found;     /* module index + 1 */
};

/* Append one loaded object to the module table; index+1 or 0 if full.
 * Async-signal-safe. */
static PT_NOINST uint32_t pt_module_add(struct dl_phdr_info *info, uintptr_t lo, uintptr_t hi)
{
    uint32_t i = __atomic_fetch_add(&pt_g.module_next, 1, __ATOMIC_RELAXED);
    if (i >= __atomic_load_n(&pt_g.module_limit, __ATOMIC_RELAXED))
        return 0;
    pt_publish_max32(&pt_g.hook->module_count, i + 1);
    if (pt_hook_reserve(&pt_g.modules[i], sizeof(pt_hook_module)) != 0) {
        /* Entries from i on are never touched (a full tmpfs allocates even on a read). */
        uint32_t limit = __atomic_load_n(&pt_g.module_limit, __ATOMIC_RELAXED);
        while (i < limit && !__atomic_compare_exchange_n(&pt_g.module_limit, &limit, i, 0,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
        return 0;
    }
    pt_hook_module *m = &pt_g.modules[i];
    const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : pt_g.exe;
    size_t len = strnlen(name, sizeof m->path - 1);
    memcpy(m->path, name, len);
    m->path[len] = '\0';
    m->end = hi;
    m->bias = info->dlpi_addr;
    __atomic_store_n(&m->start, (uint64_t)lo, __ATOMIC_RELEASE);
    pt_filter_module(name, info->dlpi_addr);
    return i + 1;
}

/* dl_iterate_phdr callback: the object containing f->address (or every object).
 * Async-signal-safe as pt_module_of is. */
static PT_NOINST int pt_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct pt_hook_find *f = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        if (a < lo)
            lo = a;
        if (b > hi)
            hi = b;
        if (f->address >= a && f->address < b)
            inside = 1;
    }
    if (hi == 0)
        return 0;
    if (f->address == 0) {
        pt_module_add(info, lo, hi);
        return 0;
    }
    if (inside) {
        f->found = pt_module_add(info, lo, hi);
        return 1;
    }
    return 0;
}

/* The module table entry holding `address` (index+1), recording the object on
 * first sight; 0 if the address is in no loaded object.  Newest entries win,
 * so an object loaded where a dlclose()d one was is found first.
 * Async-signal-safe in practice: dl_iterate_phdr takes the loader's recursive
 * lock and does not allocate. */
PT_NOINST uint32_t pt_module_of(uintptr_t address)
{
    uint32_t n = __atomic_load_n(&pt_g.module_next, __ATOMIC_ACQUIRE);
    uint32_t limit = __atomic_load_n(&pt_g.module_limit, __ATOMIC_RELAXED);
    if (n > limit)
        n = limit;
    for (uint32_t i = n; i-- > 0;) {
        pt_hook_module *m = &pt_g.modules[i];
        uint64_t start = __atomic_load_n(&m->start, __ATOMIC_ACQUIRE);
        if (start && address >= start && address < m->end)
            return i + 1;
    }
    struct pt_hook_find f = {address, 0};
    dl_iterate_phdr(pt_find_cb, &f);
    return f.found;
}

/* Record every object loaded now (and resolve the filters in each).
 * Not async-signal-safe only through the filters' file reads: init only. */
PT_NOINST void pt_modules_scan_all(void)
{
    struct pt_hook_find f = {0, 0};
    dl_iterate_phdr(pt_find_cb, &f);
}
