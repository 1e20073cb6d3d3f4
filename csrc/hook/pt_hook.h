/*
 * pt_hook.h - internals shared by the hook runtime's files:
 *   proftui_hook.c    the __cyg_profile_func_* hooks: shadow stack, node lookup
 *   pt_hook_life.c    threads, hook-cost calibration, fork, start-up, clean exit
 *   pt_hook_file.c    options, the shared-memory file, clock, module table
 *   pt_hook_filter.c  PROFTUI_INCLUDE/EXCLUDE: ELF symbols -> address ranges
 *   pt_hook_tick.c    the per-thread clock's handler: one tick to the current node
 * and from csrc/common: pt_timer.c + pt_timer_interpose.c (the clocks, shared
 * with the sampler), pt_runfile.c (the file's creation).
 */
#ifndef PT_HOOK_H
#define PT_HOOK_H

#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h> /* rdtsc; SSE2 for the table's lane compares */
#endif

#include "proftui_wire.h"
#include "proftui_wire_hook.h"
#include "pt_runfile.h"
#include "pt_timer.h"

#define PT_NOINST __attribute__((no_instrument_function))
#define PT_LIKELY(x) __builtin_expect(!!(x), 1)
#define PT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PT_NONE 0xffffffffu
#define PT_FCACHE 256u            /* per-thread filter verdict cache entries */
#define PT_CHUNK_NODES 512u       /* nodes per chunk of the pool */
#define PT_THREAD_CAP 4096u       /* thread table entries */
#define PT_MODULE_CAP 1024u       /* module table entries */
#define PT_STACK_CAP (1u << 20)   /* shadow-stack entries per thread at most */
#define PT_NODES_SHIFT 12         /* the pool's first window: 4096 nodes (8 chunks), then x2 */
#define PT_STACK_INITIAL 4096u    /* ... at first (288 KiB), then x4 as calls go deeper */

enum { PT_FILTER_INCLUDE = 1, PT_FILTER_EXCLUDE = 2 };
#define PT_ENTRY_UNRECORDED 0x80000000u  /* pt_entry.flags: the call has no node */
enum { PT_STATE_UNINIT = 0, PT_STATE_BUSY = 1, PT_STATE_READY = 2, PT_STATE_OFF = 3 };

/* Options read once from PROFTUI_* in the constructor. */
typedef struct pt_options {
    const char *dir;          /* PROFTUI_DIR */
    uint64_t buffer_bytes;    /* PROFTUI_BUFFER_BYTES: file size */
    int count_only;           /* PROFTUI_COUNT_ONLY=1: no clock at all */
    int timed;                /* PROFTUI_TIMED=1: two timestamps per call, no ticking clock */
    struct pt_timer_config timer; /* PROFTUI_FREQUENCY, PROFTUI_WALL_CLOCK, ... (sampled) */
    int force_monotonic;      /* PROFTUI_CLOCK=monotonic (tests the fallback) */
    uint32_t max_depth;       /* PROFTUI_MAX_DEPTH, 0 unlimited */
    char *include;            /* PROFTUI_INCLUDE: patterns separated by newlines */
    char *exclude;            /* PROFTUI_EXCLUDE */
} pt_options;

/* The process-wide state.  One instance, pt_g (proftui_hook.c).  The file's
 * layout and counts are kept here: the target may overwrite the headers,
 * and nothing is addressed through what they say. */
