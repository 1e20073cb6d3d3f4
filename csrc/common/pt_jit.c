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
#define PT_JIT_ARENA (256u << 10)          /* table memory is carved from such chunks, */
#define PT_JIT_MAX_ARENAS 256              /* at most 64 MiB of them (code a JIT replaced
                                            * keeps its table: a set may still hold it) */
#define PT_JIT_SCRATCH_ROWS 4096           /* a table's rows are built here first */
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
    /* The kept tables, sorted by lo, not overlapping: tables[cur][0, ntables);
     * the other array receives the next merge.  PT_JIT_MAX_TABLES slots each. */
    const struct pt_cfi_table **tables[2];
    int cur;
    size_t ntables;
    /* What this poll's records said, in file order (seq): a table, or a range
     * whose older tables go (table NULL: code loaded without unwinding
     * information, or moved away).  PT_JIT_RECORDS_PER_POLL slots. */
    struct pt_jit_news {
        uint64_t lo, hi;
        const struct pt_cfi_table *table;
        size_t seq; /* file order */
        int gone;   /* hidden by a newer one of the same poll */
    } *news;
    size_t nnews;
    unsigned char *arena; /* the current chunk of table memory */
    size_t arena_used, arenas;
    int capped; /* the cap was said (once per process) */
    struct pt_cfi_row scratch[PT_JIT_SCRATCH_ROWS];
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

/* The cap on generated code's tables was reached: said once, in the notes. */
static void pt_jit_cap(void) {
    if (pt_jit.capped) return;
    pt_jit.capped = 1;
    pt_note_cap("jit", PT_JIT_MAX_TABLES, (uint64_t)PT_JIT_MAX_ARENAS * PT_JIT_ARENA);
}

/* `bytes` of table memory, 8-aligned, from the arena.  Async-signal-safe. */
static void *pt_jit_carve(size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if (bytes > PT_JIT_ARENA) return NULL;
    if (pt_jit.arena == NULL || pt_jit.arena_used + bytes > PT_JIT_ARENA) {
        if (pt_jit.arenas >= PT_JIT_MAX_ARENAS) {
            pt_jit_cap();
            return NULL;
        }
        unsigned char *chunk = pt_alloc(PT_JIT_ARENA); /* the old one stays: sets use it */
        if (chunk == NULL) {
            pt_note_map_failure(PT_NOTE_UNWIND, PT_JIT_ARENA, ENOMEM);
            return NULL;
        }
        pt_jit.arena = chunk;
        pt_jit.arena_used = 0;
        pt_jit.arenas++;
    }
    void *p = pt_jit.arena + pt_jit.arena_used;
    pt_jit.arena_used += bytes;
    return p;
}

/* Note what a record said of [lo, hi): its new table, or NULL (the code there
 * is no longer what older tables describe).  Async-signal-safe. */
static void pt_jit_news(uint64_t lo, uint64_t hi, const struct pt_cfi_table *table) {
    if (hi <= lo || pt_jit.nnews >= PT_JIT_RECORDS_PER_POLL) return;
    pt_jit.news[pt_jit.nnews] = (struct pt_jit_news){lo, hi, table, pt_jit.nnews, 0};
    pt_jit.nnews++;
}

/* The code [addr, addr + size) was loaded: build its rows from the pending
 * unwinding record (if any) into the arena.  Async-signal-safe. */
static void pt_jit_load(uint64_t addr, uint64_t size, int (*covered)(uint64_t pc)) {
    uint64_t data = pt_jit.unwind_size, hdr = pt_jit.unwind_hdr_size;
    pt_jit.unwind_size = 0;
    if (size == 0 || size > UINT32_MAX || addr > UINT64_MAX - size - 8) return;
    if (data == 0 || covered(addr) || covered(addr + size - 1)) {
        pt_jit_news(addr, addr + size, NULL);
        return;
    }
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
    long n = pt_cfi_build_rows(&src, addr, addr + size, pt_jit.scratch, PT_JIT_SCRATCH_ROWS);
    struct pt_cfi_table *t = n > 0 ? pt_jit_carve(sizeof *t) : NULL;
    struct pt_cfi_row *rows = t != NULL ? pt_jit_carve((size_t)n * sizeof *rows) : NULL;
    if (rows == NULL) {
        pt_jit_news(addr, addr + size, NULL);
        return;
    }
    memcpy(rows, pt_jit.scratch, (size_t)n * sizeof *rows);
    *t = (struct pt_cfi_table){addr, addr + size, (size_t)n, rows, PT_TABLE_GENERATED, NULL};
    pt_jit_news(addr, addr + size, t);
}

