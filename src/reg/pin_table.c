/* The target's pin table: buckets pinned for peers with reference counts,
 * a victim FIFO of unused ones bounded by MAXVICTIM, and the hard bound of
 * M + MAXVICTIM pinned in all. Pinning is mlock unless the owner set a
 * pinner (an RDMA link's registration: each bucket then is a registration
 * with a key of its own), so the costs are real and RLIMIT_MEMLOCK
 * applies; a bucket is unpinned only with no hold on it, and a hold exists
 * for exactly as long as a peer's move said so. */
#define _GNU_SOURCE
#include "reg/reg_int.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

void nv_pin_init(struct nv_reg *r)
{
    pthread_mutex_init(&r->tlock, NULL);
    uint64_t b = r->p.bucket;
    r->max_inuse = r->p.m / b;
    /* rendezvous unpins the moment the last hold goes: no victims */
    r->max_victim = r->p.kind == NV_REG_FIREHOSE ? r->p.maxvictim / b : 0;
    r->max_total = r->max_inuse + r->max_victim;
}

static void count_pin(struct nv_reg *r, uint64_t n)
{
    r->pins++;
    r->pinned_bytes += n;
    if (r->pinned_bytes > r->pinned_high)
        r->pinned_high = r->pinned_bytes;
}

/* mlock, with its two ENOMEMs told apart: memory that is not mapped is the
 * application's doing (as an access to it would be), the limit is the
 * configuration's. */
static netvm_status_t do_pin(struct nv_reg *r, uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return NETVM_OK;
    if (mlock((void *)(uintptr_t)lo, hi - lo) == 0) {
        count_pin(r, hi - lo);
        return NETVM_OK;
    }
    int e = errno;
    if (e == ENOMEM && msync((void *)(uintptr_t)lo, hi - lo, MS_ASYNC) != 0 && errno == ENOMEM)
        return NETVM_ERR_FAULT;
    struct rlimit rl = { 0, 0 };
    getrlimit(RLIMIT_MEMLOCK, &rl);
    nv_warn("reg: mlock of %llu bytes refused (%s): RLIMIT_MEMLOCK is %llu bytes and the pin table "
            "holds %llu; raise `ulimit -l` or lower NETVM_FH_M / NETVM_FH_MAXVICTIM",
            (unsigned long long)(hi - lo), e == ENOMEM || e == EAGAIN ? "over the limit" : "not permitted",
            (unsigned long long)rl.rlim_cur, (unsigned long long)r->pinned_bytes);
    return NETVM_ERR_NOMEM;
}

static void do_unpin(struct nv_reg *r, uint64_t lo, uint64_t hi)
{
    /* memory the application unmapped meanwhile lost its lock with it */
    (void)munlock((void *)(uintptr_t)lo, hi - lo);
    r->unpins++;
    r->pinned_bytes -= hi - lo;
}

static uint64_t pdown(const struct nv_reg *r, uint64_t a) { return a & ~(r->page - 1); }
static uint64_t pup(const struct nv_reg *r, uint64_t a)   { return (a + r->page - 1) & ~(r->page - 1); }

/* The registration of bucket e with exactly rights that covers [lo, hi),
 * or NULL (keyed pinners). */
static struct pin_reg *reg_covering(const struct pin_bucket *e, uint64_t lo, uint64_t hi, unsigned rights)
{
    for (struct pin_reg *g = e->regs; g; g = g->next)
        if (g->rights == rights && g->k.base <= lo && g->k.base + g->len >= hi)
            return g;
    return NULL;
}

/* Pin [lo, hi) of bucket e, which has [e->lo, e->hi) pinned already
 * (nothing if e->hi == e->lo), for accesses with rights. mlock pins what
 * is new; a keyed pinner registers [lo, hi) with rights unless a
 * registration with the same rights covers it (never the union with
 * another segment's part: that part's rights may be fewer). */
