/* fork of a process with a region 4x its budget: the child sees the
 * parent's data as of the fork (resident and evicted pages alike, never
 * zeros), never the parent's later writes (the parent rewrites every page,
 * evicting and writing back, while the child reads), and its own writes
 * stay its own. Usage: fork BUDGET */
#include "gmem_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t budget = argc > 1 ? strtoul(argv[1], NULL, 0) : 512;
    size_t npages = 4 * budget;
    netvm_gmem_opts_t o = { .budget = budget * GPAGE };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    for (size_t p = 0; p < npages; p++)
        gt_fill(m + p * GPAGE, p, 1);
    int go[2], back[2];
    CHECK(pipe(go) == 0 && pipe(back) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char c;
        /* a third before the parent writes anything */
        for (size_t p = 0; p < npages / 3; p++)
            if (!gt_check(m + p * GPAGE, p, 1))
                FAILF("child: page %zu is not the parent's as of the fork (before its writes)", p);
        /* writes of its own */
        for (size_t p = 0; p < npages; p += 5)
            gt_fill(m + p * GPAGE, p, 3);
        CHECK(write(back[1], "r", 1) == 1);
        CHECK(read(go[0], &c, 1) == 1);
        for (size_t p = 0; p < npages; p++)
            if (!gt_check(m + p * GPAGE, p, p % 5 == 0 ? 3 : 1))
                FAILF("child: page %zu is not the parent's as of the fork or its own write", p);
        printf("fork: child saw every page as of the fork and its own writes\n");
        fflush(stdout);
        _exit(0);
    }
    char c;
    CHECK(read(back[0], &c, 1) == 1);
    /* every page rewritten: the pages the child has not read yet are
     * written back over their fork-time copies */
    for (size_t p = 0; p < npages; p++)
        gt_fill(m + p * GPAGE, p, 2);
    for (size_t p = 0; p < npages; p++)
        CHECK(gt_check(m + p * GPAGE, p, 2));
    CHECK(write(go[1], "g", 1) == 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (size_t p = 0; p < npages; p++)
        if (!gt_check(m + p * GPAGE, p, 2))
            FAILF("parent: page %zu lost its write (or got the child's)", p);
    netvm_gmem_stats_t s;
    CHECK_OK(netvm_gmem_stats(g, &s));
    CHECK(s.evictions_dirty > npages);
    /* A second fork whose child leaves at once, with the budget full: the
     * pages resident then stay shared copy-on-write (the kernel moves none
     * of them out) until written, and the parent only reads from now on.
     * It must not wait for room for ever: it goes past the budget while
     * nothing else can go, then evicts the pages it places itself. */
    CHECK_OK(netvm_gmem_sync(g));
    for (size_t p = npages - budget; p < npages; p++)
        CHECK(gt_check(m + p * GPAGE, p, 2));   /* the resident pages: the last ones, clean */
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(gt_check(m + GPAGE, 1, 2) ? 0 : 1);   /* a page not resident: served by the parent */
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int pass = 0; pass < 2; pass++)
        for (size_t p = 0; p < npages; p++)
            if (!gt_check(m + p * GPAGE, p, 2))
                FAILF("parent, after its second fork: page %zu is not its own", p);
    CHECK_OK(netvm_gmem_stats(g, &s));
    printf("fork: parent read its region twice after a fork (%llu resident, budget %llu)\n",
           (unsigned long long)s.resident_pages, (unsigned long long)s.budget_pages);
    CHECK_OK(netvm_gmem_unmap(g));
    printf("fork: ok\n");
    return 0;
}
