/* The initiator's side of Firehose (Bell and Bonachea, IPDPS 2003): a
 * table of firehoses per peer, each a hold on one remote bucket, with a
 * reference count of the operations in flight through it. A peer gets F =
 * M / (bucket * peers) of them; unused ones (count 0) stay attached,
 * oldest first in a FIFO, and are what a miss moves: one round trip that
 * releases the oldest unused firehoses and attaches the missing buckets.
 * A hit costs a lookup under the lock and nothing on the network.
 *
 * Concurrent operations: a bucket another thread is attaching (pending)
 * is waited for, not asked for twice; a thread that needs more firehoses
 * than are unused gives back what it took and waits for one to become
 * unused, so two threads can never hold each other's room.
 *
 * Keyed (an RDMA link's registrations are the pins), a firehose names one
 * segment's part of a bucket: its key is for a registration with that
 * segment's rights covering that part, so a bucket two segments share
 * takes a firehose for each. */
#include "reg/reg_int.h"

#include <stdlib.h>

/* The firehose table's key of (peer, segment) */
static uint64_t fh_a(const struct nv_reg *r, int peer, uint32_t sid)
{
    return (uint64_t)(uint32_t)peer | (r->keyed ? (uint64_t)sid << 32 : 0);
}

static struct fh_peer *fh_peer_of(struct nv_reg *r, int peer)
{
    uint64_t pa = (uint64_t)(uint32_t)peer;
    struct fh_peer *fp = (struct fh_peer *)nv_rmap_find(&r->fh_peers, pa, 0);
    if (fp)
        return fp;
    fp = calloc(1, sizeof *fp);
    if (!fp)
        return NULL;
    fp->node.a = pa;
    if (nv_rmap_add(&r->fh_peers, &fp->node) != NETVM_OK) {
        free(fp);
        return NULL;
    }
    return fp;
}

static void unused_remove(struct fh_peer *fp, struct fh_entry *e)
{
    if (e->uprev) e->uprev->unext = e->unext; else fp->uhead = e->unext;
    if (e->unext) e->unext->uprev = e->uprev; else fp->utail = e->uprev;
    e->uprev = e->unext = NULL;
    fp->nunused--;
}

static void unused_push(struct fh_peer *fp, struct fh_entry *e)
{
    e->unext = NULL;
    e->uprev = fp->utail;
    if (fp->utail) fp->utail->unext = e; else fp->uhead = e;
    fp->utail = e;
    fp->nunused++;
}

static void entry_free(struct nv_reg *r, struct fh_entry *e)
{
    nv_rmap_del(&r->fh, &e->node);
    e->fp->count--;
    free(e);
}

/* Drop one reference on each bucket of [addr, addr + len) (ilock held). */
static void unref_range(struct nv_reg *r, int peer, uint32_t sid, uint64_t addr, uint64_t len)
{
    uint64_t pa = fh_a(r, peer, sid), end = addr + len;
    for (uint64_t b = nv_reg_bucket_of(r, addr); b < end; b += r->p.bucket) {
        struct fh_entry *e = (struct fh_entry *)nv_rmap_find(&r->fh, pa, b);
        if (!e || !e->refs || --e->refs)
            continue;
        if (atomic_load(&e->state) == FH_LIVE) {
            unused_push(e->fp, e);
            atomic_fetch_add_explicit(&r->fh_gen, 1, memory_order_release);
        } else {
            entry_free(r, e);   /* its move failed: nothing is held at the peer */
        }
    }
}

void nv_fh_release(struct nv_reg *r, int peer, uint32_t sid, uint64_t addr, uint64_t len)
{
    pthread_mutex_lock(&r->ilock);
    unref_range(r, peer, sid, addr, len);
    pthread_mutex_unlock(&r->ilock);
}

struct gen_wait { struct nv_reg *r; uint64_t seen; };

static int gen_moved(void *arg)
{
    struct gen_wait *w = arg;
    return atomic_load_explicit(&w->r->fh_gen, memory_order_acquire) != w->seen;
}

struct pend_wait { struct fh_entry **e; unsigned n; };

static int pend_done(void *arg)
{
    struct pend_wait *w = arg;
    for (unsigned i = 0; i < w->n; i++)
        if (atomic_load_explicit(&w->e[i]->state, memory_order_acquire) == FH_PENDING)
            return 0;
    return 1;
}

