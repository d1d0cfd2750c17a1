/* An intrusive chained hash keyed by two 64-bit words (a peer and an
 * address), for the tables of src/reg. The owner locks. */
#ifndef NV_REG_MAP_H
#define NV_REG_MAP_H

#include <netvm/netvm.h>

#include <stdint.h>
#include <stdlib.h>

struct nv_rmap_node {
    uint64_t a, b;
    struct nv_rmap_node *next;
};

struct nv_rmap {
    struct nv_rmap_node **v;
    size_t cap, n;   /* cap: a power of two */
};

static inline size_t nv_rmap_slot(const struct nv_rmap *m, uint64_t a, uint64_t b)
{
    uint64_t h = (a * 0x9e3779b97f4a7c15ull) ^ (b >> 12) * 0xc2b2ae3d27d4eb4full;
    return (size_t)(h ^ (h >> 29)) & (m->cap - 1);
}

static inline struct nv_rmap_node *nv_rmap_find(const struct nv_rmap *m, uint64_t a, uint64_t b)
{
    if (!m->cap)
        return NULL;
    for (struct nv_rmap_node *x = m->v[nv_rmap_slot(m, a, b)]; x; x = x->next)
        if (x->a == a && x->b == b)
            return x;
    return NULL;
}

static inline netvm_status_t nv_rmap_add(struct nv_rmap *m, struct nv_rmap_node *x)
{
    if (m->n + 1 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct nv_rmap_node **v = calloc(cap, sizeof *v);
        if (!v)
            return NETVM_ERR_NOMEM;
        struct nv_rmap old = *m;
        m->v = v;
        m->cap = cap;
        for (size_t i = 0; i < old.cap; i++)
            for (struct nv_rmap_node *y = old.v[i], *nx; y; y = nx) {
                nx = y->next;
                size_t s = nv_rmap_slot(m, y->a, y->b);
                y->next = m->v[s];
                m->v[s] = y;
            }
        free(old.v);
    }
    size_t s = nv_rmap_slot(m, x->a, x->b);
    x->next = m->v[s];
    m->v[s] = x;
    m->n++;
    return NETVM_OK;
}

static inline void nv_rmap_del(struct nv_rmap *m, struct nv_rmap_node *x)
{
    for (struct nv_rmap_node **pp = &m->v[nv_rmap_slot(m, x->a, x->b)]; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            m->n--;
            return;
        }
}

static inline void nv_rmap_free(struct nv_rmap *m)
{
    free(m->v);
    m->v = NULL;
    m->cap = m->n = 0;
}

#endif
