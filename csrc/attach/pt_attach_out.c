/* proftui-attach: buffered writer of the attach stream (format in pt_attach.h).
 *
 * One job: turn samples and events into records on stdout.  Samples go into
 * the stack table (pt_attach_stacks.c); every PT_ATTACH_COUNTS_NS (or the
 * interval pt_attach_out_batch sets) the stacks that moved are sent, each new
 * one announced once.  Records are buffered
 * and written without blocking: if the reader falls behind, counts wait in
 * the table (nothing is lost), so proftui can never delay the target.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pt_attach.h"

/* Room for ~1 s of deep stacks at 10 kHz: proftui reads in bursts when busy. */
#define PT_OUT_CAP (1024 * 1024)

/* The writer's state: the helper is single-threaded, so plain fields. */
static struct {
    char deferred[512];             /* a warning held until the header is out (auto's fallback) */
    unsigned char buf[PT_OUT_CAP];  /* records not yet written to the pipe */
    size_t len;                     /* bytes of buf in use */
    int dead;                       /* a write failed with EPIPE/EBADF: the reader is gone */
    uint64_t dropped;               /* samples the stack table had no room for, unreported */
    uint64_t counts_at;             /* CLOCK_MONOTONIC ns when the counts were last sent */
    uint64_t interval_ns;           /* between counts; 0: PT_ATTACH_COUNTS_NS */
    int batched;                    /* the stream is written with the counts only... */
    int urgent;                     /* ...or when a process began: it runs now */
    int header_out;                 /* the header is in buf: bytes may go to the pipe */
    uint64_t discarded;             /* records written into scratch: the reader was stuck */
    unsigned char scratch[1024];    /* where they went (a record waited for is small) */
} pt_out;

/* Stacks per COUNTS record: 512 KiB, well under the reader's 1 MiB limit. */
#define PT_OUT_COUNTS_MAX 32768

/* Write what the pipe takes now; keep the rest.  stdout is non-blocking (set
 * by main), so a stalled reader (proftui suspended with Ctrl-Z) can never
 * stall the helper while a target thread is stopped.  Not async-signal-safe. */
static void pt_attach_out_write(void) {
    if (!pt_out.header_out) return; /* the stream starts with its header, always */
    size_t done = 0;
    while (done < pt_out.len && !pt_out.dead) {
        ssize_t n = write(STDOUT_FILENO, pt_out.buf + done, pt_out.len - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            pt_out.dead = 1;
            done = pt_out.len;
            break;
        }
        done += (size_t)n;
    }
    if (pt_out.dead) done = pt_out.len;
    memmove(pt_out.buf, pt_out.buf + done, pt_out.len - done);
    pt_out.len -= done;
}

/* Flush, waiting up to `timeout_ms` for the reader.  Not async-signal-safe. */
static void pt_attach_out_drain(int timeout_ms) {
    for (int waited = 0; !pt_out.dead; waited += 50) {
        pt_attach_out_write();
        if (pt_out.len == 0 || waited >= timeout_ms) break;
        struct pollfd pfd = {STDOUT_FILENO, POLLOUT, 0};
        poll(&pfd, 1, 50);
    }
}

int pt_attach_out_broken(void) { return pt_out.dead; }

/* Reserve `size` bytes (a multiple of 8) for one record.  When the reader is
 * behind: NULL unless `wait`, else wait up to 2 s (small, rare records and the
 * last counts are worth it).  Not async-signal-safe. */
static unsigned char *pt_attach_out_reserve(uint32_t type, uint32_t size, int wait) {
    if (pt_out.len + size > PT_OUT_CAP) pt_attach_out_write();
    if (pt_out.len + size > PT_OUT_CAP) {
        if (!wait) return NULL;
        pt_attach_out_drain(2000);
        if (pt_out.len + size > PT_OUT_CAP) {
            /* The reader took nothing for 2 s: this record is lost, never cut off
             * (the buffer may start with the rest of a record half written).
             * Counts and stacks stay in the table instead, for a later try. */
            if (type == PT_ATTACH_REC_STACK || type == PT_ATTACH_REC_COUNTS ||
                type == PT_ATTACH_REC_FORGET || size > sizeof pt_out.scratch)
                return NULL;
            pt_out.discarded++;
            return memset(pt_out.scratch, 0, sizeof pt_out.scratch);
        }
    }
    unsigned char *rec = pt_out.buf + pt_out.len;
    memset(rec, 0, size);
    memcpy(rec, &type, 4);
    memcpy(rec + 4, &size, 4);
    pt_out.len += size;
    return rec;
}

