/* The loaded objects, their map log entries and CFI tables (see pt_maps.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "pt_jit.h"
#include "pt_maps.h"
#include "pt_runfile.h"

#define PT_VDSO_NAME "[vdso]"

PT_HIDDEN const struct pt_cfi_set *volatile pt_maps_cfi;
PT_HIDDEN uintptr_t pt_maps_self_lo, pt_maps_self_hi;

#define PT_MAX_OBJECTS 4096
#define PT_MAX_SEGS 4

/* One object seen by dl_iterate_phdr (identified by load bias and name). */
struct pt_object {
    uint64_t base;
    char name[312];
    int alive; /* present in the latest iteration */
    int nsegs;
    uint64_t seg_start[PT_MAX_SEGS], seg_end[PT_MAX_SEGS], seg_off[PT_MAX_SEGS];
    uint8_t build_id[32];
    uint32_t build_id_len;
    struct pt_cfi_table *cfi; /* NULL: no .eh_frame_hdr (frame pointers only) */
};

/* Objects ever seen (pt_alloc'd once, never freed; an entry is filled before
 * pt_nobjects, stored with release, counts it, so pt_maps_unknown reads them
 * without the lock), the lock serializing refreshes (no walk takes it: walks
 * only read pt_maps_cfi) and the executable's path (dl_iterate_phdr calls it ""). */
static struct pt_object *pt_objects;
static int pt_nobjects;
static pthread_mutex_t pt_maps_lock = PTHREAD_MUTEX_INITIALIZER;
static char pt_exe_path[312];

/* What one refresh's dl_iterate_phdr callback needs. */
struct pt_refresh {
    struct pt_maplog *log;
    int fp_only;
    int changed;
};

/* Log every executable segment of `o`: objects with a path, and the vDSO as
 * "[vdso]" (its name in /proc/PID/maps; the reader symbolizes it from memory). */
static void pt_log_object(struct pt_maplog *log, const struct pt_object *o,
                          uint32_t event) {
    if (o->name[0] != '/' && strcmp(o->name, PT_VDSO_NAME) != 0) return;
    for (int i = 0; i < o->nsegs; i++) {
        struct pt_maps_segment seg = {o->seg_start[i], o->seg_end[i], o->seg_off[i], o->base,
                                      o->build_id,     o->build_id_len, o->name};
        pt_maplog_append(log, &seg, event);
    }
}

/* The GNU build-id note of an object, from its PT_NOTE segments. */
static void pt_read_build_id(const struct dl_phdr_info *info, struct pt_object *o) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_filesz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *nh;
            const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                o->build_id_len = nh->n_descsz < 32 ? nh->n_descsz : 32;
                memcpy(o->build_id, desc, o->build_id_len);
                return;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

static int pt_on_object(struct dl_phdr_info *info, size_t size, void *data) {
    struct pt_refresh *r = data;
    (void)size;
    const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : pt_exe_path;
    /* The vDSO's program headers follow its ELF header, in its first page. */
    uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    if (vdso != 0 && ((uintptr_t)info->dlpi_phdr & ~(uintptr_t)4095) == vdso) name = PT_VDSO_NAME;
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].base == info->dlpi_addr && strcmp(pt_objects[i].name, name) == 0) {
            pt_objects[i].alive = 1;
            return 0;
        }
    if (pt_nobjects >= PT_MAX_OBJECTS) return 0;
    struct pt_object *o = &pt_objects[pt_nobjects];
    memset(o, 0, sizeof *o);
    o->base = info->dlpi_addr;
    size_t len = strlen(name);
    if (len >= sizeof o->name) len = sizeof o->name - 1;
    memcpy(o->name, name, len);
    o->alive = 1;
    const void *eh_hdr = NULL;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_EH_FRAME) eh_hdr = (const void *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uint64_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (start < lo) lo = start;
        if (end > hi) hi = end;
        if (o->nsegs < PT_MAX_SEGS) {
            o->seg_start[o->nsegs] = start;
            o->seg_end[o->nsegs] = end;
            o->seg_off[o->nsegs] = ph->p_offset;
            o->nsegs++;
        }
    }
    uintptr_t self = (uintptr_t)&pt_maps_refresh;
    if (self >= lo && self < hi) {
        pt_maps_self_lo = lo;
        pt_maps_self_hi = hi;
    }
    pt_read_build_id(info, o);
    __atomic_store_n(&pt_nobjects, pt_nobjects + 1, __ATOMIC_RELEASE); /* o is whole */
    pt_log_object(r->log, o, PT_MAP_LOAD);
    if (eh_hdr != NULL && lo < hi && !r->fp_only) {
        /* The object's own mapped memory: no bound is narrower than "all of it". */
        struct pt_cfi_source src = {eh_hdr, (uint64_t)(uintptr_t)eh_hdr, (const unsigned char *)0,
                                    (const unsigned char *)UINTPTR_MAX, 0};
        pt_cfi_failed_bytes = 0;
        o->cfi = pt_cfi_build(&src, lo, hi);
        if (pt_cfi_failed_bytes) pt_note_map_failure(PT_NOTE_UNWIND, pt_cfi_failed_bytes, ENOMEM);
    }
    r->changed = 1;
    return 0;
}

