/* What the services' benchmark programs share: the clock, and a row in
 * netvm bench's format (a table line on stdout, an object of the --json
 * array). */
#ifndef NV_BENCH_SVC_BENCH_H
#define NV_BENCH_SVC_BENCH_H

#include <netvm/netvm.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One row; json (may be NULL) is the open array, *rows the objects it has. */
static inline void svc_bench_row(FILE *json, int *rows, const char *metric, size_t size, const char *unit,
                                 double v)
{
    printf("%-20s %9zu %-5s %12.6g\n", metric, size, unit, v);
    fflush(stdout);
    if (json)
        fprintf(json, "%s\n  {\"metric\": \"%s\", \"size\": %zu, \"unit\": \"%s\", \"netvm\": %.9g}",
                (*rows)++ ? "," : "", metric, size, unit, v);
}

/* Whether metric is in only, a comma list of the rows to measure (a
 * program's --only); NULL: every row. */
static inline int svc_bench_wanted(const char *only, const char *metric)
{
    if (!only)
        return 1;
    size_t n = strlen(metric);
    for (const char *p = only; (p = strstr(p, metric)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

/* A serving rank's loop: poll (netvm_progress) until *stop, as
 * ucx_perftest's server does (a sleeping server would add a thread wake-up
 * to every call). With more ranks than cores an idle poller yields now and
 * then, or it takes the core the others need. */
static inline void svc_bench_poll(netvm_ctx_t *ctx, int nranks, atomic_int *stop)
{
    int crowded = sysconf(_SC_NPROCESSORS_ONLN) < nranks;
    unsigned idle = 0;
    while (!atomic_load(stop))
        if (!netvm_progress(ctx) && crowded && ++idle % 16 == 0)
            sched_yield();
}

#endif
