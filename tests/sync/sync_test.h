/* Helpers of the sync tests: a job-wide shared segment at rank 0 for the
 * data the tests protect, and a look at a lock's tail word (to queue
 * acquirers in a known order). */
#ifndef NV_TESTS_SYNC_TEST_H
#define NV_TESTS_SYNC_TEST_H

#define _GNU_SOURCE
#include "check.h"
#include "svc/sync/sync_int.h"

#include <netvm/sync.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* rank 0 allocates "name" (len bytes); everyone imports it. Collective. */
static inline netvm_rseg_t *st_shared(netvm_ctx_t *ctx, const char *name, size_t len)
{
    if (netvm_rank(ctx) == 0) {
        void *a;
        netvm_seg_t *seg;
        CHECK_OK(netvm_alloc_shared(ctx, len, NETVM_RWA, name, &a, &seg));
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r;
    CHECK_OK(netvm_import(ctx, 0, name, &r));
    return r;
}

static inline uint64_t st_get(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off)
{
    uint64_t v;
    CHECK_OK(netvm_get(ctx, &v, r, off, 8, 0));
    return v;
}

static inline void st_put(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, uint64_t v)
{
    CHECK_OK(netvm_put(ctx, r, off, &v, 8, 0));
}

static inline uint64_t st_fadd(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, uint64_t v)
{
    uint64_t old;
    CHECK_OK(netvm_atomic(ctx, r, off, NETVM_AOP_FADD, v, 0, &old));
    return old;
}

/* The peer whose node is last in the lock object's queue (-1: free). */
static inline int st_tail_peer(netvm_ctx_t *ctx, netvm_rseg_t *obj)
{
    uint64_t t = st_get(ctx, obj, NV_SYNC_W_TAIL);
    return t == 0 ? -1 : nv_sync_ref_peer(t);
}

/* Non-atomic increment of a shared counter: breaks without mutual exclusion. */
static inline void st_racy_inc(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off)
{
    uint64_t v = st_get(ctx, r, off);
    sched_yield();   /* widen the window */
    st_put(ctx, r, off, v + 1);
}

#endif
