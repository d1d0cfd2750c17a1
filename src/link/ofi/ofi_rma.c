/* The ofi link's RMA: segments registered with fi_mr_reg (revoked by
 * closing the registration, so the provider itself refuses later
 * accesses), puts as RDMA writes and gets as RDMA reads, and what the
 * target must see of them:
 *  - a plain put carries its place (source, slot, offset) as remote CQ
 *    data, which the target reads after the data landed and matches
 *    against its tripwires;
 *  - a put that needs an answer (remote completion), a notification or a
 *    gate is followed by an OK_ACCESS message, ordered after the write
 *    (FI_ORDER_SAW), which the target checks against its ATU before it
 *    answers, notifies or fails the gate;
 *  - a get is followed, once its bytes are here, by an OK_ACCESS for the
 *    target's read tripwires and responder notification.
 * Flush is an OK_FLUSH message answered after every write before it.
 *
 * Revocation cannot be left to the provider: libfabric 1.17's tcp provider
 * stalls the connection on a write to an unknown key, and shm never answers
 * a read of one. So no access may name a closed registration: the target
 * tells every peer (OK_REVOKE), each marks its imports of that segment
 * refused and answers after everything it issued before (OK_REVOKE_ACK),
 * and only then (seg_fence) is the registration closed. */
#define _GNU_SOURCE
#include "link/ofi/ofi_priv.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/time.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* --- registration ------------------------------------------------------------------------ */

netvm_status_t ofi_reg_raw(struct ofi_link *o, void *addr, size_t len, uint64_t access, struct fid_mr **mr,
                           uint64_t *key)
{
    uint64_t want = o->prov_key ? 0 : atomic_fetch_add(&o->next_key, 1);
    int rc = fi_mr_reg(o->domain, addr, len, access, 0, want, 0, mr, NULL);
    if (!rc && o->mr_endpoint) {
        if ((rc = fi_mr_bind(*mr, &o->ep->fid, 0)) == 0)
            rc = fi_mr_enable(*mr);
        if (rc)
            fi_close(&(*mr)->fid);
    }
    if (!rc)
        *key = fi_mr_key(*mr);
    if (rc) {
        nv_error("ofi link: fi_mr_reg of %zu bytes failed: %s", len, nv_ofi_fi.strerror(-rc));
        return rc == -FI_ENOMEM ? NETVM_ERR_NOMEM : NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

/* The registration cache's registrar: one registration serves a buffer as
 * a local descriptor and, asked for, as a rendezvous payload the peer
 * reads; no local buffer is remotely writable. */
static netvm_status_t rc_reg(void *arg, void *addr, size_t len, unsigned access, void **handle)
{
    struct fid_mr *mr;
    uint64_t key, fa = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (access & OFI_LREG_PEER_READ)
        fa |= FI_REMOTE_READ;
    netvm_status_t st = ofi_reg_raw(arg, addr, len, fa, &mr, &key);
    if (st == NETVM_OK)
        *handle = mr;
    return st;
}

static void rc_dereg(void *arg, void *handle)
{
    (void)arg;
    fi_close(&((struct fid_mr *)handle)->fid);
}

const struct nv_lreg_registrar ofi_lreg_registrar = { .reg = rc_reg, .dereg = rc_dereg };

netvm_status_t ofi_local_desc(struct ofi_link *o, struct ofi_op *op, const void *buf, size_t len, void **desc)
{
    *desc = NULL;
    if (!o->mr_local || !len)
        return NETVM_OK;
    netvm_status_t st = o->base.up.lreg_get(o->rc, buf, len, OFI_LREG_LOCAL, &op->rce);
    if (st == NETVM_OK)
        *desc = fi_mr_desc(op->rce->handle);
    return st;
}

netvm_status_t ofi_mem_reg(struct nv_link *l, void *addr, size_t len, unsigned rights, void **out)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_mr *m = calloc(1, sizeof *m);
    if (!m)
        return NETVM_ERR_NOMEM;
    /* core checks rights at the initiator; the registration allows what
     * the segment allows, so a forged access is refused by the provider too */
    uint64_t access = 0;
    if (rights & NETVM_READ)
        access |= FI_REMOTE_READ;
    if (rights & NETVM_WRITE)
        access |= FI_REMOTE_WRITE;
    if (!access)
        access = FI_REMOTE_READ;
    netvm_status_t st = ofi_reg_raw(o, addr, len ? len : 1, access, &m->mr, &m->key);
    if (st != NETVM_OK) {
        free(m);
        return st;
    }
    m->addr = (uintptr_t)addr;
    *out = m;
    return NETVM_OK;
}

void ofi_mem_dereg(struct nv_link *l, void *mr)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_mr *m = mr;
    if (!m)
        return;
    pthread_mutex_lock(&o->lock);
    for (uint32_t i = 0; i < o->p.max_segments; i++)
        if (o->segs[i].mr == m)
            o->segs[i].mr = NULL;
    if (m->mr)
        fi_close(&m->mr->fid);
    pthread_mutex_unlock(&o->lock);
    free(m);
}

