/* svc/sync: what a home does for its objects' waiters: the semaphore's
 * queue (FIFO once anyone queues), wait queues and monitor conditions,
 * and barrier rounds. Every operation is applied under the state's lock
 * and answered at once; the wakes it makes are queued and sent after. */
#include "svc/sync/sync_int.h"

#include <stdlib.h>

static void fifo_push(struct nv_sync_fifo *q, struct nv_sync_waiter *w)
{
    w->next = NULL;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    q->n++;
}

static uint64_t fifo_pop(struct nv_sync_fifo *q)
{
    struct nv_sync_waiter *w = q->head;
    q->head = w->next;
    if (!q->head)
        q->tail = NULL;
    q->n--;
    uint64_t ref = w->ref;
    free(w);
    return ref;
}

static void push(struct nv_sync_state *st, uint64_t ref, uint64_t succ, netvm_status_t status,
                 const struct nv_sync_home *sem)
{
    struct nv_sync_pending *p = malloc(sizeof *p);
    if (!p)
        return;   /* the waiter's own checks end its wait (NETVM_SYNC_CHECK_MS) only if the home dies: rare */
    p->ref = ref;
    p->succ = succ;
    p->status = status;
    p->sem_id = sem ? sem->id : UINT32_MAX;
    p->sem_key = sem ? sem->key : 0;
    p->next = NULL;
    if (st->pending_tail)
        st->pending_tail->next = p;
    else
        st->pending = p;
    st->pending_tail = p;
}

static void push_wake(struct nv_sync_state *st, uint64_t ref, netvm_status_t status, const struct nv_sync_home *sem)
{
    push(st, ref, 0, status, sem);
}

static struct nv_sync_home *find(struct nv_sync_state *st, uint64_t id, uint64_t key)
{
    if (id >= st->nhomes || !st->homes[id] || st->homes[id]->key != key)
        return NULL;
    return st->homes[id];
}

/* --- semaphore ---------------------------------------------------------------- */

static _Atomic uint64_t *sem_word(struct nv_sync_home *o) { return (_Atomic uint64_t *)(o->words + NV_SYNC_W_SEM / 8); }

/* Take a unit if one is free, whatever the queued flag says. */
static int sem_take(struct nv_sync_home *o)
{
    _Atomic uint64_t *w = sem_word(o);
    uint64_t v = atomic_load(w);
    while ((v & ~NV_SYNC_SEM_QUEUED) < NV_SYNC_SEM_K)
        if (atomic_compare_exchange_weak(w, &v, v + 1))
            return 1;
    return 0;
}

/* Hand free units to the queue in order; with nobody left, let wait's
 * fast path work again. */
static void sem_serve(struct nv_sync_state *st, struct nv_sync_home *o)
{
    struct nv_sync_fifo *q = &o->q[0];
    while (q->n && sem_take(o))
        push_wake(st, fifo_pop(q), NETVM_OK, o);
    if (!q->n)
        atomic_fetch_and(sem_word(o), ~NV_SYNC_SEM_QUEUED);
}

static netvm_status_t enqueue(struct nv_sync_fifo *q, uint64_t ref)
{
    struct nv_sync_waiter *w = malloc(sizeof *w);
    if (!w)
        return NETVM_ERR_NOMEM;
    w->ref = ref;
    fifo_push(q, w);
    return NETVM_OK;
}

static netvm_status_t sem_wait(struct nv_sync_state *st, struct nv_sync_home *o, uint64_t ref, uint64_t *granted)
{
    /* raise the flag first: a post from now on sends a kick, and one
     * that came before left its unit for sem_take below */
    atomic_fetch_or(sem_word(o), NV_SYNC_SEM_QUEUED);
    if (o->q[0].n == 0 && sem_take(o)) {
        atomic_fetch_and(sem_word(o), ~NV_SYNC_SEM_QUEUED);
        *granted = 1;
        return NETVM_OK;
    }
    *granted = 0;
    netvm_status_t s = enqueue(&o->q[0], ref);
    sem_serve(st, o);
    return s;
}

/* --- the operations ------------------------------------------------------------ */

static int is_member(const struct nv_sync_home *o, int peer)
{
    for (unsigned i = 0; i < o->nmembers; i++)
        if (o->members[i] == peer)
            return 1;
    return 0;
}

