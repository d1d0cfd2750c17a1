/* The registration hook of the link contract: a link that declares
 * NV_LCAP_REGISTER gets every exported segment through mem_reg before it is
 * published to it (those exported before the link joined too), and its
 * registration back through mem_dereg only after the segment's accesses are
 * fenced; a registration that fails fails the export (or the link's
 * joining) and leaves nothing behind. A recording link stands in for an
 * RDMA one: it is never given a peer, so only the hook's calls reach it. */
#include "check.h"
#include "core/internal.h"

#include <string.h>

#define MAX_CALLS 64

struct call {
    char     what;      /* 'r' mem_reg, 'd' mem_dereg, 'p' seg_publish, 'v' seg_revoke, 'f' seg_fence */
    uintptr_t addr;     /* mem_reg: the range */
    size_t   len;
    uint32_t slot;      /* publish, revoke, fence */
    void    *mr;        /* dereg, publish: the registration */
};

static struct call calls[MAX_CALLS];
static int ncalls;
static int fail_reg_at = -1;   /* the mem_reg call (counted from 0) that fails */
static int nregs;
static int live_mrs;

static void record(struct call c)
{
    CHECK(ncalls < MAX_CALLS);
    calls[ncalls++] = c;
}

static netvm_status_t rec_reg(struct nv_link *l, void *addr, size_t len, unsigned rights, void **mr)
{
    (void)l;
    (void)rights;
    if (nregs++ == fail_reg_at)
        return NETVM_ERR_NOMEM;
    *mr = malloc(1);   /* a real handle: a leak shows up in the ASan build */
    CHECK(*mr);
    live_mrs++;
    record((struct call){ .what = 'r', .addr = (uintptr_t)addr, .len = len, .mr = *mr });
    return NETVM_OK;
}

static void rec_dereg(struct nv_link *l, void *mr)
{
    (void)l;
    record((struct call){ .what = 'd', .mr = mr });
    live_mrs--;
    free(mr);
}

static netvm_status_t rec_publish(struct nv_link *l, const struct nv_seg_desc *d)
{
    (void)l;
    record((struct call){ .what = 'p', .slot = d->slot, .mr = d->mr, .addr = d->addr, .len = d->len });
    return NETVM_OK;
}

static void rec_revoke(struct nv_link *l, uint32_t slot)
{
    (void)l;
    record((struct call){ .what = 'v', .slot = slot });
}

static void rec_fence(struct nv_link *l, uint32_t slot)
{
    (void)l;
    record((struct call){ .what = 'f', .slot = slot });
}

/* what progress may call on any link */
static int nop_poll(struct nv_link *l, struct nv_lpeer *p) { (void)l; (void)p; return 0; }
static void nop_epoll(struct nv_link *l, void *t, unsigned e) { (void)l; (void)t; (void)e; }
static void nop_link(struct nv_link *l) { (void)l; }
static int nop_sleep_prepare(struct nv_link *l) { (void)l; return 0; }
static void nop_flush_tx(struct nv_link *l, int all) { (void)l; (void)all; }
static uint64_t nop_timer(struct nv_link *l, uint64_t now) { (void)l; (void)now; return UINT64_MAX; }
static int destroyed;
static void rec_destroy(struct nv_link *l) { (void)l; destroyed++; }

static const struct nv_link_ops rec_ops = {
    .name = "recording",
    .caps = { .flags = NV_LCAP_REGISTER, .max_xfer = 1 << 20, .am_eager = 4096 },
    .mem_reg = rec_reg, .mem_dereg = rec_dereg,
    .seg_publish = rec_publish, .seg_revoke = rec_revoke, .seg_fence = rec_fence,
    .poll = nop_poll, .epoll_event = nop_epoll, .poll_enter = nop_link, .poll_leave = nop_link,
    .sleep_prepare = nop_sleep_prepare, .sleep_done = nop_link, .flush_tx = nop_flush_tx,
    .timer = nop_timer, .destroy = rec_destroy,
};

static int find(char what, int from)
{
    for (int i = from; i < ncalls; i++)
        if (calls[i].what == what)
            return i;
    return -1;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    static char a[8192], b[4096], c[4096];
    netvm_seg_t *sa, *sb, *sc;
    CHECK_OK(netvm_export(ctx, a, sizeof a, NETVM_RWA, "a", &sa));
    int before = ctx->nlinks;

    /* joining registers what is already exported, and publishes it with its mr */
    struct nv_link link = { .ops = &rec_ops, .pfd = -1 };
    CHECK_OK(nv_links_add(ctx, &link));
    CHECK(ctx->nlinks == before + 1 && ctx->links[before] == &link);
    CHECK(ncalls == 2 && calls[0].what == 'r' && calls[1].what == 'p');
    CHECK(calls[0].addr == (uintptr_t)a && calls[0].len == sizeof a);
    CHECK(calls[1].mr == calls[0].mr && calls[1].addr == (uintptr_t)a);

    /* an export after joining: registered, then published */
    ncalls = 0;
    CHECK_OK(netvm_export(ctx, b, sizeof b, NETVM_READ, "b", &sb));
    CHECK(ncalls == 2 && calls[0].what == 'r' && calls[1].what == 'p');
    CHECK(calls[0].addr == (uintptr_t)b && calls[1].mr == calls[0].mr);
    void *mr_b = calls[0].mr;
    uint32_t slot_b = calls[1].slot;

    /* unexport: revoke, fence, and only then deregister */
    ncalls = 0;
    CHECK_OK(netvm_unexport(sb));
    int v = find('v', 0), f = find('f', 0), d = find('d', 0);
    CHECK(v >= 0 && f > v && d > f);
    CHECK(calls[v].slot == slot_b && calls[f].slot == slot_b && calls[d].mr == mr_b);

    /* a registration that fails fails the export with its status; nothing
     * stays published, the name is free again */
    ncalls = 0;
    fail_reg_at = nregs;
    CHECK_ST(netvm_export(ctx, c, sizeof c, NETVM_RWA, "c", &sc), NETVM_ERR_NOMEM);
    CHECK(find('p', 0) < 0 && find('d', 0) < 0);
    netvm_rseg_t *self_c;
    CHECK_ST(netvm_import(ctx, 0, "c", &self_c), NETVM_ERR_NOTFOUND);
    CHECK_OK(netvm_export(ctx, c, sizeof c, NETVM_RWA, "c", &sc));
    CHECK(live_mrs == 2);   /* a and c */

    /* the segments still work for the other links: this process's own import */
    netvm_rseg_t *self_a;
    CHECK_OK(netvm_import(ctx, 0, "a", &self_a));
    uint64_t x = 0x1234;
    CHECK_OK(netvm_put(ctx, self_a, 8, &x, sizeof x, 0));
    CHECK(memcmp(a + 8, &x, sizeof x) == 0);
    CHECK_OK(netvm_release(self_a));

    /* a link that cannot register everything does not join, and gives
     * back what it registered before the failure */
    struct nv_link second = { .ops = &rec_ops, .pfd = -1 };
    ncalls = 0;
    fail_reg_at = nregs + 1;
    CHECK_ST(nv_links_add(ctx, &second), NETVM_ERR_NOMEM);
    CHECK(ctx->nlinks == before + 1);
    CHECK(live_mrs == 2);
    CHECK(find('r', 0) >= 0 && find('d', 0) > find('r', 0));

    /* finalize: every registration given back, the link destroyed */
    fail_reg_at = -1;
    CHECK_OK(netvm_finalize(ctx));
    CHECK(live_mrs == 0);
    CHECK(destroyed == 1);
    printf("link registration hook ok\n");
    return 0;
}
