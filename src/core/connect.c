/* Peers beyond the job: listeners, connecting, leaving, and core's part of
 * the tcp handshake (which peer a connection becomes, and whether two
 * processes of one machine move to the shm link once authenticated). A
 * peer exists only once it has proved the secret; until then a connection
 * holds no slot. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "link/shm/shm.h"
#include "link/tcp/tcp.h"
#include "util/config.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CRED_MIN 16
#define CRED_MAX 64

struct netvm_listener {
    int                     kind;     /* COOKIE_LISTEN: the handshake's cookie */
    _Atomic int             refs;     /* the caller's handle, and each peer it admitted */
    netvm_ctx_t            *ctx;
    struct nv_tcp_listener *tl;       /* the application's threads only */
    _Atomic int             open;     /* admitting (read by the handshake) */
    char                    addr[64];
    uint64_t                port;
    int                     max_peers;
    _Atomic int             npeers;
    struct netvm_listener  *next;
};

/* What a connection's cookie is (the handshake hands it back). */
enum { COOKIE_JOB = 1, COOKIE_CONNECT, COOKIE_LISTEN };

struct connecting {
    int             kind;             /* COOKIE_CONNECT */
    _Atomic int     refs;             /* the caller's and the handshake's */
    _Atomic int     done;
    _Atomic int     abandoned;        /* the caller gave up (timeout) */
    netvm_status_t  st;
    struct nv_peer *p;
};

static int job_cookie = COOKIE_JOB;

static void connecting_put(struct connecting *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        free(c);
}

/* --- moving to the shm link after authenticating ---------------------------------- */

static int same_machine(netvm_ctx_t *ctx, const struct nv_hs_hello *h)
{
    return ctx->links_mode == 0 /* auto */ && h->host_id == nv_shm_host_id();
}

static void my_shm_card(netvm_ctx_t *ctx, uint8_t *card, uint32_t *len)
{
    struct nv_shm_card c;
    nv_shm_card_of(ctx->shm, &c);
    nv_shm_allow_peers();   /* before the peer can try to attach */
    nv_shm_card_encode(&c, card);
    *len = NV_SHM_CARD_LEN;
}

static netvm_status_t attach_shm(netvm_ctx_t *ctx, struct nv_lpeer *lp, const uint8_t *card, uint32_t len)
{
    struct nv_shm_card c;
    if (nv_shm_card_decode(card, len, &c) != 0)
        return NETVM_ERR_INVAL;
    netvm_status_t st = nv_shm_attach(ctx->shm, lp, &c, 0);
    if (st != NETVM_OK)
        nv_info("peer %d stays on tcp: the shm link cannot attach (%s)", lp->id, netvm_strerror(st));
    return st;
}

static void detach_shm(netvm_ctx_t *ctx, struct nv_lpeer *lp)
{
    if (lp->link == ctx->shm && lp->conn)
        ctx->shm->ops->peer_free(ctx->shm, lp);
    lp->link = NULL;
    lp->conn = NULL;
}

/* A peer made for a handshake that did not finish: it never was. */
static void discard(netvm_ctx_t *ctx, struct nv_peer *p)
{
    if (p->is_rank)
        return;
    detach_shm(ctx, &p->lp);
    atomic_store(&p->dead, 1);
    nv_peer_gone(ctx, p, 0);
}

/* --- the handshake's upcalls ---------------------------------------------------------- */