uint64_t ofi_mr_key(struct nv_link *l, void *mr)
{
    (void)l;
    return mr ? ((struct ofi_mr *)mr)->key : 0;
}

netvm_status_t ofi_seg_publish(struct nv_link *l, const struct nv_seg_desc *d)
{
    struct ofi_link *o = ofi_of(l);
    /* d->mr is NULL when a registration strategy pins (registers) the
     * segment's buckets as peers ask (core/reg_core.c) */
    if (d->slot >= o->p.max_segments)
        return NETVM_ERR_NOMEM;
    pthread_mutex_lock(&o->lock);
    o->segs[d->slot] = (struct ofi_seg){ .base = d->addr, .len = d->len, .key = d->key, .mr = d->mr, .live = 1 };
    pthread_mutex_unlock(&o->lock);
    return NETVM_OK;
}

void ofi_seg_revoke(struct nv_link *l, uint32_t slot)
{
    struct ofi_link *o = ofi_of(l);
    if (slot >= o->p.max_segments)
        return;
    pthread_mutex_lock(&o->lock);
    struct ofi_seg *s = &o->segs[slot];
    if (s->live) {
        struct ofi_access a = { .slot = slot, .key = s->key };
        s->acks_due = 0;
        for (struct ofi_peer *pe = o->peers; pe; pe = pe->next)
            if (!atomic_load(&pe->dead) && ofi_send_locked(o, pe, OK_REVOKE, 0, &a, sizeof a, NULL, 0) == NETVM_OK) {
                pe->owed++;
                s->acks_due++;
            }
        s->mr = NULL;
        s->live = 0;   /* remote CQ data naming it fires nothing any more */
    }
    pthread_mutex_unlock(&o->lock);
}

/* Every live peer has answered (or NETVM_TIMEOUT passed): nothing naming
 * the segment's key is still on its way, and mem_dereg may close it. */
static int fenced(struct ofi_link *o, uint32_t slot)
{
    pthread_mutex_lock(&o->lock);
    int done = o->segs[slot].acks_due == 0;
    if (!done) {
        done = 1;
        for (struct ofi_peer *pe = o->peers; pe; pe = pe->next)
            if (!atomic_load(&pe->dead) && pe->owed)
                done = 0;
    }
    pthread_mutex_unlock(&o->lock);
    return done;
}

void ofi_seg_fence(struct nv_link *l, uint32_t slot)
{
    struct ofi_link *o = ofi_of(l);
    if (slot >= o->p.max_segments)
        return;
    uint64_t until = nv_now_ns() + (uint64_t)o->p.timeout_ms * 1000000ull;
    while (!fenced(o, slot)) {
        if (nv_now_ns() > until) {
            nv_warn("ofi link: peers did not answer the revocation of segment %u within NETVM_TIMEOUT", slot);
            break;
        }
        if (ofi_progress(o) == 0)
            sched_yield();
    }
    pthread_mutex_lock(&o->lock);
    o->segs[slot] = (struct ofi_seg){ 0 };
    pthread_mutex_unlock(&o->lock);
}

/* OK_REVOKE (ack == 0: refuse the segment from now on, and answer) or its
 * answer (ack == 1). */
void ofi_revoke_rx(struct ofi_link *o, struct ofi_peer *pe, int ack, const struct ofi_access *a)
{
    pthread_mutex_lock(&o->lock);
    if (ack) {
        if (pe->owed)
            pe->owed--;
        if (a->slot < o->p.max_segments && o->segs[a->slot].key == a->key && o->segs[a->slot].acks_due)
            o->segs[a->slot].acks_due--;
    } else {
        for (struct ofi_imp *im = pe->imports; im; im = im->next)
            if (im->slot == a->slot && im->key == a->key)
                atomic_store(&im->revoked, 1);
        /* sent after everything this process issued to pe before */
        ofi_send_locked(o, pe, OK_REVOKE_ACK, 0, a, sizeof *a, NULL, 0);
    }
    pthread_mutex_unlock(&o->lock);
}

