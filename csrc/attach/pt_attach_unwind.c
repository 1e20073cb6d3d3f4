/* proftui-attach: unwind each sample in the helper, with the common unwinder.
 *
 * The helper reads the target's /proc/PID/maps; for each executable mapping
 * it opens the file (through /proc/PID/root, or /proc/PID/map_files when the
 * file was deleted) or copies the vDSO out of the target, finds
 * .eh_frame_hdr through the program headers (or, when there is none, as in a
 * `gcc -static` link, .eh_frame through the section headers) and builds the
 * object's CFI rows
 * (csrc/common/pt_cfi.c) from a read-only mapping of the file, which is then
 * unmapped.  A sample is walked over the copy of the target's stack it
 * carries (struct pt_memory), and where the copy ends the frame-pointer chain
 * (kernel call chain or ptrace walk) continues it.  Maps are re-read when
 * perf reports a new executable mapping, or when a sample's pc lies in no
 * known mapping (dlopen under ptrace), at most every 50 ms.  Generated code
 * gets the tables of the target's jitdump, when it maps one (pt_jit.c), read
 * as it grows at most every 100 ms.
 *
 * The system-wide method (pt_attach_system.c) keeps one such state per
 * process it samples (pt_attach_unwind_use), made at its first sample and
 * freed when it exits or execs; there jitdumps are not read (pt_jit.c keeps
 * one target's), and each maps read's executable lines go to proftui in a
 * PROCESS record, so it can symbolize after the process is gone.  A file's
 * rows are built once for every process that maps it (pt_attach_shared):
 * building libc's is most of what a new process costs the helper.
 *
 * The helper is single-threaded: plain globals, tables freed as soon as their
 * object is gone.  Nothing here is async-signal-safe.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pt_attach.h"
#include "pt_jit.h"

#define PT_ATTACH_REFRESH_NS 50000000ull /* at most one maps re-read per 50 ms */
#define PT_ATTACH_JIT_NS 100000000ull    /* at most one jitdump read per 100 ms */
#define PT_ATTACH_MAX_VDSO (1u << 20)
#define PT_ATTACH_SEAM_BYTES 256   /* copy words checked against the live stack (perf) */
#define PT_ATTACH_STACK_MARGIN 4096 /* read beyond the word a walk wanted: its callers' frames */

/* One object with CFI rows: identified by its mapping's path, inode and bias. */
struct pt_attach_object {
    char path[512];
    uint64_t ino, bias;
    struct pt_cfi_table *cfi; /* NULL: no usable .eh_frame (frame pointers there) */
    int seen;                 /* present in the latest maps read */
    int shared;               /* cfi is a view of a shared table (pt_attach_shared) */
};

/* CFI rows shared by every process that maps the same file: a table's rows are
 * offsets from its lo, so one build serves any load address.  Each object holds a
 * view, a copy of the owner's header with its own lo and hi. */
struct pt_attach_shared {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    uint64_t link_lo, span;     /* the table's range minus the load bias */
    struct pt_cfi_table *owner; /* the built table; its header is never walked */
    size_t refs;                /* views of it */
};

/* An executable range of the target, with or without rows. */
struct pt_attach_range {
    uint64_t start, end;
    int file; /* an ELF file's (not generated code, not the jitdump) */
};

/* What this file keeps about one process (its address space): `proftui --pid`
 * has one, the system-wide method one per process it has sampled. */
struct pt_attach_unwind_state {
    pid_t pid;
    pid_t via;  /* a live thread of it, for /proc and process_vm_readv */
    struct pt_attach_object *objs;
    size_t nobjs, capobjs;
    struct pt_attach_range *ranges;
    size_t nranges, capranges;
    struct pt_cfi_set *set; /* malloc'd, rebuilt after each read */
    int dirty;              /* perf saw a new mapping */
    uint64_t last_read;     /* CLOCK_MONOTONIC ns of the last maps read */
    uint64_t last_jit;      /* CLOCK_MONOTONIC ns of the last jitdump read */
    uint64_t sent_hash;     /* system-wide: of the maps lines last sent (0: none yet) */
    int host_files;         /* gone before its maps were read: its files by our paths */
};

/* What all processes share, and which one is walked now.  The helper is
 * single-threaded, so one static instance (pt_uw_all) holds it; `pt_uw` points
 * at the process being walked (pt_attach_unwind_use). */
static struct {
    int cfi_on;   /* PT_ARCH_CFI and not PROFTUI_ATTACH_UNWIND=fp */
    int system;   /* many processes: no jitdump (pt_jit.c keeps one), maps sent on */
    int hold;     /* walks re-read no maps (pt_attach_unwind_hold_maps) */
    uint64_t *ext; /* PT_ATTACH_STACK_MAX bytes: a stack copy read further (malloc'd) */
    struct pt_attach_unwind_stats stats;
    struct pt_attach_unwind_state one;    /* `proftui --pid`'s target */
    struct pt_attach_unwind_state **procs; /* the system-wide method's, by pid */
    size_t nprocs, capprocs;
    struct pt_attach_shared *shared; /* built tables, by file */
    size_t nshared, capshared;
} pt_uw_all;
static struct pt_attach_unwind_state *pt_uw = &pt_uw_all.one; /* the process walked now */

