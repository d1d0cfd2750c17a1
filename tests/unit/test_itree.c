/* The interval index against a brute-force matcher: random intervals
 * (nested, overlapping, touching, huge), random queries, inserts and
 * removals; every query must report exactly the intervals that overlap. */
#include "check.h"
#include "util/itree.h"

#include <stdlib.h>
#include <string.h>

#define CAP 5000

static struct nv_itree_node tree[CAP + 1];
static uint64_t ref_s[CAP], ref_e[CAP];
static int ref_live[CAP];
static int hits[CAP];

static int record(void *arg, uint64_t data, uint64_t start, uint64_t end)
{
    (void)arg;
    CHECK(data < CAP && ref_live[data] && ref_s[data] == start && ref_e[data] == end);
    hits[data]++;
    return 0;
}

static uint64_t rnd(void) { return (uint64_t)rand() << 31 ^ (uint64_t)rand(); }

static void check_query(size_t n, uint64_t lo, uint64_t hi)
{
    memset(hits, 0, sizeof hits);
    size_t calls = nv_itree_query(tree, n, lo, hi, record, NULL);
    size_t want = 0;
    for (int i = 0; i < CAP; i++) {
        int overlaps = ref_live[i] && ref_s[i] < hi && ref_e[i] > lo;
        CHECK(hits[i] == overlaps);
        want += (size_t)overlaps;
    }
    CHECK(calls == want);
}

static int stop_after_one(void *arg, uint64_t data, uint64_t start, uint64_t end)
{
    (void)data, (void)start, (void)end;
    ++*(int *)arg;
    return 1;
}

int main(void)
{
    srand(7);
    size_t n = 0;
    /* build up past 4096 intervals, querying as it grows */
    for (int i = 0; i < CAP; i++) {
        uint64_t s = rnd() % 1000000, len;
        switch (rand() % 4) {
        case 0:  len = 1; break;                      /* one byte */
        case 1:  len = 1 + rnd() % 64; break;         /* a word or a line */
        case 2:  len = 1 + rnd() % 20000; break;      /* pages */
        default: len = 1 + rnd() % 1000000; break;    /* most of the space: nesting */
        }
        ref_s[i] = s;
        ref_e[i] = s + len;
        ref_live[i] = 1;
        n = nv_itree_insert(tree, n, s, s + len, (uint64_t)i);
        nv_itree_build(tree, n);
        if (i % 97 == 0 || i < 40)
            for (int q = 0; q < 20; q++) {
                uint64_t lo = rnd() % 1100000;
                check_query(n, lo, lo + 1 + rnd() % (q % 2 ? 10 : 50000));
            }
    }
    CHECK(n == CAP);
    for (int q = 0; q < 2000; q++) {
        uint64_t lo = rnd() % 1100000;
        check_query(n, lo, lo + 1 + rnd() % 3000);
    }
    /* touching is not overlapping: [s, e) and [e, ...) */
    check_query(n, ref_e[0], ref_e[0] + 1);
    check_query(n, ref_s[0] - 1 < ref_s[0] ? ref_s[0] - 1 : 0, ref_s[0]);
    /* remove half at random, querying as it shrinks */
    for (int k = 0; k < CAP / 2; k++) {
        int i = rand() % CAP;
        while (!ref_live[i])
            i = (i + 1) % CAP;
        size_t m = nv_itree_remove(tree, n, ref_s[i], (uint64_t)i);
        CHECK(m == n - 1);
        n = m;
        ref_live[i] = 0;
        nv_itree_build(tree, n);
        if (k % 101 == 0)
            for (int q = 0; q < 20; q++) {
                uint64_t lo = rnd() % 1100000;
                check_query(n, lo, lo + 1 + rnd() % 5000);
            }
    }
    /* removing what is not there changes nothing */
    CHECK(nv_itree_remove(tree, n, 12345678, 999999) == n);
    /* the callback can stop the walk */
    int calls = 0;
    CHECK(nv_itree_query(tree, n, 0, UINT64_MAX, stop_after_one, &calls) == 1 && calls == 1);
    /* empty and degenerate queries */
    CHECK(nv_itree_query(tree, 0, 0, 10, record, NULL) == 0);
    CHECK(nv_itree_query(tree, n, 10, 10, record, NULL) == 0);
    return 0;
}
