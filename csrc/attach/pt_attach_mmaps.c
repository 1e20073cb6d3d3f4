/* proftui-attach, system-wide method: the code mappings perf reported, kept for
 * processes that are gone before the helper first reads their /proc/PID/maps.
 *
 * A program that runs for less than a drain round (a compiler pass, a shell
 * command) has exited by the time its first sample is read: its /proc entries
 * are gone, but PERF_RECORD_MMAP2 told where each file was mapped, with the
 * file's device and inode.  The last PT_MMAPS_MAX such mappings are kept
 * here (an exec forgets its process's earlier ones), and a process's are
 * turned into /proc/PID/maps lines for the files that the same path still
 * names in the helper's own mount namespace (same device and inode): a file
 * seen through another namespace (a container) is left out, never guessed.
 *
 * The helper is single-threaded: file-level state in one instance (pt_mm).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "pt_attach.h"

#define PT_MMAPS_MAX 8192 /* mappings kept, over every process: a ring, oldest first out */

struct pt_mmap_entry {
    pid_t pid; /* 0: free or forgotten */
    uint32_t maj, min;
    uint64_t start, len, pgoff, ino;
    uint64_t time; /* CLOCK_MONOTONIC ns of its record, 0 unknown */
    int first; /* the first mapping after the process's exec: its executable */
    char path[256];
};

static struct {
    struct pt_mmap_entry *ring; /* PT_MMAPS_MAX entries, malloc'd on first use */
    size_t next;                /* where the next one goes */
    pid_t exec_pid[64];         /* processes that exec'd and mapped nothing since */
    size_t nexec;
} pt_mm;

void pt_attach_mmaps_exec(pid_t pid) {
    if (pt_mm.ring != NULL)
        for (size_t i = 0; i < PT_MMAPS_MAX; i++)
            if (pt_mm.ring[i].pid == pid) pt_mm.ring[i].pid = 0;
    pt_mm.exec_pid[pt_mm.nexec++ % 64] = pid;
}

void pt_attach_mmaps_note(pid_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t maj,
                          uint32_t min, uint64_t ino, const char *path, uint64_t time) {
    if (path[0] != '/') return; /* not a file */
    if (pt_mm.ring == NULL && (pt_mm.ring = calloc(PT_MMAPS_MAX, sizeof *pt_mm.ring)) == NULL)
        return;
    struct pt_mmap_entry *e = &pt_mm.ring[pt_mm.next++ % PT_MMAPS_MAX];
    *e = (struct pt_mmap_entry){pid, maj, min, start, len, pgoff, ino, time, 0, ""};
    snprintf(e->path, sizeof e->path, "%s", path);
    for (size_t i = 0; i < 64 && i < pt_mm.nexec; i++)
        if (pt_mm.exec_pid[i] == pid) { /* the exec's first mapping: the program */
            e->first = 1;
            pt_mm.exec_pid[i] = 0;
        }
}

char *pt_attach_mmaps_text(pid_t pid, size_t *len, char *exe, size_t exe_size,
                           uint64_t *as_of) {
    *as_of = 0; /* an exec forgot the mappings before it: the ones kept came after it */
    if (pt_mm.ring == NULL) return NULL;
    char *text = NULL;
    FILE *out = open_memstream(&text, len);
    if (out == NULL) return NULL;
    int any = 0;
    exe[0] = '\0';
    for (size_t k = 0; k < PT_MMAPS_MAX; k++) {
        const struct pt_mmap_entry *e = &pt_mm.ring[(pt_mm.next + k) % PT_MMAPS_MAX];
        struct stat st;
        if (e->pid != pid || stat(e->path, &st) != 0 || st.st_ino != e->ino ||
            major(st.st_dev) != e->maj || minor(st.st_dev) != e->min)
            continue;
        fprintf(out, "%lx-%lx r-xp %08lx %02x:%02x %lu %s\n", (unsigned long)e->start,
                (unsigned long)(e->start + e->len), (unsigned long)e->pgoff, e->maj, e->min,
                (unsigned long)e->ino, e->path);
        if (e->first) snprintf(exe, exe_size, "%s", e->path);
        if (e->time > *as_of) *as_of = e->time;
        any = 1;
    }
    if (fclose(out) != 0 || !any) {
        free(text);
        return NULL;
    }
    return text;
}
