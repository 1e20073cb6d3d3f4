/* proftui-attach: sample a running process from outside (`proftui --pid N`).
 *
 *   proftui-attach PID HZ auto|perf|ptrace [BUFFER_BYTES]
 *   proftui-attach 0 HZ system BUFFER_BYTES EXCLUDE_PID     every process of the host
 *
 * BUFFER_BYTES (proftui's --buffer): the total size of the perf ring buffers,
 * split over the CPUs (default 512 KiB per CPU).
 * Writes the attach stream (pt_attach.h, docs/attach-stream.md) to stdout
 * until stdin reaches EOF or receives a byte, SIGINT/SIGTERM/SIGHUP arrive,
 * the parent (proftui) dies (PR_SET_PDEATHSIG -> SIGTERM), or the target
 * exits; then detaches and exits 0.  The target keeps running untouched.
 * Failures before the stream header go to stderr as one line, exit status 1.
 *
 * The helper is single-threaded and installs no signal handlers: signals are
 * read from a signalfd, so nothing here needs to be async-signal-safe.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "pt_attach.h"

/* Read /proc/PID/task/TID/stat (or /proc/PID/stat when tid is 0) into `buf`
 * and return the text after the command's closing ") ", or NULL when it
 * cannot be read (gone).  Not async-signal-safe. */
static const char *pt_attach_read_stat(pid_t pid, pid_t tid, char *buf, size_t size) {
    char path[80];
    if (tid > 0) snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    else snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return NULL;
    buf[n] = '\0';
    char *end = strrchr(buf, ')');
    if (end == NULL || end[1] != ' ') return NULL;
    return end + 2;
}

/* Not async-signal-safe (realloc). */
void *pt_attach_grow(void *items, size_t *cap, size_t count, size_t size) {
    if (count < *cap) return items;
    size_t grown = *cap ? 2 * *cap : 64;
    void *moved = realloc(items, grown * size);
    if (moved == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    *cap = grown;
    return moved;
}

/* State letter of /proc/PID/task/TID/stat (or /proc/PID/stat when tid is 0);
 * 0 when it cannot be read (gone).  Not async-signal-safe. */
char pt_attach_task_state(pid_t pid, pid_t tid) {
    char buf[512];
    const char *fields = pt_attach_read_stat(pid, tid, buf, sizeof buf);
    return fields != NULL ? fields[0] : 0;
}

static int pt_state_dead(char state) {
    return state == 0 || state == 'Z' || state == 'X' || state == 'x';
}

/* 0 once every thread of the target is a zombie or gone.  The leader's own
 * state is not enough: after its pthread_exit it is a zombie while the other
 * threads of its group run on.  Not async-signal-safe. */
int pt_attach_target_alive(pid_t pid) {
    if (!pt_state_dead(pt_attach_task_state(pid, 0))) return 1;
    static pid_t tids[4096]; /* too big for the stack; the helper is single-threaded */
    int n = pt_attach_list_tasks(pid, tids, (int)(sizeof tids / sizeof tids[0]));
    for (int i = 0; i < n; i++)
        if (tids[i] != pid && !pt_state_dead(pt_attach_task_state(pid, tids[i]))) return 1;
    return 0;
}

/* A thread of `pid` whose /proc entries still show the process's memory:
 * `pid` itself unless its leader is a zombie with live threads (then its
 * /proc/PID/maps is empty and process_vm_readv(PID) fails).  Not async-signal-safe. */
pid_t pt_attach_live_task(pid_t pid) {
    if (!pt_state_dead(pt_attach_task_state(pid, 0))) return pid;
    static pid_t tids[4096]; /* too big for the stack; the helper is single-threaded */
    int n = pt_attach_list_tasks(pid, tids, (int)(sizeof tids / sizeof tids[0]));
    for (int i = 0; i < n; i++)
        if (tids[i] != pid && !pt_state_dead(pt_attach_task_state(pid, tids[i]))) return tids[i];
    return pid;
}

/* Thread ids of `pid` from /proc/PID/task; -1 if it is gone.  Not async-signal-safe. */
int pt_attach_list_tasks(pid_t pid, pid_t *tids, int max) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *dir = opendir(path);
    if (dir == NULL) return -1;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(dir)) != NULL && n < max) {
        long tid = strtol(ent->d_name, NULL, 10);
        if (tid > 0) tids[n++] = (pid_t)tid;
    }
    closedir(dir);
    return n;
}

/* Drain the control pipe and the signalfd after poll().  Not async-signal-safe. */
int pt_attach_check_control(const struct pt_attach_config *cfg, short revents_control,
                            short revents_signal, int *got_chld, int *got_forget) {
    int stop = 0;
    if (revents_control & POLLIN && got_forget != NULL) {
        /* POLLIN: this read returns at once (a byte, or 0 at EOF: proftui died). */
        unsigned char bytes[16];
        ssize_t n = read(cfg->control_fd, bytes, sizeof bytes);
        if (n <= 0 && !(n < 0 && errno == EINTR)) stop = 1;
        for (ssize_t i = 0; i < n; i++) {
            if (bytes[i] == 'f') *got_forget = 1;
            else stop = 1;
        }
    } else if (revents_control & (POLLIN | POLLHUP | POLLERR)) {
        stop = 1; /* a byte, or proftui died */
    }
    if (revents_signal & POLLIN) {
        struct signalfd_siginfo si;
        while (read(cfg->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo == SIGCHLD) {
                if (got_chld != NULL) *got_chld = 1;
            } else {
                stop = 1;
            }
        }
    }
    return stop;
}

