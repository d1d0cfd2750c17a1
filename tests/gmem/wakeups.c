/* A fault wakes one fault thread, not all of them: the threads sleeping
 * on the region's uffd are counted by their voluntary context switches
 * (/proc/self/task/TID/status) over N sequential faults on fresh pages
 * (zero fills: no store, no network). With every thread polling the uffd,
 * each fault woke all of them and all but one read nothing: about
 * THREADS x N sleeps; one woken thread sleeps about N times.
 * With a third argument, "spin" (run with NETVM_GMEM_SPIN_US set high),
 * the fault thread that served a fault keeps polling for the next one, so
 * a lone fault thread hardly sleeps at all (about 0.7 sleeps a fault
 * without the spin, here).
 * Usage: wakeups [FAULTS] [THREADS] [spin] */
#include "gmem_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Voluntary context switches of every thread of the process but this one. */
static long others_sleeps(void)
{
    long self = (long)syscall(SYS_gettid), sum = 0;
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || atol(e->d_name) == self)
            continue;
        char path[300], line[128];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;   /* the thread ended meanwhile */
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "voluntary_ctxt_switches:", 24))
                sum += atol(line + 24);
        fclose(f);
    }
    closedir(d);
    return sum;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 20000;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    int spin = argc > 3 && !strcmp(argv[3], "spin");
    /* a budget above the region: no eviction, the evictor sleeps */
    netvm_gmem_opts_t o = { .budget = (2 * n + 256) * GPAGE, .fault_threads = threads, .readahead = -1 };
    netvm_gmem_t *g;
    volatile unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), n * GPAGE, &o, &g, (void **)&m));
    m[0];   /* every thread started and asleep on the uffd */
    usleep(100000);
    long before = others_sleeps();
    unsigned sum = 0;
    for (size_t p = 1; p < n; p++)
        sum += m[p * GPAGE];
    long sleeps = others_sleeps() - before;
    netvm_gmem_stats_t s;
    CHECK_OK(netvm_gmem_stats(g, &s));
    printf("wakeups: %zu faults, %d fault threads: %ld sleeps of the other threads (%.2f a fault), sum %u\n",
           (size_t)s.faults, threads, sleeps, (double)sleeps / (double)(n - 1), sum);
    CHECK(s.faults >= n - 1);
    if (sleeps > 2 * (long)n)
        FAILF("%ld sleeps of other threads for %zu faults: faults wake more than one fault thread", sleeps, n - 1);
    if (spin && sleeps > (long)n / 8)
        FAILF("%ld sleeps of the fault thread for %zu back-to-back faults: it does not poll for the next fault",
              sleeps, n - 1);
    CHECK_OK(netvm_gmem_unmap(g));
    return 0;
}