/* The key of a live firehose to bucket b (keyed strategies); it stays
 * valid while this caller's reference keeps the firehose attached. */
static void key_of(struct nv_reg *r, int peer, uint32_t sid, uint64_t b, struct nv_reg_key *key)
{
    pthread_mutex_lock(&r->ilock);
    struct fh_entry *e = (struct fh_entry *)nv_rmap_find(&r->fh, fh_a(r, peer, sid), b);
    *key = e ? e->k : (struct nv_reg_key){ 0, 0 };
    pthread_mutex_unlock(&r->ilock);
}

netvm_status_t nv_fh_acquire(struct nv_reg *r, int peer, uint32_t sid, const void *seg, uint64_t addr,
                             uint64_t len, struct nv_reg_key *key)
{
    uint64_t bs = r->p.bucket, pa = fh_a(r, peer, sid);
    uint64_t b0 = nv_reg_bucket_of(r, addr), b1 = nv_reg_bucket_of(r, addr + len - 1);
    unsigned nb = (unsigned)((b1 - b0) / bs + 1);
    if (nb > NV_REG_SPAN_BUCKETS || nb > r->fh_per_peer)
        return NETVM_ERR_INVAL;   /* core splits operations to nv_reg_max_span */
    struct fh_entry *pend[NV_REG_SPAN_BUCKETS], *fresh[NV_REG_SPAN_BUCKETS];
    uint64_t miss[NV_REG_SPAN_BUCKETS], rel[NV_REG_SPAN_BUCKETS];
    struct nv_reg_range acq[NV_REG_SPAN_BUCKETS];
    struct nv_reg_key keys[NV_REG_SPAN_BUCKETS];
    for (;;) {
        unsigned nmiss = 0, npend = 0;
        pthread_mutex_lock(&r->ilock);
        struct fh_peer *fp = fh_peer_of(r, peer);
        if (!fp) {
            pthread_mutex_unlock(&r->ilock);
            return NETVM_ERR_NOMEM;
        }
        uint64_t seen = atomic_load_explicit(&r->fh_gen, memory_order_acquire);
        for (uint64_t b = b0; b <= b1; b += bs) {
            struct fh_entry *e = (struct fh_entry *)nv_rmap_find(&r->fh, pa, b);
            if (!e) {
                miss[nmiss++] = b;
                continue;
            }
            if (e->refs++ == 0 && atomic_load(&e->state) == FH_LIVE)
                unused_remove(fp, e);
            if (atomic_load(&e->state) != FH_LIVE)
                pend[npend++] = e;
        }
        unsigned nrel = 0;
        if (nmiss) {
            unsigned need = fp->count + nmiss > r->fh_per_peer ? fp->count + nmiss - r->fh_per_peer : 0;
            if (need > fp->nunused) {
                /* not enough room: give back what this attempt took, wait
                 * for an operation through this peer's firehoses to end */
                for (uint64_t b = b0; b <= b1; b += bs)
                    if (nv_rmap_find(&r->fh, pa, b))
                        unref_range(r, peer, sid, b, 1);
                pthread_mutex_unlock(&r->ilock);
                struct gen_wait w = { r, seen };
                netvm_status_t st = r->net.wait(r->net.arg, gen_moved, &w, r->p.timeout_ms);
                if (st != NETVM_OK)
                    return st;
                continue;
            }
            /* the oldest unused firehoses move */
            while (nrel < need) {
                struct fh_entry *v = fp->uhead;
                unused_remove(fp, v);
                rel[nrel++] = v->node.b;
                entry_free(r, v);
            }
            netvm_status_t st = NETVM_OK;
            unsigned made = 0;
            for (; made < nmiss && st == NETVM_OK; made++) {
                struct fh_entry *e = calloc(1, sizeof *e);
                if (!e) {
                    st = NETVM_ERR_NOMEM;
                    break;
                }
                e->node.a = pa;
                e->node.b = miss[made];
                e->refs = 1;
                e->fp = fp;
                atomic_init(&e->state, FH_PENDING);
                if ((st = nv_rmap_add(&r->fh, &e->node)) != NETVM_OK) {
                    free(e);
                    break;
                }
                fp->count++;
                fresh[made] = e;
            }
            if (st != NETVM_OK) {
                for (unsigned i = 0; i < made; i++)
                    atomic_store(&fresh[i]->state, FH_FAILED);
                unref_range(r, peer, sid, b0, b1 - b0 + bs);
                pthread_mutex_unlock(&r->ilock);
                return st;
            }
            r->misses++;
            r->moves++;
        } else if (!npend) {
            r->hits++;
            pthread_mutex_unlock(&r->ilock);
            if (key)
                key_of(r, peer, sid, b0, key);
            return NETVM_OK;
        } else {
            r->misses++;   /* another thread's move serves it */
        }
        pthread_mutex_unlock(&r->ilock);

        netvm_status_t st = NETVM_OK;
        if (nmiss) {
            /* contiguous missing buckets travel as one range, unless each
             * is a registration of its own with a key to learn */
            unsigned nacq = 0;
            for (unsigned i = 0; i < nmiss; i++) {
                if (nacq && !r->keyed && acq[nacq - 1].addr + acq[nacq - 1].len == miss[i])
                    acq[nacq - 1].len += bs;
                else
                    acq[nacq++] = (struct nv_reg_range){ miss[i], bs };
            }
            st = r->net.move(r->net.arg, peer, seg, 0, rel, nrel, acq, nacq, r->keyed ? keys : NULL);
            pthread_mutex_lock(&r->ilock);
            for (unsigned i = 0; i < nmiss; i++) {
                if (r->keyed)
                    fresh[i]->k = keys[i];   /* keyed: one range per bucket */
                fresh[i]->st = st;
                atomic_store_explicit(&fresh[i]->state, st == NETVM_OK ? FH_LIVE : FH_FAILED,
                                      memory_order_release);
            }
            pthread_mutex_unlock(&r->ilock);
        }
        if (st == NETVM_OK && npend) {
            struct pend_wait w = { pend, npend };
            st = r->net.wait(r->net.arg, pend_done, &w, r->p.timeout_ms);
            for (unsigned i = 0; i < npend && st == NETVM_OK; i++)
                if (atomic_load(&pend[i]->state) != FH_LIVE)
                    st = pend[i]->st != NETVM_OK ? pend[i]->st : NETVM_ERR_PEER;
        }
        if (st != NETVM_OK) {
            pthread_mutex_lock(&r->ilock);
            unref_range(r, peer, sid, b0, b1 - b0 + bs);
            pthread_mutex_unlock(&r->ilock);
        } else if (key) {
            key_of(r, peer, sid, b0, key);
        }
        return st;
    }
}

