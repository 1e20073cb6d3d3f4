/* proftui_sampler: the LD_PRELOAD stack sampler (proftui's default mode).
 *
 * The constructor reads PROFTUI_* once, creates this process's runtime file
 * in $PROFTUI_DIR, logs the loaded objects and builds their unwind tables,
 * chooses a clock and a signal, and arms the main thread.  Interposers keep
 * that true for the target's lifetime:
 *   pthread_create  wraps the start routine so each new thread arms its own clock
 *   dlopen/dlclose  log new/unloaded code and republish the unwind tables
 *   fork (atfork)   the child drops the parent's events; own file if followed
 * and, shared with the hook runtime (csrc/common/pt_timer_interpose.c):
 * sigaction/signal, close/close_range/closefrom and the exec family.
 * None of the functions in this file is async-signal-safe.
 * Without follow, the constructor takes the sampler out of LD_PRELOAD and (last
 * runtime) the PROFTUI_* variables out of the environment the target passes on
 * (csrc/common/pt_env.h); the target's own exec gets them back (pt_exec.c).
 *
 * Environment (read once, in the constructor):
 *   PROFTUI_DIR              per-run directory (required; nothing happens without it)
 *   PROFTUI_FREQUENCY        samples per second per thread (default 1000, max 10000)
 *   PROFTUI_WALL_CLOCK=1     sample wall-clock time instead of CPU time
 *   PROFTUI_FOLLOW_CHILDREN=1  forked/exec'd children are profiled too
 *   PROFTUI_FRONTEND_PID     without follow, only this pid's direct child samples
 *   PROFTUI_BUFFER_BYTES     ring budget per process (default 32 MiB)
 *   PROFTUI_SAMPLER_CLOCK=timer   skip perf_event (tests, benchmarks)
 *   PROFTUI_SAMPLER_UNWIND=fp     frame pointers only (tests, benchmarks)
 *   PROFTUI_SAMPLER_KERNEL=0      user time only, even where kernel time may be counted
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pt_env.h"
#include "pt_exec.h"
#include "pt_note.h"
#include "pt_sampler.h"
#include "pt_timer.h"

/* Settings from the environment, written once by the constructor. */
PT_HIDDEN struct pt_sampler_config pt_sampler_cfg;
/* Per-thread state the handler reads (initial-exec TLS: no lazy allocation). */
PT_HIDDEN __thread struct pt_sampler_thread pt_sampler_self
    __attribute__((tls_model("initial-exec")));
/* 1 while this process samples; 0 before the constructor, without
 * PROFTUI_DIR, or in a fork child that is not followed. */
static int pt_active;

/* The real functions we wrap, resolved once (lazily if called before us). */
static int (*pt_real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                     void *);
static void *(*pt_real_dlopen)(const char *, int);
static int (*pt_real_dlclose)(void *);

static void pt_resolve(void) {
    if (pt_real_pthread_create == NULL)
        pt_real_pthread_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                          void *))dlsym(RTLD_NEXT, "pthread_create");
    if (pt_real_dlopen == NULL)
        pt_real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    if (pt_real_dlclose == NULL) pt_real_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
    pt_timer_interpose_resolve();
}

/* Fork child (pthread_atfork): never write into the parent's file. */
static void pt_atfork_child(void) {
    if (!PT_GET(pt_active)) return;
    pt_sampler_self.slot = NULL;
    pt_note_fork_child();
    pt_sampler_maps_fork_child();
    pt_sampler_file_forget();
    int keep = pt_sampler_cfg.follow_children && pt_sampler_file_create(getpid()) == 0;
    if (keep) pt_sampler_maps_refresh(1);
    else PT_SET(pt_active, 0);
    pt_sampler_timer_fork_child(keep);
}

/* Read PROFTUI_* into pt_sampler_cfg; 1 if this process is to be sampled.
 * Not async-signal-safe (constructor only). */
static int pt_read_settings(void) {
    pt_sampler_cfg.follow_children = pt_env_is("PROFTUI_FOLLOW_CHILDREN", "1");
    /* Without follow only the front end's own child (the target, also after it
     * exec's) samples; others that inherited LD_PRELOAD anyway stay idle. */
    long frontend = pt_env_long("PROFTUI_FRONTEND_PID", 0);
    if (!pt_sampler_cfg.follow_children && frontend > 0 && getppid() != (pid_t)frontend) return 0;
    struct pt_timer_config clock; /* PROFTUI_FREQUENCY, _WALL_CLOCK, _SAMPLER_CLOCK, _KERNEL */
    pt_timer_config_from_env(&clock);
    pt_sampler_cfg.period_ns = clock.period_ns;
    pt_sampler_cfg.wall_clock = clock.wall_clock;
    pt_sampler_cfg.force_timer = clock.force_timer;
    pt_sampler_cfg.user_only = clock.user_only;
    long buffer = pt_env_long("PROFTUI_BUFFER_BYTES", PT_DEFAULT_BUFFER);
    pt_sampler_cfg.buffer_bytes = buffer > 0 ? (uint64_t)buffer : PT_DEFAULT_BUFFER;
    /* proftui holds the budget to --buffer's range; this is the backstop for an
     * environment set by hand (10^14 made 19 GB rings per thread). */
    if (pt_sampler_cfg.buffer_bytes > PT_MAX_BUFFER) pt_sampler_cfg.buffer_bytes = PT_MAX_BUFFER;
    pt_sampler_cfg.fp_only = pt_env_is("PROFTUI_SAMPLER_UNWIND", "fp");
    return 1;
}

