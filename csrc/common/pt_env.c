/* The runtimes' settings, and keeping proftui out of the environment a profiled
 * program passes on: see pt_env.h. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pt_env.h"

extern char **environ;

#define PT_ENV_SAVED_MAX 64      /* PROFTUI_* entries and LD_PRELOAD */
#define PT_ENV_STORE_BYTES 16384 /* their text */

/* What pt_env_scrub took out, for the scrubbing process's own exec.  Written
 * once by a constructor (before any thread), read by the exec wrappers. */
static struct {
    pid_t owner;                          /* the process that scrubbed; 0: nothing saved */
    size_t n;                             /* saved entries ("NAME=value") */
    const char *entries[PT_ENV_SAVED_MAX];
    const char *preload;                  /* the saved LD_PRELOAD value, or NULL */
    char store[PT_ENV_STORE_BYTES];
    size_t used;
} pt_env;

static const char pt_preload_key[] = "LD_PRELOAD=";

/* Not async-signal-safe (getenv): constructors only. */
long pt_env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return fallback;
    char *end;
    long n = strtol(v, &end, 10);
    return *end == '\0' ? n : fallback;
}

/* Not async-signal-safe (getenv): constructors only. */
int pt_env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v != NULL && strcmp(v, value) == 0;
}

/* 1 if `entry` ("NAME=value") is a PROFTUI_* variable.  Async-signal-safe. */
static int pt_env_ours(const char *entry) { return strncmp(entry, "PROFTUI_", 8) == 0; }

/* 1 if `entry` names variable `name` (the part before '=').  Async-signal-safe. */
static int pt_env_named(const char *entry, const char *name, size_t len) {
    return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

/* Copy `entry` into the store; NULL when it is full.  Not async-signal-safe
 * (constructor only), though it only copies. */
static const char *pt_env_keep(const char *entry) {
    size_t len = strlen(entry) + 1;
    if (pt_env.n >= PT_ENV_SAVED_MAX || pt_env.used + len > sizeof pt_env.store) return NULL;
    char *copy = pt_env.store + pt_env.used;
    memcpy(copy, entry, len);
    pt_env.used += len;
    pt_env.entries[pt_env.n++] = copy;
    return copy;
}

/* The next LD_PRELOAD entry (separated by ':' or ' ') at *at: its start and
 * length, *at moved past it; 0 when there is none.  Async-signal-safe. */
static size_t pt_env_next(const char **at, const char **start) {
    const char *p = *at;
    while (*p == ':' || *p == ' ') p++;
    *start = p;
    while (*p != '\0' && *p != ':' && *p != ' ') p++;
    *at = p;
    return (size_t)(p - *start);
}

/* 1 if the LD_PRELOAD entry start[0, len) contains `needle`.  Async-signal-safe. */
static int pt_env_has(const char *start, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(start + i, needle, n) == 0) return 1;
    return 0;
}

/* Not async-signal-safe: constructor only. */
void pt_env_scrub(const char *self) {
    if (environ == NULL) return;
    if (pt_env.owner == 0) { /* the first call in this image saves what was there */
        pt_env.owner = getpid();
        for (char **e = environ; *e != NULL; e++) {
            if (pt_env_ours(*e)) {
                pt_env_keep(*e);
            } else if (pt_env_named(*e, "LD_PRELOAD", 10)) {
                const char *copy = pt_env_keep(*e);
                if (copy != NULL) pt_env.preload = copy + sizeof pt_preload_key - 1;
            }
        }
    }
    /* LD_PRELOAD without this runtime, rewritten in its own string (never longer). */
    int runtimes_left = 0, preload_empty = 0;
    for (char **e = environ; *e != NULL; e++) {
        if (!pt_env_named(*e, "LD_PRELOAD", 10)) continue;
        char *value = *e + sizeof pt_preload_key - 1, *write = value;
        const char *at = value, *start;
        size_t len;
        while ((len = pt_env_next(&at, &start)) > 0) {
            if (pt_env_has(start, len, self)) continue;
            runtimes_left |= pt_env_has(start, len, "proftui_");
            if (write != value) *write++ = ':';
            memmove(write, start, len);
            write += len;
        }
        *write = '\0';
        preload_empty = write == value;
    }
    if (runtimes_left) return; /* another proftui runtime still has to read its settings */
    size_t kept = 0;
    for (size_t i = 0; environ[i] != NULL; i++) {
        int drop = pt_env_ours(environ[i]) ||
                   (preload_empty && pt_env_named(environ[i], "LD_PRELOAD", 10));
        if (!drop) environ[kept++] = environ[i];
    }
    environ[kept] = NULL;
}

