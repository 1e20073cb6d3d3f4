/* Loaded objects for the sampler: the one object table, map log and CFI
 * publishing live in csrc/common/pt_maps.c; this file points them at the
 * sampler's map log and sets the file's CFI flag.  Runs at start,
 * after dlopen/dlclose and in a followed fork child; never in signal context.
 * Also: does the executable call mcount (-pg)? */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <string.h>

#include "pt_maps.h"
#include "pt_sampler.h"

/* See which objects came and went since the last call; log them and publish
 * their unwind tables.  log_all: a new file (fork child) logs every live
 * object again.  Not async-signal-safe. */
void pt_sampler_maps_refresh(int log_all) {
    pt_maps_refresh(&pt_sampler_file.maplog, pt_sampler_cfg.fp_only, log_all);
    const struct pt_cfi_set *set = __atomic_load_n(&pt_maps_cfi, __ATOMIC_ACQUIRE);
    if (set != NULL && set->n > 0 && pt_sampler_file.smp != NULL)
        pt_sampler_file.smp->sflags |= PT_SMP_CFI;
}

/* Fork child: the lock may have been held by a thread that does not exist here. */
void pt_sampler_maps_fork_child(void) { pt_maps_fork_child(); }

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
