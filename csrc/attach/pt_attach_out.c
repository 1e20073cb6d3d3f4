/* proftui-attach: buffered writer of the attach stream (format in pt_attach.h).
 *
 * One job: turn samples and events into records on stdout.  Records are
 * buffered and flushed without blocking; if the reader falls behind, samples
 * are dropped and counted (PT_ATTACH_REC_LOST), so it can never delay the target.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pt_attach.h"

/* Room for ~1 s of deep stacks at 10 kHz: proftui reads in bursts when busy. */
#define PT_OUT_CAP (1024 * 1024)

/* A warning held until the header is out (the auto method's fallback reason). */
static char pt_attach_out_deferred[512];

/* The output buffer and its fill level: the helper is single-threaded. */
static unsigned char pt_attach_out_buf[PT_OUT_CAP];
static size_t pt_attach_out_len;
/* Set once a write failed with EPIPE/EBADF: the reader is gone, stop writing. */
static int pt_attach_out_dead;
/* Samples dropped because the reader fell behind, not yet reported. */
static uint64_t pt_attach_out_dropped;

/* Write what the pipe takes now; keep the rest.  stdout is non-blocking (set
 * by main), so a stalled reader (proftui suspended with Ctrl-Z) can never
 * stall the helper while a target thread is stopped.  Not async-signal-safe. */
void pt_attach_out_flush(void) {
    size_t done = 0;
    while (done < pt_attach_out_len && !pt_attach_out_dead) {
        ssize_t n = write(STDOUT_FILENO, pt_attach_out_buf + done, pt_attach_out_len - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            pt_attach_out_dead = 1;
            done = pt_attach_out_len;
            break;
        }
        done += (size_t)n;
    }
    if (pt_attach_out_dead) done = pt_attach_out_len;
    memmove(pt_attach_out_buf, pt_attach_out_buf + done, pt_attach_out_len - done);
    pt_attach_out_len -= done;
}

/* Flush, waiting up to `timeout_ms` for the reader.  Not async-signal-safe. */
static void pt_attach_out_drain(int timeout_ms) {
    for (int waited = 0; !pt_attach_out_dead; waited += 50) {
        pt_attach_out_flush();
        if (pt_attach_out_len == 0 || waited >= timeout_ms) break;
        struct pollfd pfd = {STDOUT_FILENO, POLLOUT, 0};
        poll(&pfd, 1, 50);
    }
}

int pt_attach_out_broken(void) { return pt_attach_out_dead; }

/* Reserve `size` bytes (a multiple of 8) for one record; NULL when a sample
 * must be dropped because the reader is behind.  Not async-signal-safe. */
static unsigned char *pt_attach_out_reserve(uint32_t type, uint32_t size) {
    if (pt_attach_out_len + size + 24 > PT_OUT_CAP) pt_attach_out_flush();
    if (pt_attach_out_len + size + 24 > PT_OUT_CAP) {
        if (type == PT_ATTACH_REC_SAMPLE) {
            pt_attach_out_dropped++;
            return NULL;
        }
        pt_attach_out_drain(2000); /* rare, small records: worth a wait */
        if (pt_attach_out_len + size + 24 > PT_OUT_CAP)
            pt_attach_out_len = 0; /* reader gone astray */
    }
    if (pt_attach_out_dropped > 0) { /* report drops before anything newer */
        uint32_t lost_type = PT_ATTACH_REC_LOST, lost_size = 24;
        uint32_t where[2] = {PT_ATTACH_LOST_STREAM, 0};
        memcpy(pt_attach_out_buf + pt_attach_out_len, &lost_type, 4);
        memcpy(pt_attach_out_buf + pt_attach_out_len + 4, &lost_size, 4);
        memcpy(pt_attach_out_buf + pt_attach_out_len + 8, &pt_attach_out_dropped, 8);
        memcpy(pt_attach_out_buf + pt_attach_out_len + 16, where, 8);
        pt_attach_out_len += 24;
        pt_attach_out_dropped = 0;
    }
    unsigned char *rec = pt_attach_out_buf + pt_attach_out_len;
    memset(rec, 0, size);
    memcpy(rec, &type, 4);
    memcpy(rec + 4, &size, 4);
    pt_attach_out_len += size;
    return rec;
}

