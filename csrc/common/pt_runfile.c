/* Run-file creation shared by the LD_PRELOAD runtimes (see pt_runfile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pt_runfile.h"

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
                        uint32_t *generation) {
    char path[4096 + 64];
    size_t dlen = strlen(dir), klen = strlen(kind);
    if (dlen >= 4000 || klen >= 32 || size == 0) return NULL;
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
        /* Sparse: untouched pages cost nothing. */
        void *map = MAP_FAILED;
        if (ftruncate(fd, (off_t)size) == 0)
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
