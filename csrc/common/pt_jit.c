/* Unwind tables of generated code from the process's jitdump (see pt_jit.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pt_jit.h"
#include "pt_note.h"

#define PT_JIT_MAGIC 0x4A695444u           /* "JiTD" in the writer's byte order */
#define PT_JIT_FIND_FIRST_NS 10000000ull   /* look for the file 10 ms after the first poll, */
#define PT_JIT_FIND_MAX_NS 5000000000ull    /* then twice as late each time, up to every 5 s */
#define PT_JIT_MAX_UNWIND (1u << 20)       /* a larger unwinding record is skipped */
#define PT_JIT_RECORDS_PER_POLL 4096       /* bounds one poll's time in a handler */
#define PT_JIT_ARENA (256u << 10)          /* table memory is carved from such chunks */
#define PT_JIT_PATH 512

enum { PT_JIT_LOAD = 0, PT_JIT_MOVE = 1, PT_JIT_CLOSE = 3, PT_JIT_UNWINDING = 4 };

/* What the polls know, under the maps lock (the only writer and reader but
 * for the published table pointers, which a set copies). */
static struct {
    char path[PT_JIT_PATH]; /* the file, once found ("" before), as we open it */
    int given;              /* attach: the path, uid and pid come from pt_jit_use */
    uint32_t uid, pid;      /* given: the file's owner, the pid its header names */
    dev_t dev;
    ino_t ino;
    uint64_t offset;       /* bytes read and parsed (whole records) */
    uint64_t next_find_ns; /* when to look for the file again */
    uint64_t find_gap_ns;  /* the wait after the next failed look */
    int done;              /* JIT_CODE_CLOSE, a refused file or garbage: read no more */
    unsigned char *unwind; /* the pending unwinding record's data (pt_alloc'd) */
    uint64_t unwind_cap, unwind_size, unwind_hdr_size; /* size 0: none pending */
    const struct pt_cfi_table **tables; /* PT_JIT_MAX_TABLES slots (pt_alloc'd) */
    size_t ntables;
    unsigned char *arena; /* the current chunk of table memory */
    size_t arena_used;
    uint64_t dropped; /* tables not kept (cap, no memory) */
} pt_jit;

/* 1 if `fd` is a file we may trust: regular, its process's user's (ours
 * when preloaded), writable by no one else.  Async-signal-safe. */
