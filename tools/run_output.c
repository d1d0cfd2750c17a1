/* netvm run --tag-output: each rank's lines, prefixed with its rank. */
#define _GNU_SOURCE
#include "run_job.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static void tag_emit(struct tagger *t, const char *line, size_t len)
{
    char prefix[16];
    int plen = snprintf(prefix, sizeof prefix, "[%d] ", t->rank);
    /* one write per line, so lines of different ranks never interleave */
    char *buf = malloc((size_t)plen + len + 1);
    if (!buf)
        return;
    memcpy(buf, prefix, (size_t)plen);
    memcpy(buf + plen, line, len);
    buf[(size_t)plen + len] = '\n';
    (void)run_write_all(t->dst, buf, (size_t)plen + len + 1);
    free(buf);
}

void run_tag_close(struct job *j, struct tagger *t)
{
    if (t->len)
        tag_emit(t, t->buf, t->len);   /* a last line without its newline */
    t->len = 0;
    epoll_ctl(j->ep, EPOLL_CTL_DEL, t->fd, NULL);
    close(t->fd);
    t->fd = -1;
}

/* Read what the pipe has now; emit every complete line. */
void run_tag_read(struct job *j, struct tagger *t)
{
    if (t->fd < 0)
        return;
    for (;;) {
        if (t->len == t->cap) {
            /* grow as lines get long: a thousand quiet ranks cost little */
            size_t cap = t->cap ? 2 * t->cap : 4096;
            char *nb = realloc(t->buf, cap);
            if (!nb) {
                run_tag_close(j, t);
                return;
            }
            t->buf = nb;
            t->cap = cap;
        }
        ssize_t n = read(t->fd, t->buf + t->len, t->cap - t->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            run_tag_close(j, t);
            return;
        }
        t->len += (size_t)n;
        size_t start = 0;
        for (size_t i = t->len - (size_t)n; i < t->len; i++)
            if (t->buf[i] == '\n') {
                tag_emit(t, t->buf + start, i - start);
                start = i + 1;
            }
        memmove(t->buf, t->buf + start, t->len - start);
        t->len -= start;
        if (t->len == LINE_MAX_BYTES) {     /* an endless line: break it */
            tag_emit(t, t->buf, t->len);
            t->len = 0;
        }
    }
}
