/* Core's wiring of the registration strategies (src/reg): the network the
 * policy reaches through callbacks (a move is a core active message, a
 * wait drives progress), the target's side of a move, the check a tcp
 * target makes before an access when NETVM_TCP_PINNED is on, pin-all at
 * export, and netvm_reg_stats. Operations on the shm link and everything
 * with NETVM_REG=none never come here.
 *
 * On a link whose NIC names registrations by key (ofi: ops->mr_key), the
 * strategy's pins are that link's registrations: the pin table registers
 * each bucket through the link's mem_reg (no mlock: the registration pins
 * where the NIC needs it), a move's answer carries the bucket's key and
 * where its registration begins (args 0 and 1, the import answer's style),
 * and the initiator names the bucket by them. */
#include "core/internal.h"
#include "reg/reg.h"
#include "util/config.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the move's arguments: slot, key, flags, nrel, nacq, bucket size */
enum { MV_SLOT, MV_KEY, MV_FLAGS, MV_NREL, MV_NACQ, MV_BUCKET, MV_NARGS };
#define MV_MAX_WORDS 1024   /* a move's payload stays eager on every link */

static netvm_status_t regc_move(void *arg, int peer, const void *seg, unsigned flags, const uint64_t *rel,
                                unsigned nrel, const struct nv_reg_range *acq, unsigned nacq, struct nv_reg_key *keys)
{
    netvm_ctx_t *ctx = arg;
    const netvm_rseg_t *r = seg;
    const struct nv_rdesc *d = &r->d;
    (void)peer;
    if (nv_in_handler)
        return NETVM_ERR_AGAIN;   /* a handler may not wait for the round trip: it defers */
    if (nrel + 2 * nacq > MV_MAX_WORDS)
        return NETVM_ERR_INVAL;
    uint64_t w[MV_MAX_WORDS];
    memcpy(w, rel, nrel * sizeof *rel);
    /* buckets are clipped to the segment: the target pins nothing outside it */
    unsigned n = nrel, na = 0;
    for (unsigned i = 0; i < nacq; i++) {
        uint64_t base = r->reg_base;
        uint64_t lo = acq[i].addr > base ? acq[i].addr : base;
        uint64_t hi = acq[i].addr + acq[i].len < base + d->len ? acq[i].addr + acq[i].len : base + d->len;
        if (hi <= lo)
            continue;
        w[n++] = lo - base;
        w[n++] = hi - lo;
        na++;
    }
    uint64_t a[MV_NARGS] = { d->slot, d->key, flags, nrel, na, nv_reg_params_of(ctx->reg)->bucket };
    struct nv_peer *p = nv_peer_of(d->peer);
    struct netvm_req *q;
    netvm_status_t st = nv_reserve_req(ctx, p, NULL, &q);
    if (st != NETVM_OK)
        return st;
    if (!keys)
        return nv_finish_req(ctx, q, nv_am_call(ctx, p, q, NV_AMH_REG, a, MV_NARGS, w, n * sizeof *w, 0));
    /* keyed: the answer's arguments are the key (one range, one bucket) */
    netvm_am_result_t res;
    memset(&res, 0, sizeof res);
    q->amres = &res;
    st = nv_finish_req(ctx, q, nv_am_call(ctx, p, q, NV_AMH_REG, a, MV_NARGS, w, n * sizeof *w, 0));
    if (st == NETVM_OK)
        st = res.status;
    if (st == NETVM_OK && (na != 1 || res.nargs < 2))
        st = NETVM_ERR_UNSUPPORTED;   /* the target registers no buckets (its NETVM_REG or links differ) */
    if (st == NETVM_OK)
        keys[0] = (struct nv_reg_key){ res.args[0], res.args[1] };
    return st;
}

static netvm_status_t regc_wait(void *arg, int (*done)(void *), void *darg, int timeout_ms)
{
    if (nv_in_handler)
        return NETVM_ERR_AGAIN;
    return nv_progress_wait(arg, done, darg, timeout_ms, 1);
}

