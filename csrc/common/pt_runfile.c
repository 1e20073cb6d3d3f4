/* Run-file creation shared by the LD_PRELOAD runtimes (see pt_runfile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pt_runfile.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Append decimal `v` at `p`; returns the end.  Async-signal-safe. */
static char *pt_runfile_u32(char *p, uint32_t v) {
    char tmp[12];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

/* Async-signal-safe. */
void *pt_runfile_create(const char *dir, const char *kind, uint32_t pid, uint64_t size,
                        uint64_t reserve, uint32_t *generation) {
    char path[4096 + 64];
    size_t dlen = strlen(dir), klen = strlen(kind);
    if (dlen >= 4000 || klen >= 32 || size == 0 || reserve > size) return NULL;
    for (uint32_t gen = 0; gen < PT_RUNFILE_MAX_GENERATION; gen++) {
        char *p = path;
        memcpy(p, dir, dlen);
        p += dlen;
        *p++ = '/';
        memcpy(p, kind, klen);
        p += klen;
        *p++ = '.';
        p = pt_runfile_u32(p, pid);
        if (gen) {
            *p++ = '.';
            p = pt_runfile_u32(p, gen);
        }
        memcpy(p, ".ptw", 5);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EEXIST) continue; /* an earlier image of this pid: next name */
            return NULL;
        }
        /* Sparse beyond `reserve`: the rest is backed region by region
         * (pt_runfile_reserve) before its first touch, so a full file system
         * costs records, never a SIGBUS. */
        void *map = MAP_FAILED;
        if (ftruncate(fd, (off_t)size) == 0 &&
            (reserve == 0 || posix_fallocate(fd, 0, (off_t)reserve) == 0))
            map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd); /* the mapping keeps the file; no fd for the target to trip over */
        if (map == MAP_FAILED) {
            unlink(path);
            return NULL;
        }
        if (generation != NULL) *generation = gen;
        return map;
    }
    return NULL;
}

/* Async-signal-safe (one madvise). */
int pt_runfile_reserve(void *map, uint64_t offset, uint64_t len) {
    if (len == 0) return 0;
    uintptr_t lo = ((uintptr_t)map + offset) & ~(uintptr_t)4095;
    uintptr_t hi = ((uintptr_t)map + offset + len + 4095) & ~(uintptr_t)4095;
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
    __atomic_fetch_or(&f->flags, (uint32_t)PT_FLAG_NO_SPACE, __ATOMIC_RELAXED);
}