typedef struct pt_global {
    int state;                /* PT_STATE_*, atomic */
    int use_tsc;              /* timestamps from rdtsc rather than clock_gettime */
    int timed;                /* opt.timed: the hooks take timestamps */
    int ticking;              /* the per-thread clocks run (the default: neither option) */
    uintptr_t text_lo;        /* this library's code [text_lo, text_hi): a tick there is */
    uintptr_t text_hi;        /*   the hooks' own cost ([instrumentation]) */
    uint32_t node_cap;        /* nodes in the pool (chunk_capacity * chunk_nodes) */
    int filtering;            /* include or exclude patterns given */
    int slow;                 /* include patterns or a depth limit: every enter takes the
                                 slow path (exclude patterns: only inside an excluded call) */
    int has_include;
    uint32_t max_depth;       /* 0 unlimited */
    pt_options opt;
    struct pt_runfile rf;     /* the file; its head maps the headers and the tables */
    pt_file_header *hdr;
    pt_hook_header *hook;
    pt_hook_thread *threads;
    pt_hook_chunk *chunks;
    pt_hook_module *modules;
    struct pt_region nodes;   /* the node pool, mapped in windows as chunks are taken */
    uint32_t chunk_cap;       /* chunks in the pool */
    uint32_t chunk_next;      /* chunks handed out (atomic; may pass chunk_cap) */
    uint32_t thread_next;     /* thread entries handed out (atomic) */
    uint32_t module_next;     /* module entries handed out (atomic) */
    char exe[PT_HOOK_NAME_MAX];   /* /proc/self/exe, for the main program's module */
    /* Clock and overhead calibration, kept here so a fork child's new file gets them. */
    double ns_per_tick;
    double overhead_inner;    /* ticks */
    double overhead_outer;    /* ticks */
    uint64_t tick0;           /* ticks at calibration */
    uint64_t mono0;           /* CLOCK_MONOTONIC ns at calibration */
    uint32_t generation;      /* file name suffix after exec (hook.<pid>.<n>.ptw) */
    uint32_t module_limit;    /* module entries that may be touched: the capacity, or the
                                 first one the file system could not back (atomic) */
} pt_global;

extern pt_global pt_g;

/* One open call on the shadow stack: 64 bytes, one cache line (the stack is
 * page-aligned), so a push touches one line and its parent's, never three. */
typedef struct pt_entry {
    uintptr_t fn;       /* 0 only in the sentinel at index 0 */
    uintptr_t slot;     /* address of the return-address slot (stack position) */
    uint64_t ts;        /* ticks at entry */
    uint64_t child;     /* ticks of recorded descendants attached to this entry */
    uint32_t up;        /* entry index this call's time is charged to as a child */
    uint32_t anchor;    /* index of the nearest recorded entry at or below (0 sentinel);
                           written only when flags != 0, else it is the entry's own
                           index: read it through pt_anchor() */
    uint32_t anode;     /* that entry's node (this call's own node when it is recorded):
                           the parent of this entry's children */
    uint32_t rdepth;    /* recorded entries at or below (kept only when a limit is set) */
    uint32_t flags;     /* PT_FILTER_* counted in the thread's include/exclude depth,
                           PT_ENTRY_UNRECORDED; 0 for every fast-path entry (the fast
                           path never writes it: popping an entry resets it to 0) */
    uint32_t ra;        /* low 32 bits of the enter hook's return address: which hook
                           call instruction made this entry (see pt_enter_slow) */
    uint32_t site;      /* low 32 bits of the call site gcc passed (the frame's return
                           address: an inlined body passes its container's) */
    uint32_t pad_;
} pt_entry;
_Static_assert(sizeof(pt_entry) == 64, "a shadow-stack entry is one cache line");

/* The per-thread table (fn, parent) -> node: buckets of PT_BUCKET_SLOTS keys,
 * one cache line each, the keys' fields in lanes, so that one bucket is
 * searched with two vector compares and no branch per slot (the enter's
 * common path: a loop alternating between callees, as an interpreter's, finds
 * each child with one predictable branch).  A lane also holds what the enter
 * needs before it touches the node: the return slot's offset and whether the
 * context runs inlined; and the high half of fn, which completes the key for
 * the slow path.  Private memory: no bound or index comes
 * from the run file.  A lane is empty while its `parent2` is 0 (parent + 2
 * never is: PT_HOOK_ROOT + 2 is 1). */
#define PT_BUCKET_SLOTS 4u
#define PT_LANE_OFF 0x7fffu      /* pt_bucket.word: the offset; PT_LANE_OFF itself: unknown */
#define PT_LANE_INLINED 0x8000u  /* pt_bucket.word: the context ran inlined */
#define PT_LANE_FNHI_SHIFT 16    /* pt_bucket.word: fn >> 32 in the 15 bits above it, */
#define PT_LANE_FNHI 0x7fffu     /*   PT_LANE_FNHI when it does not fit */
/* pt_bucket.word: another function's lane has the same key (their addresses
 * are 4 GiB apart) or fn is above 2^47: the fast path, which compares only
 * the low half, must take neither, so such lanes keep the offset PT_LANE_OFF
 * for good. */