/* Build a set of the live objects' tables and swap it in; the old one is
 * leaked on purpose (see pt_maps.h).  Sorted by insertion, not qsort (which
 * may malloc): a refresh may run in a signal handler (pt_maps_try_refresh). */
static void pt_publish(void) {
    size_t njit = 0;
    const struct pt_cfi_table *const *jit = pt_jit_tables(&njit);
    size_t n = njit;
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].alive && pt_objects[i].cfi != NULL) n++;
    struct pt_cfi_set *set = pt_alloc(sizeof *set + n * sizeof set->tables[0]);
    if (set == NULL) {
        pt_note_map_failure(PT_NOTE_UNWIND, sizeof *set + n * sizeof set->tables[0], ENOMEM);
        return;
    }
    /* The objects' tables at the end, sorted there (a few hundred at most, mostly
     * in order), then merged from the front with generated code's (sorted by
     * pt_jit.c, up to 65,536 of them): O(objects^2 + n).  The write index
     * never passes the objects' read index (it trails it by the generated
     * tables still to come), and once those are all placed the objects left
     * are where they belong. */
    const struct pt_cfi_table **t = set->tables;
    size_t objs = njit;
    for (int i = 0; i < pt_nobjects; i++) {
        if (!pt_objects[i].alive || pt_objects[i].cfi == NULL) continue;
        const struct pt_cfi_table *x = pt_objects[i].cfi;
        size_t j = objs++;
        for (; j > njit && t[j - 1]->lo > x->lo; j--) t[j] = t[j - 1];
        t[j] = x;
    }
    size_t w = 0, a = 0, b = njit; /* jit[a, njit) and t[b, n) are what is left */
    while (a < njit && b < n) t[w++] = jit[a]->lo <= t[b]->lo ? jit[a++] : t[b++];
    while (a < njit) t[w++] = jit[a++];
    set->n = n;
    __atomic_store_n(&pt_maps_cfi, set, __ATOMIC_RELEASE);
}

/* The refresh, pt_maps_lock held. */
static void pt_refresh_locked(struct pt_maplog *log, int fp_only, int log_all) {
    if (pt_objects == NULL) {
        pt_objects = pt_alloc(PT_MAX_OBJECTS * sizeof *pt_objects);
        ssize_t len = readlink("/proc/self/exe", pt_exe_path, sizeof pt_exe_path - 1);
        pt_exe_path[len > 0 ? len : 0] = '\0';
    }
    if (pt_objects == NULL) {
        pt_note_map_failure(PT_NOTE_UNWIND, PT_MAX_OBJECTS * sizeof *pt_objects, ENOMEM);
        return;
    }
    static unsigned char was_alive[PT_MAX_OBJECTS]; /* under pt_maps_lock */
    int known = pt_nobjects;
    for (int i = 0; i < known; i++) {
        was_alive[i] = (unsigned char)pt_objects[i].alive;
        pt_objects[i].alive = 0;
        if (log_all && was_alive[i]) pt_log_object(log, &pt_objects[i], PT_MAP_LOAD);
    }
    struct pt_refresh r = {log, fp_only, log_all};
    dl_iterate_phdr(pt_on_object, &r);
    for (int i = 0; i < known; i++)
        if (was_alive[i] && !pt_objects[i].alive) {
            pt_log_object(log, &pt_objects[i], PT_MAP_UNLOAD);
            r.changed = 1;
        }
    if (r.changed) pt_publish();
}

/* See pt_maps.h.  Not async-signal-safe. */
void pt_maps_refresh(struct pt_maplog *log, int fp_only, int log_all) {
    pthread_mutex_lock(&pt_maps_lock);
    pt_refresh_locked(log, fp_only, log_all);
    pthread_mutex_unlock(&pt_maps_lock);
}