netvm_status_t ofi_import_done(struct nv_link *l, struct nv_rdesc *d)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(d->peer);
    if (!pe)
        return NETVM_ERR_PEER;
    struct ofi_imp *im = calloc(1, sizeof *im);
    if (!im)
        return NETVM_ERR_NOMEM;
    im->slot = d->slot;
    im->key = d->key;
    pthread_mutex_lock(&o->lock);
    im->next = pe->imports;
    if (pe->imports)
        pe->imports->prev = im;
    pe->imports = im;
    pthread_mutex_unlock(&o->lock);
    d->link_priv = im;
    if (o->native_amo)
        d->flags |= NV_RDESC_ATOMIC_BASIC;
    return NETVM_OK;
}

void ofi_release(struct nv_link *l, struct nv_rdesc *d)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_imp *im = d->link_priv;
    struct ofi_peer *pe = opeer_of(d->peer);
    if (!im)
        return;
    pthread_mutex_lock(&o->lock);
    if (im->prev)
        im->prev->next = im->next;
    else if (pe && pe->imports == im)
        pe->imports = im->next;
    if (im->next)
        im->next->prev = im->prev;
    pthread_mutex_unlock(&o->lock);
    d->link_priv = NULL;
    free(im);
}

static netvm_status_t usable(const struct nv_rdesc *d, struct ofi_peer *pe)
{
    if (!pe || atomic_load(&pe->dead))
        return NETVM_ERR_PEER;
    const struct ofi_imp *im = d->link_priv;
    if (!im || atomic_load(&im->revoked))
        return NETVM_ERR_REVOKED;
    return NETVM_OK;
}

/* usable() looked without the lock; OK_REVOKE_ACK leaves under it
 * (ofi_revoke_rx), so an access posted after that answer would reach a key
 * the target is closing (a stalled connection on tcp). Looked at again
 * under the lock, at every attempt to post. */
static int revoked_locked(const struct nv_rdesc *d)
{
    const struct ofi_imp *im = d->link_priv;
    return !im || atomic_load(&im->revoked);
}

/* The posts of an access (the caller holds the lock): 0 if it may be
 * posted, else what posting would have said. A peer found gone (its
 * address removed) is never named again. */
static ssize_t post_refused(const struct nv_rdesc *d, const struct ofi_peer *pe)
{
    return revoked_locked(d) ? -FI_ECANCELED : pe->av_gone ? -FI_EAGAIN : 0;
}

/* After a post said rc: 1 if it is to be tried again, after progress
 * (the queue was full, the peer lives, not for NETVM_TIMEOUT already:
 * *since); the lock is held again then. */
static int post_again(struct ofi_link *o, struct ofi_peer *pe, ssize_t rc, uint64_t *since)
{
    if (rc != -FI_EAGAIN || atomic_load(&pe->dead) || ofi_refused_too_long(o, pe, since))
        return 0;
    pthread_mutex_unlock(&o->lock);
    ofi_progress(o);
    pthread_mutex_lock(&o->lock);
    return 1;
}

static netvm_status_t post_status(ssize_t rc)
{
    return rc == -FI_ECANCELED ? NETVM_ERR_REVOKED : rc == -FI_EAGAIN ? NETVM_ERR_PEER : ofi_status(rc);
}

/* --- the initiator ----------------------------------------------------------------------- */

static void unlink_waiting(struct ofi_link *o, struct ofi_op *op)
{
    for (struct ofi_op **pp = &o->waiting; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            return;
        }
}

/* One of op's completions arrived (st); the caller holds the lock.
 * Returns 1 when it was the last (op is then out of the waiting list). */
static int op_step(struct ofi_link *o, struct ofi_op *op, netvm_status_t st)
{
    if (st != NETVM_OK && op->st == NETVM_OK)
        op->st = st;
    if (--op->waits > 0)
        return 0;
    unlink_waiting(o, op);
    return 1;
}

static void op_finish(struct ofi_link *o, struct ofi_op *op)
{
    if (op->token)
        o->base.up.complete(o->base.up.arg, op->token, op->st);
    ofi_op_free(op);
}