netvm_status_t nv_regc_init(netvm_ctx_t *ctx)
{
    const char *kind = nv_config_str("NETVM_REG");
    struct nv_reg_params p = { .timeout_ms = ctx->timeout_ms };
    if (nv_reg_kind_parse(kind, &p.kind) != 0) {
        nv_error("NETVM_REG=%s: not one of none, pin-all, rendezvous, rendezvous-keep, firehose", kind);
        return NETVM_ERR_INVAL;
    }
    p.bucket = (uint64_t)nv_config_size("NETVM_FH_BUCKET", 4096, 1ll << 30);
    p.m = (uint64_t)nv_config_size("NETVM_FH_M", 4096, 1ll << 50);
    p.maxvictim = (uint64_t)nv_config_size("NETVM_FH_MAXVICTIM", 0, 1ll << 50);
    long peers = nv_config_long("NETVM_FH_PEERS", 0, 1 << 20);
    p.peers = peers > 0 ? (unsigned)peers : (ctx->size > 1 ? (unsigned)ctx->size - 1 : 1);
    struct nv_reg_net net = { .arg = ctx, .move = regc_move, .wait = regc_wait };
    netvm_status_t st = nv_reg_create(&ctx->reg, &p, &net);
    if (st != NETVM_OK) {
        nv_error("NETVM_FH_BUCKET must be a power of two, a multiple of the page size and at most NETVM_FH_M");
        return st;
    }
    ctx->reg_remote = p.kind == NV_REG_RENDEZVOUS || p.kind == NV_REG_RENDEZVOUS_KEEP || p.kind == NV_REG_FIREHOSE;
    const char *pin = nv_config_str("NETVM_TCP_PINNED");
    if (!pin || !strcasecmp(pin, "auto"))
        ctx->tcp_pinned = p.kind != NV_REG_NONE;
    else
        ctx->tcp_pinned = atoi(pin) != 0;
    if (ctx->tcp_pinned || p.kind != NV_REG_NONE)
        nv_info("registration: NETVM_REG=%s, tcp target requires pinned memory: %s", kind,
                ctx->tcp_pinned ? "yes" : "no");
    return NETVM_OK;
}

/* The ofi link's registration as the pin table's pinner: a bucket's part
 * in a segment is registered with that segment's rights, so that its key
 * allows a peer no access the segment refuses (an RDMA write bypasses the
 * ATU; the provider checks the registration). */
static netvm_status_t link_pin(void *arg, uint64_t addr, uint64_t len, unsigned rights, void **handle, uint64_t *key)
{
    struct nv_link *l = arg;
    netvm_status_t st = l->ops->mem_reg(l, (void *)(uintptr_t)addr, len, rights, handle);
    if (st == NETVM_OK)
        *key = l->ops->mr_key(l, *handle);
    return st;
}

static void link_unpin(void *arg, void *handle)
{
    struct nv_link *l = arg;
    l->ops->mem_dereg(l, handle);
}

void nv_regc_links(netvm_ctx_t *ctx)
{
    if (!ctx->reg_remote)
        return;
    for (int i = 0; i < ctx->nlinks; i++) {
        struct nv_link *l = ctx->links[i];
        if (l->ops->mr_key && l->ops->mem_reg && (l->ops->caps.flags & NV_LCAP_REGISTER)) {
            struct nv_reg_pinner pn = { .arg = l, .pin = link_pin, .unpin = link_unpin };
            nv_reg_set_pinner(ctx->reg, &pn, 1);
            ctx->reg_link = l;
            nv_info("registration: NETVM_REG=%s pins buckets by registering them on the %s link",
                    nv_reg_kind_name(nv_reg_kind_of(ctx->reg)), l->ops->name);
            return;
        }
    }
}

void nv_regc_links_down(netvm_ctx_t *ctx)
{
    if (ctx->reg && ctx->reg_link) {
        nv_reg_drop_pinner(ctx->reg);
        ctx->reg_link = NULL;
    }
}

void nv_regc_fini(netvm_ctx_t *ctx)
{
    nv_reg_destroy(ctx->reg);
    ctx->reg = NULL;
}