static netvm_status_t hs_accepted(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer **lp,
                                  int *upgrade, uint8_t *card, uint32_t *card_len)
{
    netvm_ctx_t *ctx = arg;
    *upgrade = 0;
    if (in->hello.purpose == NV_HS_JOB) {
        if (in->their_id != (uint32_t)ctx->rank)
            return NETVM_ERR_RANK;
        return nv_links_job_accept(ctx, in->hello.rank, lp);
    }
    struct netvm_listener *l = in->cookie;
    if (!l || !atomic_load(&l->open))
        return NETVM_ERR_STATE;   /* closed while this handshake ran */
    if (atomic_fetch_add(&l->npeers, 1) >= l->max_peers) {
        atomic_fetch_sub(&l->npeers, 1);
        nv_warn("listener %s is full (%d peers): refused a connection", l->addr, l->max_peers);
        return NETVM_ERR_AGAIN;
    }
    struct nv_peer *p;
    netvm_status_t st = nv_peer_new(ctx, &p);
    if (st != NETVM_OK) {
        atomic_fetch_sub(&l->npeers, 1);
        return st;
    }
    atomic_fetch_add(&l->refs, 1);
    p->via = l;
    nv_peer_set_uuid(ctx, p, in->hello.uuid);
    p->lp.remote_id = in->their_id;
    if (same_machine(ctx, &in->hello) && in->card_len &&
        attach_shm(ctx, &p->lp, in->card, in->card_len) == NETVM_OK) {
        my_shm_card(ctx, card, card_len);
        *upgrade = 1;
    }
    *lp = &p->lp;
    return NETVM_OK;
}

static netvm_status_t hs_authenticated(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer **lp,
                                       uint8_t *card, uint32_t *card_len)
{
    netvm_ctx_t *ctx = arg;
    *card_len = 0;
    if (in->hello.purpose == NV_HS_JOB) {
        if (in->hello.rank < 0 || in->hello.rank >= ctx->size)
            return NETVM_ERR_RANK;
        *lp = &nv_rank_peer(ctx, in->hello.rank)->lp;
        return NETVM_OK;
    }
    struct connecting *cn = in->cookie;
    if (atomic_load(&cn->abandoned))
        return NETVM_ERR_TIMEOUT;
    struct nv_peer *p;
    netvm_status_t st = nv_peer_new(ctx, &p);
    if (st != NETVM_OK)
        return st;
    nv_peer_set_uuid(ctx, p, in->hello.uuid);
    if (same_machine(ctx, &in->hello))
        my_shm_card(ctx, card, card_len);
    *lp = &p->lp;
    return NETVM_OK;
}

static netvm_status_t hs_welcomed(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer *lp)
{
    return attach_shm(arg, lp, in->card, in->card_len);
}

static void hs_attached(void *arg, struct nv_lpeer *lp, netvm_status_t st)
{
    if (st != NETVM_OK)
        detach_shm(arg, lp);   /* it could not attach to us: tcp it is */
}

static void hs_aborted(void *arg, struct nv_lpeer *lp)
{
    discard(arg, nv_peer_of(lp));
}

static void hs_ready(void *arg, void *cookie, struct nv_lpeer *lp, int moved, netvm_status_t st)
{
    netvm_ctx_t *ctx = arg;
    struct nv_peer *p = lp ? nv_peer_of(lp) : NULL;
    if ((p && p->is_rank) || (!p && cookie == &job_cookie)) {
        nv_links_job_ready(ctx, st);
        return;
    }
    if (cookie && *(int *)cookie == COOKIE_CONNECT) {
        struct connecting *cn = cookie;
        if (p && atomic_load(&cn->abandoned)) {
            /* the caller gave up before it got here: leave at once */
            nv_info("peer %d connected after netvm_connect gave up: left", nv_peer_id(p));
            netvm_disconnect(ctx, nv_peer_id(p));
        }
        cn->st = st;
        cn->p = p;
        atomic_store_explicit(&cn->done, 1, memory_order_release);
        connecting_put(cn);
        return;
    }
    if (!p)
        return;
    /* through a listener: tell the application */
    struct netvm_listener *l = cookie;
    nv_info("peer %d connected through %s (link %s)", nv_peer_id(p), l ? l->addr : "?", moved ? "shm" : "tcp");
    struct nv_ep_rec e = { .type = NETVM_EV_PEER_UP, .rank = nv_peer_id(p), .value = l ? l->port : 0 };
    nv_evq_post_local(ctx, &e);
}

const struct nv_tcp_hs_upcalls nv_hs_upcalls = {
    .accepted = hs_accepted, .authenticated = hs_authenticated, .welcomed = hs_welcomed,
    .attached = hs_attached, .aborted = hs_aborted, .ready = hs_ready,
};

