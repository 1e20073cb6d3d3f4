/* proftui heap demo: a small program with a known shape of memory use.
 *
 * Each round a "server" handles requests: it parses each into a temporary
 * buffer (freed at once: heaptrack's "temporary"), caches the documents it
 * builds (live, evicted in bulk when the cache is full, so the heap saws up
 * and down), grows a log with realloc, and forgets to free one session per
 * round (the leak).  Run it with `proftui demo --heap`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define CACHE 4096

struct doc {
    char *title;
    char *body;
    size_t len;
};

static struct doc *volatile cache[CACHE];
static int cached;
static char *volatile log_text;
static size_t log_len, log_cap;
static void *volatile sessions[1024];
static int nsessions;
static volatile unsigned long sink;

NOINLINE static char *parse_request(int i)
{
    char *buf = malloc(256);  /* temporary: freed by the caller right away */
    snprintf(buf, 256, "GET /doc/%d?lang=en", i);
    return buf;
}

NOINLINE static struct doc *build_document(int i)
{
    struct doc *d = malloc(sizeof *d);
    d->len = 512 + (size_t)(i % 7) * 256;
    d->title = malloc(64);                   /* a small allocation per document */
    snprintf(d->title, 64, "document %d", i);
    d->body = malloc(d->len);                /* the bulk of the live bytes */
    memset(d->body, 'a' + i % 26, d->len);
    return d;
}

NOINLINE static void evict_all(void)
{
    for (int i = 0; i < cached; i++) {
        free(cache[i]->body);
        free(cache[i]->title);
        free(cache[i]);
    }
    cached = 0;
}

NOINLINE static void append_log(const char *line)
{
    size_t n = strlen(line);
    if (log_len + n + 1 > log_cap) { /* grows by realloc, doubling: a realloc chain */
        log_cap = log_cap ? 2 * log_cap : 4096;
        log_text = realloc(log_text, log_cap);
    }
    memcpy(log_text + log_len, line, n + 1);
    log_len += n;
    if (log_len > (1u << 20)) log_len = 0; /* rotated: the buffer is reused */
}

NOINLINE static void open_session(int round)
{
    if (nsessions < 1024) sessions[nsessions++] = calloc(1, 2048 + (size_t)round); /* leaked */
}

NOINLINE static void handle(int i)
{
    char *req = parse_request(i);
    sink += strlen(req);
    free(req);
    if (cached == CACHE) evict_all();
    cache[cached++] = build_document(i);
    append_log("served a document\n");
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 60;
    struct timespec pause = {0, 100 * 1000 * 1000}; /* 0.1 s: the chart has time to draw */
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 2000; i++) handle(r * 2000 + i);
        open_session(r);
        nanosleep(&pause, NULL);
    }
    evict_all();
    free(log_text);
    printf("served %d requests, %d sessions never closed\n", rounds * 2000, nsessions);
    return 0;
}
