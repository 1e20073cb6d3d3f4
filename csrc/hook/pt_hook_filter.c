/*
 * pt_hook_filter.c - PROFTUI_INCLUDE / PROFTUI_EXCLUDE, resolved in the runtime.
 *
 * Patterns are fnmatch(3) globs matched against the linker (raw, for C++
 * mangled) names of function symbols, separated by newlines in the variable.
 * Each loaded object's .symtab (else .dynsym) is read once, when the module
 * table first records it (start-up, or the first call into a dlopen()ed
 * object), and every matching function becomes an address range.  The hooks
 * then look up a function's verdict in a per-thread cache (proftui_hook.c)
 * and, on a miss, scan these ranges lock-free.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pt_hook.h"

#define PT_MAX_PATTERNS 64
#define PT_MAX_RANGES 65536
#define PT_MAX_RESOLVED 1024

typedef struct pt_range {
    uintptr_t lo, hi;
    int kind;  /* PT_FILTER_INCLUDE or PT_FILTER_EXCLUDE */
} pt_range;

/* Patterns split at init; read-only afterwards. */
static const char *pt_patterns[PT_MAX_PATTERNS];
static int pt_pattern_kind[PT_MAX_PATTERNS];
static int pt_npatterns;

/* Resolved ranges: appended under pt_filter_lock, published by the count
 * (release), read without a lock by the hooks. */
static pt_range pt_ranges[PT_MAX_RANGES];
static uint32_t pt_nranges;
/* Biases of objects already resolved (a fork child must not add them twice). */
static uintptr_t pt_resolved[PT_MAX_RESOLVED];
static uint32_t pt_nresolved;
/* Spin lock serialising resolution (slow path only). */
static int pt_filter_lock;

/* Split one newline-separated list into patterns of `kind`.  Init only. */
static PT_NOINST void pt_split(char *list, int kind)
{
    for (char *p = list; p && *p && pt_npatterns < PT_MAX_PATTERNS;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (*p) {
            pt_patterns[pt_npatterns] = p;
            pt_pattern_kind[pt_npatterns++] = kind;
        }
        p = nl ? nl + 1 : NULL;
    }
}

/* Prepare the patterns from the options.  Not async-signal-safe: init only. */
PT_NOINST void pt_filter_init(void)
{
    pt_split(pt_g.opt.include, PT_FILTER_INCLUDE);
    pt_split(pt_g.opt.exclude, PT_FILTER_EXCLUDE);
    pt_g.has_include = 0;
    for (int i = 0; i < pt_npatterns; i++)
        pt_g.has_include |= pt_pattern_kind[i] == PT_FILTER_INCLUDE;
    pt_g.filtering = pt_npatterns > 0;
}

/* Add every matching function symbol of one mapped ELF image.  Lock held;
 * fnmatch: not async-signal-safe (see pt_filter_module). */
static PT_NOINST void pt_scan_symbols(const uint8_t *img, size_t len, uintptr_t bias)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shoff == 0 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len)
        return;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const Elf64_Shdr *symtab = NULL;
    for (int pass = 0; pass < 2 && !symtab; pass++)
        for (int i = 0; i < eh->e_shnum; i++)
            if (sh[i].sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB)) {
                symtab = &sh[i];
                break;
            }
    if (!symtab || symtab->sh_link >= eh->e_shnum)
        return;
    const Elf64_Shdr *strtab = &sh[symtab->sh_link];
    if (symtab->sh_offset + symtab->sh_size > len || strtab->sh_offset + strtab->sh_size > len)
        return;
    const Elf64_Sym *syms = (const Elf64_Sym *)(img + symtab->sh_offset);
    size_t nsyms = symtab->sh_size / sizeof(Elf64_Sym);
    const char *names = (const char *)(img + strtab->sh_offset);
    for (size_t s = 0; s < nsyms; s++) {
        int type = ELF64_ST_TYPE(syms[s].st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[s].st_shndx == SHN_UNDEF ||
            syms[s].st_value == 0 || syms[s].st_name >= strtab->sh_size)
            continue;
        const char *name = names + syms[s].st_name;
        if (!memchr(name, '\0', strtab->sh_size - syms[s].st_name))
            continue;
        int kind = 0;
        for (int p = 0; p < pt_npatterns; p++)
            if (!(kind & pt_pattern_kind[p]) && fnmatch(pt_patterns[p], name, 0) == 0)
                kind |= pt_pattern_kind[p];
        if (!kind || pt_nranges >= PT_MAX_RANGES)
            continue;
        uintptr_t lo = bias + syms[s].st_value;
        pt_ranges[pt_nranges] = (pt_range){lo, lo + (syms[s].st_size ? syms[s].st_size : 1), kind};
        __atomic_store_n(&pt_nranges, pt_nranges + 1, __ATOMIC_RELEASE);
    }
}

/* Resolve the patterns in the object at `path` loaded with `bias`, once.
 * Uses open/mmap/fnmatch: call from init or a hook's slow path, not from a
 * signal handler that interrupted the loader. */
PT_NOINST void pt_filter_module(const char *path, uintptr_t bias)
{
    if (!pt_g.filtering || path[0] != '/')
        return;
    while (__atomic_exchange_n(&pt_filter_lock, 1, __ATOMIC_ACQUIRE))
        ;
    for (uint32_t i = 0; i < pt_nresolved; i++)
        if (pt_resolved[i] == bias)
            goto out;
    if (pt_nresolved < PT_MAX_RESOLVED)
        pt_resolved[pt_nresolved++] = bias;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        goto out;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (img != MAP_FAILED) {
            pt_scan_symbols(img, (size_t)st.st_size, bias);
            munmap(img, (size_t)st.st_size);
        }
    }
    close(fd);
    __atomic_store_n(&pt_g.hook->filter_ranges, pt_nranges, __ATOMIC_RELAXED);
out:
    __atomic_store_n(&pt_filter_lock, 0, __ATOMIC_RELEASE);
}

/* fork child: a thread that held the lock in the parent does not exist here.
 * Async-signal-safe. */
PT_NOINST void pt_filter_atfork_child(void)
{
    __atomic_store_n(&pt_filter_lock, 0, __ATOMIC_RELEASE);
}

/* PT_FILTER_* bits of the function starting at `fn`.  Lock-free, async-signal-safe. */
PT_NOINST int pt_filter_verdict(uintptr_t fn)
{
    uint32_t n = __atomic_load_n(&pt_nranges, __ATOMIC_ACQUIRE);
    int kind = 0;
    for (uint32_t i = 0; i < n; i++)
        if (fn >= pt_ranges[i].lo && fn < pt_ranges[i].hi)
            kind |= pt_ranges[i].kind;
    return kind;
}
