/* Core's handler ids for the services (core/svc.h): a service handler
 * receives one-way messages, requests (answered) and forwarded requests
 * like an application handler, and the application cannot reach those
 * ids through the public calls. */
#include "am_test.h"
#include "core/svc.h"

static atomic_int oneway;

static int svc_handler(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    CHECK(m->id == nv_svc_am_id(3));
    CHECK(arg == (void *)&oneway);
    if (!m->has_token) {
        CHECK(m->nargs == 1 && m->args[0] == 77);
        atomic_fetch_add(&oneway, 1);
        return NETVM_AM_DONE;
    }
    /* a request carries the hop count in args[0]: forward it around the
     * job once, then answer from the last peer */
    int n = netvm_size(ctx), me = netvm_rank(ctx);
    uint64_t hops = m->args[0];
    if (hops + 1 < (uint64_t)n) {
        uint64_t a = hops + 1;
        CHECK_OK(nv_svc_forward(ctx, (me + 1) % n, 3, &m->token, &a, 1, NULL, 0));
        return NETVM_AM_DONE;
    }
    uint64_t r = (uint64_t)me * 1000 + hops;
    CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, &r, 1, NULL, 0));
    return NETVM_AM_DONE;
}

static int stray_handler(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx; (void)m; (void)arg;
    FAILF("the stray handler ran");
}

static int done_oneway(void) { return atomic_load(&oneway) > 0; }

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = netvm_rank(ctx), n = netvm_size(ctx);
    check_rank = me;
    CHECK_ST(nv_svc_register(ctx, NV_SVC_NIDS, svc_handler, &oneway), NETVM_ERR_INVAL);
    CHECK_OK(nv_svc_register(ctx, 3, svc_handler, &oneway));
    /* a second service on the same id is refused (it would take the
     * first one's messages); the same handler again is fine */
    CHECK_ST(nv_svc_register(ctx, 3, stray_handler, NULL), NETVM_ERR_EXISTS);
    CHECK_OK(nv_svc_register(ctx, 3, svc_handler, &oneway));
    /* the public calls do not reach a service's ids */
    CHECK_ST(netvm_am_register(ctx, nv_svc_am_id(3), svc_handler, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_send(ctx, (me + 1) % n, nv_svc_am_id(3), NULL, 0, NULL, 0, NULL), NETVM_ERR_INVAL);
    CHECK_OK(netvm_barrier(ctx));

    uint64_t a = 77;
    CHECK_OK(nv_svc_send(ctx, (me + 1) % n, 3, &a, 1, NULL, 0, NULL));
    while (!done_oneway())
        netvm_progress(ctx);

    /* a request that travels through every peer and is answered by the last */
    uint64_t hops = 1;
    netvm_am_result_t res;
    CHECK_OK(nv_svc_request(ctx, (me + 1) % n, 3, &hops, 1, NULL, 0, NULL, 0, &res, NULL));
    int last = (me + n - 1) % n;
    CHECK(res.status == NETVM_OK && res.nargs == 1);
    CHECK(res.peer == last);
    CHECK(res.args[0] == (uint64_t)last * 1000 + (uint64_t)(n - 1));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    printf("svc_ids: rank %d ok\n", me);
    return 0;
}