void pt_attach_out_header(uint32_t method, pid_t pid, uint64_t period_ns, uint32_t flags) {
    unsigned char *h = pt_attach_out_buf + pt_attach_out_len;
    uint32_t version = PT_ATTACH_VERSION, upid = (uint32_t)pid;
    memcpy(h, PT_ATTACH_MAGIC, 8);
    memcpy(h + 8, &version, 4);
    memcpy(h + 12, &method, 4);
    memcpy(h + 16, &upid, 4);
    memcpy(h + 20, &flags, 4);
    memcpy(h + 24, &period_ns, 8);
    pt_attach_out_len += 32;
    if (pt_attach_out_deferred[0] != '\0')
        pt_attach_out_text(PT_ATTACH_REC_WARN, "%s", pt_attach_out_deferred);
}

void pt_attach_out_sample(uint32_t tid, uint64_t weight_ns, uint32_t flags, const uint64_t *ips,
                          uint32_t n) {
    if (n > PT_ATTACH_MAX_FRAMES) n = PT_ATTACH_MAX_FRAMES;
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_SAMPLE, 32 + 8 * n);
    if (rec == NULL) return;
    memcpy(rec + 8, &tid, 4);
    memcpy(rec + 12, &n, 4);
    memcpy(rec + 16, &weight_ns, 8);
    memcpy(rec + 24, &flags, 4);
    memcpy(rec + 32, ips, 8 * (size_t)n);
}

/* Announce a thread with its name from /proc (empty if it is already gone). */
void pt_attach_out_thread(uint32_t tid, uint32_t flags, pid_t pid) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_THREAD, 32);
    memcpy(rec + 8, &tid, 4);
    memcpy(rec + 12, &flags, 4);
    if (flags & PT_ATTACH_THREAD_GONE) return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%u/comm", (int)pid, tid);
    FILE *f = fopen(path, "re");
    if (f == NULL) return;
    char comm[17] = {0};
    if (fgets(comm, sizeof comm, f) != NULL) {
        comm[strcspn(comm, "\n")] = '\0';
        memcpy(rec + 16, comm, strlen(comm));
    }
    fclose(f);
}

void pt_attach_out_u64(uint32_t type, uint64_t value) {
    unsigned char *rec = pt_attach_out_reserve(type, 16);
    memcpy(rec + 8, &value, 8);
}

void pt_attach_out_lost(uint64_t count, uint32_t where) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_LOST, 24);
    memcpy(rec + 8, &count, 8);
    memcpy(rec + 16, &where, 4);
}

void pt_attach_out_buffers(uint64_t ring_bytes, uint32_t rings, uint64_t asked,
                           uint32_t stack_bytes) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_BUFFERS, 40);
    uint64_t stream = PT_OUT_CAP;
    memcpy(rec + 8, &ring_bytes, 8);
    memcpy(rec + 16, &rings, 4);
    memcpy(rec + 20, &stack_bytes, 4);
    memcpy(rec + 24, &stream, 8);
    memcpy(rec + 32, &asked, 8);
}

void pt_attach_out_exit(int32_t status, int32_t signal) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_EXIT, 16);
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
    unsigned char *rec = pt_attach_out_reserve(type, size);
    memcpy(rec + 8, text, len);
}

void pt_attach_out_end(uint64_t samples, uint64_t lost) {
    unsigned char *rec = pt_attach_out_reserve(PT_ATTACH_REC_END, 24);
    memcpy(rec + 8, &samples, 8);
    memcpy(rec + 16, &lost, 8);
    pt_attach_out_drain(5000);
}

void pt_attach_out_defer_warning(const char *text) {
    snprintf(pt_attach_out_deferred, sizeof pt_attach_out_deferred, "%s", text);
}