static uint64_t pt_attach_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if PT_ARCH_CFI
/* Find the .eh_frame section of the ELF image img[0, size) through the
 * section headers: its link-time address, file offset and size.  0, or -1
 * when there is none (or a header lies outside the image). */
static int pt_attach_eh_frame_section(const unsigned char *img, size_t size, const Elf64_Ehdr *eh,
                                      uint64_t *addr, uint64_t *off, uint64_t *len) {
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff == 0 || eh->e_shoff > size ||
        eh->e_shnum == 0 || eh->e_shstrndx >= eh->e_shnum ||
        (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size - eh->e_shoff)
        return -1;
    Elf64_Shdr names;
    memcpy(&names, img + eh->e_shoff + (uint64_t)eh->e_shstrndx * sizeof names, sizeof names);
    if (names.sh_offset > size || names.sh_size > size - names.sh_offset) return -1;
    static const char want[] = ".eh_frame";
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, img + eh->e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
            sh.sh_name >= names.sh_size || names.sh_size - sh.sh_name < sizeof want ||
            memcmp(img + names.sh_offset + sh.sh_name, want, sizeof want) != 0)
            continue;
        if (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset || sh.sh_size < 4) return -1;
        *addr = sh.sh_addr;
        *off = sh.sh_offset;
        *len = sh.sh_size;
        return 0;
    }
    return -1;
}

/* Rows of the ELF image img[0, size) whose mapping of file offset `off` sits
 * at runtime `start`; NULL if it has none.  Every header read is bounds-checked. */
static struct pt_cfi_table *pt_attach_shared_view(const struct stat *st, uint64_t link_lo,
                                                  uint64_t span, uint64_t lo);
static struct pt_cfi_table *pt_attach_shared_add(const struct stat *st, uint64_t link_lo,
                                                 struct pt_cfi_table *built);

/* `st`: the file the image is (its rows are then shared), or NULL (a memory copy). */
static struct pt_cfi_table *pt_attach_image_rows(const unsigned char *img, size_t size,
                                                 uint64_t start, uint64_t off, uint64_t *bias,
                                                 const struct stat *st, int *shared) {
    if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) != 0 ||
        img[EI_CLASS] != ELFCLASS64)
        return NULL;
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > size ||
        (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > size - eh.e_phoff)
        return NULL;
    const Elf64_Phdr *eh_frame = NULL, *mapped = NULL;
    Elf64_Phdr ph[512];
    unsigned n = eh.e_phnum < 512 ? eh.e_phnum : 512;
    memcpy(ph, img + eh.e_phoff, n * sizeof ph[0]);
    for (unsigned i = 0; i < n; i++) {
        if (ph[i].p_type == PT_GNU_EH_FRAME) eh_frame = &ph[i];
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && ph[i].p_offset <= off &&
            off < ph[i].p_offset + ph[i].p_filesz)
            mapped = &ph[i];
    }
    if (mapped == NULL) return NULL;
    *bias = start - (mapped->p_vaddr + (off - mapped->p_offset));
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned i = 0; i < n; i++) {
        if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X)) continue;
        if (*bias + ph[i].p_vaddr < lo) lo = *bias + ph[i].p_vaddr;
        if (*bias + ph[i].p_vaddr + ph[i].p_memsz > hi) hi = *bias + ph[i].p_vaddr + ph[i].p_memsz;
    }
    if (lo >= hi) return NULL;
    if (st != NULL) {
        struct pt_cfi_table *view = pt_attach_shared_view(st, lo - *bias, hi - lo, lo);
        if (view != NULL) {
            *shared = 1;
            return view;
        }
    }
    /* .eh_frame_hdr and .eh_frame share a read-only PT_LOAD: file offsets
     * and addresses differ by the same amount for both. */
    struct pt_cfi_source src = {NULL, 0, img, img + size, 0};
    uint64_t sec_off;
    if (eh_frame != NULL && eh_frame->p_offset < size) {
        src.hdr = img + eh_frame->p_offset;
        src.hdr_addr = *bias + eh_frame->p_vaddr;
    } else if (pt_attach_eh_frame_section(img, size, &eh, &src.hdr_addr, &sec_off,
                                          &src.eh_frame_len) == 0) {
        src.hdr = img + sec_off; /* no search table (gcc -static): walk .eh_frame */
        src.hdr_addr += *bias;
    } else {
        return NULL;
    }
    struct pt_cfi_table *built = pt_cfi_build(&src, lo, hi);
    if (built == NULL || st == NULL) return built;
    struct pt_cfi_table *view = pt_attach_shared_add(st, lo - *bias, built);
    if (view == NULL) return built; /* not shared: this object owns it */
    *shared = 1;
    return view;
}

