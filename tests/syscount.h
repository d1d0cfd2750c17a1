/* Counting a process's own system calls of one kind with the kernel's
 * syscall tracepoint (perf_event_open): how tests check that frames leave
 * gathered. Opened before netvm_init, the count includes the threads the
 * process makes later (the progress thread). Needs tracefs and the right
 * to open tracepoint events (root here); -1 where that is missing, and the
 * caller skips its count, saying so. */
#ifndef NV_TESTS_SYSCOUNT_H
#define NV_TESTS_SYSCOUNT_H

#include "check.h"

#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A counter of sys_enter_NAME (e.g. "sendmsg"), or -1. */
static inline int syscount_open(const char *name)
{
    static const char *roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
    long id = -1;
    for (unsigned i = 0; i < 2 && id < 0; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/events/syscalls/sys_enter_%s/id", roots[i], name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &id) != 1)
                id = -1;
            fclose(f);
        }
    }
    if (id < 0)
        return -1;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_TRACEPOINT;
    a.size = sizeof a;
    a.config = (uint64_t)id;
    a.inherit = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

/* The calls counted so far (this thread's and its children's). */
static inline uint64_t syscount_read(int fd)
{
    uint64_t v = 0;
    CHECK(read(fd, &v, sizeof v) == (ssize_t)sizeof v);
    return v;
}

#endif