__attribute__((constructor)) static void pt_init(void) {
    pt_resolve();
    const char *dir = getenv("PROFTUI_DIR");
    if (dir == NULL || *dir == '\0' || strlen(dir) >= sizeof pt_sampler_cfg.dir) return;
    strcpy(pt_sampler_cfg.dir, dir);
    pt_note_init(pt_sampler_cfg.dir, "sampler"); /* what cannot be mapped is said there */
    int sample = pt_read_settings();
    /* Settings read: without follow, nothing the target runs inherits the sampler. */
    if (!pt_sampler_cfg.follow_children) pt_env_scrub("proftui_sampler");
    if (!sample) return;
    if (pt_sampler_file_create(getpid()) != 0) return;
    pt_sampler_maps_refresh(0);
    if (pt_sampler_timer_init() != 0) return; /* the file stays, with no samples */
    pthread_atfork(NULL, NULL, pt_atfork_child);
    PT_SET(pt_active, 1);
    pt_sampler_thread_arm();
}

__attribute__((destructor)) static void pt_fini(void) {
    if (!PT_GET(pt_active)) return;
    pt_sampler_thread_disarm();
    if (pt_sampler_file.hdr != NULL)
        __atomic_store_n(&pt_sampler_file.hdr->state, (uint32_t)PT_STATE_EXITED, __ATOMIC_RELEASE);
}

/* ---- pthread_create --------------------------------------------------------- */

struct pt_start {
    void *(*fn)(void *);
    void *arg;
};

static void *pt_thread_start(void *p) {
    struct pt_start start = *(struct pt_start *)p;
    free(p);
    int saved_errno = errno; /* arming maps memory: the thread starts with its own errno */
    if (PT_GET(pt_active)) pt_sampler_thread_arm(); /* the key destructor disarms at thread exit */
    errno = saved_errno;
    return start.fn(start.arg);
}

__attribute__((visibility("default"))) int
pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    pt_resolve();
    if (pt_real_pthread_create == NULL) return EAGAIN;
    struct pt_start *start = PT_GET(pt_active) ? malloc(sizeof *start) : NULL;
    if (start == NULL) return pt_real_pthread_create(thread, attr, fn, arg);
    start->fn = fn;
    start->arg = arg;
    int rc = pt_real_pthread_create(thread, attr, pt_thread_start, start);
    if (rc != 0) free(start);
    return rc;
}

/* ---- dlopen / dlclose --------------------------------------------------------- */

/* glibc resolves a bare name against the *caller's* RUNPATH/RPATH and expands
 * $ORIGIN to the caller's directory; through this wrapper the caller looks
 * like proftui's library.  When the plain call fails, retry the way the real
 * caller would have found the file: its own search list (dlinfo SERINFO) and
 * its own $ORIGIN.  Not async-signal-safe (mallocs, like dlopen itself). */
static void *pt_dlopen_as(const void *caller, const char *file, int mode) {
    Dl_info info;
    struct link_map *map = NULL;
    if (file == NULL || !dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || map == NULL)
        return NULL;
    char origin[4096];
    const char *name = map->l_name[0] ? map->l_name : NULL;
    ssize_t n = name ? (ssize_t)snprintf(origin, sizeof origin, "%s", name)
                     : readlink("/proc/self/exe", origin, sizeof origin - 1);
    if (n <= 0 || n >= (ssize_t)sizeof origin) return NULL;
    origin[n] = '\0';
    char *slash = strrchr(origin, '/');
    if (slash != NULL) *slash = '\0';
    char path[8192];
    if (strncmp(file, "$ORIGIN/", 8) == 0 || strncmp(file, "${ORIGIN}/", 10) == 0) {
        snprintf(path, sizeof path, "%s/%s", origin, strchr(file, '/') + 1);
        return pt_real_dlopen(path, mode);
    }
    if (strchr(file, '/') != NULL) return NULL;
    void *self = pt_real_dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    if (self == NULL) return NULL;
    void *handle = NULL;
    Dl_serinfo size;
    if (dlinfo(self, RTLD_DI_SERINFOSIZE, &size) == 0) {
        Dl_serinfo *list = malloc(size.dls_size);
        if (list != NULL) {
            memcpy(list, &size, sizeof size);
            if (dlinfo(self, RTLD_DI_SERINFOSIZE, list) == 0 &&
                dlinfo(self, RTLD_DI_SERINFO, list) == 0) {
                for (unsigned i = 0; i < list->dls_cnt && handle == NULL; i++) {
                    snprintf(path, sizeof path, "%s/%s", list->dls_serpath[i].dls_name, file);
                    if (access(path, F_OK) == 0) handle = pt_real_dlopen(path, mode);
                }
            }
            free(list);
        }
    }
    pt_real_dlclose(self);
    return handle;
}

__attribute__((visibility("default"))) void *dlopen(const char *file, int mode) {
    pt_resolve();
    if (pt_real_dlopen == NULL) return NULL;
    void *handle = pt_real_dlopen(file, mode);
    if (handle == NULL && file != NULL && (strchr(file, '/') == NULL || file[0] == '$'))
        handle = pt_dlopen_as(__builtin_return_address(0), file, mode);
    if (handle != NULL && PT_GET(pt_active)) pt_sampler_maps_refresh(0);
    return handle;
}

__attribute__((visibility("default"))) int dlclose(void *handle) {
    pt_resolve();
    if (pt_real_dlclose == NULL) return -1;
    int rc = pt_real_dlclose(handle);
    if (PT_GET(pt_active)) pt_sampler_maps_refresh(0);
    return rc;
}
