/* The implicit interval tree (the layout of Heng Li's cgranges: a sorted
 * array whose index bits give the tree shape). */
#include "util/itree.h"

#define LD(p)    __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELAXED)

static void copy_node(struct nv_itree_node *to, const struct nv_itree_node *from)
{
    ST(to->start, LD(from->start));
    ST(to->end, LD(from->end));
    ST(to->data, LD(from->data));
}

size_t nv_itree_insert(struct nv_itree_node *a, size_t n, uint64_t start, uint64_t end, uint64_t data)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {   /* the first node starting after start */
        size_t mid = lo + (hi - lo) / 2;
        if (LD(a[mid].start) <= start)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = n; i > lo; i--)
        copy_node(&a[i], &a[i - 1]);
    ST(a[lo].start, start);
    ST(a[lo].end, end);
    ST(a[lo].data, data);
    return n + 1;
}

size_t nv_itree_remove(struct nv_itree_node *a, size_t n, uint64_t start, uint64_t data)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {   /* the first node starting at or after start */
        size_t mid = lo + (hi - lo) / 2;
        if (LD(a[mid].start) < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < n && LD(a[i].start) == start; i++) {
        if (LD(a[i].data) != data)
            continue;
        for (size_t k = i; k + 1 < n; k++)
            copy_node(&a[k], &a[k + 1]);
        return n - 1;
    }
    return n;
}

/* The level of the root of a tree over n nodes: its index is 2^k - 1 with
 * 2^(k+1) - 1 >= n. */
static int root_level(size_t n)
{
    int k = 0;
    while (((size_t)2 << k) - 1 < n)
        k++;
    return k;
}

/* Nodes past the end exist only on the rightmost path; their subtree's
 * real part is their left child's. */
static uint64_t build(struct nv_itree_node *a, size_t n, size_t i, int k)
{
    if (i >= n)
        return k > 0 ? build(a, n, i - ((size_t)1 << (k - 1)), k - 1) : 0;
    uint64_t m = LD(a[i].end);
    if (k > 0) {
        uint64_t l = build(a, n, i - ((size_t)1 << (k - 1)), k - 1);
        uint64_t r = build(a, n, i + ((size_t)1 << (k - 1)), k - 1);
        m = l > m ? l : m;
        m = r > m ? r : m;
    }
    ST(a[i].max, m);
    return m;
}

void nv_itree_build(struct nv_itree_node *a, size_t n)
{
    if (n) {
        int k = root_level(n);
        build(a, n, ((size_t)1 << k) - 1, k);
    }
}

struct query {
    const struct nv_itree_node *a;
    size_t n, calls;
    uint64_t lo, hi;
    int stop;
    int (*fn)(void *, uint64_t, uint64_t, uint64_t);
    void *arg;
};

static void query(struct query *q, size_t i, int k)
{
    if (q->stop)
        return;
    size_t half = k > 0 ? (size_t)1 << (k - 1) : 0;
    if (i >= q->n) {
        if (k > 0)
            query(q, i - half, k - 1);
        return;
    }
    if (LD(q->a[i].max) <= q->lo)
        return;   /* everything below ends before the query starts */
    if (k > 0)
        query(q, i - half, k - 1);
    uint64_t s = LD(q->a[i].start);
    if (q->stop || s >= q->hi)
        return;   /* this node and its right subtree start after the query */
    uint64_t e = LD(q->a[i].end);
    if (e > q->lo) {
        q->calls++;
        if (q->fn(q->arg, LD(q->a[i].data), s, e))
            q->stop = 1;
    }
    if (k > 0)
        query(q, i + half, k - 1);
}

size_t nv_itree_query(const struct nv_itree_node *a, size_t n, uint64_t lo, uint64_t hi,
                      int (*fn)(void *arg, uint64_t data, uint64_t start, uint64_t end), void *arg)
{
    if (!n || lo >= hi)
        return 0;
    struct query q = { .a = a, .n = n, .lo = lo, .hi = hi, .fn = fn, .arg = arg };
    int k = root_level(n);
    query(&q, ((size_t)1 << k) - 1, k);
    return q.calls;
}