#define PT_LANE_SHARED 0x80000000u
typedef struct pt_bucket {
    uint32_t fnlo[PT_BUCKET_SLOTS];    /* low half of the function's address */
    uint32_t parent2[PT_BUCKET_SLOTS]; /* parent node index + 2; 0: empty */
    uint32_t node[PT_BUCKET_SLOTS];    /* its node's index (< node_cap: made by this thread) */
    uint32_t word[PT_BUCKET_SLOTS];    /* return-address slot minus the enter hook's CFA
                                          (PT_LANE_OFF: not known or larger), PT_LANE_INLINED,
                                          fn >> 32 << PT_LANE_FNHI_SHIFT, PT_LANE_SHARED */
} pt_bucket;
_Static_assert(sizeof(pt_bucket) == 64, "a bucket is one cache line");

/* The first fields are pt_hook_live (proftui_wire_hook.h): the front end
 * reads them, and the open entries, from the target's memory.  Everything
 * both fast paths read or write is in the first 64 bytes. */
typedef struct pt_hook_tstate {
    union {
        struct {
            uint32_t busy;      /* nonzero: hooks return at once (in a hook, disabled, exited) */
            uint32_t overflow;  /* calls deeper than cap, not stacked */
        };
        uint64_t guard;         /* both at once: one test on the fast paths */
    };
    uint32_t depth;     /* index of the top entry; 0: only the sentinel */
    uint32_t cap;
    pt_entry *stack;
    /* Ticks this thread spent making new calling contexts (node, hash slot, the
     * run file's pages they fault in, hash growth): the profiler's own one-time
     * work, 1-2 us per context against ~30 ns per known call.  Every timestamp
     * is taken on pt_thread_now(), which leaves it out, so a phase that meets
     * many new contexts (a parser) is not charged for them.  Written only under
     * `busy`, so a signal handler's hooks never race it. */
    uint64_t setup;
    uint32_t cur;       /* the current node: stack[depth].anode, PT_HOOK_ROOT when no
                           recorded call is open.  What the clock's handler charges: stored
                           (release) once the node is valid, in one store, by pt_set_depth
                           and the fast paths; never read otherwise */
    uint32_t limit;     /* min(max_depth + 1, cap), 0 under include patterns, a depth
                           limit or inside an excluded call (pt_set_limit): deeper enters
                           take the slow path */
    uintptr_t stk_hi;   /* the thread's own stack, [stk_lo, stk_hi): calls outside it */
    pt_bucket *hash;    /* the (fn, parent) -> node table: hash_mask + 1 buckets */
    uint32_t hash_mask;
    uint32_t hash_shift; /* 64 - log2(buckets): a key's bucket is its hash >> hash_shift */
    /* ---- end of the fast paths' line ---- */
    uint32_t hash_count; /* keys in the table */
    int ticking;        /* this thread's clock runs and the handler may charge it */
    pt_hook_pc *pcs;    /* its pc table in the file (pt_hook_thread.pcs_chunk), NULL none */
    uint32_t pc_mask;   /* entries - 1 */
    uintptr_t stk_lo;   /* run on another stack (sigaltstack); 0, UINTPTR_MAX unknown */
    uint32_t chunk;     /* current chunk or PT_NONE */
    uint32_t used;      /* nodes used in it */
    uint32_t slot;      /* thread table index */
    uint32_t incl;      /* active entries matching an include pattern */
    uint32_t excl;      /* active entries matching an exclude pattern */
    int pool_full;
    uint32_t max_depth;
    size_t region;      /* bytes of this mapping (the struct) */
    size_t stack_bytes; /* bytes of the shadow stack's mapping (cap entries) */
    /* Outgrown hash tables and shadow stacks, unmapped only at thread exit: an
     * enter interrupted by a signal whose handler grows one may still be
     * reading it. */
    struct { void *table; size_t bytes; } retired[32];
    uint32_t nretired;
    struct { uintptr_t fn; int verdict; } fcache[PT_FCACHE];
} pt_hook_tstate;