static int pt_jit_trusted(int fd, struct stat *st) {
    uint32_t uid = pt_jit.given ? pt_jit.uid : (uint32_t)geteuid();
    return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == uid &&
           !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* 1 if `line` (one line of /proc/self/maps, NUL-terminated) maps our jitdump:
 * its path is copied to pt_jit.path.  Async-signal-safe. */
static int pt_jit_line(const char *line, const char *suffix) {
    const char *path = strchr(line, '/');
    if (path == NULL) return 0;
    size_t len = strlen(path), slen = strlen(suffix);
    if (len < slen || len >= sizeof pt_jit.path || strcmp(path + len - slen, suffix) != 0)
        return 0;
    memcpy(pt_jit.path, path, len + 1);
    return 1;
}

/* Look for "/jit-<pid>.dump" among our mappings.  Async-signal-safe. */
static void pt_jit_find(void) {
    char suffix[40] = "/jit-";
    char *end = pt_decimal(suffix + 5, (uint64_t)getpid());
    memcpy(end, ".dump", 6);
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    static char buf[4096], line[PT_JIT_PATH + 128]; /* under the maps lock */
    size_t used = 0;
    int found = 0, skipping = 0; /* skipping: the rest of an over-long line */
    ssize_t got;
    while (!found && (got = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got && !found; i++) {
            if (buf[i] != '\n') {
                if (used + 1 < sizeof line) line[used++] = buf[i];
                else skipping = 1;
                continue;
            }
            line[used] = '\0';
            found = !skipping && pt_jit_line(line, suffix);
            used = 0;
            skipping = 0;
        }
    }
    close(fd);
    if (!found) pt_jit.path[0] = '\0';
}

/* Whole `n` bytes at `off`, or -1.  Async-signal-safe. */
static int pt_jit_read(int fd, void *dst, size_t n, uint64_t off) {
    size_t have = 0;
    while (have < n) {
        ssize_t got = pread(fd, (char *)dst + have, n - have, (off_t)(off + have));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        have += (size_t)got;
    }
    return 0;
}

/* `bytes` of table memory, 8-aligned, from the arena.  Async-signal-safe. */
static void *pt_jit_carve(size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if (bytes > PT_JIT_ARENA) return NULL;
    if (pt_jit.arena == NULL || pt_jit.arena_used + bytes > PT_JIT_ARENA) {
        pt_jit.arena = pt_alloc(PT_JIT_ARENA); /* the old chunk stays: sets point into it */
        pt_jit.arena_used = 0;
        if (pt_jit.arena == NULL) {
            pt_note_map_failure(PT_NOTE_UNWIND, PT_JIT_ARENA, ENOMEM);
            return NULL;
        }
    }
    void *p = pt_jit.arena + pt_jit.arena_used;
    pt_jit.arena_used += bytes;
    return p;
}

/* Forget the tables overlapping [lo, hi): that code was replaced or moved.
 * Their memory stays (a published set may still point to it).
 * Async-signal-safe. */
static int pt_jit_forget(uint64_t lo, uint64_t hi) {
    int changed = 0;
    for (size_t i = 0; i < pt_jit.ntables;) {
        const struct pt_cfi_table *t = pt_jit.tables[i];
        if (t->lo < hi && lo < t->hi) {
            pt_jit.tables[i] = pt_jit.tables[--pt_jit.ntables];
            changed = 1;
        } else {
            i++;
        }
    }
    return changed;
}

/* The code [addr, addr + size) was loaded: build its rows from the pending
 * unwinding record (if any) and keep them.  1 if the tables changed.
 * Async-signal-safe. */
static int pt_jit_load(uint64_t addr, uint64_t size, int (*covered)(uint64_t pc)) {
    int changed = pt_jit_forget(addr, addr + size);
    uint64_t data = pt_jit.unwind_size, hdr = pt_jit.unwind_hdr_size;
    pt_jit.unwind_size = 0;
    if (data == 0 || size == 0 || size > UINT32_MAX || addr > UINT64_MAX - size - 8 ||
        covered(addr) || covered(addr + size - 1))
        return changed;
    /* perf inject's layout: .eh_frame at the code's end rounded up to 8, then
     * .eh_frame_hdr; without a header, .eh_frame is walked. */
    uint64_t eh_frame = addr + ((size + 7) & ~(uint64_t)7), table = data - hdr;
    struct pt_cfi_source src = {pt_jit.unwind + table, eh_frame + table, pt_jit.unwind,
                                pt_jit.unwind + data, 0};
    if (hdr == 0) {
        src.hdr = pt_jit.unwind;
        src.hdr_addr = eh_frame;
        src.eh_frame_len = data;
    }
    struct pt_cfi_table *built = pt_cfi_build(&src, addr, addr + size);
    if (built == NULL) return changed;
    struct pt_cfi_table *t = NULL;
    struct pt_cfi_row *rows = NULL;
    if (pt_jit.ntables < PT_JIT_MAX_TABLES) {
        t = pt_jit_carve(sizeof *t);
        rows = t ? pt_jit_carve(built->nrows * sizeof *rows) : NULL;
    }
    if (rows != NULL) {
        memcpy(rows, built->rows, built->nrows * sizeof *rows);
        *t = *built;
        t->rows = rows;
        t->flags = PT_TABLE_GENERATED;
        pt_jit.tables[pt_jit.ntables++] = t;
        changed = 1;
    } else if (pt_jit.dropped++ == 0 && pt_jit.ntables >= PT_JIT_MAX_TABLES) {
        pt_note_map_failure(PT_NOTE_UNWIND, PT_JIT_MAX_TABLES * sizeof *t, ENOSPC);
    }
    pt_cfi_free(built);
    return changed;
}

/* Keep the unwinding record of `body` bytes at `off` (its 24-byte head, then
 * the data) for the next load.  Async-signal-safe. */
static void pt_jit_unwinding(int fd, uint64_t off, uint64_t body) {
    uint64_t head[3]; /* unwinding_size, eh_frame_hdr_size, mapped_size */
    pt_jit.unwind_size = 0;
    if (body < sizeof head || pt_jit_read(fd, head, sizeof head, off) != 0) return;
    uint64_t size = head[0], hdr = head[1];
    if (size == 0 || size > PT_JIT_MAX_UNWIND || size > body - sizeof head || hdr > size) return;
    if (size > pt_jit.unwind_cap) {
        uint64_t cap = (size + 4095) & ~(uint64_t)4095;
        unsigned char *p = pt_alloc(cap);
        if (p == NULL) return;
        pt_free(pt_jit.unwind, pt_jit.unwind_cap);
        pt_jit.unwind = p;
        pt_jit.unwind_cap = cap;
    }
    if (pt_jit_read(fd, pt_jit.unwind, size, off + sizeof head) != 0) return;
    pt_jit.unwind_size = size;
    pt_jit.unwind_hdr_size = hdr;
}

/* Parse the whole records after pt_jit.offset (the file is `fd`, `end`
 * bytes).  1 if the tables changed.  Async-signal-safe. */
static int pt_jit_records(int fd, uint64_t end, int (*covered)(uint64_t pc)) {
    int changed = 0;
    if (pt_jit.offset == 0) { /* the header: magic, version, size, machine, pad, pid */
        uint32_t h[6];
        if (end < 40) return 0;
        uint32_t pid = pt_jit.given ? pt_jit.pid : (uint32_t)getpid();
        if (pt_jit_read(fd, h, sizeof h, 0) != 0 || h[0] != PT_JIT_MAGIC || h[2] < 40 ||
            h[2] > 4096 || h[5] != pid) {
            pt_jit.done = 1;
            return 0;
        }
        if (end < h[2]) return 0; /* the header is still being written */
        pt_jit.offset = h[2];
    }
    for (int n = 0; n < PT_JIT_RECORDS_PER_POLL && !pt_jit.done; n++) {
        uint32_t prefix[4]; /* id, total size, timestamp */
        uint64_t at = pt_jit.offset;
        if (end - at < sizeof prefix || pt_jit_read(fd, prefix, sizeof prefix, at) != 0) break;
        uint64_t size = prefix[1], body = size - sizeof prefix;
        if (size < sizeof prefix) {
            pt_jit.done = 1; /* garbage: the rest cannot be framed */
            break;
        }
        if (end - at < size) break; /* still being written */
        at += sizeof prefix;
        if (prefix[0] == PT_JIT_UNWINDING) {
            pt_jit_unwinding(fd, at, body);
        } else if (prefix[0] == PT_JIT_LOAD || prefix[0] == PT_JIT_MOVE) {
            uint64_t load[5]; /* pid|tid, vma, code_addr (MOVE: old, new), size / new, size */
            uint64_t want = prefix[0] == PT_JIT_LOAD ? 4 : 5;
            if (body >= want * 8 && pt_jit_read(fd, load, want * 8, at) == 0) {
                if (prefix[0] == PT_JIT_LOAD) changed |= pt_jit_load(load[2], load[3], covered);
                else changed |= pt_jit_forget(load[2], load[2] + load[4]); /* moved: re-learn */
            }
            pt_jit.unwind_size = 0;
        } else if (prefix[0] == PT_JIT_CLOSE) {
            pt_jit.done = 1;
        }
        pt_jit.offset += size;
    }
    return changed;
}

/* See pt_jit.h.  Async-signal-safe. */
int pt_jit_poll(uint64_t now_ns, int (*covered)(uint64_t pc)) {
    if (pt_jit.done) return 0;
    if (pt_jit.path[0] == '\0' && !pt_jit.given) {
        /* Reading /proc/self/maps costs milliseconds in a process with many
         * mappings: a JIT maps its file early, so look often at first only. */
        if (now_ns < pt_jit.next_find_ns) return 0;
        if (pt_jit.find_gap_ns == 0) pt_jit.find_gap_ns = PT_JIT_FIND_FIRST_NS;
        pt_jit.next_find_ns = now_ns + pt_jit.find_gap_ns;
        if (pt_jit.find_gap_ns < PT_JIT_FIND_MAX_NS / 2) pt_jit.find_gap_ns *= 2;
        else pt_jit.find_gap_ns = PT_JIT_FIND_MAX_NS;
        pt_jit_find();
    }
    if (pt_jit.path[0] == '\0') return 0;
    if (pt_jit.tables == NULL) {
        pt_jit.tables = pt_alloc(PT_JIT_MAX_TABLES * sizeof *pt_jit.tables);
        if (pt_jit.tables == NULL) {
            pt_note_map_failure(PT_NOTE_UNWIND, PT_JIT_MAX_TABLES * sizeof *pt_jit.tables, ENOMEM);
            pt_jit.done = 1;
            return 0;
        }
    }
    int fd = open(pt_jit.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st;
    int changed = 0;
    if (!pt_jit_trusted(fd, &st) || (pt_jit.offset > 0 && (st.st_dev != pt_jit.dev ||
                                                            st.st_ino != pt_jit.ino))) {
        pt_jit.done = 1; /* another user's, writable by others, or replaced */
    } else {
        pt_jit.dev = st.st_dev;
        pt_jit.ino = st.st_ino;
        if ((uint64_t)st.st_size > pt_jit.offset)
            changed = pt_jit_records(fd, (uint64_t)st.st_size, covered);
    }
    close(fd);
    return changed;
}

/* See pt_jit.h.  Not async-signal-safe. */
void pt_jit_use(const char *path, uint32_t uid, uint32_t pid) {
    size_t len = strlen(path);
    if (pt_jit.given && strcmp(path, pt_jit.path) == 0) return;
    pt_jit_fork_child(); /* another file: start over */
    pt_jit.given = 1;
    pt_jit.uid = uid;
    pt_jit.pid = pid;
    if (len < sizeof pt_jit.path) memcpy(pt_jit.path, path, len + 1);
}

/* See pt_jit.h. */
const struct pt_cfi_table *const *pt_jit_tables(size_t *n) {
    *n = pt_jit.ntables;
    return pt_jit.tables;
}

/* See pt_jit.h.  Async-signal-safe. */
void pt_jit_fork_child(void) {
    pt_jit.given = 0;
    pt_jit.path[0] = '\0';
    pt_jit.offset = 0;
    pt_jit.done = 0;
    pt_jit.ntables = 0;
    pt_jit.unwind_size = 0;
    pt_jit.next_find_ns = 0;
    pt_jit.find_gap_ns = 0;
}
