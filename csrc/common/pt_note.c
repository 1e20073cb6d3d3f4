/* Notes from a preloaded runtime to the front end (see pt_note.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pt_note.h"

/* Where notes go, set once by the constructor (empty: nowhere). */
static char pt_note_dir[4000];
static char pt_note_kind[32];
/* Regions already noted in this process (bit per pt_note_what; atomic or). */
static uint32_t pt_note_done;

/* Not async-signal-safe (constructor only). */
void pt_note_init(const char *dir, const char *kind) {
    size_t d = strlen(dir), k = strlen(kind);
    if (d >= sizeof pt_note_dir || k >= sizeof pt_note_kind) return;
    memcpy(pt_note_dir, dir, d + 1);
    memcpy(pt_note_kind, kind, k + 1);
}

/* Async-signal-safe. */
void pt_note_fork_child(void) { __atomic_store_n(&pt_note_done, 0, __ATOMIC_RELAXED); }

/* Append decimal `v` at `p`; returns the end.  Async-signal-safe. */
char *pt_decimal(char *p, uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

/* Append `s` at `p`; returns the end.  Async-signal-safe. */
static char *pt_note_str(char *p, const char *s) {
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Append " key=<limit in units of `unit` bytes>" or "=inf".  Async-signal-safe. */
static char *pt_note_limit(char *p, const char *key, int resource, uint64_t unit) {
    struct rlimit rl;
    p = pt_note_str(p, key);
    if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return pt_note_str(p, "inf");
    return pt_decimal(p, (uint64_t)rl.rlim_cur / unit);
}

static const char *const pt_note_names[PT_NOTE_COUNT] = {
    "file", "ring", "stacks", "maplog", "unwind", "altstack", "nodes", "shadow", "hash",
    "buckets", "pointers"};

/* Append `line` (len bytes) to <dir>/<kind>.<pid>.note.  Async-signal-safe. */
static void pt_note_write(const char *line, size_t len) {
    if (pt_note_dir[0] == '\0') return;
    char path[sizeof pt_note_dir + sizeof pt_note_kind + 32];
    char *p = pt_note_str(path, pt_note_dir);
    *p++ = '/';
    p = pt_note_str(p, pt_note_kind);
    *p++ = '.';
    p = pt_decimal(p, (uint64_t)getpid());
    memcpy(p, ".note", 6);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return; /* no descriptor left, no directory: nothing more can be said */
    ssize_t written = write(fd, line, len);
    (void)written;
    close(fd);
}

/* Async-signal-safe. */
void pt_note_map_failure(enum pt_note_what what, uint64_t bytes, int err) {
    if ((unsigned)what >= PT_NOTE_COUNT) return;
    uint32_t bit = 1u << what;
    if (__atomic_fetch_or(&pt_note_done, bit, __ATOMIC_RELAXED) & bit) return;
    int saved = errno;
    char line[256];
    char *p = pt_note_str(line, "map what=");
    p = pt_note_str(p, pt_note_names[what]);
    p = pt_note_str(p, " bytes=");
    p = pt_decimal(p, bytes);
    p = pt_note_str(p, " errno=");
    p = pt_decimal(p, (uint64_t)(err > 0 ? err : 0));
    p = pt_note_limit(p, " as=", RLIMIT_AS, 1024);
    p = pt_note_limit(p, " fsize=", RLIMIT_FSIZE, 1024);
    p = pt_note_limit(p, " nofile=", RLIMIT_NOFILE, 1);
    *p++ = '\n';
    pt_note_write(line, (size_t)(p - line));
    errno = saved;
}

/* Async-signal-safe. */
void pt_note_fsize_cap(uint64_t bytes) {
    int saved = errno;
    char line[128];
    char *p = pt_note_str(line, "fsize what=file bytes=");
    p = pt_decimal(p, bytes);
    p = pt_note_limit(p, " fsize=", RLIMIT_FSIZE, 1024);
    *p++ = '\n';
    pt_note_write(line, (size_t)(p - line));
    errno = saved;
}

/* Async-signal-safe. */
void pt_note_cap(const char *what, uint64_t count, uint64_t bytes) {
    int saved = errno;
    char line[128];
    char *p = pt_note_str(line, "cap what=");
    if (strlen(what) < 32) p = pt_note_str(p, what);
    p = pt_note_str(p, " count=");
    p = pt_decimal(p, count);
    p = pt_note_str(p, " bytes=");
    p = pt_decimal(p, bytes);
    *p++ = '\n';
    pt_note_write(line, (size_t)(p - line));
    errno = saved;
}

/* Async-signal-safe. */
uint64_t pt_note_fsize_limit(void) {
    struct rlimit rl;
    int saved = errno;
    uint64_t limit = UINT64_MAX;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        limit = (uint64_t)rl.rlim_cur;
    errno = saved;
    return limit;
}
