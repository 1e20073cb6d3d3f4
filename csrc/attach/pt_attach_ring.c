/* proftui-attach: perf ring buffers and sample records, shared by the perf
 * method (one target, pt_attach_perf.c) and the system-wide method
 * (pt_attach_system.c).  Both ask for the same sample_type:
 * IP | TID | CALLCHAIN | PERIOD, and where the architecture has it
 * REGS_USER | STACK_USER; the system-wide method adds TIME.  Nothing here is
 * async-signal-safe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pt_attach.h"

void pt_perf_attr(struct perf_event_attr *attr, uint64_t config, uint64_t period_ns,
                  uint32_t stack_bytes, int kernel, size_t ring_pages) {
    memset(attr, 0, sizeof *attr);
    attr->size = sizeof *attr;
    attr->type = PERF_TYPE_SOFTWARE;
    attr->config = config;
    attr->sample_period = period_ns;
    attr->sample_type =
        PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_PERIOD;
    if (PT_ARCH_PERF_REGS != 0) {
        attr->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
        attr->sample_regs_user = PT_ARCH_PERF_REGS;
        attr->sample_stack_user = stack_bytes;
    }
    attr->exclude_kernel = !kernel;
    attr->exclude_hv = 1;
    attr->exclude_callchain_kernel = 1;
    attr->task = 1;
    attr->mmap = 1;
    attr->comm = 1;
    attr->sample_id_all = 1;
    /* Wake the helper once a ring is a quarter full (besides its own timer), so a
     * burst or a late timer on a busy machine does not overflow the ring. */
    attr->watermark = 1;
    attr->wakeup_watermark = (uint32_t)(ring_pages * (size_t)sysconf(_SC_PAGESIZE) / 4);
}

int pt_ring_cpus(int most) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n < 1 ? 1 : n > most ? most : (int)n;
}

size_t pt_ring_pages(uint64_t asked, int ncpus) {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t want = asked ? asked / (uint64_t)ncpus / page
                          : (ncpus <= 16 ? PT_PERF_DEFAULT_PAGES : PT_PERF_DEFAULT_PAGES / 4);
    size_t pages = PT_PERF_MIN_PAGES;
    while (pages < PT_PERF_MAX_PAGES && 2 * (uint64_t)pages <= want) pages *= 2;
    return pages;
}

int pt_ring_map(struct pt_perf_ring *ring, int fd, size_t *pages) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *map = MAP_FAILED;
    for (;;) {
        map = mmap(NULL, (*pages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED || (errno != EPERM && errno != ENOMEM) ||
            *pages <= PT_PERF_MIN_PAGES)
            break;
        *pages /= 2; /* the locked-memory budget */
    }
    if (map == MAP_FAILED) return -1;
    ring->fd = fd;
    ring->meta = map;
    ring->data = (unsigned char *)map + page;
    ring->size = *pages * page;
    return 0;
}

void pt_ring_copy(const struct pt_perf_ring *ev, uint64_t off, void *dst, size_t len) {
    uint64_t start = off & (ev->size - 1);
    size_t first = len;
    if (start + len > ev->size) first = (size_t)(ev->size - start);
    memcpy(dst, ev->data + start, first);
    if (first < len) memcpy((unsigned char *)dst + first, ev->data, len - first);
}

uint64_t pt_ring_head(const struct pt_perf_ring *ev) {
    return __atomic_load_n(&ev->meta->data_head, __ATOMIC_ACQUIRE);
}

/* Hand each record from `tail` up to `head` to `handle` (every record, or only
 * those of `type` when it is not 0); the offset reached. */