static uint64_t pt_attach_out_clock(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Announce the new stacks among those that moved and send their counts, as far
 * as the buffer takes them (`force`: all of them, waiting for the reader).
 * What does not fit waits in the table for the next call. */
static void pt_attach_out_counts(int force) {
    if (pt_out.dropped > 0) {
        unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_LOST, 24, force);
        if (rec != NULL) {
            uint32_t where = PT_ATTACH_LOST_TABLE;
            memcpy(rec + 8, &pt_out.dropped, 8);
            memcpy(rec + 16, &where, 4);
            pt_out.dropped = 0;
        }
    }
    while (pt_attach_stacks_moved() > 0) {
        size_t n = pt_attach_stacks_moved(), k = 0;
        if (n > PT_OUT_COUNTS_MAX) n = PT_OUT_COUNTS_MAX;
        for (; k < n; k++) {
            struct pt_attach_stack *s = pt_attach_stacks_moved_at(k);
            if (s->announced) continue;
            unsigned char *rec =
                pt_attach_out_reserve(PT_ATTACH_REC_STACK, 24 + 8 * s->nframes, force);
            if (rec == NULL) break;
            memcpy(rec + 8, &s->id, 4);
            memcpy(rec + 12, &s->tid, 4);
            memcpy(rec + 16, &s->flags, 4);
            memcpy(rec + 20, &s->nframes, 4);
            memcpy(rec + 24, pt_attach_stacks_frames(s), 8 * (size_t)s->nframes);
            s->announced = 1;
        }
        if (k == 0) return;
        unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_COUNTS, (uint32_t)(16 + 16 * k),
                                                   force);
        if (rec == NULL) return;
        uint64_t now = pt_attach_out_clock(CLOCK_REALTIME);
        memcpy(rec + 8, &now, 8);
        for (size_t i = 0; i < k; i++) {
            const struct pt_attach_stack *s = pt_attach_stacks_moved_at(i);
            uint32_t samples = s->samples > UINT32_MAX ? UINT32_MAX : (uint32_t)s->samples;
            memcpy(rec + 16 + 16 * i, &s->id, 4);
            memcpy(rec + 20 + 16 * i, &samples, 4);
            memcpy(rec + 24 + 16 * i, &s->weight_ns, 8);
        }
        pt_attach_stacks_taken(k);
    }
}

int pt_attach_out_forget(void) {
    pt_attach_out_counts(1);
    if (pt_attach_stacks_moved() > 0) return 0; /* the reader took nothing for 2 s */
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_FORGET, 16, 1);
    if (rec == NULL) return 0;
    uint32_t ids = pt_attach_stacks_forget();
    memcpy(rec + 8, &ids, 4);
    pt_attach_out_write();
    return 1;
}

void pt_attach_out_batch(uint64_t interval_ns) {
    pt_out.interval_ns = interval_ns;
    pt_out.batched = 1;
}

static uint64_t pt_attach_out_interval_ns(void) {
    return pt_out.interval_ns ? pt_out.interval_ns : PT_ATTACH_COUNTS_NS;
}

void pt_attach_out_flush(void) {
    uint64_t now = pt_attach_out_clock(CLOCK_MONOTONIC);
    int due = now - pt_out.counts_at >= pt_attach_out_interval_ns() || pt_out.urgent;
    if (due) {
        pt_out.counts_at = now;
        pt_out.urgent = 0;
        pt_attach_out_counts(0);
    }
    if (due || !pt_out.batched || pt_out.len > PT_OUT_CAP / 4) pt_attach_out_write();
}

/* The header goes first in the stream even when records were made before it
 * (a thread that exited while the helper attached): they follow it. */