static int pt_attach_same_file(const struct pt_attach_shared *e, const struct stat *st) {
    return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
           e->mtime.tv_sec == st->st_mtim.tv_sec && e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* A view of `owner` at runtime `lo`; NULL when out of memory. */
static struct pt_cfi_table *pt_attach_view_of(struct pt_attach_shared *e, uint64_t lo) {
    struct pt_cfi_table *view = malloc(sizeof *view);
    if (view == NULL) return NULL;
    *view = *e->owner;
    view->lo = lo;
    view->hi = lo + e->span;
    e->refs++;
    return view;
}

/* A view of the rows already built for this file and range, or NULL. */
static struct pt_cfi_table *pt_attach_shared_view(const struct stat *st, uint64_t link_lo,
                                                  uint64_t span, uint64_t lo) {
    for (size_t i = 0; i < pt_uw_all.nshared; i++) {
        struct pt_attach_shared *e = &pt_uw_all.shared[i];
        if (e->link_lo == link_lo && e->span == span && pt_attach_same_file(e, st))
            return pt_attach_view_of(e, lo);
    }
    return NULL;
}

/* Keep `built` for the next process that maps the file: its first view, or NULL
 * (out of memory: the caller owns `built` alone). */
static struct pt_cfi_table *pt_attach_shared_add(const struct stat *st, uint64_t link_lo,
                                                 struct pt_cfi_table *built) {
    struct pt_attach_shared *items = pt_attach_grow(pt_uw_all.shared, &pt_uw_all.capshared,
                                                    pt_uw_all.nshared, sizeof *items);
    if (items == NULL) return NULL;
    pt_uw_all.shared = items;
    struct pt_attach_shared *e = &items[pt_uw_all.nshared];
    *e = (struct pt_attach_shared){st->st_dev, st->st_ino, st->st_size, st->st_mtim, link_lo,
                                   built->hi - built->lo, built, 0};
    struct pt_cfi_table *view = pt_attach_view_of(e, built->lo);
    if (view != NULL) pt_uw_all.nshared++;
    return view;
}

/* Free one object's rows: a view gives its reference back, the last frees the table. */
static void pt_attach_object_free(struct pt_attach_object *o) {
    if (!o->shared) {
        pt_cfi_free(o->cfi);
        return;
    }
    for (size_t i = 0; i < pt_uw_all.nshared; i++) {
        struct pt_attach_shared *e = &pt_uw_all.shared[i];
        if (e->owner->rows != o->cfi->rows) continue;
        if (--e->refs == 0) {
            pt_cfi_free(e->owner);
            pt_uw_all.shared[i] = pt_uw_all.shared[--pt_uw_all.nshared];
        }
        break;
    }
    free(o->cfi);
}

/* Rows of the file behind one mapping line.  NULL if unreadable or no CFI. */
static struct pt_cfi_table *pt_attach_file_rows(const char *path, uint64_t start, uint64_t end,
                                                uint64_t off, uint64_t *bias, int *shared) {
    char where[700];
    size_t len = strlen(path);
    static const char deleted[] = " (deleted)";
    if (len > sizeof deleted - 1 && strcmp(path + len - (sizeof deleted - 1), deleted) == 0)
        snprintf(where, sizeof where, "/proc/%d/map_files/%lx-%lx", (int)pt_uw->via,
                 (unsigned long)start, (unsigned long)end);
    else if (pt_uw->host_files) snprintf(where, sizeof where, "%s", path); /* checked */
    else snprintf(where, sizeof where, "/proc/%d/root%s", (int)pt_uw->via, path);
    int fd = open(where, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    struct pt_cfi_table *t = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            t = pt_attach_image_rows(map, (size_t)st.st_size, start, off, bias, &st, shared);
            munmap(map, (size_t)st.st_size);
        }
    }
    close(fd);
    return t;
}

/* Rows of the vDSO, copied out of the target (it is a whole ELF image). */
static struct pt_cfi_table *pt_attach_vdso_rows(uint64_t start, uint64_t end, uint64_t *bias) {
    if (end <= start || end - start > PT_ATTACH_MAX_VDSO) return NULL;
    size_t size = (size_t)(end - start);
    unsigned char *copy = malloc(size);
    if (copy == NULL) return NULL;
    struct iovec local = {copy, size}, remote = {(void *)(uintptr_t)start, size};
    struct pt_cfi_table *t = NULL;
    if (process_vm_readv(pt_uw->via, &local, 1, &remote, 1, 0) == (ssize_t)size)
        t = pt_attach_image_rows(copy, size, start, 0, bias, NULL, NULL);
    free(copy);
    return t;
}
#endif