/* Merge this poll's news into the kept tables.  A range hides every older
 * table it overlaps (code replaced, moved, or loaded again without unwinding
 * information), so a table is kept only if nothing newer overlaps it; the
 * kept ones stay sorted by lo and never overlap.  O(n log k) for n kept
 * tables and k news, plus an insertion sort of the news (they come mostly in
 * address order) and the pairs of them that overlap.  1 if the tables
 * changed.  Async-signal-safe. */
static int pt_jit_merge(void) {
    size_t k = pt_jit.nnews;
    if (k == 0) return 0;
    struct pt_jit_news *news = pt_jit.news;
    /* Sort by lo, stably (a poll's news come mostly in address order). */
    for (size_t i = 1; i < k; i++) {
        struct pt_jit_news x = news[i];
        size_t j = i;
        for (; j > 0 && news[j - 1].lo > x.lo; j--) news[j] = news[j - 1];
        news[j] = x;
    }
    /* Among the news, the older of two that overlap goes. */
    for (size_t i = 0; i < k; i++)
        for (size_t j = i + 1; j < k && news[j].lo < news[i].hi; j++) {
            if (news[i].seq < news[j].seq) news[i].gone = 1;
            else news[j].gone = 1;
        }
    /* The highest end among news[0..i]: a kept table [lo, hi) overlaps some
     * news iff the news starting before hi reach past lo. */
    static uint64_t reach[PT_JIT_RECORDS_PER_POLL]; /* under the maps lock */
    for (size_t i = 0; i < k; i++)
        reach[i] = i > 0 && reach[i - 1] > news[i].hi ? reach[i - 1] : news[i].hi;
    const struct pt_cfi_table **old = pt_jit.tables[pt_jit.cur];
    const struct pt_cfi_table **out = pt_jit.tables[1 - pt_jit.cur];
    size_t n = 0, i = 0, j = 0;
    while (i < pt_jit.ntables || j < k) {
        const struct pt_cfi_table *t;
        if (j >= k || (i < pt_jit.ntables && old[i]->lo < news[j].lo)) {
            t = old[i++];
            size_t a = 0, z = k; /* news starting before t->hi: [0, a) */
            while (a < z) {
                size_t mid = a + (z - a) / 2;
                if (news[mid].lo < t->hi) a = mid + 1;
                else z = mid;
            }
            if (a > 0 && reach[a - 1] > t->lo) continue; /* hidden by something newer */
        } else {
            t = news[j].gone ? NULL : news[j].table;
            j++;
            if (t == NULL) continue; /* a hole, or hidden */
        }
        if (n >= PT_JIT_MAX_TABLES) {
            pt_jit_cap();
            continue;
        }
        out[n++] = t;
    }
    pt_jit.cur = 1 - pt_jit.cur;
    pt_jit.ntables = n;
    pt_jit.nnews = 0;
    return 1;
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
                if (prefix[0] == PT_JIT_LOAD) pt_jit_load(load[2], load[3], covered);
                else pt_jit_news(load[2], load[2] + load[4], NULL); /* moved: re-learn */
            }
            pt_jit.unwind_size = 0;
        } else if (prefix[0] == PT_JIT_CLOSE) {
            pt_jit.done = 1;
        }
        pt_jit.offset += size;
    }
    return pt_jit_merge();
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
    if (pt_jit.news == NULL) { /* the tables' slots, twice, and this poll's news */
        size_t slots = PT_JIT_MAX_TABLES * sizeof *pt_jit.tables[0];
        size_t news = PT_JIT_RECORDS_PER_POLL * sizeof *pt_jit.news;
        unsigned char *p = pt_alloc(2 * slots + news);
        if (p == NULL) {
            pt_note_map_failure(PT_NOTE_UNWIND, 2 * slots + news, ENOMEM);
            pt_jit.done = 1;
            return 0;
        }
        pt_jit.tables[0] = (const struct pt_cfi_table **)(void *)p;
        pt_jit.tables[1] = (const struct pt_cfi_table **)(void *)(p + slots);
        pt_jit.news = (struct pt_jit_news *)(void *)(p + 2 * slots);
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
    return pt_jit.tables[pt_jit.cur];
}

/* See pt_jit.h.  Async-signal-safe. */
void pt_jit_fork_child(void) {
    pt_jit.given = 0;
    pt_jit.path[0] = '\0';
    pt_jit.offset = 0;
    pt_jit.done = 0;
    pt_jit.ntables = 0;
    pt_jit.nnews = 0;
    pt_jit.unwind_size = 0;
    pt_jit.next_find_ns = 0;
    pt_jit.find_gap_ns = 0;
}