static uint64_t pt_ring_walk(const struct pt_perf_ring *ev, uint64_t tail, uint64_t head,
                             uint32_t type, pt_ring_handler handle, void *arg) {
    static uint64_t rec[65536 / 8]; /* the largest record (its size is a u16): off the stack */
    while (tail < head) {
        struct perf_event_header hdr;
        pt_ring_copy(ev, tail, &hdr, sizeof hdr);
        if (hdr.size < sizeof hdr) break; /* corrupt: give up on this batch */
        if (type == 0 || hdr.type == type) {
            /* Read in place unless the record wraps: the kernel writes only past the
             * head and before our tail, so [tail, head) holds still until the tail
             * moves (perf's own reader copies only wrapped records).  A sample is
             * mostly its 8 KiB stack copy: copying each was a sixth of the helper's
             * CPU on two Lua loads. */
            uint64_t start = tail & (ev->size - 1);
            const uint64_t *body = rec + 1;
            if (start + hdr.size <= ev->size)
                body = (const uint64_t *)(const void *)(ev->data + start) + 1;
            else
                pt_ring_copy(ev, tail, rec, hdr.size);
            handle(&hdr, body, (hdr.size - sizeof hdr) / 8, arg);
        }
        tail += hdr.size;
    }
    return tail;
}

void pt_ring_scan(const struct pt_perf_ring *ev, uint64_t from, uint64_t head, uint32_t type,
                  pt_ring_handler handle, void *arg) {
    (void)pt_ring_walk(ev, from, head, type, handle, arg);
}

void pt_ring_drain_to(struct pt_perf_ring *ev, uint64_t head, pt_ring_handler handle, void *arg) {
    uint64_t tail = pt_ring_walk(ev, ev->meta->data_tail, head, 0, handle, arg);
    __atomic_store_n(&ev->meta->data_tail, tail, __ATOMIC_RELEASE);
}

void pt_ring_drain(struct pt_perf_ring *ev, pt_ring_handler handle, void *arg) {
    pt_ring_drain_to(ev, pt_ring_head(ev), handle, arg);
}

int pt_perf_parse_sample(const uint64_t *body, size_t words, int timed,
                         struct pt_perf_sample *out) {
    /* Layout: ip, pid|tid, [time,] period, nr, ips[nr], then with registers: abi,
     * regs[PT_ARCH_PERF_NREGS] (ascending register number) unless abi is NONE,
     * stack size, stack bytes[size], dyn_size (size > 0).  Every length read is
     * checked against the record's. */
    size_t t = timed ? 1 : 0; /* words after pid|tid are one further with a time */
    if (words < 4 + t) return -1;
    out->pid = (uint32_t)body[1];
    out->tid = (uint32_t)(body[1] >> 32);
    out->time = timed ? body[2] : 0;
    out->period = body[2 + t];
    uint64_t nr = body[3 + t];
    if (nr > words - 4 - t) nr = words - 4 - t;
    const uint64_t *chain = body + 4 + t;
    size_t at = 4 + t + (size_t)nr;
    out->regs = (struct pt_regs){0, 0, 0, 0};
    if (PT_ARCH_PERF_REGS != 0 && at < words && body[at++] != PERF_SAMPLE_REGS_ABI_NONE &&
        at + PT_ARCH_PERF_NREGS <= words) {
        pt_arch_perf_regs(body + at, &out->regs);
        at += PT_ARCH_PERF_NREGS;
    }
    out->stack = NULL;
    out->nstack = 0;
    if (PT_ARCH_PERF_REGS != 0 && at < words) {
        uint64_t size = body[at] / 8;
        if (size > 0 && at + 1 + size < words) {
            uint64_t dyn = body[at + 1 + size] / 8;
            out->stack = body + at + 1;
            out->nstack = (uint32_t)(dyn < size ? dyn : size);
        }
    }
    /* The user part of the call chain: a sample taken in the kernel starts at
     * the user pc that entered it (kernel entries are excluded). */
    out->n = 0;
    for (uint64_t i = 0; i < nr && out->n < PT_ATTACH_MAX_FRAMES; i++) {
        uint64_t ip = chain[i];
        if (ip >= (uint64_t)PERF_CONTEXT_MAX) continue; /* PERF_CONTEXT_USER etc. markers */
        out->ips[out->n++] = ip;
    }
    if (out->n == 0 && out->regs.pc != 0) out->ips[out->n++] = out->regs.pc;
    if (out->n == 0) return -1; /* no user context at all (a kernel thread's sample) */
    if (out->regs.pc == 0) out->regs.pc = out->ips[0];
    return 0;
}