/* Tell the target what it must do after this access (the caller holds the lock). */
static netvm_status_t send_access(struct ofi_link *o, struct ofi_peer *pe, const struct ofi_op *op,
                                  uint32_t flags, const struct nv_note *note, unsigned kind)
{
    struct ofi_access a = { .slot = op->slot, .flags = flags, .key = op->key, .off = op->off, .len = op->len,
                            .id = op->id };
    if (note && (note->flags & kind)) {
        a.note = kind;
        a.tag = note->tag;
    }
    if (note)
        a.gate = note->gate;
    return ofi_send_locked(o, pe, OK_ACCESS, 0, &a, sizeof a, NULL, 0);
}

void ofi_rma_done(struct ofi_link *o, struct ofi_op *op, netvm_status_t st)
{
    struct ofi_peer *pe = op->peer;
    if (st == NETVM_ERR_PEER)
        ofi_peer_failed(o, pe);
    if (op->kind == OP_READ) {
        if (st == NETVM_OK && pe && !atomic_load(&pe->dead)) {
            pthread_mutex_lock(&o->lock);
            send_access(o, pe, op, OA_READ, &op->note, NV_NOTE_RESPONDER);
            pthread_mutex_unlock(&o->lock);
        }
        op->st = st;
        op_finish(o, op);
        return;
    }
    pthread_mutex_lock(&o->lock);
    if (pe)
        pe->outstanding--;
    if (op->sync_done) {
        op->st = st;
        /* release: the waiter reads op->st after seeing this, without the lock */
        __atomic_store_n(op->sync_done, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&o->lock);
        return;   /* the waiting put frees it */
    }
    if (!op->token && !op->quiet && st != NETVM_OK && pe && pe->first_err == NETVM_OK)
        pe->first_err = st;   /* the next flush reports it */
    int last = op_step(o, op, st);
    pthread_mutex_unlock(&o->lock);
    if (last)
        op_finish(o, op);
}

void ofi_take_ack(struct ofi_link *o, const struct ofi_access *a)
{
    pthread_mutex_lock(&o->lock);
    struct ofi_op *op = o->waiting;
    while (op && !((op->kind == OP_WRITE || op->kind == OP_FLUSH) && op->id == a->id))
        op = op->next;
    int last = 0;
    if (op) {
        if (op->kind == OP_FLUSH && op->peer) {
            op->st = op->peer->first_err;
            op->peer->first_err = NETVM_OK;
        }
        last = op_step(o, op, (netvm_status_t)a->status);
    }
    pthread_mutex_unlock(&o->lock);
    if (last)
        op_finish(o, op);
}

/* Where an access to off lands, as the registration it names wants it:
 * the virtual address (FI_MR_VIRT_ADDR), else the offset from the
 * registration's start, which lies mr_off into the segment (a bucket's
 * registration; 0 for the whole segment's; modulo 2^64, since a bucket's
 * first page may begin before the segment) */
static uint64_t raddr(struct ofi_link *o, const struct nv_rdesc *d, uint64_t off)
{
    return o->virt_addr ? d->addr + off : off - d->mr_off;
}

/* Wait here for a put's local completion (a payload too large to copy
 * and the caller wants its buffer back at return), or an atomic's (its
 * old value to *fetched). */
static netvm_status_t wait_local(struct ofi_link *o, struct ofi_op *op, int *done, uint64_t *fetched)
{
    uint64_t until = nv_now_ns() + (uint64_t)o->p.timeout_ms * 1000000ull;
    for (unsigned passes = 0; !__atomic_load_n(done, __ATOMIC_ACQUIRE); passes++) {
        if (passes)   /* the target may need this core to progress its provider */
            nv_spin_pause(o->p.spin_yield, passes);
        ofi_progress(o);
        if (nv_now_ns() > until || atomic_load(&op->peer->dead)) {
            /* the provider still owns the op: leave it to its completion */
            pthread_mutex_lock(&o->lock);
            int d = *done;
            if (!d)
                op->sync_done = NULL;   /* its completion frees it */
            pthread_mutex_unlock(&o->lock);
            if (!d)
                return atomic_load(&op->peer->dead) ? NETVM_ERR_PEER : NETVM_ERR_TIMEOUT;
        }
    }
    netvm_status_t st = op->st;
    if (fetched)
        *fetched = op->amo[2];
    ofi_op_free(op);
    return st;
}

#define OFI_COPY_MAX (64 * 1024)   /* a put up to this returns at once: its payload is copied */