_Static_assert(offsetof(pt_hook_tstate, hash_shift) < 64,
               "the fields of both fast paths share one cache line");
_Static_assert(offsetof(pt_hook_tstate, guard) == offsetof(pt_hook_live, guard) &&
               offsetof(pt_hook_tstate, depth) == offsetof(pt_hook_live, depth) &&
               offsetof(pt_hook_tstate, cap) == offsetof(pt_hook_live, cap) &&
               offsetof(pt_hook_tstate, stack) == offsetof(pt_hook_live, stack) &&
               offsetof(pt_hook_tstate, setup) == offsetof(pt_hook_live, setup),
               "pt_hook_tstate starts with pt_hook_live");
_Static_assert(sizeof(pt_entry) == sizeof(pt_hook_open_entry) &&
               offsetof(pt_entry, fn) == offsetof(pt_hook_open_entry, fn) &&
               offsetof(pt_entry, ts) == offsetof(pt_hook_open_entry, ts) &&
               offsetof(pt_entry, child) == offsetof(pt_hook_open_entry, child) &&
               offsetof(pt_entry, up) == offsetof(pt_hook_open_entry, up) &&
               offsetof(pt_entry, anode) == offsetof(pt_hook_open_entry, anode) &&
               offsetof(pt_entry, flags) == offsetof(pt_hook_open_entry, flags),
               "pt_entry is pt_hook_open_entry");

/* The anchor of entry `e` at index `index` (see pt_entry.anchor).  Async-signal-safe. */
static inline __attribute__((no_instrument_function)) uint32_t pt_anchor(const pt_entry *e,
                                                                         uint32_t index)
{
    return e->flags ? e->anchor : index;
}

/* Set the top of the shadow stack to `d` and publish its node as the current
 * one for the clock's handler.  Async-signal-safe. */
static inline __attribute__((no_instrument_function)) void pt_set_depth(pt_hook_tstate *t,
                                                                        uint32_t d)
{
    t->depth = d;
    __atomic_store_n(&t->cur, t->stack[d].anode, __ATOMIC_RELEASE);
}

/* The PT_EXPORT hooks (proftui_hook.c); the calibration calls them too. */
void __cyg_profile_func_enter(void *fn, void *site);
void __cyg_profile_func_exit(void *fn, void *site);

/* Node i of the pool (i < node_cap), or NULL when its window is not mapped
 * (only an index the target overwrote can name such a node: callers that
 * may hold one check).  Async-signal-safe. */
static inline __attribute__((no_instrument_function)) pt_hook_node *pt_node(uint32_t i)
{
    /* pt_region_peek with the pool's constants: on every timed exit. */
    unsigned k = 63u - (unsigned)__builtin_clzll(((uint64_t)i >> PT_NODES_SHIFT) + 1);
    uintptr_t b = __atomic_load_n(&pt_g.nodes.bias[k], __ATOMIC_ACQUIRE);
    return b == 0 ? NULL : (pt_hook_node *)(b + ((uintptr_t)i << 6));
}
_Static_assert(sizeof(pt_hook_node) == 64, "pt_node shifts by 6");

/* Node i of the pool, for an index this thread made (its window is mapped:
 * the index comes from the runtime's own memory, never from the file).
 * Async-signal-safe. */
static inline __attribute__((no_instrument_function)) pt_hook_node *pt_node_own(uint32_t i)
{
    unsigned k = 63u - (unsigned)__builtin_clzll(((uint64_t)i >> PT_NODES_SHIFT) + 1);
    return (pt_hook_node *)(__atomic_load_n(&pt_g.nodes.bias[k], __ATOMIC_RELAXED) +
                            ((uintptr_t)i << 6));
}

/* The index of node `n` (an address pt_node gave): its own record, read from
 * the cache line the enter hook touches anyway, or PT_NONE when the target
 * overwrote it with one outside the pool.  One inside the pool but wrong
 * only misplaces that node's counts (the target destroyed it already); every
 * use of an index checks pt_node's NULL.  Async-signal-safe. */