static netvm_status_t bucket_pin(struct nv_reg *r, struct pin_bucket *e, uint64_t lo, uint64_t hi, unsigned rights)
{
    int fresh = e->hi == e->lo;
    uint64_t nlo = fresh || lo < e->lo ? lo : e->lo, nhi = fresh || hi > e->hi ? hi : e->hi;
    if (!r->pinner.pin) {
        netvm_status_t st = NETVM_OK;
        if (fresh)
            st = do_pin(r, lo, hi);
        else if (lo < e->lo && (st = do_pin(r, lo, e->lo)) == NETVM_OK)
            e->lo = lo;
        if (!fresh && st == NETVM_OK && hi > e->hi && (st = do_pin(r, e->hi, hi)) == NETVM_OK)
            e->hi = hi;
        if (fresh && st == NETVM_OK) {
            e->lo = lo;
            e->hi = hi;
        }
        return st;
    }
    if (!fresh && reg_covering(e, lo, hi, rights))
        return NETVM_OK;
    struct pin_reg *g = calloc(1, sizeof *g);
    if (!g)
        return NETVM_ERR_NOMEM;
    netvm_status_t st = r->pinner.pin(r->pinner.arg, lo, hi - lo, rights, &g->h, &g->k.key);
    if (st != NETVM_OK) {
        nv_warn("reg: registering a bucket's %llu bytes failed: %s", (unsigned long long)(hi - lo),
                netvm_strerror(st));
        free(g);
        return st;
    }
    g->k.base = lo;
    g->len = hi - lo;
    g->rights = rights;
    g->next = e->regs;
    e->regs = g;
    count_pin(r, (nhi - nlo) - (e->hi - e->lo));
    e->lo = nlo;
    e->hi = nhi;
    return NETVM_OK;
}

static void bucket_unpin(struct nv_reg *r, struct pin_bucket *e)
{
    if (!r->pinner.pin) {
        do_unpin(r, e->lo, e->hi);
        return;
    }
    while (e->regs) {
        struct pin_reg *g = e->regs;
        e->regs = g->next;
        r->pinner.unpin(r->pinner.arg, g->h);
        free(g);
    }
    r->unpins++;
    r->pinned_bytes -= e->hi - e->lo;
}

static void victim_remove(struct nv_reg *r, struct pin_bucket *e)
{
    if (e->vprev) e->vprev->vnext = e->vnext; else r->vhead = e->vnext;
    if (e->vnext) e->vnext->vprev = e->vprev; else r->vtail = e->vprev;
    e->vprev = e->vnext = NULL;
    r->nvictim--;
}

static void evict_tail(struct nv_reg *r)
{
    struct pin_bucket *e = r->vtail;
    victim_remove(r, e);
    bucket_unpin(r, e);
    nv_rmap_del(&r->buckets, &e->node);
    r->nbuckets--;
    free(e);
}

static void bucket_unref(struct nv_reg *r, struct pin_bucket *e)
{
    if (--e->refs)
        return;
    r->ninuse--;
    e->vprev = NULL;
    e->vnext = r->vhead;
    if (r->vhead) r->vhead->vprev = e; else r->vtail = e;
    r->vhead = e;
    r->nvictim++;
    while (r->nvictim > r->max_victim)
        evict_tail(r);
}


/* One hold on bucket b, pinning at least [lo, hi) of it. */
static netvm_status_t bucket_ref(struct nv_reg *r, uint64_t b, uint64_t lo, uint64_t hi, unsigned rights)
{
    lo = pdown(r, lo);
    hi = pup(r, hi);
    struct pin_bucket *e = (struct pin_bucket *)nv_rmap_find(&r->buckets, 0, b);
    if (e) {
        if (!e->refs && r->ninuse + 1 > r->max_inuse)
            return NETVM_ERR_NOMEM;
        /* another segment's part of the same bucket: pin what is new */
        netvm_status_t st = bucket_pin(r, e, lo, hi, rights);
        if (st != NETVM_OK)
            return st;
        if (!e->refs++) {
            victim_remove(r, e);
            r->ninuse++;
        }
        return NETVM_OK;
    }
    if (r->ninuse + 1 > r->max_inuse)
        return NETVM_ERR_NOMEM;   /* M is taken by holds: the peers' shares overflowed it */
    while (r->nbuckets + 1 > r->max_total && r->vtail)
        evict_tail(r);
    e = calloc(1, sizeof *e);
    if (!e)
        return NETVM_ERR_NOMEM;
    e->node.a = 0;
    e->node.b = b;
    netvm_status_t st = bucket_pin(r, e, lo, hi, rights);
    if (st == NETVM_OK && (st = nv_rmap_add(&r->buckets, &e->node)) != NETVM_OK)
        bucket_unpin(r, e);
    if (st != NETVM_OK) {
        free(e);
        return st;
    }
    e->refs = 1;
    r->nbuckets++;
    r->ninuse++;
    return NETVM_OK;
}

/* Drop one of peer's holds on bucket b; 0 if it held none. */
static int hold_drop(struct nv_reg *r, int peer, uint64_t b)
{
    struct pin_hold *h = (struct pin_hold *)nv_rmap_find(&r->holds, (uint64_t)(uint32_t)peer, b);
    if (!h)
        return 0;
    if (--h->n == 0) {
        nv_rmap_del(&r->holds, &h->node);
        free(h);
    }
    struct pin_bucket *e = (struct pin_bucket *)nv_rmap_find(&r->buckets, 0, b);
    if (e)
        bucket_unref(r, e);
    return 1;
}