static int pt_attach_by_lo(const void *a, const void *b) {
    const struct pt_cfi_table *x = *(const struct pt_cfi_table *const *)a;
    const struct pt_cfi_table *y = *(const struct pt_cfi_table *const *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* 1 if `path` (a mapping of the target) is its jitdump, jit-PID.dump: its
 * unwinding records are read from now on (csrc/common/pt_jit.c), through
 * the target's root, if its owner is the target's user. */
static int pt_attach_jitdump(const char *path) {
    const char *base = strrchr(path, '/');
    char *end = NULL;
    if (base == NULL || strncmp(base, "/jit-", 5) != 0) return 0;
    unsigned long pid = strtoul(base + 5, &end, 10);
    if (end == base + 5 || strcmp(end, ".dump") != 0 || pid == 0 || pid > UINT32_MAX) return 0;
    char proc[64], where[700];
    struct stat st;
    snprintf(proc, sizeof proc, "/proc/%d", (int)pt_uw->pid);
    if (stat(proc, &st) != 0) return 1;
    snprintf(where, sizeof where, "/proc/%d/root%s", (int)pt_uw->pid, path);
    pt_jit_use(where, (uint32_t)st.st_uid, (uint32_t)pid);
    return 1;
}

/* One executable mapping line: remember its range; build rows for a new object. */
static void pt_attach_mapping(uint64_t start, uint64_t end, uint64_t off, uint64_t ino,
                              const char *path) {
    struct pt_attach_range *ranges = pt_attach_grow(pt_uw->ranges, &pt_uw->capranges,
                                                    pt_uw->nranges, sizeof *ranges);
    if (ranges == NULL) return;
    pt_uw->ranges = ranges;
    int jitdump = pt_uw_all.cfi_on && !pt_uw_all.system && pt_attach_jitdump(path);
    pt_uw->ranges[pt_uw->nranges++] = (struct pt_attach_range){start, end,
                                                             path[0] == '/' && !jitdump};
    int vdso = strcmp(path, "[vdso]") == 0;
    /* Anonymous (JIT): the jitdump's tables (pt_attach_poll_jit), else fp only. */
    if (!pt_uw_all.cfi_on || jitdump || (path[0] != '/' && !vdso)) return;
    for (size_t i = 0; i < pt_uw->nobjs; i++) {
        struct pt_attach_object *o = &pt_uw->objs[i];
        /* The same object: same file, and this mapping inside the object's code. */
        if (o->ino == ino && strcmp(o->path, path) == 0 &&
            (o->cfi == NULL ? o->bias == start - off
                            : (start >= o->cfi->lo && end <= o->cfi->hi))) {
            o->seen = 1;
            return;
        }
    }
    struct pt_attach_object *objs = pt_attach_grow(pt_uw->objs, &pt_uw->capobjs,
                                                   pt_uw->nobjs, sizeof *objs);
    if (objs == NULL) return;
    pt_uw->objs = objs;
    struct pt_attach_object *o = &pt_uw->objs[pt_uw->nobjs++];
    memset(o, 0, sizeof *o);
    snprintf(o->path, sizeof o->path, "%s", path);
    o->ino = ino;
    o->bias = start - off; /* a placeholder key when the object has no rows */
    o->seen = 1;
#if PT_ARCH_CFI
    uint64_t bias = o->bias;
    o->cfi = vdso ? pt_attach_vdso_rows(start, end, &bias)
                  : pt_attach_file_rows(path, start, end, off, &bias, &o->shared);
    if (o->cfi != NULL) o->bias = bias;
#endif
}

/* 1 if some line of maps `text` is executable ("start-end perms ..."). */
static int pt_attach_any_exec(const char *text) {
    for (const char *line = text; line != NULL && *line; line = strchr(line, '\n')) {
        if (*line == '\n') line++;
        const char *perms = strchr(line, ' ');
        if (perms != NULL && strlen(perms) > 4 && perms[3] == 'x') return 1;
    }
    return 0;
}

/* The set a walk searches: the objects' tables and generated code's. */
static void pt_attach_publish(void) {
    size_t njit = 0, n = 0;
    const struct pt_cfi_table *const *jit = pt_jit_tables(&njit);
    for (size_t i = 0; i < pt_uw->nobjs; i++) n += pt_uw->objs[i].cfi != NULL;
    free(pt_uw->set);
    pt_uw->set = malloc(sizeof *pt_uw->set + (n + njit + 1) * sizeof(void *));
    if (pt_uw->set == NULL) return;
    pt_uw->set->n = 0;
    for (size_t i = 0; i < pt_uw->nobjs; i++)
        if (pt_uw->objs[i].cfi != NULL)
            pt_uw->set->tables[pt_uw->set->n++] = pt_uw->objs[i].cfi;
    for (size_t i = 0; i < njit; i++) pt_uw->set->tables[pt_uw->set->n++] = jit[i];
    qsort(pt_uw->set->tables, pt_uw->set->n, sizeof pt_uw->set->tables[0],
          pt_attach_by_lo);
}

/* 1 if `pc` lies in an ELF file's executable mapping (generated code's
 * tables never cover such code). */
static int pt_attach_in_file(uint64_t pc) {
    for (size_t i = 0; i < pt_uw->nranges; i++)
        if (pt_uw->ranges[i].file && pc >= pt_uw->ranges[i].start && pc < pt_uw->ranges[i].end)
            return 1;
    return 0;
}

/* Read what the target's jitdump gained (at most every 100 ms) and publish
 * the set again when generated code got tables. */
static void pt_attach_poll_jit(void) {
    uint64_t now = pt_attach_now_ns();
    if (!pt_uw_all.cfi_on || pt_uw_all.system || now - pt_uw->last_jit < PT_ATTACH_JIT_NS)
        return;
    pt_uw->last_jit = now;
    if (pt_jit_poll(now, pt_attach_in_file)) pt_attach_publish();
}

/* Re-read /proc/PID/maps: keep known objects, build new ones, drop gone
 * ones.  A read without executable mappings (the target exited: its maps are
 * empty while samples are still drained) changes nothing. */
static void pt_attach_read_maps(void) {
    pt_uw->last_read = pt_attach_now_ns();
    pt_uw->dirty = 0;
    /* After the leader's pthread_exit its /proc/PID/maps is empty: read a live thread's. */
    pt_uw->via = pt_attach_live_task(pt_uw->pid);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pt_uw->via);
    FILE *f = fopen(path, "re");
    char *text = NULL;
    size_t len = 0;
    if (f == NULL) {
        /* The target is gone: keep what we had.  A process the system-wide method
         * never read: the mappings perf reported, where our paths name its files. */
        char exe[256];
        uint64_t as_of = 0;
        if (!pt_uw_all.system || pt_uw->sent_hash != 0 || pt_uw->nobjs != 0 ||
            (text = pt_attach_mmaps_text(pt_uw->pid, &len, exe, sizeof exe, &as_of)) == NULL)
            return;
        /* The maps of the records drained so far, not of now: an exec may be later. */
        if (as_of != 0) pt_uw->last_read = as_of;
        pt_uw->host_files = 1;
        pt_uw->sent_hash = 1; /* sent here, once: never as a later MAPS */
        pt_attach_out_gone_process(pt_uw->pid, exe, text, len, 1);
    } else {
        FILE *mem = open_memstream(&text, &len);
        char chunk[8192];
        size_t got;
        while (mem != NULL && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
            fwrite(chunk, 1, got, mem);
        fclose(f);
        if (mem == NULL || fclose(mem) != 0 || text == NULL) return;
    }
    if (!pt_attach_any_exec(text)) {
        free(text);
        return;
    }
    for (size_t i = 0; i < pt_uw->nobjs; i++) pt_uw->objs[i].seen = 0;
    pt_uw->nranges = 0;
    /* The system-wide method sends the executable lines on (a PROCESS record):
     * proftui symbolizes with them after the process is gone. */
    char *sent = NULL;
    size_t sent_len = 0;
    FILE *keep = pt_uw_all.system && !pt_uw->host_files ? open_memstream(&sent, &sent_len)
                                                         : NULL;
    for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        unsigned long start, end, off, ino;
        char perms[8];
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %lu %n", &start, &end, perms, &off, &ino, &name_at) <
                5 ||
            strchr(perms, 'x') == NULL)
            continue;
        pt_attach_mapping(start, end, off, ino, line + name_at);
        if (keep != NULL) fprintf(keep, "%s\n", line);
    }
    free(text);
    if (keep != NULL && fclose(keep) == 0 && sent != NULL) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < sent_len; i++) h = (h ^ (unsigned char)sent[i]) * 0x100000001b3ull;
        h |= 1; /* never 0, "none sent yet" */
        if (h != pt_uw->sent_hash)
            pt_attach_out_process(pt_uw->pid, pt_uw->sent_hash == 0 ? PT_ATTACH_PROCESS_NEW
                                                                     : PT_ATTACH_PROCESS_MAPS,
                                  sent, sent_len);
        pt_uw->sent_hash = h;
    }
    free(sent);
    size_t kept = 0;
    for (size_t i = 0; i < pt_uw->nobjs; i++) {
        if (!pt_uw->objs[i].seen) {
            pt_attach_object_free(&pt_uw->objs[i]);
            continue;
        }
        pt_uw->objs[kept++] = pt_uw->objs[i];
    }
    pt_uw->nobjs = kept;
    pt_attach_publish();
}