void *nv_job_cookie(void) { return &job_cookie; }

/* --- listeners ------------------------------------------------------------------------------ */

static netvm_status_t check_cred(const void *cred, size_t len)
{
    if (!cred || len < CRED_MIN || len > CRED_MAX) {
        nv_error("a listener's credential must be %d to %d bytes", CRED_MIN, CRED_MAX);
        return NETVM_ERR_INVAL;
    }
    return NETVM_OK;
}

netvm_status_t netvm_listen(netvm_ctx_t *ctx, const char *addr, const netvm_listen_opts_t *opts,
                            netvm_listener_t **out)
{
    if (out)
        *out = NULL;
    if (!ctx || !addr || !opts || !out || opts->max_peers < 0)
        return NETVM_ERR_INVAL;
    netvm_status_t st = check_cred(opts->credential, opts->credential_len);
    if (st != NETVM_OK)
        return st;
    if (ctx->links_mode == 1 /* shm only */) {
        nv_error("netvm_listen: NETVM_LINKS=shm has no tcp link to listen with");
        return NETVM_ERR_UNSUPPORTED;
    }
    if ((st = nv_links_open_tcp(ctx, 0, NULL)) != NETVM_OK)
        return st;
    struct netvm_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NETVM_ERR_NOMEM;
    l->kind = COOKIE_LISTEN;
    atomic_store(&l->refs, 1);
    l->ctx = ctx;
    l->max_peers = opts->max_peers ? opts->max_peers : ctx->listen_max_peers;
    atomic_store(&l->open, 1);   /* before a handshake through it can run */
    st = nv_tcp_listen(ctx->tcp, addr, opts->credential, opts->credential_len, l, &l->tl, l->addr,
                       sizeof l->addr);
    if (st != NETVM_OK) {
        free(l);
        return st;
    }
    const char *colon = strrchr(l->addr, ':');
    l->port = colon ? strtoull(colon + 1, NULL, 10) : 0;
    pthread_mutex_lock(&ctx->peer_lock);
    l->next = ctx->listeners;
    ctx->listeners = l;
    pthread_mutex_unlock(&ctx->peer_lock);
    nv_info("listening on %s for at most %d peers", l->addr, l->max_peers);
    *out = l;
    return NETVM_OK;
}

const char *netvm_listener_addr(const netvm_listener_t *l) { return l ? l->addr : NULL; }
int netvm_listener_peers(const netvm_listener_t *l) { return l ? atomic_load(&((netvm_listener_t *)l)->npeers) : -1; }

static void listener_put(struct netvm_listener *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1)
        free(l);
}

/* Stop admitting. The struct stays, on the context's list, until finalize
 * (the caller may still ask how many peers it has: nothing tells it when
 * the last has gone), and after that while peers it admitted are
 * connected (they hold it: p->via). */
netvm_status_t netvm_listener_close(netvm_listener_t *l)
{
    if (!l || !atomic_exchange(&l->open, 0))
        return NETVM_ERR_INVAL;
    nv_tcp_listener_close(l->ctx->tcp, l->tl);
    l->tl = NULL;
    return NETVM_OK;
}

void nv_listener_peer_left(struct netvm_listener *l)
{
    atomic_fetch_sub(&l->npeers, 1);
    listener_put(l);
}

void nv_listeners_close_all(netvm_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->peer_lock);
    struct netvm_listener *l = ctx->listeners;
    ctx->listeners = NULL;
    pthread_mutex_unlock(&ctx->peer_lock);
    while (l) {
        struct netvm_listener *next = l->next;
        if (atomic_load(&l->open))
            netvm_listener_close(l);
        listener_put(l);   /* the caller's handle */
        l = next;
    }
}

/* --- connecting and leaving ------------------------------------------------------------------- */

static int connected(void *arg)
{
    return atomic_load_explicit(&((struct connecting *)arg)->done, memory_order_acquire);
}