netvm_status_t ofi_put(struct nv_link *l, struct nv_rdesc *d, uint64_t off, const void *src, size_t len,
                       int remote, void *token, uint32_t id, const struct nv_note *note)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(d->peer);
    netvm_status_t ok = usable(d, pe);
    if (ok != NETVM_OK)
        return ok;
    if (remote && !token)
        return NETVM_ERR_INVAL;
    int tell = remote || (note && ((note->flags & NV_NOTE_COMPLETER) || note->gate));
    uint32_t from = pe->lp->remote_id;
    /* a plain put names its place in the remote CQ data, if it fits */
    int data = !tell && ofi_cqd_fits(from, d->slot, off, len);
    struct ofi_op *op = ofi_op_new(o, OP_WRITE, pe);
    if (!op)
        return NETVM_ERR_NOMEM;
    op->slot = d->slot;
    op->key = d->key;
    op->off = off;
    op->len = len;
    op->id = id;
    op->waits = 1;
    op->quiet = !remote && note && (note->flags & NV_NOTE_QUIET);
    int done = 0;
    const void *from_buf = src;
    uint64_t flags = FI_COMPLETION;
    if (remote) {
        op->token = token;
        op->waits = 2;   /* the write and the target's answer */
    }
    if (len <= o->inject) {
        flags |= FI_INJECT;
    } else if (len <= OFI_COPY_MAX) {
        if (!(op->buf = malloc(len))) {
            ofi_op_free(op);
            return NETVM_ERR_NOMEM;
        }
        memcpy(op->buf, src, len);
        from_buf = op->buf;
    } else if (!remote) {
        op->sync_done = &done;   /* the caller's buffer is in use until the write completes */
    }
    if (data)
        flags |= FI_REMOTE_CQ_DATA;
    void *desc = NULL;
    if (!(flags & FI_INJECT) && ofi_local_desc(o, op, from_buf, len, &desc) != NETVM_OK) {
        ofi_op_free(op);
        return NETVM_ERR_NOMEM;
    }
    struct iovec iov = { .iov_base = (void *)from_buf, .iov_len = len };
    struct fi_rma_iov riov = { .addr = raddr(o, d, off), .len = len, .key = d->mr_key };
    int sync = op->sync_done != NULL;   /* op may be gone once posted, unless sync */
    struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = pe->fa, .rma_iov = &riov,
                              .rma_iov_count = 1, .context = &op->fctx,
                              .data = data ? ofi_cqd(from, d->slot, off, len) : 0 };
    pthread_mutex_lock(&o->lock);
    ssize_t rc;
    uint64_t since = 0;
    do
        if (!(rc = post_refused(d, pe)))
            rc = fi_writemsg(o->ep, &msg, flags);
    while (post_again(o, pe, rc, &since));
    netvm_status_t st = post_status(rc);
    if (st == NETVM_OK) {
        pe->outstanding++;
        if (remote) {
            op->next = o->waiting;
            o->waiting = op;
        }
        if (tell || !data) {
            netvm_status_t s2 = send_access(o, pe, op, OA_WRITE | (remote ? OA_ACK : 0), note, NV_NOTE_COMPLETER);
            if (s2 != NETVM_OK && remote) {
                /* no answer will come: the write's completion ends it */
                op->st = s2;
                op->waits--;
            }
        }
    }
    pthread_mutex_unlock(&o->lock);
    if (st != NETVM_OK) {
        ofi_op_free(op);
        return st;
    }
    if (sync)
        return wait_local(o, op, &done, NULL);
    return remote ? NV_LINK_PENDING : NETVM_OK;
}

netvm_status_t ofi_get(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *dst, size_t len, void *token,
                       uint32_t id, const struct nv_note *note)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(d->peer);
    netvm_status_t ok = usable(d, pe);
    if (ok != NETVM_OK)
        return ok;
    if (!token)
        return NETVM_ERR_INVAL;
    struct ofi_op *op = ofi_op_new(o, OP_READ, pe);
    if (!op)
        return NETVM_ERR_NOMEM;
    op->token = token;
    op->id = id;
    op->slot = d->slot;
    op->key = d->key;
    op->off = off;
    op->len = len;
    if (note)
        op->note = *note;
    void *desc;
    if (ofi_local_desc(o, op, dst, len, &desc) != NETVM_OK) {
        ofi_op_free(op);
        return NETVM_ERR_NOMEM;
    }
    pthread_mutex_lock(&o->lock);
    ssize_t rc;
    uint64_t since = 0;
    do
        if (!(rc = post_refused(d, pe)))
            rc = fi_read(o->ep, dst, len, desc, pe->fa, raddr(o, d, off), d->mr_key, &op->fctx);
    while (post_again(o, pe, rc, &since));
    pthread_mutex_unlock(&o->lock);
    if (rc) {
        ofi_op_free(op);
        return post_status(rc);
    }
    return NV_LINK_PENDING;
}