void pt_attach_out_header(uint32_t method, pid_t pid, uint64_t period_ns, uint32_t flags) {
    if (pt_out.header_out) return;
    if (pt_out.len + 32 > PT_OUT_CAP) pt_out.len = PT_OUT_CAP - 32; /* cannot happen: tiny */
    memmove(pt_out.buf + 32, pt_out.buf, pt_out.len);
    unsigned char *h = pt_out.buf;
    uint32_t version = PT_ATTACH_VERSION, upid = (uint32_t)pid;
    memcpy(h, PT_ATTACH_MAGIC, 8);
    memcpy(h + 8, &version, 4);
    memcpy(h + 12, &method, 4);
    memcpy(h + 16, &upid, 4);
    memcpy(h + 20, &flags, 4);
    memcpy(h + 24, &period_ns, 8);
    pt_out.len += 32;
    pt_out.header_out = 1;
    if (pt_out.deferred[0] != '\0')
        pt_attach_out_text(PT_ATTACH_REC_WARN, "%s", pt_out.deferred);
}

void pt_attach_out_sample(uint32_t tid, uint64_t weight_ns, uint32_t flags, const uint64_t *ips,
                          uint32_t n) {
    if (n > PT_ATTACH_MAX_FRAMES) n = PT_ATTACH_MAX_FRAMES;
    if (pt_attach_stacks_count(tid, flags, ips, n, weight_ns) != 0) pt_out.dropped++;
}

/* The first line of /proc/PID/task/TID/comm into comm[16] (left empty if it is gone). */
static void pt_attach_out_comm(pid_t pid, uint32_t tid, unsigned char *comm) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%u/comm", (int)pid, tid);
    FILE *f = fopen(path, "re");
    if (f == NULL) return;
    char text[17] = {0};
    if (fgets(text, sizeof text, f) != NULL) {
        text[strcspn(text, "\n")] = '\0';
        memcpy(comm, text, strlen(text));
    }
    fclose(f);
}

/* Announce a thread with its name from /proc (empty if it is already gone). */
void pt_attach_out_thread(uint32_t tid, uint32_t flags, pid_t pid) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_THREAD, 32, 1);
    memcpy(rec + 8, &tid, 4);
    memcpy(rec + 12, &flags, 4);
    if (!(flags & PT_ATTACH_THREAD_GONE)) pt_attach_out_comm(pid, tid, rec + 16);
}

void pt_attach_out_task(uint32_t serial, pid_t pid, pid_t tid, uint32_t flags) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_TASK, 40, 1);
    uint32_t upid = (uint32_t)pid, utid = (uint32_t)tid;
    memcpy(rec + 8, &serial, 4);
    memcpy(rec + 12, &upid, 4);
    memcpy(rec + 16, &utid, 4);
    memcpy(rec + 20, &flags, 4);
    if (flags & PT_ATTACH_THREAD_NEW) pt_attach_out_comm(pid, utid, rec + 24);
}

/* Maps text sent at most: a record's size must stay well within the buffer. */
#define PT_OUT_MAPS_MAX 65536

/* One PROCESS record; `exe` NULL: read from /proc/PID/exe; `ns_of`: whose mount
 * namespace to send ("self" for the helper's, a pid, or NULL for none). */