netvm_status_t netvm_connect(netvm_ctx_t *ctx, const char *addr, const void *cred, size_t cred_len,
                             int timeout_ms, int *peer)
{
    if (peer)
        *peer = -1;
    if (!ctx || !addr || !peer)
        return NETVM_ERR_INVAL;
    netvm_status_t st = check_cred(cred, cred_len);
    if (st != NETVM_OK || (st = nv_may_block()) != NETVM_OK)
        return st;
    if (ctx->links_mode == 1) {
        nv_error("netvm_connect: NETVM_LINKS=shm has no tcp link to connect with");
        return NETVM_ERR_UNSUPPORTED;
    }
    if ((st = nv_links_open_tcp(ctx, 0, NULL)) != NETVM_OK)
        return st;
    struct connecting *cn = calloc(1, sizeof *cn);
    if (!cn)
        return NETVM_ERR_NOMEM;
    cn->kind = COOKIE_CONNECT;
    atomic_store(&cn->refs, 2);
    st = nv_tcp_connect(ctx->tcp, addr, cred, cred_len, cn);
    if (st != NETVM_OK) {
        free(cn);
        if (st == NETVM_ERR_INVAL)
            nv_error("netvm_connect: '%s' is not an address of the form tcp:IPV4:PORT", addr);
        return st;
    }
    st = nv_progress_wait(ctx, connected, cn, timeout_ms > 0 ? timeout_ms : ctx->timeout_ms, 1);
    if (st != NETVM_OK) {
        atomic_store(&cn->abandoned, 1);
        /* it may have finished just now */
        if (!connected(cn)) {
            connecting_put(cn);
            nv_warn("netvm_connect to %s: no answer within the timeout", addr);
            return NETVM_ERR_TIMEOUT;
        }
    }
    st = cn->st;
    if (st == NETVM_OK && cn->p) {
        *peer = nv_peer_id(cn->p);
        nv_info("connected to %s: peer %d (link %s)", addr, *peer, cn->p->lp.link->ops->name);
    } else if (st == NETVM_OK) {
        st = NETVM_ERR_PEER;
    }
    connecting_put(cn);
    return st;
}

netvm_status_t netvm_disconnect(netvm_ctx_t *ctx, int peer)
{
    struct nv_peer *p;
    netvm_status_t st = nv_peer_get(ctx, peer, &p);
    if (st != NETVM_OK)
        return st;
    if (p->is_rank) {
        nv_peer_put(p);
        return NETVM_ERR_INVAL;
    }
    if (!nv_in_handler)
        netvm_flush(ctx, peer);   /* what was issued completes first */
    struct nv_am_hdr bye = { .handler = NV_AMH_BYE };
    nv_am_send(ctx, p, &bye, NULL, NULL, NV_AMS_REPLY | NV_AMS_NOW);
    struct nv_link *l = p->lp.link;
    if (l)
        l->ops->peer_close(l, &p->lp, 1);
    nv_peer_down(ctx, p, 1);
    nv_peer_put(p);
    return NETVM_OK;
}

/* finalize: every connected peer is told goodbye */
void nv_connected_leave_all(netvm_ctx_t *ctx)
{
    uint32_t high = __atomic_load_n(&ctx->peer_high, __ATOMIC_ACQUIRE);
    for (uint32_t i = (uint32_t)ctx->size; i < high; i++) {
        struct nv_peer *p = nv_peer_slot(ctx, i);
        if (p && !p->is_rank && !atomic_load(&p->gone))
            netvm_disconnect(ctx, __atomic_load_n(&p->lp.id, __ATOMIC_ACQUIRE));
    }
}

netvm_status_t netvm_peer_info(netvm_ctx_t *ctx, int peer, netvm_peer_info_t *info)
{
    if (!info)
        return NETVM_ERR_INVAL;
    struct nv_peer *p;
    netvm_status_t st = nv_peer_get(ctx, peer, &p);
    if (st != NETVM_OK)
        return st;
    info->is_rank = p->is_rank;
    info->alive = !atomic_load(&p->dead);
    info->link = p->lp.link ? p->lp.link->ops->name : "none";
    nv_peer_put(p);
    return NETVM_OK;
}