static netvm_status_t hold_take(struct nv_reg *r, int peer, uint64_t b, uint64_t lo, uint64_t hi, unsigned flags,
                                unsigned rights, int *taken)
{
    uint64_t pa = (uint64_t)(uint32_t)peer;
    struct pin_hold *h = (struct pin_hold *)nv_rmap_find(&r->holds, pa, b);
    *taken = 0;
    if (h && (flags & NV_REG_MOVE_KEEP))
        return NETVM_OK;
    struct pin_hold *nh = NULL;
    if (!h && !(nh = calloc(1, sizeof *nh)))
        return NETVM_ERR_NOMEM;
    netvm_status_t st = bucket_ref(r, b, lo, hi, rights);
    if (st == NETVM_OK && nh) {
        nh->node.a = pa;
        nh->node.b = b;
        if ((st = nv_rmap_add(&r->holds, &nh->node)) != NETVM_OK) {
            bucket_unref(r, (struct pin_bucket *)nv_rmap_find(&r->buckets, 0, b));
        } else {
            h = nh;
            nh = NULL;
        }
    }
    free(nh);
    if (st == NETVM_OK) {
        h->n++;
        *taken = 1;
    }
    return st;
}

netvm_status_t nv_reg_serve_move(struct nv_reg *r, int peer, unsigned flags, unsigned rights, const uint64_t *rel,
                                 unsigned nrel, const struct nv_reg_range *acq, unsigned nacq, struct nv_reg_key *keys)
{
    uint64_t bs = r->p.bucket, total = 0;
    for (unsigned i = 0; i < nacq; i++) {
        if (!acq[i].len || acq[i].addr + acq[i].len < acq[i].addr)
            return NETVM_ERR_INVAL;
        total += (nv_reg_bucket_of(r, acq[i].addr + acq[i].len - 1) - nv_reg_bucket_of(r, acq[i].addr)) / bs + 1;
    }
    if (total > NV_REG_SPAN_BUCKETS * 2)
        return NETVM_ERR_INVAL;
    uint64_t taken_b[NV_REG_SPAN_BUCKETS * 2];
    unsigned ntaken = 0;
    pthread_mutex_lock(&r->tlock);
    /* releases first: the room they free may serve this move's acquires */
    for (unsigned i = 0; i < nrel; i++)
        hold_drop(r, peer, nv_reg_bucket_of(r, rel[i]));
    netvm_status_t st = NETVM_OK;
    for (unsigned i = 0; i < nacq && st == NETVM_OK; i++) {
        uint64_t end = acq[i].addr + acq[i].len;
        for (uint64_t b = nv_reg_bucket_of(r, acq[i].addr); b < end && st == NETVM_OK; b += bs) {
            int taken;
            uint64_t lo = b > acq[i].addr ? b : acq[i].addr, hi = b + bs < end ? b + bs : end;
            st = hold_take(r, peer, b, lo, hi, flags, rights, &taken);
            if (taken)
                taken_b[ntaken++] = b;
        }
        if (st == NETVM_OK && keys) {
            /* the registration with the segment's rights covering the range */
            uint64_t b = nv_reg_bucket_of(r, acq[i].addr), hi = end < b + bs ? end : b + bs;
            struct pin_bucket *e = (struct pin_bucket *)nv_rmap_find(&r->buckets, 0, b);
            struct pin_reg *g = e ? reg_covering(e, pdown(r, acq[i].addr), pup(r, hi), rights) : NULL;
            keys[i] = g ? g->k : (struct nv_reg_key){ 0, 0 };
            if (!g)
                st = NETVM_ERR_INVAL;   /* a keyed range must lie in one bucket */
        }
    }
    /* a failed move leaves nothing of its acquires held: the initiator
     * believes it holds none of them */
    if (st != NETVM_OK)
        while (ntaken)
            hold_drop(r, peer, taken_b[--ntaken]);
    pthread_mutex_unlock(&r->tlock);
    return st;
}

netvm_status_t nv_reg_pin_whole(struct nv_reg *r, uint64_t addr, uint64_t len)
{
    if (!len)
        return NETVM_OK;
    pthread_mutex_lock(&r->tlock);
    netvm_status_t st = NETVM_OK;
    if (r->nwhole == r->whole_cap) {
        size_t cap = r->whole_cap ? r->whole_cap * 2 : 16;
        struct pin_whole *v = realloc(r->whole, cap * sizeof *v);
        if (v) {
            r->whole = v;
            r->whole_cap = cap;
        } else {
            st = NETVM_ERR_NOMEM;
        }
    }
    uint64_t lo = pdown(r, addr), hi = pup(r, addr + len);
    if (st == NETVM_OK && (st = do_pin(r, lo, hi)) == NETVM_OK)
        r->whole[r->nwhole++] = (struct pin_whole){ addr, len };
    pthread_mutex_unlock(&r->tlock);
    return st;
}