/* 1 if `pc` lies in an executable mapping of the last read. */
static int pt_attach_known(uint64_t pc) {
    for (size_t i = 0; i < pt_uw->nranges; i++)
        if (pc >= pt_uw->ranges[i].start && pc < pt_uw->ranges[i].end) return 1;
    return 0;
}

/* pt_attach_known, re-reading the maps first (at most every 50 ms) when they
 * changed, or when `pc` lies in none of them and `unknown_rereads` (the sampled
 * pc: a dlopen under ptrace; a return address outside every mapping is garbage
 * from a frame-pointer chain, and re-reading for it re-read Lua's maps and
 * reopened its files three times a second). */
static int pt_attach_known_now(uint64_t pc, int unknown_rereads) {
    if (!pt_uw_all.hold && (pt_uw->dirty || (unknown_rereads && !pt_attach_known(pc))) &&
        pt_attach_now_ns() - pt_uw->last_read >= PT_ATTACH_REFRESH_NS)
        pt_attach_read_maps();
    return pt_attach_known(pc);
}

/* What every process shares: the unwinding mode and the buffer a copy is read
 * further into. */
static void pt_attach_unwind_setup(void) {
    const char *mode = getenv("PROFTUI_ATTACH_UNWIND");
    pt_uw_all.cfi_on = PT_ARCH_CFI && !(mode != NULL && strcmp(mode, "fp") == 0);
    pt_uw_all.ext = malloc(PT_ATTACH_STACK_MAX); /* NULL: copies are never read further */
}