/* Async-signal-safe. */
size_t pt_env_extra_entries(void) {
    return pt_env.owner != 0 && pt_env.owner == getpid() ? pt_env.n : 0;
}

/* Async-signal-safe. */
size_t pt_env_merge_bytes(char *const *envp) {
    if (pt_env_extra_entries() == 0 || pt_env.preload == NULL) return 0;
    size_t bytes = sizeof pt_preload_key + strlen(pt_env.preload) + 1;
    for (char *const *e = envp; e != NULL && *e != NULL; e++)
        if (pt_env_named(*e, "LD_PRELOAD", 10)) bytes += strlen(*e);
    return bytes;
}

/* 1 if every entry of list `saved` is in list `current`.  Async-signal-safe. */
static int pt_env_covers(const char *current, const char *saved) {
    const char *at = saved, *start;
    size_t len;
    while ((len = pt_env_next(&at, &start)) > 0) {
        const char *cat = current, *cstart;
        size_t clen;
        int found = 0;
        while (!found && (clen = pt_env_next(&cat, &cstart)) > 0)
            found = clen == len && memcmp(cstart, start, len) == 0;
        if (!found) return 0;
    }
    return 1;
}

/* Async-signal-safe. */
char *const *pt_env_for_exec(char *const *envp, char **out, size_t cap, char *merged,
                             size_t merged_cap) {
    if (pt_env_extra_entries() == 0 || envp == NULL) return envp;
    size_t n = 0;
    const char *current = NULL; /* envp's own LD_PRELOAD value */
    for (char *const *e = envp; *e != NULL; e++) {
        if (pt_env_named(*e, "LD_PRELOAD", 10)) {
            current = *e + sizeof pt_preload_key - 1;
            continue;
        }
        if (n + 1 >= cap) return envp;
        out[n++] = *e;
    }
    if (pt_env.preload != NULL && (current == NULL || !pt_env_covers(current, pt_env.preload))) {
        /* The saved list first, then what the program added: the runtimes keep their order. */
        size_t need = sizeof pt_preload_key + strlen(pt_env.preload) +
                      (current != NULL ? strlen(current) + 1 : 0);
        if (need > merged_cap || n + 1 >= cap) return envp;
        char *w = merged;
        memcpy(w, pt_preload_key, sizeof pt_preload_key - 1);
        w += sizeof pt_preload_key - 1;
        size_t len = strlen(pt_env.preload);
        memcpy(w, pt_env.preload, len);
        w += len;
        const char *at = current != NULL ? current : "", *start;
        while ((len = pt_env_next(&at, &start)) > 0) {
            const char *sat = pt_env.preload, *sstart;
            size_t slen;
            int dup = 0;
            while (!dup && (slen = pt_env_next(&sat, &sstart)) > 0)
                dup = slen == len && memcmp(sstart, start, len) == 0;
            if (dup) continue;
            *w++ = ':';
            memcpy(w, start, len);
            w += len;
        }
        *w = '\0';
        out[n++] = merged;
    } else if (current != NULL) {
        out[n++] = (char *)current - (sizeof pt_preload_key - 1);
    }
    for (size_t i = 0; i < pt_env.n; i++) {
        const char *entry = pt_env.entries[i];
        if (pt_env_named(entry, "LD_PRELOAD", 10)) continue;
        size_t name = (size_t)(strchr(entry, '=') - entry);
        int present = 0;
        for (size_t j = 0; j < n && !present; j++) present = pt_env_named(out[j], entry, name);
        if (present) continue;
        if (n + 1 >= cap) return envp;
        out[n++] = (char *)entry;
    }
    out[n] = NULL;
    return out;
}
