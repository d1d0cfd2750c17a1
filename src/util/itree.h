/* An interval index: intervals [start, end) sorted by start in a flat array,
 * read as an implicit balanced binary tree (node i's level is the number of
 * trailing one bits of i) where each node also holds the largest end in its
 * subtree. A query reports every interval overlapping [lo, hi) in
 * O(log n + matches); inserting or removing is O(n) (a shift and a rebuild).
 *
 * The array may live in memory other processes read while its owner writes
 * (the tripwire table): every field is read and written with relaxed
 * atomics, a query is bounded whatever the bytes say, and the caller
 * validates what it read with its own sequence lock. */
#ifndef NV_UTIL_ITREE_H
#define NV_UTIL_ITREE_H

#include <stddef.h>
#include <stdint.h>

struct nv_itree_node {
    uint64_t start, end;   /* [start, end), start < end */
    uint64_t max;          /* the largest end in this node's subtree (built) */
    uint64_t data;         /* the caller's: what the interval stands for */
};

/* Insert keeping start order; a must have room for n + 1 nodes; returns the
 * new count. The caller rebuilds afterwards. */
size_t nv_itree_insert(struct nv_itree_node *a, size_t n, uint64_t start, uint64_t end, uint64_t data);
/* Remove the node holding data among those starting at start; returns the
 * new count (n if none matched). The caller rebuilds afterwards. */
size_t nv_itree_remove(struct nv_itree_node *a, size_t n, uint64_t start, uint64_t data);
/* Compute every node's max. */
void   nv_itree_build(struct nv_itree_node *a, size_t n);
/* Call fn for each interval overlapping [lo, hi) until it returns nonzero;
 * returns the number of calls. */
size_t nv_itree_query(const struct nv_itree_node *a, size_t n, uint64_t lo, uint64_t hi,
                      int (*fn)(void *arg, uint64_t data, uint64_t start, uint64_t end), void *arg);

#endif