netvm_status_t ofi_flush(struct nv_link *l, struct nv_lpeer *lp, void *token, uint32_t id)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(lp);
    if (!pe || atomic_load(&pe->dead))
        return NETVM_ERR_PEER;
    struct ofi_op *op = ofi_op_new(o, OP_FLUSH, pe);
    if (!op)
        return NETVM_ERR_NOMEM;
    op->token = token;
    op->id = id;
    op->waits = 1;
    struct ofi_access a = { .id = id };
    pthread_mutex_lock(&o->lock);
    op->next = o->waiting;
    o->waiting = op;
    netvm_status_t st = ofi_send_locked(o, pe, OK_FLUSH, 0, &a, sizeof a, NULL, 0);
    if (st != NETVM_OK)
        unlink_waiting(o, op);
    pthread_mutex_unlock(&o->lock);
    if (st != NETVM_OK) {
        ofi_op_free(op);
        return st;
    }
    return NV_LINK_PENDING;
}

/* A native atomic in the provider's fetching form (FI_SUM, FI_ATOMIC_WRITE
 * for a swap, FI_CSWAP), an add too: its completion then means the target
 * applied it, and netvm's blocking calls return at remote completion. Then
 * an OK_ACCESS for the target's tripwires and notification. */
netvm_status_t ofi_atomic(struct nv_link *l, struct nv_rdesc *d, uint64_t off, netvm_atomic_op_t aop,
                          uint64_t operand, uint64_t compare, uint64_t *result, const struct nv_note *note)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(d->peer);
    netvm_status_t ok = usable(d, pe);
    if (ok != NETVM_OK)
        return ok;
    enum fi_op fop;
    switch (aop) {
    case NETVM_AOP_ADD:
    case NETVM_AOP_FADD:  fop = FI_SUM; break;
    case NETVM_AOP_SWAP:  fop = FI_ATOMIC_WRITE; break;
    case NETVM_AOP_CSWAP: fop = FI_CSWAP; break;
    default:              return NETVM_ERR_INVAL;   /* FCAA: core's (NV_RDESC_ATOMIC_BASIC) */
    }
    struct ofi_op *op = ofi_op_new(o, OP_ATOMIC, pe);
    if (!op)
        return NETVM_ERR_NOMEM;
    op->slot = d->slot;
    op->key = d->key;
    op->off = off;
    op->len = 8;
    op->waits = 1;
    op->amo[0] = operand;
    op->amo[1] = compare;
    int done = 0;
    op->sync_done = &done;
    void *desc;
    if (ofi_local_desc(o, op, op->amo, sizeof op->amo, &desc) != NETVM_OK) {
        ofi_op_free(op);
        return NETVM_ERR_NOMEM;
    }
    uint64_t at = raddr(o, d, off);
    pthread_mutex_lock(&o->lock);
    ssize_t rc;
    uint64_t since = 0;
    do {
        if ((rc = post_refused(d, pe)))
            break;
        if (fop == FI_CSWAP)
            rc = fi_compare_atomic(o->ep, &op->amo[0], 1, desc, &op->amo[1], desc, &op->amo[2], desc, pe->fa, at,
                                   d->mr_key, FI_UINT64, fop, &op->fctx);
        else
            rc = fi_fetch_atomic(o->ep, &op->amo[0], 1, desc, &op->amo[2], desc, pe->fa, at, d->mr_key, FI_UINT64,
                                 fop, &op->fctx);
    } while (post_again(o, pe, rc, &since));
    if (rc == 0)
        pe->outstanding++;
    pthread_mutex_unlock(&o->lock);
    if (rc) {
        ofi_op_free(op);
        return post_status(rc);
    }
    netvm_status_t st = wait_local(o, op, &done, result);
    if (st != NETVM_OK)
        return st;
    struct ofi_op acc = { .slot = d->slot, .key = d->key, .off = off, .len = 8 };
    pthread_mutex_lock(&o->lock);
    if (!atomic_load(&pe->dead))
        send_access(o, pe, &acc, OA_READ | OA_WRITE, note, NV_NOTE_COMPLETER);
    pthread_mutex_unlock(&o->lock);
    return NETVM_OK;
}

