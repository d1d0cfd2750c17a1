#include "core/atu.h"
#include "util/time.h"

#include <sched.h>
#include <stdlib.h>

netvm_status_t nv_atu_init(struct nv_atu *atu, uint32_t cap)
{
    atu->e = calloc(cap, sizeof *atu->e);
    atu->free = malloc(cap * sizeof *atu->free);
    if (!atu->e || !atu->free) {
        nv_atu_fini(atu);
        return NETVM_ERR_NOMEM;
    }
    atu->cap = cap;
    /* hand out low slots first so peers' name scans stay short */
    for (uint32_t i = 0; i < cap; i++)
        atu->free[i] = cap - 1 - i;
    atu->nfree = cap;
    atomic_store(&atu->serve_seq, 0);
    return NETVM_OK;
}

void nv_atu_fini(struct nv_atu *atu)
{
    free(atu->e);
    free(atu->free);
    atu->e = NULL;
    atu->free = NULL;
}

netvm_status_t nv_atu_alloc(struct nv_atu *atu, uint32_t *slot)
{
    if (atu->nfree == 0)
        return NETVM_ERR_NOMEM;
    *slot = atu->free[--atu->nfree];
    return NETVM_OK;
}

void nv_atu_set(struct nv_atu *atu, uint32_t slot, uint64_t key, uint64_t addr,
                uint64_t len, unsigned rights, void *owner)
{
    struct nv_atu_entry *e = &atu->e[slot];
    uint64_t w = atomic_load_explicit(&e->word, memory_order_relaxed);
    /* odd-to-even generation steps make a torn read visible to readers */
    atomic_store_explicit(&e->word, (w | 1) + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    e->key = key;
    e->addr = addr;
    e->len = len;
    e->rights = rights;
    e->owner = owner;
    atomic_store_explicit(&e->word, (w | 1) + 2, memory_order_release);
}

void nv_atu_revoke(struct nv_atu *atu, uint32_t slot)
{
    struct nv_atu_entry *e = &atu->e[slot];
    uint64_t w = atomic_load_explicit(&e->word, memory_order_relaxed);
    atomic_store_explicit(&e->word, (w | 1) + 1, memory_order_seq_cst);   /* even: not live */
    uint64_t seq = atomic_load_explicit(&atu->serve_seq, memory_order_seq_cst);
    if (seq & 1) {
        unsigned spins = 0;
        while (atomic_load_explicit(&atu->serve_seq, memory_order_acquire) == seq)
            if (++spins > 1000)
                sched_yield();
            else
                nv_cpu_relax();
    }
}

void nv_atu_release(struct nv_atu *atu, uint32_t slot)
{
    atu->free[atu->nfree++] = slot;
}

netvm_status_t nv_atu_translate(struct nv_atu *atu, uint32_t slot, uint64_t key, uint64_t off,
                                uint64_t len, unsigned need, uint64_t *addr)
{
    unsigned rights;
    return nv_atu_translate_rights(atu, slot, key, off, len, need, addr, &rights);
}

netvm_status_t nv_atu_translate_rights(struct nv_atu *atu, uint32_t slot, uint64_t key, uint64_t off,
                                       uint64_t len, unsigned need, uint64_t *addr, unsigned *rights)
{
    if (slot >= atu->cap)
        return NETVM_ERR_KEY;
    struct nv_atu_entry *e = &atu->e[slot];
    for (;;) {
        uint64_t w = atomic_load_explicit(&e->word, memory_order_acquire);
        if (!(w & 1))
            return w ? NETVM_ERR_REVOKED : NETVM_ERR_KEY;
        uint64_t k = e->key, a = e->addr, n = e->len;
        unsigned r = e->rights;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->word, memory_order_relaxed) != w)
            continue;
        /* a key from an earlier export of this slot means that segment is gone */
        if (k != key)
            return NETVM_ERR_REVOKED;
        if (!nv_range_ok(off, len, n))
            return NETVM_ERR_BOUNDS;
        if ((r & need) != need)
            return NETVM_ERR_RIGHTS;
        *addr = a + off;
        *rights = r;
        return NETVM_OK;
    }
}
