/* What the services' benchmark programs share: the clock, and a row in
 * netvm bench's format (a table line on stdout, an object of the --json
 * array). */
#ifndef NV_BENCH_SVC_BENCH_H
#define NV_BENCH_SVC_BENCH_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>

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

#endif