/* 1 if `pid` is a kernel thread (PF_KTHREAD in the flags field of
 * /proc/PID/stat): perf would attach and never sample.  Not async-signal-safe. */
static int pt_attach_kernel_thread(pid_t pid) {
    char buf[512];
    const char *fields = pt_attach_read_stat(pid, 0, buf, sizeof buf);
    unsigned long flags = 0;
    /* state ppid pgrp session tty_nr tpgid flags. */
    if (fields == NULL || sscanf(fields, "%*c %*d %*d %*d %*d %*d %lu", &flags) != 1) return 0;
    return (flags & 0x00200000ul) != 0; /* PF_KTHREAD */
}

static void pt_usage(void) {
    fprintf(stderr, "usage: proftui-attach PID HZ auto|perf|ptrace [BUFFER_BYTES]\n"
                    "       proftui-attach 0 HZ system BUFFER_BYTES EXCLUDE_PID\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) pt_usage();
    char *end;
    long pid = strtol(argv[1], &end, 10);
    int system = strcmp(argv[3], "system") == 0;
    if (*end != '\0' || (system ? pid != 0 || argc != 6 : pid <= 0 || argc == 6)) pt_usage();
    long hz = strtol(argv[2], &end, 10);
    if (*end != '\0' || hz <= 0 || hz > 100000) pt_usage();
    const char *method = argv[3];
    unsigned long long buffer = 0;
    if (argc >= 5) {
        buffer = strtoull(argv[4], &end, 10);
        if (*end != '\0' || argv[4][0] == '-') pt_usage();
    }
    long exclude = 0;
    if (argc == 6) {
        exclude = strtol(argv[5], &end, 10);
        if (*end != '\0' || exclude < 0) pt_usage();
    }

    /* If proftui dies we get SIGTERM (read from the signalfd), and stdin EOF. */
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) return 0;

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Never block on proftui: pt_attach_out.c drops samples instead. */
    fcntl(STDOUT_FILENO, F_SETFL, fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK);
    /* A bigger pipe (up to fs.pipe-max-size, 1 MiB for any user) rides out the
     * moments proftui is busy drawing; best effort (stdout may not be a pipe). */
    fcntl(STDOUT_FILENO, F_SETPIPE_SZ, 1 << 20);
    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "signalfd: %s\n", strerror(errno));
        return 1;
    }
    if (system) {
        struct pt_attach_config all = {
            .period_ns = 1000000000ull / (uint64_t)hz,
            .control_fd = STDIN_FILENO,
            .signal_fd = sfd,
            .buffer_bytes = (uint64_t)buffer,
            .exclude = (pid_t)exclude,
        };
        if (PT_ARCH_UNWIND_NOTE[0] != '\0') pt_attach_out_defer_warning(PT_ARCH_UNWIND_NOTE);
        int rc = pt_attach_system_run(&all);
        pt_attach_out_flush();
        return rc < 0 ? 1 : 0;
    }
    if (pt_attach_kernel_thread((pid_t)pid)) {
        fprintf(stderr, "process %ld is a kernel thread: it has no user-space code to sample\n",
                pid);
        return 1;
    }
    if (!pt_attach_target_alive((pid_t)pid)) {
        fprintf(stderr, "process %ld does not exist or has exited\n", pid);
        return 1;
    }

    struct pt_attach_config cfg = {
        .pid = (pid_t)pid,
        .period_ns = 1000000000ull / (uint64_t)hz,
        .control_fd = STDIN_FILENO,
        .signal_fd = sfd,
        .buffer_bytes = (uint64_t)buffer,
    };
    /* What unwinding lacks on this architecture (arch/pt_arch.h), for meta.warnings. */
    if (PT_ARCH_UNWIND_NOTE[0] != '\0') pt_attach_out_defer_warning(PT_ARCH_UNWIND_NOTE);
    int rc;
    if (strcmp(method, "perf") == 0) {
        rc = pt_attach_perf_run(&cfg, 0);
    } else if (strcmp(method, "ptrace") == 0) {
        rc = pt_attach_ptrace_run(&cfg);
    } else if (strcmp(method, "auto") == 0) {
        rc = pt_attach_perf_run(&cfg, 1);
        if (rc < 0) {
            char why[300];
            snprintf(why, sizeof why, "perf_event_open failed (%s); sampling with ptrace instead",
                     strerror(errno));
            pt_attach_out_defer_warning(why); /* the fallback's reason matters more */
            rc = pt_attach_ptrace_run(&cfg);
        }
    } else {
        pt_usage();
        return 2;
    }
    pt_attach_out_flush();
    return rc < 0 ? 1 : 0;
}