void nv_regc_serve(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx)
{
    const struct nv_am_hdr *h = &rx->h;
    netvm_status_t st = NETVM_OK;
    uint64_t nrel = h->nargs >= MV_NARGS ? h->args[MV_NREL] : 0, nacq = h->nargs >= MV_NARGS ? h->args[MV_NACQ] : 0;
    if (h->nargs < MV_NARGS || !ctx->reg || nrel > MV_MAX_WORDS || nacq > MV_MAX_WORDS / 2 ||
        h->len != (nrel + 2 * nacq) * 8 || (h->len && !rx->payload))
        st = NETVM_ERR_INVAL;
    else if (h->args[MV_BUCKET] != nv_reg_params_of(ctx->reg)->bucket)
        st = NETVM_ERR_INVAL;   /* both sides must agree on NETVM_FH_BUCKET */
    struct nv_reg_range acq[MV_MAX_WORDS / 2];
    struct nv_reg_key keys[MV_MAX_WORDS / 2];
    uint64_t rel[MV_MAX_WORDS];
    int keyed = ctx->reg_link != NULL;
    unsigned rights = 0;
    if (st == NETVM_OK) {
        memcpy(rel, rx->payload, nrel * 8);
        const uint8_t *pa = rx->payload + nrel * 8;
        for (uint64_t i = 0; i < nacq && st == NETVM_OK; i++) {
            uint64_t off, len, addr;
            memcpy(&off, pa + i * 16, 8);
            memcpy(&len, pa + i * 16 + 8, 8);
            /* the ATU decides what a peer may name: bounds and key */
            st = nv_atu_translate_rights(&ctx->atu, (uint32_t)h->args[MV_SLOT], h->args[MV_KEY], off, len, 0, &addr,
                                         &rights);
            acq[i] = (struct nv_reg_range){ addr, len };
        }
    }
    if (st == NETVM_OK)
        st = nv_reg_serve_move(ctx->reg, nv_peer_id(p), (unsigned)h->args[MV_FLAGS], rights, rel, (unsigned)nrel,
                               acq, (unsigned)nacq, keyed ? keys : NULL);
    if (st != NETVM_OK)
        nv_debug("reg: a move from peer %d failed: %s", nv_peer_id(p), netvm_strerror(st));
    /* keyed initiators acquire one bucket per move: its key and base */
    uint64_t a[2] = { 0, 0 };
    unsigned na = 0;
    if (st == NETVM_OK && keyed && nacq == 1) {
        a[0] = keys[0].key;
        a[1] = keys[0].base;
        na = 2;
    }
    nv_am_answer(ctx, p, h, st, a, na, NULL, 0);
}

void nv_regc_peer_down(netvm_ctx_t *ctx, struct nv_peer *p)
{
    if (ctx->reg)
        nv_reg_peer_gone(ctx->reg, nv_peer_id(p));
}

netvm_status_t nv_regc_check(netvm_ctx_t *ctx, uint64_t addr, uint64_t len)
{
    return !len || nv_reg_pinned(ctx->reg, addr, len) ? NETVM_OK : NETVM_ERR_UNPINNED;
}

netvm_status_t nv_regc_export(netvm_ctx_t *ctx, void *addr, size_t len)
{
    if (nv_reg_kind_of(ctx->reg) != NV_REG_PIN_ALL)
        return NETVM_OK;
    return nv_reg_pin_whole(ctx->reg, (uintptr_t)addr, len);
}

void nv_regc_unexport(netvm_ctx_t *ctx, void *addr, size_t len)
{
    if (nv_reg_kind_of(ctx->reg) == NV_REG_PIN_ALL)
        nv_reg_unpin_whole(ctx->reg, (uintptr_t)addr, len);
}

netvm_status_t nv_regc_acquire(netvm_ctx_t *ctx, netvm_rseg_t *r, uint64_t off, uint64_t len, struct nv_reg_key *key)
{
    return nv_reg_acquire(ctx->reg, nv_peer_id(r->peer), r->d.slot, r, r->reg_base + off, len, key);
}

void nv_regc_release(netvm_ctx_t *ctx, netvm_rseg_t *r, uint64_t off, uint64_t len)
{
    nv_reg_release(ctx->reg, nv_peer_id(r->peer), r->d.slot, r->reg_base + off, len);
}

void nv_req_hold_release(struct netvm_req *q)
{
    if (!q->reg_len)
        return;
    nv_reg_release(q->ctx->reg, q->reg_peer, q->reg_sid, q->reg_addr, q->reg_len);
    q->reg_len = 0;
}

uint64_t nv_regc_span(netvm_ctx_t *ctx)
{
    return nv_reg_max_span(ctx->reg);
}

netvm_status_t netvm_reg_stats(netvm_ctx_t *ctx, netvm_reg_stats_t *out)
{
    if (!ctx || !out || !ctx->reg)
        return NETVM_ERR_INVAL;
    nv_reg_get_stats(ctx->reg, out);
    return NETVM_OK;
}
