/* How many fault threads a region gets: by default one when the process
 * may run on two CPUs or fewer, two otherwise (region.c says why); what
 * NETVM_GMEM_THREADS or the options ask for otherwise. The threads are
 * counted by name (netvm-gmfault) in /proc/self/task, and every case
 * faults pages in and reads them back, so the threads it counted serve.
 * Usage: fault_threads */
#define _GNU_SOURCE
#include "gmem_test.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static int fault_threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;   /* the thread ended meanwhile */
        if (fgets(name, sizeof name, f) && !strncmp(name, "netvm-gmfault", 13))
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Map a region with opts o, fault pages in (a region twice its budget,
 * so pages are evicted and fetched back), count its fault threads. */
static int threads_of(netvm_gmem_opts_t o)
{
    const size_t budget = 256, npages = 2 * budget;
    o.budget = budget * GPAGE;
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    for (size_t p = 0; p < npages; p++)
        gt_fill(m + p * GPAGE, p, 1);
    for (size_t p = 0; p < npages; p++)
        if (!gt_check(m + p * GPAGE, p, 1))
            FAILF("page %zu wrong", p);
    int n = fault_threads_now();
    CHECK_OK(netvm_gmem_unmap(g));
    CHECK(fault_threads_now() == 0);
    return n;
}

int main(void)
{
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    int ncpu = CPU_COUNT(&all);
    CHECK(unsetenv("NETVM_GMEM_THREADS") == 0);
    netvm_gmem_opts_t dflt = { .readahead = -1 };

    int n = threads_of(dflt);
    printf("fault_threads: %d CPUs allowed, %d fault threads by default\n", ncpu, n);
    CHECK(n == (ncpu <= 2 ? 1 : 2));

    /* the CPUs the process may use when it maps the region, not the machine's */
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    CHECK(threads_of(dflt) == 1);
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);

    CHECK(setenv("NETVM_GMEM_THREADS", "3", 1) == 0);
    CHECK(threads_of(dflt) == 3);
    netvm_gmem_opts_t five = { .readahead = -1, .fault_threads = 5 };
    CHECK(threads_of(five) == 5);
    printf("fault_threads: NETVM_GMEM_THREADS=3 gives 3, the options' 5 gives 5\n");
    return 0;
}
