/* Bad arguments to the events API return the documented error, and a
 * failing put with signal leaves the target untouched; the comparisons of
 * netvm_wait_until. Two ranks, each the other's target. */
#include "evt.h"

#include <sys/mman.h>

#define LEN 4096

static netvm_ctx_t *ctx;
static int peer;
static evbuf_t eb;

/* The status of an operation with NETVM_F_NOTIFY_REQUESTER: at once, or in its event. */
static netvm_status_t req_status(netvm_status_t st, uint64_t tag)
{
    if (st != NETVM_OK)
        return st;
    netvm_event_t e;
    double t0 = now_s();
    while ((st = evbuf_next(ctx, &eb, &e, 1000)) == NETVM_ERR_TIMEOUT)
        CHECK(now_s() - t0 < 10);
    CHECK_OK(st);
    if (e.type != NETVM_EV_REQUESTER || e.value != tag || e.rank != peer) {
        ev_print("unexpected", &e);
        FAILF("wanted the requester event of tag %#" PRIx64, tag);
    }
    return (netvm_status_t)e.status;
}

int main(void)
{
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size == 2);
    peer = 1 - rank;
    static uint8_t rw[LEN] __attribute__((aligned(64))), ro[LEN], rwna[LEN];
    memset(rw, 0xAA, LEN);
    netvm_seg_t *s1, *s2, *s3;
    CHECK_OK(netvm_export(ctx, rw, LEN, NETVM_RWA, "rw", &s1));
    CHECK_OK(netvm_export(ctx, ro, LEN, NETVM_READ, "ro", &s2));
    CHECK_OK(netvm_export(ctx, rwna, LEN, NETVM_RW, "rw-no-atomic", &s3));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r_rw, *r_ro, *r_rwna;
    CHECK_OK(netvm_import(ctx, peer, "rw", &r_rw));
    CHECK_OK(netvm_import(ctx, peer, "ro", &r_ro));
    CHECK_OK(netvm_import(ctx, peer, "rw-no-atomic", &r_rwna));

    netvm_event_t ev;
    int n = 0;
    uint8_t buf[64];
    memset(buf, 0x55, sizeof buf);
    uint64_t res, f;

    /* the event queue */
    CHECK(netvm_evq_poll(NULL, &ev, 1) == -1);
    CHECK(netvm_evq_poll(ctx, NULL, 1) == -1);
    CHECK_ST(netvm_evq_wait(NULL, &ev, 1, &n, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_evq_wait(ctx, NULL, 1, &n, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_evq_wait(ctx, &ev, 1, NULL, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_evq_arm(NULL), NETVM_ERR_INVAL);

    /* local tripwires */
    netvm_tripwire_t *tw = NULL;
    CHECK_ST(netvm_tripwire_arm(NULL, rw, 8, NETVM_TRIP_WRITE, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm(ctx, NULL, 8, NETVM_TRIP_WRITE, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm(ctx, rw, 0, NETVM_TRIP_WRITE, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm(ctx, rw, 8, NETVM_TRIP_WRITE, 0, NULL, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm(ctx, rw, 8, NETVM_TRIP_WRITE | 0x100, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_disarm(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_test(NULL, &f), NETVM_ERR_INVAL);
    CHECK_OK(netvm_tripwire_arm(ctx, rw, 8, NETVM_TRIP_WRITE, 0, NULL, &tw));
    CHECK_ST(netvm_tripwire_test(tw, NULL), NETVM_ERR_INVAL);
    CHECK_OK(netvm_tripwire_test(tw, &f));
    CHECK(f == 0);
    CHECK_OK(netvm_tripwire_disarm(tw));

    /* remote tripwires: write rights, bounds, flags */
    CHECK_ST(netvm_tripwire_arm_remote(ctx, r_ro, 0, 8, NETVM_TRIP_WRITE, 0, NULL, &tw), NETVM_ERR_RIGHTS);
    CHECK_ST(netvm_tripwire_arm_remote(ctx, r_rw, LEN - 4, 8, NETVM_TRIP_WRITE, 0, NULL, &tw), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_tripwire_arm_remote(ctx, r_rw, 0, 8, NETVM_TRIP_READ, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm_remote(ctx, r_rw, 0, 8, NETVM_TRIP_WRITE | 0x100, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm_remote(ctx, NULL, 0, 8, NETVM_TRIP_WRITE, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm_remote(ctx, r_rw, 0, 0, NETVM_TRIP_WRITE, 0, NULL, &tw), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripwire_arm_remote(ctx, r_rw, 0, 8, NETVM_TRIP_WRITE, 0, NULL, NULL), NETVM_ERR_INVAL);

    /* tripsets */
    netvm_tripset_t *set;
    CHECK_ST(netvm_tripset_create(NULL, &set), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripset_create(ctx, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripset_wait(NULL, &ev, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripset_destroy(NULL), NETVM_ERR_INVAL);
    CHECK_OK(netvm_tripset_create(ctx, &set));
    CHECK_ST(netvm_tripset_wait(set, NULL, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_tripset_wait(set, &ev, 0), NETVM_ERR_TIMEOUT);
    CHECK_OK(netvm_tripset_destroy(set));

    /* notifications */
    CHECK_ST(netvm_put_notify(ctx, r_rw, 0, buf, 8, 0x10000, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_put_notify(ctx, NULL, 0, buf, 8, NETVM_F_NOTIFY_REQUESTER, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_put_notify(NULL, r_rw, 0, buf, 8, NETVM_F_NOTIFY_REQUESTER, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_get_notify(ctx, buf, r_rw, 0, 8, 0, 1), NETVM_ERR_INVAL);   /* result would be lost */
    CHECK_ST(netvm_get_notify(ctx, buf, r_rw, 0, 8, NETVM_F_NOTIFY_RESPONDER, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_get_notify(ctx, NULL, r_rw, 0, 8, NETVM_F_NOTIFY_REQUESTER, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_get_notify(ctx, buf, NULL, 0, 8, NETVM_F_NOTIFY_REQUESTER, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_atomic_notify(ctx, r_rw, 0, NETVM_AOP_FADD, 1, 0, &res, 0, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_atomic_notify(ctx, r_rw, 4, NETVM_AOP_FADD, 1, 0, &res, NETVM_F_NOTIFY_REQUESTER, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_atomic_notify(ctx, r_rw, 0, (netvm_atomic_op_t)99, 1, 0, &res, NETVM_F_NOTIFY_REQUESTER, 1),
             NETVM_ERR_INVAL);
    /* rights and bounds: at once or in the requester event */
    CHECK_ST(req_status(netvm_put_notify(ctx, r_ro, 0, buf, 8, NETVM_F_NOTIFY_REQUESTER, 2), 2), NETVM_ERR_RIGHTS);
    CHECK_ST(req_status(netvm_atomic_notify(ctx, r_rwna, 0, NETVM_AOP_FADD, 1, 0, &res, NETVM_F_NOTIFY_REQUESTER, 3), 3),
             NETVM_ERR_RIGHTS);
    CHECK_ST(req_status(netvm_put_notify(ctx, r_rw, LEN - 4, buf, 8, NETVM_F_NOTIFY_REQUESTER, 4), 4), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_notify(ctx, size, 1), NETVM_ERR_RANK);
    CHECK_ST(netvm_notify(ctx, -1, 1), NETVM_ERR_RANK);
    CHECK_ST(netvm_notify(NULL, peer, 1), NETVM_ERR_INVAL);

    /* counters */
    CHECK_ST(netvm_counter_add(ctx, peer, UINT32_MAX, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_counter_add(ctx, peer, 1u << 31, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_counter_add(ctx, size, 0, 1), NETVM_ERR_RANK);
    CHECK_ST(netvm_counter_add(ctx, -1, 0, 1), NETVM_ERR_RANK);
    CHECK_ST(netvm_counter_add(NULL, peer, 0, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_counter_arm(ctx, UINT32_MAX, NULL, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_counter_arm(NULL, 0, NULL, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_counter_ack(ctx, UINT32_MAX), NETVM_ERR_INVAL);
    {   /* NETVM_COUNTERS counters, 1024 unless configured: the first one past the end */
        uint32_t nc = (uint32_t)env_int("NETVM_COUNTERS", 1024);
        CHECK_ST(netvm_counter_add(ctx, peer, nc, 1), NETVM_ERR_INVAL);
        CHECK_ST(netvm_counter_arm(ctx, nc, NULL, NULL), NETVM_ERR_INVAL);
        CHECK_ST(netvm_counter_ack(ctx, nc), NETVM_ERR_INVAL);
        CHECK_OK(netvm_counter_arm(ctx, nc - 1, NULL, NULL));   /* the last one exists */
        CHECK_OK(netvm_counter_ack(ctx, nc - 1));
    }

    /* signals: every failing one leaves the target untouched (data included) */
    CHECK_ST(netvm_put_signal(ctx, r_rw, 0, buf, 8, r_rw, 4, 1, NETVM_SIGNAL_SET, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_put_signal_nb(ctx, r_rw, 0, buf, 8, r_rw, 12, 1, NETVM_SIGNAL_ADD, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_put_signal(ctx, r_rw, 0, buf, 8, r_rw, 64, 1, (netvm_signal_op_t)7, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_put_signal(ctx, r_rw, 0, buf, 8, NULL, 64, 1, NETVM_SIGNAL_SET, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_put_signal(ctx, r_rw, 0, buf, 8, r_ro, 64, 1, NETVM_SIGNAL_SET, 0), NETVM_ERR_RIGHTS);
    CHECK_ST(netvm_put_signal(ctx, r_rw, 0, buf, 8, r_rwna, 64, 1, NETVM_SIGNAL_ADD, 0), NETVM_ERR_RIGHTS);
    CHECK_ST(netvm_put_signal(ctx, r_rw, 0, buf, 8, r_rw, LEN, 1, NETVM_SIGNAL_SET, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_put_signal(ctx, r_rw, LEN - 4, buf, 8, r_rw, 64, 1, NETVM_SIGNAL_SET, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_put_signal(ctx, r_ro, 0, buf, 8, r_rw, 64, 1, NETVM_SIGNAL_SET, 0), NETVM_ERR_RIGHTS);
    {
        netvm_status_t st = netvm_put_signal_nb(ctx, r_rw, 0, buf, 8, r_rwna, 64, 1, NETVM_SIGNAL_ADD, 0);
        if (st == NETVM_OK)
            st = netvm_flush(ctx, peer);   /* a failure at the target is reported by flush */
        CHECK_ST(st, NETVM_ERR_RIGHTS);
    }
    /* the signal word alone is fine when it may be */
    CHECK_OK(netvm_put_signal(ctx, r_rw, 128, buf, 0 + 8, r_rw, 256, 9, NETVM_SIGNAL_SET, 0));

    /* wait_until */
    static uint64_t w[2] __attribute__((aligned(16)));
    uint64_t seen = 0;
    CHECK_ST(netvm_wait_until(ctx, (const uint64_t *)((const char *)w + 4), NETVM_CMP_EQ, 0, 0, 0, NULL),
             NETVM_ERR_INVAL);
    CHECK_ST(netvm_wait_until(ctx, NULL, NETVM_CMP_EQ, 0, 0, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_wait_until(NULL, w, NETVM_CMP_EQ, 0, 0, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_wait_until(ctx, w, (netvm_cmp_t)99, 0, 0, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_wait_until(ctx, w, NETVM_CMP_EQ, 0, 0x80, 0, NULL), NETVM_ERR_INVAL);
    w[0] = 5;
    CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_EQ, 5, 0, 0, &seen));
    CHECK(seen == 5);
    CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_GE, 5, 0, 0, NULL));
    CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_LE, 5, 0, 0, NULL));
    CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_LT, 6, 0, 0, NULL));
    CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_GT, 4, 0, 0, NULL));
    CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_NE, 4, 0, 0, NULL));
    CHECK_ST(netvm_wait_until(ctx, w, NETVM_CMP_GT, 5, 0, 0, &seen), NETVM_ERR_TIMEOUT);
    CHECK(seen == 5);
    CHECK_ST(netvm_wait_until(ctx, w, NETVM_CMP_LT, 5, 0, 0, NULL), NETVM_ERR_TIMEOUT);
    CHECK_ST(netvm_wait_until(ctx, w, NETVM_CMP_NE, 5, 0, 0, NULL), NETVM_ERR_TIMEOUT);
    CHECK_ST(netvm_wait_until(ctx, w, NETVM_CMP_EQ, 6, NETVM_WAIT_SPIN, 0, NULL), NETVM_ERR_TIMEOUT);
    w[0] = UINT64_MAX;   /* comparisons are unsigned */
    CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_GT, 1, 0, 0, NULL));
    CHECK_ST(netvm_wait_until(ctx, w, NETVM_CMP_LT, 1, 0, 0, NULL), NETVM_ERR_TIMEOUT);

    {   /* a failure only the target sees: the signal word's page is taken
         * away behind its export; the nonblocking signal is accepted, and the
         * next flush reports the target's refusal (on tcp the target
         * answers only failures, ahead of the flush's answer) */
        long pg = sysconf(_SC_PAGESIZE);
        void *page = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(page != MAP_FAILED);
        netvm_seg_t *sg;
        CHECK_OK(netvm_export(ctx, page, (size_t)pg, NETVM_RWA, "gone", &sg));
        CHECK_OK(netvm_barrier(ctx));
        netvm_rseg_t *r_gone;
        CHECK_OK(netvm_import(ctx, peer, "gone", &r_gone));
        CHECK_OK(netvm_barrier(ctx));
        /* PROT_NONE rather than munmap: an unmapped address can be mapped
         * again by anything in the process (ASan's allocator did, and the
         * signal then landed) */
        CHECK(mprotect(page, (size_t)pg, PROT_NONE) == 0);
        CHECK_OK(netvm_barrier(ctx));
        for (int op = NETVM_SIGNAL_SET; op <= NETVM_SIGNAL_ADD; op++) {
            /* the data goes where the peer's earlier put with signal wrote the same bytes */
            CHECK_OK(netvm_put_signal_nb(ctx, r_rw, 128, buf, 8, r_gone, 0, 1, (netvm_signal_op_t)op, 0));
            CHECK_ST(netvm_flush(ctx, peer), NETVM_ERR_FAULT);
            CHECK_OK(netvm_flush(ctx, peer));   /* reported once */
        }
        CHECK_OK(netvm_barrier(ctx));
        CHECK_OK(netvm_release(r_gone));
        CHECK_OK(netvm_unexport(sg));
        CHECK(munmap(page, (size_t)pg) == 0);
    }

    CHECK_OK(netvm_flush(ctx, -1));
    CHECK_OK(netvm_barrier(ctx));
    /* my memory: only [128, 136) and the word at 256 were written by the peer */
    for (int i = 0; i < LEN; i++) {
        uint8_t want = (i >= 128 && i < 136) ? 0x55 : 0xAA;
        if (i >= 256 && i < 264)
            continue;
        if (rw[i] != want)
            FAILF("byte %d of my memory is %#x after the peer's failing puts with signal, wanted %#x", i, rw[i], want);
    }
    CHECK(__atomic_load_n((uint64_t *)(rw + 256), __ATOMIC_ACQUIRE) == 9);
    /* no event came from any of it */
    CHECK(eb.n == 0 && netvm_evq_poll(ctx, &ev, 1) == 0);
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d: every bad argument refused\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