void nv_reg_unpin_whole(struct nv_reg *r, uint64_t addr, uint64_t len)
{
    pthread_mutex_lock(&r->tlock);
    for (size_t i = 0; i < r->nwhole; i++)
        if (r->whole[i].addr == addr && r->whole[i].len == len) {
            do_unpin(r, pdown(r, addr), pup(r, addr + len));
            r->whole[i] = r->whole[--r->nwhole];
            break;
        }
    pthread_mutex_unlock(&r->tlock);
}

int nv_reg_pinned(struct nv_reg *r, uint64_t addr, uint64_t len)
{
    uint64_t end = addr + (len ? len : 1), bs = r->p.bucket;
    int ok = 0;
    pthread_mutex_lock(&r->tlock);
    for (size_t i = 0; i < r->nwhole && !ok; i++)
        ok = addr >= r->whole[i].addr && end <= r->whole[i].addr + r->whole[i].len;
    if (!ok) {
        ok = 1;
        for (uint64_t b = nv_reg_bucket_of(r, addr); b < end && ok; b += bs) {
            struct pin_bucket *e = (struct pin_bucket *)nv_rmap_find(&r->buckets, 0, b);
            uint64_t lo = b > addr ? b : addr, hi = b + bs < end ? b + bs : end;
            ok = e && lo >= e->lo && hi <= e->hi;
        }
    }
    pthread_mutex_unlock(&r->tlock);
    if (!ok)
        atomic_fetch_add_explicit(&r->refused, 1, memory_order_relaxed);
    return ok;
}

void nv_pin_peer_gone(struct nv_reg *r, int peer)
{
    uint64_t pa = (uint64_t)(uint32_t)peer;
    pthread_mutex_lock(&r->tlock);
    for (size_t i = 0; i < r->holds.cap; i++) {
        struct nv_rmap_node **pp = &r->holds.v[i];
        while (*pp) {
            struct pin_hold *h = (struct pin_hold *)*pp;
            if (h->node.a != pa) {
                pp = &(*pp)->next;
                continue;
            }
            *pp = h->node.next;
            r->holds.n--;
            struct pin_bucket *e = (struct pin_bucket *)nv_rmap_find(&r->buckets, 0, h->node.b);
            for (uint32_t k = 0; k < h->n && e; k++) {
                r->peer_releases++;
                int last = e->refs == 1;
                bucket_unref(r, e);
                if (last)
                    break;   /* a victim now (or unpinned and gone) */
            }
            free(h);
        }
    }
    pthread_mutex_unlock(&r->tlock);
}

/* Every bucket unpinned and every hold forgotten (tlock held or no
 * other thread left). */
static void drop_buckets(struct nv_reg *r)
{
    for (size_t i = 0; i < r->buckets.cap; i++) {
        for (struct nv_rmap_node *x = r->buckets.v[i], *nx; x; x = nx) {
            nx = x->next;
            struct pin_bucket *e = (struct pin_bucket *)x;
            bucket_unpin(r, e);
            free(e);
        }
        r->buckets.v[i] = NULL;
    }
    for (size_t i = 0; i < r->holds.cap; i++) {
        for (struct nv_rmap_node *x = r->holds.v[i], *nx; x; x = nx) {
            nx = x->next;
            free(x);
        }
        r->holds.v[i] = NULL;
    }
    r->buckets.n = r->holds.n = 0;
    r->vhead = r->vtail = NULL;
    r->nbuckets = r->ninuse = r->nvictim = 0;
}

void nv_reg_drop_pinner(struct nv_reg *r)
{
    pthread_mutex_lock(&r->tlock);
    drop_buckets(r);
    r->pinner = (struct nv_reg_pinner){ 0 };
    pthread_mutex_unlock(&r->tlock);
}

void nv_pin_fini(struct nv_reg *r)
{
    drop_buckets(r);
    for (size_t i = 0; i < r->nwhole; i++)
        do_unpin(r, pdown(r, r->whole[i].addr), pup(r, r->whole[i].addr + r->whole[i].len));
    nv_rmap_free(&r->buckets);
    nv_rmap_free(&r->holds);
    free(r->whole);
    pthread_mutex_destroy(&r->tlock);
}
