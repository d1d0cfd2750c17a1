/* Bad arguments and wrong states: NULL handles and outputs, bad names,
 * an object that does not exist or is of another kind, a name taken
 * twice, out-of-range counts, releasing what one does not hold, a
 * blocking sync call inside an active-message handler (NETVM_ERR_STATE),
 * and a home that closes its object while a peer waits on it (the waiter
 * gets NETVM_ERR_REVOKED, later calls too). */
#include "sync_test.h"

static netvm_lock_t *in_handler_lock;
static _Atomic int handler_st = -1;

static int on_msg(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)m;
    (void)arg;
    atomic_store(&handler_st, (int)netvm_lock_acquire(in_handler_lock));
    return NETVM_AM_DONE;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx), n = netvm_size(ctx);
    CHECK(n == 2);
    netvm_lock_t *l = NULL;
    char longname[NETVM_SYNC_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;

    CHECK_ST(netvm_lock_create(NULL, "a", &l), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_create(ctx, NULL, &l), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_create(ctx, "", &l), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_create(ctx, longname, &l), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_create(ctx, "a", NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_acquire(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_release(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_close(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rwlock_rdlock(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rwlock_wrlock(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_sem_post(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_sem_wait(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_waitq_signal(NULL, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_monitor_enter(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_gbarrier_wait(NULL), NETVM_ERR_INVAL);
    netvm_sem_t *s;
    CHECK_ST(netvm_sem_create(ctx, "s", 1ull << 62, &s), NETVM_ERR_INVAL);
    netvm_monitor_t *mon;
    CHECK_ST(netvm_monitor_create(ctx, "m", 0, &mon), NETVM_ERR_INVAL);
    CHECK_ST(netvm_monitor_create(ctx, "m", 65, &mon), NETVM_ERR_INVAL);
    netvm_gbarrier_t *b;
    int dup[2] = { 0, 0 }, neg[2] = { 0, -1 };
    CHECK_ST(netvm_gbarrier_create(ctx, "b", dup, 2, &b), NETVM_ERR_INVAL);
    CHECK_ST(netvm_gbarrier_create(ctx, "b", neg, 2, &b), NETVM_ERR_INVAL);
    CHECK_ST(netvm_gbarrier_create(ctx, "b", dup, 0, &b), NETVM_ERR_INVAL);

    /* rank 0 is the home of everything */
    netvm_waitq_t *wq;
    if (me == 0) {
        CHECK_OK(netvm_lock_create(ctx, "L", &l));
        CHECK_ST(netvm_lock_create(ctx, "L", &in_handler_lock), NETVM_ERR_EXISTS);
        CHECK_OK(netvm_monitor_create(ctx, "M", 2, &mon));
        CHECK_OK(netvm_waitq_create(ctx, "Q", &wq));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (me == 1) {
        CHECK_ST(netvm_lock_open(ctx, 0, "nope", &l), NETVM_ERR_NOTFOUND);
        netvm_sem_t *wrong;
        CHECK_ST(netvm_sem_open(ctx, 0, "L", &wrong), NETVM_ERR_INVAL);
        CHECK_ST(netvm_lock_open(ctx, 7, "L", &l), NETVM_ERR_RANK);
        CHECK_OK(netvm_lock_open(ctx, 0, "L", &l));
        CHECK_OK(netvm_monitor_open(ctx, 0, "M", &mon));
        CHECK_OK(netvm_waitq_open(ctx, 0, "Q", &wq));
    }
    /* a handle of one kind passed as another */
    CHECK_ST(netvm_sem_post((netvm_sem_t *)l), NETVM_ERR_INVAL);
    CHECK_ST(netvm_lock_release(l), NETVM_ERR_STATE);
    CHECK_ST(netvm_monitor_exit(mon), NETVM_ERR_STATE);
    CHECK_ST(netvm_monitor_wait(mon, 0), NETVM_ERR_STATE);
    CHECK_OK(netvm_monitor_enter(mon));
    CHECK_ST(netvm_monitor_wait(mon, 64), NETVM_ERR_INVAL);
    CHECK_ST(netvm_monitor_signal(mon, 2, NULL), NETVM_ERR_INVAL);   /* it has 2 conditions */
    CHECK_OK(netvm_monitor_exit(mon));

    /* inside a handler: NETVM_ERR_STATE, nothing blocks */
    in_handler_lock = l;
    CHECK_OK(netvm_am_register(ctx, 1, on_msg, NULL));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_am_send(ctx, 1 - me, 1, NULL, 0, NULL, 0, NULL));
    while (atomic_load(&handler_st) < 0)
        netvm_progress(ctx);
    CHECK(atomic_load(&handler_st) == NETVM_ERR_STATE);
    CHECK_OK(netvm_barrier(ctx));

    /* the home closes a queue a peer waits on */
    if (me == 1) {
        CHECK_ST(netvm_waitq_wait(wq), NETVM_ERR_REVOKED);
        CHECK_ST(netvm_waitq_signal(wq, NULL), NETVM_ERR_REVOKED);
        CHECK(netvm_lock_acquire(l) != NETVM_OK);   /* its segment is gone */
    } else {
        for (;;) {
            pthread_mutex_lock(&wq->h.st->lock);
            unsigned q = wq->h.owned->q[0].n;
            pthread_mutex_unlock(&wq->h.st->lock);
            if (q)
                break;
            sched_yield();
        }
        CHECK_OK(netvm_lock_close(l));   /* first: the waiter tries it once woken */
        CHECK_OK(netvm_waitq_close(wq));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (me == 1) {
        CHECK_OK(netvm_waitq_close(wq));
        CHECK_OK(netvm_lock_close(l));
    }
    CHECK_OK(netvm_monitor_close(mon));
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