uint32_t pt_attach_unwind_init(pid_t pid) {
    pt_attach_unwind_setup();
    pt_uw->pid = pid;
    pt_attach_read_maps();
    return pt_uw_all.cfi_on ? PT_ATTACH_FLAG_CFI : 0;
}

uint32_t pt_attach_unwind_system(void) {
    pt_attach_unwind_setup();
    pt_uw_all.system = 1;
    return pt_uw_all.cfi_on ? PT_ATTACH_FLAG_CFI : 0;
}

/* The index of pid's state in pt_uw_all.procs, or nprocs. */
static size_t pt_attach_unwind_find(pid_t pid) {
    for (size_t i = 0; i < pt_uw_all.nprocs; i++)
        if (pt_uw_all.procs[i]->pid == pid) return i;
    return pt_uw_all.nprocs;
}

int pt_attach_unwind_use(pid_t pid) {
    if (pt_uw->pid == pid && pt_uw != &pt_uw_all.one) return 0;
    size_t i = pt_attach_unwind_find(pid);
    if (i < pt_uw_all.nprocs) {
        pt_uw = pt_uw_all.procs[i];
        return 0;
    }
    struct pt_attach_unwind_state **procs = pt_attach_grow(
        pt_uw_all.procs, &pt_uw_all.capprocs, pt_uw_all.nprocs, sizeof *procs);
    struct pt_attach_unwind_state *st = calloc(1, sizeof *st);
    if (procs == NULL || st == NULL) {
        free(st);
        if (procs != NULL) pt_uw_all.procs = procs;
        pt_uw = &pt_uw_all.one; /* no memory: walk with no tables (frame pointers) */
        pt_uw->pid = pid;
        pt_uw->via = pid;
        return -1;
    }
    pt_uw_all.procs = procs;
    pt_uw_all.procs[pt_uw_all.nprocs++] = st;
    st->pid = pid;
    st->via = pid;
    pt_uw = st;
    pt_attach_read_maps();
    return 1;
}

int pt_attach_unwind_forget(pid_t pid) {
    size_t i = pt_attach_unwind_find(pid);
    if (i == pt_uw_all.nprocs) return 0;
    struct pt_attach_unwind_state *st = pt_uw_all.procs[i];
    pt_uw_all.procs[i] = pt_uw_all.procs[--pt_uw_all.nprocs];
    for (size_t k = 0; k < st->nobjs; k++) pt_attach_object_free(&st->objs[k]);
    free(st->objs);
    free(st->ranges);
    free(st->set);
    if (pt_uw == st) pt_uw = &pt_uw_all.one;
    free(st);
    return 1;
}

void pt_attach_unwind_maps_changed_of(pid_t pid) {
    size_t i = pt_attach_unwind_find(pid);
    if (i < pt_uw_all.nprocs) pt_uw_all.procs[i]->dirty = 1;
}

size_t pt_attach_unwind_processes(void) { return pt_uw_all.nprocs; }

void pt_attach_unwind_retry_unread(void) {
    struct pt_attach_unwind_state *was = pt_uw;
    for (size_t i = 0; i < pt_uw_all.nprocs; i++) {
        if (pt_uw_all.procs[i]->sent_hash != 0) continue;
        pt_uw = pt_uw_all.procs[i];
        pt_attach_read_maps();
    }
    pt_uw = was;
}

void pt_attach_unwind_maps_changed(void) { pt_uw->dirty = 1; }

