/* wl_gups: random updates, HPCC RandomAccess style (bench/workloads/run).
 *   wl_gups --size W [--updates U] [--seed S]
 * A table of 2^k 64-bit words (the largest that fits in W), T[i] = i; U
 * updates T[r & (2^k-1)] ^= r for a seeded pseudo-random stream r (timed).
 * Checked as HPCC checks: the same updates applied again must leave
 * T[i] == i everywhere (xor undoes itself; one thread, so no error is
 * allowed).  Row "gups": million updates per second. */
#include "wl.h"

int main(int argc, char **argv)
{
    size_t size = 1ull << 30;
    uint64_t updates = 1ull << 20, seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            size = gm_parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--updates"))
            updates = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else
            size = 0;
    }
    if (size < 16 || !updates || argc % 2 == 0) {
        fprintf(stderr, "usage: wl_gups --size W [--updates U] [--seed S]\n");
        return 2;
    }
    size_t n = 1;
    while (n * 2 * 8 <= size)
        n *= 2;
    uint64_t *t = wl_alloc(n * 8, "the table");
    for (size_t i = 0; i < n; i++)
        t[i] = i;
    uint64_t r = seed, t0 = gm_now_ns();
    for (uint64_t u = 0; u < updates; u++) {
        uint64_t v = gm_rand(&r);
        t[v & (n - 1)] ^= v;
    }
    double s = (double)(gm_now_ns() - t0) / 1e9;
    r = seed;
    for (uint64_t u = 0; u < updates; u++) {
        uint64_t v = gm_rand(&r);
        t[v & (n - 1)] ^= v;
    }
    for (size_t i = 0; i < n; i++)
        if (t[i] != i)
            wl_fail("gups: T[%zu] = %016llx after the updates were undone", i, (unsigned long long)t[i]);
    int rows = 0;
    gm_row(&rows, "gups", n * 8, "MUPS", (double)updates / s / 1e6, "seconds", s, "updates", (double)updates,
           "verified", 1.0, "peak_rss", wl_peak_rss(), (const char *)NULL);
    printf("{\"done\":%d}\n", rows);
    free(t);
    return 0;
}