static inline __attribute__((no_instrument_function)) uint32_t pt_node_index(
    const pt_hook_node *n)
{
    uint32_t i = __atomic_load_n(&n->self_, __ATOMIC_RELAXED);
    return i < pt_g.node_cap ? i : PT_NONE;
}

/* This thread's state (proftui_hook.c); initial-exec: one instruction to read. */
extern __thread pt_hook_tstate *pt_tls __attribute__((tls_model("initial-exec")));
/* Threads that must not record (table full, exited, fork failure) point here. */
extern pt_hook_tstate pt_off_thread;

/* ---- the table's keys (shared by the hooks and pt_hook_table.c) ---- */

/* The hash of (fn, parent) from the fields a bucket keeps (the low half of fn
 * and the parent), so a table grows from its own lanes: nothing is read back
 * from the run file.  A key's bucket is the product's top bits.
 * Async-signal-safe. */
static inline PT_NOINST uint64_t pt_hash(uint32_t fnlo, uint32_t parent)
{
    return (((uint64_t)parent << 32) | fnlo) * 0x9E3779B97F4A7C15ull;
}

/* The lanes of bucket `b` keyed (fnlo, parent), as a bit mask.  Branch-free:
 * the common path of every enter.  Async-signal-safe. */
static inline PT_NOINST unsigned pt_bucket_match(const pt_bucket *b, uint32_t fnlo,
                                                 uint32_t parent)
{
#if defined(__SSE2__)
    __m128i lo = _mm_cmpeq_epi32(_mm_load_si128((const __m128i *)(const void *)b->fnlo),
                                 _mm_set1_epi32((int)fnlo));
    __m128i pa = _mm_cmpeq_epi32(_mm_load_si128((const __m128i *)(const void *)b->parent2),
                                 _mm_set1_epi32((int)(parent + 2)));
    return (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_and_si128(lo, pa)));
#else
    unsigned m = 0;
    for (unsigned i = 0; i < PT_BUCKET_SLOTS; i++)
        m |= (unsigned)((b->fnlo[i] == fnlo) & (b->parent2[i] == parent + 2)) << i;
    return m;
#endif
}

/* The high half of fn as a lane keeps it (PT_LANE_FNHI when it does not fit:
 * such lanes are PT_LANE_SHARED).  Async-signal-safe. */
static inline PT_NOINST uint32_t pt_lane_fnhi(uintptr_t fn)
{
    uint64_t hi = (uint64_t)fn >> 32;
    return hi < PT_LANE_FNHI ? (uint32_t)hi : PT_LANE_FNHI;
}

/* A lane's word for fn with offset `off` (PT_LANE_OFF when unknown or too
 * large for the fast path), the inlined mark and `shared`.  Async-signal-safe. */
static inline PT_NOINST uint32_t pt_lane_word(uintptr_t fn, uintptr_t off, int inlined,
                                              int shared)
{
    uint32_t hi = pt_lane_fnhi(fn);
    shared |= hi == PT_LANE_FNHI;
    return (off < PT_LANE_OFF && !shared ? (uint32_t)off : PT_LANE_OFF) |
           (inlined ? PT_LANE_INLINED : 0) | (hi << PT_LANE_FNHI_SHIFT) |
           (shared ? PT_LANE_SHARED : 0);
}

/* ---- pt_hook_table.c ---- */
pt_bucket *pt_hash_alloc(uint32_t buckets);                /* async-signal-safe */
size_t pt_hash_bytes(const pt_hook_tstate *t);           /* async-signal-safe */
int pt_hash_add(pt_hook_tstate *t, uint32_t parent, uintptr_t fn); /* async-signal-safe */


/* ---- proftui_hook.c ---- */
int pt_stack_grow(pt_hook_tstate *t);                     /* async-signal-safe */
uint32_t pt_node_for(pt_hook_tstate *t, uint32_t parent, uintptr_t fn); /* async-signal-safe */
void pt_hook_close_all(pt_hook_tstate *t, uint64_t now);           /* async-signal-safe */
void pt_enter_slow(pt_hook_tstate *t, uintptr_t fn, uintptr_t site, uintptr_t cfa,
                   uintptr_t ra);