/* See pt_maps.h.  glibc's trylock of a normal mutex is one compare-and-swap:
 * it never waits.  Async-signal-safe but for dl_iterate_phdr's lock. */
int pt_maps_try_refresh(struct pt_maplog *log, int fp_only) {
    if (pthread_mutex_trylock(&pt_maps_lock) != 0) return -1;
    pt_refresh_locked(log, fp_only, 0);
    pthread_mutex_unlock(&pt_maps_lock);
    return 0;
}

static int pt_known_pc(uint64_t pc);

/* See pt_maps.h.  Async-signal-safe but for dl_iterate_phdr's lock (not taken here). */
int pt_maps_try_jit(uint64_t now_ns) {
    if (pthread_mutex_trylock(&pt_maps_lock) != 0) return -1;
    if (pt_objects != NULL && pt_jit_poll(now_ns, pt_known_pc)) pt_publish();
    pthread_mutex_unlock(&pt_maps_lock);
    return 0;
}

#if defined(DLFO_STRUCT_HAS_EH_DBASE)
/* glibc >= 2.35: lock-free and async-signal-safe by contract.  Weak: absent
 * in an older glibc, where every unknown pc counts as a new object. */
#pragma weak _dl_find_object
#endif

/* 1 if `pc` lies in an executable segment of a live object seen by a
 * refresh.  Lock-free: entries are whole before they are counted; `alive`
 * may flicker during a refresh (a false "unknown": one more try).
 * Async-signal-safe. */
static int pt_known_pc(uint64_t pc) {
    int n = __atomic_load_n(&pt_nobjects, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) {
        const struct pt_object *o = &pt_objects[i];
        if (!__atomic_load_n(&o->alive, __ATOMIC_RELAXED)) continue;
        for (int s = 0; s < o->nsegs; s++)
            if (pc >= o->seg_start[s] && pc < o->seg_end[s]) return 1;
    }
    return 0;
}

/* See pt_maps.h.  Async-signal-safe. */
int pt_maps_unknown(const uint64_t *pcs, unsigned n) {
    if (__atomic_load_n(&pt_objects, __ATOMIC_ACQUIRE) == NULL) return 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t pc = i == 0 ? pcs[i] : pcs[i] - 1; /* a return address: its call */
        if (pc < 4096 || pt_known_pc(pc)) continue;
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
        if (_dl_find_object != NULL) {
            struct dl_find_object found;
            if (_dl_find_object((void *)(uintptr_t)pc, &found) != 0) continue; /* JIT, no object */
        }
#endif
        return 1;
    }
    return 0;
}

/* See pt_maps.h.  Not async-signal-safe. */
void pt_maps_fork_child(void) {
    pthread_mutex_init(&pt_maps_lock, NULL);
    pt_jit_fork_child();
}

/* Async-signal-safe. */
void pt_maplog_init(struct pt_maplog *log, const struct pt_runfile *rf, uint64_t offset,
                    uint32_t *count) {
    log->hdr = rf->hdr;
    log->used = 0;
    log->count = count;
    /* Windows of 16, 32, ... entries: a program's few dozen segments take two pages. */
    pt_region_init(&log->entries, rf, offset, sizeof(pt_map_entry), 4, PT_MAPLOG_ENTRIES, 0,
                   PT_NOTE_MAPLOG);
}

/* Not async-signal-safe (see pt_maps.h). */
void pt_maplog_append(struct pt_maplog *log, const struct pt_maps_segment *seg,
                      uint32_t event) {
    if (log->hdr == NULL) return;
    uint32_t n = log->used;
    int saved_errno = errno; /* after a dlopen: the target's errno stays */
    pt_map_entry *e = n < PT_MAPLOG_ENTRIES ? pt_region_at(&log->entries, n) : NULL;
    errno = saved_errno;
    if (e == NULL || pt_runfile_reserve(e, sizeof *e) != 0) {
        if (e != NULL) pt_runfile_no_space(log->hdr);
        __atomic_add_fetch(&log->hdr->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    e->start = seg->start;
    e->end = seg->end;
    e->offset = seg->offset;
    e->base = seg->base;
    e->event = event;
    e->build_id_len = seg->build_id_len;
    memcpy(e->build_id, seg->build_id, seg->build_id_len);
    strncpy(e->path, seg->path, sizeof e->path - 1); /* the entry's page was zero */
    log->used = n + 1;
    __atomic_store_n(log->count, n + 1, __ATOMIC_RELEASE);
}