/* --- the target ------------------------------------------------------------------------------ */

static void gate_fail(struct ofi_peer *pe, uint32_t gate, netvm_status_t st)
{
    for (uint32_t i = 0; i < pe->gate_n; i++)
        if (pe->gate_id[i] == gate)
            return;   /* a split put fails piece by piece */
    if (pe->gate_n < OFI_GATES) {
        pe->gate_id[pe->gate_n] = gate;
        pe->gate_st[pe->gate_n++] = st;
    }
}

int ofi_gate_failed(struct nv_link *l, struct nv_lpeer *lp, uint32_t gate, netvm_status_t *st)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(lp);
    int found = 0;
    if (!pe)
        return 0;
    pthread_mutex_lock(&o->lock);
    for (uint32_t i = 0; i < pe->gate_n && !found; i++)
        if (pe->gate_id[i] == gate) {
            *st = pe->gate_st[i];
            pe->gate_id[i] = pe->gate_id[pe->gate_n - 1];
            pe->gate_st[i] = pe->gate_st[pe->gate_n - 1];
            pe->gate_n--;
            found = 1;
        }
    pthread_mutex_unlock(&o->lock);
    return found;
}

static void fire(struct ofi_link *o, int src, uint64_t addr, uint64_t len, unsigned access, unsigned note,
                 uint64_t tag)
{
    struct nv_ep *ep = o->p.ep;
    if (!ep)
        return;
    nv_ep_access(ep, src, addr, len, access);
    if (note) {
        struct nv_ep_rec r = { .type = note == NV_NOTE_RESPONDER ? NETVM_EV_RESPONDER : NETVM_EV_COMPLETER,
                               .access = (uint16_t)access, .rank = src, .value = tag, .addr = addr, .len = len };
        nv_ep_post(ep, &r);
    }
}

void ofi_serve_access(struct ofi_link *o, struct ofi_peer *pe, const struct ofi_access *a)
{
    int write = (a->flags & OA_WRITE) != 0, both = write && (a->flags & OA_READ);
    uint64_t addr = 0;
    /* both: a native atomic, which reads and writes */
    netvm_status_t st = o->base.up.translate(o->base.up.arg, a->slot, a->key, a->off, a->len,
                                             both ? NETVM_ATOMIC : write ? NETVM_WRITE : NETVM_READ, &addr);
    if (st == NETVM_OK)
        fire(o, pe->lp->id, addr, a->len, both ? NETVM_TRIP_RW : write ? NETVM_TRIP_WRITE : NETVM_TRIP_READ,
             a->note, a->tag);
    pthread_mutex_lock(&o->lock);
    if (st != NETVM_OK && a->gate)
        gate_fail(pe, a->gate, st);
    if (a->flags & OA_ACK) {
        struct ofi_access ack = { .id = a->id, .status = (int32_t)st };
        ofi_send_locked(o, pe, OK_ACK, 0, &ack, sizeof ack, NULL, 0);
    }
    pthread_mutex_unlock(&o->lock);
}

void ofi_rx_data(struct ofi_link *o, uint64_t data, size_t cq_len)
{
    (void)cq_len;   /* not every provider fills it in */
    uint32_t from = (uint32_t)(data >> 52), slot = (uint32_t)(data >> 40) & ((1u << OFI_CQD_SLOT_BITS) - 1);
    uint64_t off = (data >> 16) & ((1ull << OFI_CQD_OFF_BITS) - 1), len = data & 0xffff;
    if (!o->p.ep || !nv_ep_has_trips(o->p.ep) || slot >= o->p.max_segments)
        return;
    pthread_mutex_lock(&o->lock);
    struct ofi_seg s = o->segs[slot];
    pthread_mutex_unlock(&o->lock);
    if (!s.live || off + len > s.len)
        return;
    struct nv_lpeer *lp = o->base.up.peer_ref(o->base.up.arg, from);
    if (!lp)
        return;
    fire(o, lp->id, s.base + off, len, NETVM_TRIP_WRITE, 0, 0);
    o->base.up.peer_unref(o->base.up.arg, lp);
}
