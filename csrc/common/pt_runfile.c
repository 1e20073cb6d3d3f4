/* Run-file creation and mapping shared by the LD_PRELOAD runtimes (see pt_runfile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pt_note.h"
#include "pt_runfile.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#define PT_PAGE 4096ull


/* Async-signal-safe. */
int pt_runfile_create(struct pt_runfile *rf, const char *dir, const char *kind, uint32_t pid,
                      uint64_t size, uint64_t head, uint64_t reserve, uint32_t *generation) {
    memset(rf, 0, sizeof *rf);
    size_t dlen = strlen(dir), klen = strlen(kind);
    if (dlen >= 4000 || klen >= 32 || size == 0 || head == 0 || head > size || reserve > head)
        return -1;
    /* A file longer than RLIMIT_FSIZE: ftruncate would raise SIGXFSZ in the target. */
    if (size > pt_note_fsize_limit()) {
        pt_note_map_failure(PT_NOTE_FILE, size, EFBIG);
        return -1;
    }
    for (uint32_t gen = 0; gen < PT_RUNFILE_MAX_GENERATION; gen++) {
        char *p = rf->path;
        memcpy(p, dir, dlen);
        p += dlen;
        *p++ = '/';
        memcpy(p, kind, klen);
        p += klen;
        *p++ = '.';
        p = pt_decimal(p, pid);
        if (gen) {
            *p++ = '.';
            p = pt_decimal(p, gen);
        }
        memcpy(p, ".ptw", 5);
        int fd = open(rf->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EEXIST) continue; /* an earlier image of this pid: next name */
            pt_note_map_failure(PT_NOTE_FILE, size, errno);
            return -1;
        }
        /* Sparse beyond `reserve`: the rest is backed region by region
         * (pt_runfile_reserve) before its first touch, so a full file system
         * costs records, never a SIGBUS. */
        void *map = MAP_FAILED;
        struct stat st;
        int err = 0;
        if (ftruncate(fd, (off_t)size) != 0) err = errno;
        else if (reserve != 0 && (err = posix_fallocate(fd, 0, (off_t)reserve)) != 0) {
        } else if (fstat(fd, &st) != 0) err = errno;
        else if ((map = mmap(NULL, head, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
            err = errno;
        close(fd); /* the mapping keeps the file; no fd for the target to trip over */
        if (map == MAP_FAILED) {
            unlink(rf->path);
            pt_note_map_failure(PT_NOTE_FILE, head, err);
            rf->path[0] = '\0';
            return -1;
        }
        /* On a disk-backed run directory, read-ahead would zero-fill many pages of
         * the sparse file at each first touch: fault one page at a time instead. */
        madvise(map, head, MADV_RANDOM);
        rf->dev = (uint64_t)st.st_dev;
        rf->ino = (uint64_t)st.st_ino;
        rf->size = size;
        rf->head = map;
        rf->head_len = head;
        rf->hdr = map;
        if (generation != NULL) *generation = gen;
        return 0;
    }
    return -1;
}

/* Async-signal-safe. */
unsigned char *pt_runfile_map(const struct pt_runfile *rf, uint64_t offset, uint64_t len,
                              void **map, size_t *map_len) {
    if (rf->head == NULL || len == 0 || offset > rf->size || len > rf->size - offset) {
        errno = EINVAL;
        return NULL;
    }
    uint64_t lo = offset & ~(PT_PAGE - 1), hi = (offset + len + PT_PAGE - 1) & ~(PT_PAGE - 1);
    int fd = open(rf->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) != 0) {
    } else if ((uint64_t)st.st_dev != rf->dev || (uint64_t)st.st_ino != rf->ino) {
        errno = ESTALE; /* not our file any more */
    } else {
        p = mmap(NULL, hi - lo, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)lo);
    }
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        errno = err;
        return NULL;
    }
    madvise(p, hi - lo, MADV_RANDOM);
    *map = p;
    *map_len = hi - lo;
    return (unsigned char *)p + (offset - lo);
}

/* Not async-signal-safe by contract (nothing may use the mapping any more). */
void pt_runfile_unmap(struct pt_runfile *rf) {
    if (rf->head != NULL) munmap(rf->head, rf->head_len);
    rf->head = NULL;
    rf->hdr = NULL;
}

/* Not in a handler. */
void pt_runfile_discard(struct pt_runfile *rf, uint64_t bytes, int err) {
    pt_runfile_unmap(rf);
    if (rf->path[0] != '\0') unlink(rf->path);
    rf->path[0] = '\0';
    pt_note_map_failure(PT_NOTE_FILE, bytes, err);
}

/* Async-signal-safe (one madvise). */
int pt_runfile_reserve(void *addr, uint64_t len) {
    if (len == 0) return 0;
    uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(PT_PAGE - 1);
    uintptr_t hi = ((uintptr_t)addr + len + PT_PAGE - 1) & ~(uintptr_t)(PT_PAGE - 1);
    int saved = errno;
    int rc = madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
    /* EINVAL: a kernel before 5.14 cannot populate; touch as before (best effort). */
    if (rc != 0 && errno == EINVAL) rc = 0;
    errno = saved;
    return rc == 0 ? 0 : -1;
}