uint64_t pt_attach_unwind_read_ns(pid_t pid) {
    const struct pt_attach_unwind_state *st = NULL;
    if (pt_uw->pid == pid && pt_uw != &pt_uw_all.one) {
        st = pt_uw; /* the process walked now: no search (once per sample) */
    } else {
        size_t i = pt_attach_unwind_find(pid);
        if (i < pt_uw_all.nprocs) st = pt_uw_all.procs[i];
    }
    return st != NULL && st->nranges ? st->last_read : 0;
}

void pt_attach_unwind_hold_maps(int hold) { pt_uw_all.hold = hold; }

int pt_attach_unwind_pc_known(uint64_t pc, int may_reread) {
    return may_reread ? pt_attach_known_now(pc, 1) : pt_attach_known(pc);
}

struct pt_attach_unwind_stats pt_attach_unwind_take_stats(void) {
    struct pt_attach_unwind_stats out = pt_uw_all.stats;
    memset(&pt_uw_all.stats, 0, sizeof pt_uw_all.stats);
    return out;
}

/* The CFI chain continued by the frame-pointer chain after their last common
 * address (the copied stack ended before the outermost frame).  Returns n. */
static uint32_t pt_attach_join(uint64_t *ips, uint32_t n, const uint64_t *fp, uint32_t nfp) {
    if (n <= 1) { /* no rule at the pc at all: the frame-pointer chain alone */
        uint32_t m = nfp < PT_ATTACH_MAX_FRAMES ? nfp : PT_ATTACH_MAX_FRAMES;
        memcpy(ips, fp, 8 * (size_t)m);
        return m;
    }
    for (uint32_t i = 1; i < nfp; i++) {
        if (fp[i] != ips[n - 1]) continue;
        for (uint32_t j = i + 1; j < nfp && n < PT_ATTACH_MAX_FRAMES; j++) ips[n++] = fp[j];
        break;
    }
    return n;
}

/* Read [addr, addr + len) of the target into dst, one iovec per page so a
 * short read stops at the first unmapped page; returns the bytes read. */
static size_t pt_attach_read(pid_t tid, uint64_t addr, void *dst, size_t len) {
    struct iovec local = {dst, len}, remote[PT_ATTACH_STACK_MAX / 4096 + 1];
    unsigned long nremote = 0;
    uint64_t at = addr, end = addr + len;
    while (at < end && nremote < sizeof remote / sizeof remote[0]) {
        uint64_t page_end = (at | 4095u) + 1, stop = page_end < end ? page_end : end;
        remote[nremote++] = (struct iovec){(void *)(uintptr_t)at, (size_t)(stop - at)};
        at = stop;
    }
    ssize_t got = process_vm_readv(tid, &local, 1, remote, nremote, 0);
    return got > 0 ? (size_t)got : 0;
}

/* Read more of the stack, into pt_uw_all.ext: its first `have` bytes are the
 * copy so far (at `stack`, which may be pt_uw_all.ext itself), then the target's
 * memory up to want + 8 and as much again (the frames after it are likely
 * as deep), at most PT_ATTACH_STACK_MAX from sp.  Returns the new length in
 * bytes, 0 if nothing more could be read.  Not async-signal-safe. */
static size_t pt_attach_extend(pid_t tid, uint64_t sp, const uint64_t *stack, size_t have,
                               uint64_t want) {
    if (pt_uw_all.ext == NULL || want < sp + have || want + 8 - sp > PT_ATTACH_STACK_MAX) return 0;
    size_t len = 2 * (size_t)(want + 8 - sp) + PT_ATTACH_STACK_MARGIN;
    if (len > PT_ATTACH_STACK_MAX) len = PT_ATTACH_STACK_MAX;
    len &= ~(size_t)7;
    if (stack != pt_uw_all.ext) memcpy(pt_uw_all.ext, stack, have);
    size_t got = pt_attach_read(tid, sp + have, (unsigned char *)pt_uw_all.ext + have, len - have);
    return got > 0 ? (have + got) & ~(size_t)7 : 0;
}

/* 1 if the last bytes of a perf sample's stack copy still hold the same
 * values in the target: the frame at the seam is the same activation, so the
 * stack beyond it, read now, is the one the sample had.  Not async-signal-safe. */
static int pt_attach_seam_holds(pid_t tid, uint64_t sp, const uint64_t *stack, size_t have) {
    uint64_t seam[PT_ATTACH_SEAM_BYTES / 8];
    size_t n = have < sizeof seam ? have : sizeof seam;
    return pt_attach_read(tid, sp + have - n, seam, n) == n &&
           memcmp(seam, (const unsigned char *)stack + have - n, n) == 0;
}

/* Walk one sample's copy; where it ends too early, read further (up to
 * PT_ATTACH_STACK_MAX) and walk again: from a stopped thread (ptrace) at
 * once, from one that ran on since its copy (perf, `ran_on`) only if the
 * frame at the seam is still there.  Sets *need to the stack bytes from sp a
 * whole walk used (0 when it did not finish).  Returns the frame count.
 * Not async-signal-safe. */