static void pt_attach_out_process_record(pid_t pid, uint32_t flags, const char *maps,
                                         size_t maps_len, const char *exe_known,
                                         const char *ns_of) {
    char exe[512] = "";
    /* proftui reads its comm and files through /proc while it runs: its stacks go now. */
    if ((flags & PT_ATTACH_PROCESS_NEW) && exe_known == NULL) pt_out.urgent = 1;
    if (exe_known != NULL) {
        snprintf(exe, sizeof exe, "%s", exe_known);
    } else if (!(flags & PT_ATTACH_PROCESS_GONE)) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
        ssize_t n = readlink(path, exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
    }
    if (maps_len > PT_OUT_MAPS_MAX) { /* cut at a line's end */
        maps_len = PT_OUT_MAPS_MAX;
        while (maps_len > 0 && maps[maps_len - 1] != '\n') maps_len--;
    }
    /* Its mount namespace: which files its paths name, after it is gone. */
    uint64_t mnt_ns = 0;
    struct stat st;
    char ns[64];
    if (ns_of != NULL) {
        snprintf(ns, sizeof ns, "/proc/%s/ns/mnt", ns_of);
        if (stat(ns, &st) == 0) mnt_ns = (uint64_t)st.st_ino;
    }
    uint32_t exe_len = (uint32_t)strlen(exe), upid = (uint32_t)pid, mlen = (uint32_t)maps_len;
    uint32_t size = (uint32_t)(32 + ((exe_len + maps_len + 1 + 7) & ~(size_t)7));
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_PROCESS, size, 1);
    if (rec == NULL) return; /* the reader is stuck: proftui reads /proc/PID/maps itself */
    memcpy(rec + 8, &upid, 4);
    memcpy(rec + 12, &flags, 4);
    memcpy(rec + 16, &exe_len, 4);
    memcpy(rec + 20, &mlen, 4);
    memcpy(rec + 24, &mnt_ns, 8);
    memcpy(rec + 32, exe, exe_len);
    if (maps_len > 0) memcpy(rec + 32 + exe_len, maps, maps_len);
}

void pt_attach_out_process(pid_t pid, uint32_t flags, const char *maps, size_t maps_len) {
    /* Its last counts before its end: proftui may forget a process soon after. */
    if (flags & PT_ATTACH_PROCESS_GONE) pt_attach_out_counts(0);
    char who[16];
    snprintf(who, sizeof who, "%d", (int)pid);
    pt_attach_out_process_record(pid, flags, maps, maps_len, NULL,
                                 (flags & PT_ATTACH_PROCESS_GONE) ? NULL : who);
}

void pt_attach_out_gone_process(pid_t pid, const char *exe, const char *maps, size_t maps_len,
                                int own_namespace) {
    pt_attach_out_process_record(pid, PT_ATTACH_PROCESS_NEW, maps, maps_len, exe,
                                 own_namespace ? "self" : NULL);
}

void pt_attach_out_u64(uint32_t type, uint64_t value) {
    unsigned char *rec = pt_attach_out_reserve(type, 16, 1);
    memcpy(rec + 8, &value, 8);
}

void pt_attach_out_lost(uint64_t count, uint32_t where) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_LOST, 24, 1);
    memcpy(rec + 8, &count, 8);
    memcpy(rec + 16, &where, 4);
}

void pt_attach_out_buffers(uint64_t ring_bytes, uint32_t rings, uint64_t asked,
                           uint32_t stack_bytes) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_BUFFERS, 40, 1);
    uint64_t stream = PT_OUT_CAP;
    memcpy(rec + 8, &ring_bytes, 8);
    memcpy(rec + 16, &rings, 4);
    memcpy(rec + 20, &stack_bytes, 4);
    memcpy(rec + 24, &stream, 8);
    memcpy(rec + 32, &asked, 8);
}

void pt_attach_out_exit(int32_t status, int32_t signal) {
    pt_attach_out_counts(1); /* every sample before the exit */
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_EXIT, 16, 1);
    memcpy(rec + 8, &status, 4);
    memcpy(rec + 12, &signal, 4);
}

void pt_attach_out_text(uint32_t type, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = strlen(text);
    uint32_t size = (uint32_t)(8 + ((len + 1 + 7) & ~(size_t)7));
    unsigned char *rec = pt_attach_out_reserve(type, size, 1);
    memcpy(rec + 8, text, len);
}

void pt_attach_out_end(uint64_t samples, uint64_t lost) {
    pt_attach_out_counts(1);
    if (pt_out.discarded > 0)
        pt_attach_out_text(PT_ATTACH_REC_WARN,
                           "%llu records of the attach stream (thread names, notes) were "
                           "discarded: proftui read nothing from the helper for 2 s",
                           (unsigned long long)pt_out.discarded);
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_END, 24, 1);
    memcpy(rec + 8, &samples, 8);
    memcpy(rec + 16, &lost, 8);
    pt_attach_out_drain(5000);
}

void pt_attach_out_defer_warning(const char *text) {
    snprintf(pt_out.deferred, sizeof pt_out.deferred, "%s", text);
}