/* Async-signal-safe. */
void pt_runfile_header_init(pt_file_header *f, uint32_t kind, uint64_t file_size) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    f->version = PT_WIRE_VERSION;
    f->kind = kind;
    f->header_size = sizeof *f;
    f->pid = (uint32_t)getpid();
    f->ppid = (uint32_t)getppid();
    f->start_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    f->body_offset = sizeof *f;
    f->file_size = file_size;
}

/* Async-signal-safe. */
void pt_runfile_publish(pt_file_header *f) {
    char magic[8] = PT_WIRE_MAGIC;
    uint64_t word;
    memcpy(&word, magic, sizeof word);
    __atomic_store_n((uint64_t *)(void *)f->magic, word, __ATOMIC_RELEASE);
}

/* Async-signal-safe. */
void pt_runfile_no_space(pt_file_header *f) {
    if (f != NULL) __atomic_fetch_or(&f->flags, (uint32_t)PT_FLAG_NO_SPACE, __ATOMIC_RELAXED);
}

/* ---- regions ------------------------------------------------------------------- */

/* First element of window k.  Async-signal-safe. */
static inline uint64_t pt_region_first(const struct pt_region *r, unsigned k) {
    return ((1ull << k) - 1) << r->shift;
}

/* Async-signal-safe. */
void pt_region_init(struct pt_region *r, const struct pt_runfile *rf, uint64_t offset,
                    uint32_t elem, uint32_t shift, uint64_t capacity, uint64_t overlap,
                    enum pt_note_what what) {
    memset(r, 0, sizeof *r);
    r->rf = rf;
    r->offset = offset;
    r->elem = elem;
    r->shift = shift;
    r->capacity = capacity;
    r->overlap = overlap;
    r->what = what;
}

/* Map window k (its elements and the overlap, clamped to the capacity); the
 * address of its first element or NULL.  Two threads may map it at once:
 * the second unmaps its own and takes the first's.  Async-signal-safe. */
static unsigned char *pt_region_map(struct pt_region *r, unsigned k) {
    if (__atomic_load_n(&r->failed, __ATOMIC_RELAXED)) return NULL;
    uint64_t first = pt_region_first(r, k), end = pt_region_first(r, k + 1) + r->overlap;
    if (end > r->capacity) end = r->capacity;
    uint64_t bytes = (end - first) * r->elem;
    void *map = NULL;
    size_t map_len = 0;
    unsigned char *w = pt_runfile_map(r->rf, r->offset + first * r->elem, bytes, &map, &map_len);
    if (w == NULL) {
        if (!r->quiet) pt_note_map_failure(r->what, bytes, errno);
        __atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    if (r->populate && pt_runfile_reserve(w, bytes) != 0) {
        munmap(map, map_len);
        pt_runfile_no_space(r->rf->hdr);
        __atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED);
        errno = ENOSPC;
        return NULL;
    }
    uintptr_t expect = 0, bias = (uintptr_t)w - (uintptr_t)(first * r->elem);
    if (__atomic_compare_exchange_n(&r->bias[k], &expect, bias, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_ACQUIRE)) {
        /* Only the winner writes these (pt_region_mapped, pt_region_unmap). */
        __atomic_store_n(&r->map_len[k], map_len, __ATOMIC_RELAXED);
        __atomic_store_n(&r->map[k], map, __ATOMIC_RELAXED);
        return w;
    }
    munmap(map, map_len); /* another thread mapped it first */
    return (unsigned char *)(expect + (uintptr_t)(first * r->elem));
}

/* Async-signal-safe. */
void *pt_region_at(struct pt_region *r, uint64_t i) {
    if (i >= r->capacity) return NULL;
    void *p = pt_region_peek(r, i);
    if (p != NULL) return p;
    unsigned k = pt_region_window(r, i);
    unsigned char *w = pt_region_map(r, k);
    return w == NULL ? NULL : w + (i - pt_region_first(r, k)) * r->elem;
}

/* Async-signal-safe. */
int pt_region_back(struct pt_region *r, uint64_t from, uint64_t to) {
    if (to > r->capacity) return -1;
    while (from < to) {
        unsigned char *p = pt_region_at(r, from);
        if (p == NULL) return -1;
        uint64_t end = pt_region_first(r, pt_region_window(r, from) + 1);
        if (end > to) end = to;
        if (!r->populate && pt_runfile_reserve(p, (end - from) * r->elem) != 0) {
            pt_runfile_no_space(r->rf->hdr);
            return -1;
        }
        from = end;
    }
    return 0;
}

/* Async-signal-safe. */
uint64_t pt_region_mapped(const struct pt_region *r) {
    uint64_t total = 0;
    for (unsigned k = 0; k < PT_REGION_WINDOWS; k++)
        if (__atomic_load_n(&r->bias[k], __ATOMIC_ACQUIRE) != 0)
            total += __atomic_load_n(&r->map_len[k], __ATOMIC_RELAXED);
    return total;
}

/* Not in a handler. */
void pt_region_unmap(struct pt_region *r) {
    for (unsigned k = 0; k < PT_REGION_WINDOWS; k++) {
        if (r->bias[k] != 0 && r->map[k] != NULL) munmap(r->map[k], r->map_len[k]);
        r->bias[k] = 0;
        r->map[k] = NULL;
    }
}