static uint32_t pt_attach_walk(uint32_t tid, const struct pt_regs *regs, const uint64_t *stack,
                               uint32_t nstack, int ran_on, uint64_t *ips, unsigned *flags,
                               uint64_t *need) {
    struct pt_memory mem = {regs->sp, regs->sp + 8 * (uintptr_t)nstack,
                            (const unsigned char *)stack, 0, NULL};
    struct pt_unwind_stop stop;
    unsigned f = 0;
    uint32_t n = pt_unwind_walk_stop(pt_uw->set, &mem, regs, ips, PT_ATTACH_MAX_FRAMES, &f, &stop);
    if ((f & PT_UNWIND_TRUNCATED) && stop.want != 0) {
        pt_uw_all.stats.short_copies++;
        pid_t from = ran_on ? pt_uw->via : (pid_t)tid; /* perf: the thread may be gone */
        if (ran_on && !pt_attach_seam_holds(from, regs->sp, stack, 8 * (size_t)nstack)) {
            pt_uw_all.stats.seam_changed++;
        } else {
            const uint64_t *copy = stack;
            size_t have = 8 * (size_t)nstack, len;
            while ((f & PT_UNWIND_TRUNCATED) && stop.want != 0 &&
                   (len = pt_attach_extend(from, regs->sp, copy, have, stop.want)) > have) {
                copy = pt_uw_all.ext;
                have = len;
                struct pt_memory longer = {regs->sp, regs->sp + len,
                                           (const unsigned char *)pt_uw_all.ext, 0, NULL};
                f = 0;
                n = pt_unwind_walk_stop(pt_uw->set, &longer, regs, ips, PT_ATTACH_MAX_FRAMES, &f,
                                        &stop);
            }
            if (!(f & PT_UNWIND_TRUNCATED)) {
                pt_uw_all.stats.extended++;
                if (ran_on) f |= PT_ATTACH_SAMPLE_LATE;
            }
        }
    }
    *need = (f & PT_UNWIND_TRUNCATED) ? 0 : stop.regs.sp - regs->sp + PT_ATTACH_SEAM_BYTES;
    *flags = f;
    return n;
}

/* Cut the chain at the first return address outside every executable
 * mapping: garbage from a frame-pointer chain through code without frame
 * pointers, never a frame.  Returns the new count. */
static uint32_t pt_attach_valid_prefix(const uint64_t *ips, uint32_t n, unsigned *flags) {
    for (uint32_t i = 1; i < n; i++)
        if (!pt_attach_known_now(ips[i], 0)) {
            *flags |= PT_UNWIND_TRUNCATED;
            *flags &= ~(unsigned)PT_UNWIND_DEPTH;
            return i;
        }
    return n;
}

uint64_t pt_attach_unwind_sample(uint32_t tid, uint64_t weight_ns, const struct pt_regs *regs,
                                 const uint64_t *stack, uint32_t nstack, int ran_on,
                                 const uint64_t *fp_ips, uint32_t nfp) {
    uint64_t ips[PT_ATTACH_MAX_FRAMES], need = 0;
    unsigned flags = 0;
    uint32_t n;
    pt_uw_all.stats.samples++;
    if (regs->sp == 0 || nstack == 0) { /* no registers or no stack copy: the fp chain */
        n = nfp < PT_ATTACH_MAX_FRAMES ? nfp : PT_ATTACH_MAX_FRAMES;
        memcpy(ips, fp_ips, 8 * (size_t)n);
        flags = PT_UNWIND_TRUNCATED;
        if (n > 1 && pt_uw->set != NULL && pt_cfi_outermost(pt_uw->set, ips[n - 1]))
            flags = 0; /* the chain reached code with no caller: whole */
        else if (regs->sp != 0 && pt_uw_all.cfi_on)
            flags |= PT_ATTACH_SAMPLE_NO_STACK; /* registers came, the stack could not */
    } else {
        pt_attach_known_now(regs->pc, 1);
        pt_attach_poll_jit();
        n = pt_attach_walk(tid, regs, stack, nstack, ran_on, ips, &flags, &need);
        if ((flags & PT_UNWIND_TRUNCATED) && nfp > 0) {
            uint32_t before = n;
            n = pt_attach_join(ips, n, fp_ips, nfp);
            /* The frame-pointer chain ends at a zero or a bad link alike: whole
             * only if it reached code with no caller (_start, clone). */
            if (n > before && (pt_uw->set == NULL || pt_cfi_outermost(pt_uw->set, ips[n - 1])))
                flags &= ~(unsigned)PT_UNWIND_TRUNCATED;
        }
    }
    n = pt_attach_valid_prefix(ips, n, &flags);
    if (flags & PT_UNWIND_TRUNCATED) pt_uw_all.stats.truncated++;
    if (need > pt_uw_all.stats.max_need) pt_uw_all.stats.max_need = need;
    pt_attach_out_sample(tid, weight_ns, flags, ips, n);
    return need;
}
