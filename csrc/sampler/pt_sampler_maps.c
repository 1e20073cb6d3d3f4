/* Loaded objects: log their executable segments into the runtime file (so
 * code of a dlclose'd plugin still resolves by name) and publish the CFI
 * unwind tables the handler searches.  Runs at start, after dlopen/dlclose
 * and in a followed fork child; never in signal context. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pt_sampler.h"

/* Rows the handler searches; see pt_sampler.h. */
PT_HIDDEN const struct pt_cfi_set *volatile pt_sampler_cfi_current;

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

/* Objects ever seen (pt_alloc'd once, never freed) and the lock serializing
 * refreshes: the handler never takes it, it only reads pt_sampler_cfi_current. */
static struct pt_object *pt_objects;
static int pt_nobjects;
static pthread_mutex_t pt_maps_lock = PTHREAD_MUTEX_INITIALIZER;
/* Path of the main executable (dl_iterate_phdr calls it ""), read once. */
static char pt_exe_path[312];

static void pt_log_object(const struct pt_object *o, uint32_t event) {
    for (int i = 0; i < o->nsegs; i++) {
        pt_map_entry e;
        memset(&e, 0, sizeof e);
        e.start = o->seg_start[i];
        e.end = o->seg_end[i];
        e.offset = o->seg_off[i];
        e.base = o->base;
        e.event = event;
        e.build_id_len = o->build_id_len;
        memcpy(e.build_id, o->build_id, sizeof e.build_id);
        memcpy(e.path, o->name, sizeof e.path);
        pt_sampler_maplog_append(&e);
    }
}

/* The GNU build-id note of an object, from its PT_NOTE segments. */
static void pt_read_build_id(struct dl_phdr_info *info, struct pt_object *o) {
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

static struct pt_object *pt_find(uint64_t base, const char *name) {
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].base == base && strcmp(pt_objects[i].name, name) == 0)
            return &pt_objects[i];
    return NULL;
}

static int pt_on_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    int *changed = data;
    const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : pt_exe_path;
    struct pt_object *o = pt_find(info->dlpi_addr, name);
    if (o != NULL) {
        o->alive = 1;
        return 0;
    }
    if (pt_nobjects >= PT_MAX_OBJECTS) return 0;
    o = &pt_objects[pt_nobjects++];
    memset(o, 0, sizeof *o);
    o->base = info->dlpi_addr;
    snprintf(o->name, sizeof o->name, "%s", name);
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
    pt_read_build_id(info, o);
    /* The vDSO is no file the front end can open: unwind through it, but do not log it. */
    if (o->name[0] == '/') pt_log_object(o, PT_MAP_LOAD);
    if (eh_hdr != NULL && lo < hi && !pt_sampler_cfg.fp_only) {
        /* The object's own mapped memory: no bound is narrower than "all of it". */
        struct pt_cfi_source src = {eh_hdr, (uint64_t)(uintptr_t)eh_hdr, (const unsigned char *)0,
                                    (const unsigned char *)UINTPTR_MAX};
        o->cfi = pt_cfi_build(&src, lo, hi);
    }
    *changed = 1;
    return 0;
}

static int pt_by_lo(const void *a, const void *b) {
    const struct pt_cfi_table *x = *(const struct pt_cfi_table *const *)a;
    const struct pt_cfi_table *y = *(const struct pt_cfi_table *const *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Build a new table set from the live objects and swap it in.  The old set
 * is leaked on purpose: a handler on another thread may still be reading it. */
static void pt_publish(void) {
    size_t n = 0;
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].alive && pt_objects[i].cfi != NULL) n++;
    struct pt_cfi_set *set = pt_alloc(sizeof *set + n * sizeof set->tables[0]);
    if (set == NULL) return;
    set->n = 0;
    for (int i = 0; i < pt_nobjects; i++)
        if (pt_objects[i].alive && pt_objects[i].cfi != NULL)
            set->tables[set->n++] = pt_objects[i].cfi;
    qsort(set->tables, set->n, sizeof set->tables[0], pt_by_lo);
    __atomic_store_n(&pt_sampler_cfi_current, set, __ATOMIC_RELEASE);
    if (set->n > 0 && pt_sampler_file.smp != NULL) pt_sampler_file.smp->sflags |= PT_SMP_CFI;
}

/* See which objects came and went since the last call; log them and publish
 * their unwind tables.  log_all: a new file (fork child) logs every live
 * object again.  Not async-signal-safe. */
void pt_sampler_maps_refresh(int log_all) {
    pthread_mutex_lock(&pt_maps_lock);
    if (pt_objects == NULL) {
        pt_objects = pt_alloc(PT_MAX_OBJECTS * sizeof *pt_objects);
        ssize_t len = readlink("/proc/self/exe", pt_exe_path, sizeof pt_exe_path - 1);
        pt_exe_path[len > 0 ? len : 0] = '\0';
    }
    if (pt_objects == NULL) {
        pthread_mutex_unlock(&pt_maps_lock);
        return;
    }
    int was_alive[PT_MAX_OBJECTS / 8 + 1];
    memset(was_alive, 0, sizeof was_alive);
    int known = pt_nobjects;
    for (int i = 0; i < known; i++) {
        if (pt_objects[i].alive) was_alive[i / 32] |= 1 << (i % 32);
        pt_objects[i].alive = 0;
        if (log_all && (was_alive[i / 32] >> (i % 32) & 1) && pt_objects[i].name[0] == '/')
            pt_log_object(&pt_objects[i], PT_MAP_LOAD);
    }
    int changed = log_all;
    dl_iterate_phdr(pt_on_object, &changed);
    for (int i = 0; i < known; i++) {
        if ((was_alive[i / 32] >> (i % 32) & 1) && !pt_objects[i].alive) {
            if (pt_objects[i].name[0] == '/') pt_log_object(&pt_objects[i], PT_MAP_UNLOAD);
            changed = 1;
        }
    }
    if (changed) pt_publish();
    pthread_mutex_unlock(&pt_maps_lock);
}

/* Fork child: the lock may have been held by a thread that does not exist here. */
void pt_sampler_maps_fork_child(void) { pthread_mutex_init(&pt_maps_lock, NULL); }

static int pt_mcount_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    int *found = data;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    uint64_t strtab = 0, strsz = 0;
    for (; dyn != NULL && dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_STRTAB) strtab = dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_STRSZ) strsz = dyn->d_un.d_val;
    }
    /* ld.so relocates these pointers in place on some ports and not others. */
    if (strtab != 0 && strtab < info->dlpi_addr) strtab += info->dlpi_addr;
    const char *s = (const char *)strtab, *end = s + strsz;
    for (; strtab != 0 && s < end; s += strlen(s) + 1)
        if (!strcmp(s, "mcount") || !strcmp(s, "_mcount") || !strcmp(s, "__fentry__")) *found = 1;
    return 1; /* the main program comes first: stop there */
}

/* 1 if the executable calls mcount (built with -pg: gmon's profil owns
 * SIGPROF).  Not async-signal-safe. */
int pt_sampler_main_uses_mcount(void) {
    int found = 0;
    dl_iterate_phdr(pt_mcount_cb, &found);
    return found;
}