/* ---- pt_hook_life.c ---- */
pt_hook_tstate *pt_thread_attach(void);                       /* first call of a thread */

/* ---- pt_hook_file.c ---- */
void pt_options_read(pt_options *opt);                  /* constructor only */
int pt_hook_file_create(void);                          /* 0 ok; async-signal-safe (fork child) */
int pt_hook_reserve(void *addr, uint64_t len);          /* back a region; async-signal-safe */
uint32_t pt_hook_chunks_claim(uint32_t k);              /* k chunks aligned to k, or PT_NONE;
                                                           async-signal-safe */
void pt_hook_file_forget(void);                         /* fork child: unmap the parent's */
uint64_t pt_ticks_slow(void);                           /* async-signal-safe */
void pt_clock_calibrate(void);                          /* constructor only: ~2 ms */
void pt_clock_refine(void);                             /* exit path; async-signal-safe */
uint32_t pt_module_of(uintptr_t address);               /* index+1 or 0; async-signal-safe
                                                           in practice (dl_iterate_phdr's lock
                                                           is recursive) */
void pt_modules_scan_all(void);                         /* record every loaded object */

/* ---- pt_hook_filter.c ---- */
void pt_filter_init(void);                              /* split the patterns: init only */
void pt_filter_module(const char *path, uintptr_t bias); /* resolve patterns in one object */
int pt_filter_verdict(uintptr_t fn);                    /* PT_FILTER_* bits; lock-free read */
void pt_filter_atfork_child(void);                      /* async-signal-safe */

/* ---- pt_hook_tick.c ---- */
int pt_hook_tick_init(void);          /* start-up: choose the clock, install the handler; 0 ok */
void pt_hook_tick_arm(pt_hook_tstate *t);  /* calling thread's clock (first call, fork child) */
void pt_hook_tick_disarm(pt_hook_tstate *t); /* thread or process exit */
void pt_hook_tick_describe(void);     /* clock, signal, flags into the file's headers;
                                         async-signal-safe */

/* Timestamp in ticks.  Async-signal-safe. */
static inline PT_NOINST uint64_t pt_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (PT_LIKELY(pt_g.use_tsc))
        return __rdtsc();
#endif
    return pt_ticks_slow();
}

/* This thread's clock: ticks without its set-up time (pt_hook_tstate.setup).
 * Async-signal-safe. */
static inline PT_NOINST uint64_t pt_thread_now(const pt_hook_tstate *t)
{
    return pt_ticks() - t->setup;
}

/*
 * A call's two timestamps must bracket its body.  rdtsc is not ordered with
 * other instructions: an out-of-order core runs a body's long dependency
 * chain (a 20-multiply loop: 80 cycles) under the exit hook's own work and
 * reads the exit timestamp before the chain is done, so the body's time
 * showed up nowhere (hidden under hook cost the compensation then takes out)
 * or in the caller's self time: ins_chain.c's 77 ms of calls showed as 10 ms.
 * The entry timestamp is therefore followed by lfence (the body starts after
 * it) and the exit one is rdtscp (it waits for the body's instructions); the
 * clock_gettime fallback gets the same fences around it.  This doubles the
 * hook's cost (bench_hook: 17 -> 36 ns per call), which the calibration takes
 * out like the rest.  Both async-signal-safe.
 */
static inline PT_NOINST uint64_t pt_call_start(const pt_hook_tstate *t)
{
#if defined(__x86_64__) || defined(__i386__)
    if (PT_LIKELY(pt_g.use_tsc)) {
        uint64_t now = __rdtsc();
        _mm_lfence();
        return now - t->setup;
    }
    uint64_t now = pt_ticks_slow();
    _mm_lfence();
    return now - t->setup;
#else
    return pt_ticks_slow() - t->setup;
#endif
}

/* The exit timestamp, setup not yet taken out (the exit hook reads it before
 * its thread state).  See pt_call_start.  Async-signal-safe. */
static inline PT_NOINST uint64_t pt_call_end_raw(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (PT_LIKELY(pt_g.use_tsc)) {
        unsigned int aux;
        return __rdtscp(&aux);
    }
    _mm_lfence();
#endif
    return pt_ticks_slow();
}

#endif /* PT_HOOK_H */
