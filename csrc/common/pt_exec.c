/* The interposed exec family: see pt_exec.h.  None of these functions is
 * async-signal-safe (dlsym on first use, the runtimes' hooks), although
 * exec is: a target that execs from a signal handler or a vfork child of
 * another thread takes that risk with any preloaded library. */
#define _GNU_SOURCE
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "pt_env.h"
#include "pt_exec.h"

extern char **environ;

/* Exported, never instrumented (the hook runtime's own code must not call the hooks). */
#define PT_EXEC_INTERPOSE __attribute__((visibility("default"), no_instrument_function))

#define PT_EXEC_MAX_ENV 65536 /* entries: a larger environment is passed on as it is */

typedef int (*pt_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*pt_execv_fn)(const char *, char *const[]);

/* The next definition of `name` (libc's, or the other runtime's wrapper). */
static void *pt_exec_next(const char *name) { return dlsym(RTLD_NEXT, name); }

/* Run `call` between the runtime's hooks, keeping the exec's errno. */
#define PT_EXEC_CALL(call)                                                                     \
    do {                                                                                       \
        pt_exec_before();                                                                      \
        int pt_rc = (call);                                                                    \
        int pt_err = errno;                                                                    \
        pt_exec_failed();                                                                      \
        errno = pt_err;                                                                        \
        return pt_rc;                                                                          \
    } while (0)

/* `use`: `envp` with proftui's saved entries back when this process scrubbed
 * them (its own exec), else `envp`.  Space on this function's stack. */
#define PT_EXEC_ENV(envp, use)                                                                 \
    char *const *use = (envp);                                                                 \
    do {                                                                                       \
        size_t pt_extra = pt_env_extra_entries(), pt_count = 0;                                \
        if (pt_extra == 0 || (envp) == NULL) break;                                            \
        while ((envp)[pt_count] != NULL && pt_count < PT_EXEC_MAX_ENV) pt_count++;             \
        if (pt_count >= PT_EXEC_MAX_ENV) break;                                                \
        size_t pt_cap = pt_count + pt_extra + 2, pt_bytes = pt_env_merge_bytes(envp);          \
        char **pt_out = alloca(pt_cap * sizeof *pt_out);                                       \
        char *pt_merged = pt_bytes ? alloca(pt_bytes) : NULL;                                  \
        use = pt_env_for_exec((envp), pt_out, pt_cap, pt_merged, pt_bytes);                    \
    } while (0)

/* execve and execvpe, which differ only in the next definition called: `name`'s
 * (a path, or a file searched for in PATH). */
static __attribute__((no_instrument_function)) int
pt_exec_with_env(const char *name, const char *file, char *const argv[], char *const envp[]) {
    pt_execve_fn next = (pt_execve_fn)pt_exec_next(name);
    if (next == NULL) return errno = ENOSYS, -1;
    PT_EXEC_ENV(envp, use);
    PT_EXEC_CALL(next(file, argv, use));
}

PT_EXEC_INTERPOSE int execve(const char *path, char *const argv[], char *const envp[]) {
    return pt_exec_with_env("execve", path, argv, envp);
}

PT_EXEC_INTERPOSE int execvpe(const char *file, char *const argv[], char *const envp[]) {
    return pt_exec_with_env("execvpe", file, argv, envp);
}

/* execv and execvp pass environ: with saved entries to put back they become
 * execve and execvpe (the same calls, with an explicit environment). */
PT_EXEC_INTERPOSE int execv(const char *path, char *const argv[]) {
    if (pt_env_extra_entries() != 0) return execve(path, argv, environ);
    pt_execv_fn next = (pt_execv_fn)pt_exec_next("execv");
    if (next == NULL) return errno = ENOSYS, -1;
    PT_EXEC_CALL(next(path, argv));
}

PT_EXEC_INTERPOSE int execvp(const char *file, char *const argv[]) {
    if (pt_env_extra_entries() != 0) return execvpe(file, argv, environ);
    pt_execv_fn next = (pt_execv_fn)pt_exec_next("execvp");
    if (next == NULL) return errno = ENOSYS, -1;
    PT_EXEC_CALL(next(file, argv));
}

PT_EXEC_INTERPOSE int fexecve(int fd, char *const argv[], char *const envp[]) {
    int (*next)(int, char *const[], char *const[]) =
        (int (*)(int, char *const[], char *const[]))pt_exec_next("fexecve");
    if (next == NULL) return errno = ENOSYS, -1;
    PT_EXEC_ENV(envp, use);
    PT_EXEC_CALL(next(fd, argv, use));
}

/* execl, execlp, execle: collect the variadic arguments (on the stack, as
 * glibc does) and go through the vector forms above. */
#define PT_COLLECT_ARGS(first, ap, argv)                                                       \
    size_t pt_n = 1;                                                                           \
    va_start(ap, first);                                                                       \
    while (va_arg(ap, char *) != NULL) pt_n++;                                                 \
    va_end(ap);                                                                                \
    char **argv = __builtin_alloca((pt_n + 1) * sizeof(char *));                               \
    argv[0] = (char *)(first);                                                                 \
    va_start(ap, first);                                                                       \
    for (size_t pt_i = 1; pt_i <= pt_n; pt_i++) argv[pt_i] = va_arg(ap, char *)

PT_EXEC_INTERPOSE int execl(const char *path, const char *arg, ...) {
    va_list ap;
    PT_COLLECT_ARGS(arg, ap, argv);
    va_end(ap);
    return execv(path, argv);
}

PT_EXEC_INTERPOSE int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    PT_COLLECT_ARGS(arg, ap, argv);
    va_end(ap);
    return execvp(file, argv);
}

PT_EXEC_INTERPOSE int execle(const char *path, const char *arg, ...) {
    va_list ap;
    PT_COLLECT_ARGS(arg, ap, argv);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