netvm_status_t nv_sync_home_op(struct nv_sync_state *st, int from, const uint64_t *a, uint64_t *out,
                               unsigned *nout)
{
    unsigned op = (unsigned)a[0];
    uint64_t ref = a[3], arg = a[4];
    struct nv_sync_home *o = find(st, a[1], a[2]);
    *nout = 0;
    if (!o)
        return NETVM_ERR_REVOKED;
    if (ref && (nv_sync_ref_peer(ref) != from || nv_sync_ref_ticket(ref) == 0))
        return NETVM_ERR_INVAL;   /* one wakes only oneself */
    switch (op) {
    case NV_SYNC_OP_SEM_WAIT:
        if (o->kind != NV_SYNC_SEM || !ref)
            return NETVM_ERR_INVAL;
        *nout = 1;
        return sem_wait(st, o, ref, &out[0]);
    case NV_SYNC_OP_SEM_KICK:
        if (o->kind != NV_SYNC_SEM)
            return NETVM_ERR_INVAL;
        sem_serve(st, o);
        return NETVM_OK;
    case NV_SYNC_OP_WQ_WAIT:
        if ((o->kind != NV_SYNC_WAITQ && o->kind != NV_SYNC_MONITOR) || arg >= o->nq || !ref)
            return NETVM_ERR_INVAL;
        return enqueue(&o->q[arg], ref);
    case NV_SYNC_OP_WQ_SIGNAL:
    case NV_SYNC_OP_WQ_BROADCAST: {
        if ((o->kind != NV_SYNC_WAITQ && o->kind != NV_SYNC_MONITOR) || arg >= o->nq)
            return NETVM_ERR_INVAL;
        struct nv_sync_fifo *q = &o->q[arg];
        unsigned n = 0;
        while (q->n && (op == NV_SYNC_OP_WQ_BROADCAST || n == 0)) {
            push_wake(st, fifo_pop(q), NETVM_OK, NULL);
            n++;
        }
        out[0] = n;
        *nout = 1;
        return NETVM_OK;
    }
    case NV_SYNC_OP_BAR_ARRIVE: {
        if (o->kind != NV_SYNC_BARRIER || !ref)
            return NETVM_ERR_INVAL;
        if (!is_member(o, from))
            return NETVM_ERR_RANK;
        *nout = 1;
        if (++o->arrived < o->nmembers) {
            out[0] = 0;
            return enqueue(&o->q[0], ref);
        }
        /* the last arrival: everyone goes, it by the answer itself */
        o->arrived = 0;
        while (o->q[0].n)
            push_wake(st, fifo_pop(&o->q[0]), NETVM_OK, NULL);
        out[0] = 1;
        return NETVM_OK;
    }
    case NV_SYNC_OP_MCS_ENQ: {
        /* The acquire of a queue lock whose words the acquirer does not
         * map (lock.c): the swap is made here and the link to the
         * predecessor sent from here, so the acquirer waits for one
         * answer and sends no link; a predecessor that lives at the home
         * (a lock handed between the home and one other) is linked with
         * no message at all. A broken mark goes back at once: the
         * acquirer fails, and whoever swaps next sees the broken word. */
        if ((o->kind != NV_SYNC_LOCK && o->kind != NV_SYNC_RWLOCK && o->kind != NV_SYNC_MONITOR) || !ref)
            return NETVM_ERR_INVAL;
        _Atomic uint64_t *tail = (_Atomic uint64_t *)(o->words + NV_SYNC_W_TAIL / 8);
        uint64_t pred = atomic_exchange(tail, ref);
        if (pred == NV_SYNC_BROKEN)
            atomic_exchange(tail, NV_SYNC_BROKEN);
        else if (pred)
            push(st, pred, ref, NETVM_OK, NULL);
        out[0] = pred;
        *nout = 1;
        return NETVM_OK;
    }
    default:
        return NETVM_ERR_INVAL;
    }
}

void nv_sync_home_drop(struct nv_sync_state *st, struct nv_sync_home *o)
{
    for (unsigned i = 0; i < o->nq; i++)
        while (o->q[i].n)
            push_wake(st, fifo_pop(&o->q[i]), NETVM_ERR_REVOKED, NULL);
    free(o->q);
    free(o->members);
    free(o);
}

void nv_sync_flush_pending(struct nv_sync_state *st)
{
    for (;;) {
        pthread_mutex_lock(&st->lock);
        struct nv_sync_pending *p = st->pending;
        if (p) {
            st->pending = p->next;
            if (!st->pending)
                st->pending_tail = NULL;
        }
        pthread_mutex_unlock(&st->lock);
        if (!p)
            return;
        /* a link that cannot be delivered (the predecessor died) is
         * dropped: its successor watches the predecessor and breaks the
         * lock (lock.c) */
        netvm_status_t s = p->succ ? nv_sync_send_link(st, p->ref, p->succ) : nv_sync_send_wake(st, p->ref, p->status);
        if (s == NETVM_ERR_AGAIN) {
            /* out of credit inside a handler: back to the front, the
             * deferred message retries */
            pthread_mutex_lock(&st->lock);
            p->next = st->pending;
            st->pending = p;
            if (!st->pending_tail)
                st->pending_tail = p;
            pthread_mutex_unlock(&st->lock);
            return;
        }
        if (s != NETVM_OK && p->sem_id != UINT32_MAX) {
            /* the waiter is gone: its unit goes back, to the next one */
            pthread_mutex_lock(&st->lock);
            struct nv_sync_home *o = find(st, p->sem_id, p->sem_key);
            if (o) {
                atomic_fetch_sub(sem_word(o), 1);
                sem_serve(st, o);
            }
            pthread_mutex_unlock(&st->lock);
        }
        free(p);
    }
}