void nv_fh_peer_gone(struct nv_reg *r, int peer)
{
    uint64_t pa = (uint64_t)(uint32_t)peer;
    pthread_mutex_lock(&r->ilock);
    struct fh_peer *fp = (struct fh_peer *)nv_rmap_find(&r->fh_peers, pa, 0);
    if (fp) {
        /* unused firehoses go; those in use fail with their operations and
         * go at their last release */
        while (fp->uhead) {
            struct fh_entry *e = fp->uhead;
            unused_remove(fp, e);
            entry_free(r, e);
        }
        for (size_t i = 0; i < r->fh.cap; i++)
            for (struct nv_rmap_node *x = r->fh.v[i]; x; x = x->next)
                if ((uint32_t)x->a == (uint32_t)peer && atomic_load(&((struct fh_entry *)x)->state) == FH_LIVE) {
                    ((struct fh_entry *)x)->st = NETVM_ERR_PEER;
                    atomic_store(&((struct fh_entry *)x)->state, FH_FAILED);
                }
    }
    pthread_mutex_unlock(&r->ilock);
}

void nv_fh_fini(struct nv_reg *r)
{
    for (size_t i = 0; i < r->fh.cap; i++)
        for (struct nv_rmap_node *x = r->fh.v[i], *nx; x; x = nx) {
            nx = x->next;
            free(x);
        }
    for (size_t i = 0; i < r->fh_peers.cap; i++)
        for (struct nv_rmap_node *x = r->fh_peers.v[i], *nx; x; x = nx) {
            nx = x->next;
            free(x);
        }
    nv_rmap_free(&r->fh);
    nv_rmap_free(&r->fh_peers);
}
