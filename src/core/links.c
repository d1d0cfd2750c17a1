/* The links of a context, and how the job's ranks reach each other: shm
 * between processes of one machine (same kernel boot, network and pid
 * namespaces, host name), tcp between machines. NETVM_LINKS forces a
 * choice: "tcp" uses tcp for every other rank even on one machine (for
 * tests and comparison), "shm" refuses peers it cannot reach by shm. A
 * process always reaches itself by shm.
 *
 * Ranks exchange cards through the bootstrap; then each rank attaches to
 * its same-machine peers' blocks directly, and the higher rank of each tcp
 * pair connects to the lower, through the same nonblocking, authenticated
 * handshake any connection uses (core/connect.c).
 *
 * NETVM_LINKS=ofi: every other rank of the job is reached through the ofi
 * link (libfabric, NETVM_OFI_PROVIDER); its address travels in the card,
 * so no handshake runs (the bootstrap's allgather already proved the job).
 * Peers beyond the job (netvm_listen / netvm_connect) stay on tcp. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "link/shm/shm.h"
#include "link/tcp/tcp.h"
#ifdef NETVM_HAVE_OFI
#include "link/ofi/ofi.h"
#endif
#include "util/config.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

enum mode { MODE_AUTO, MODE_SHM, MODE_TCP, MODE_OFI };

struct card {
    struct nv_shm_card shm;
    struct nv_tcp_card tcp;
    uint64_t           uuid;
#ifdef NETVM_HAVE_OFI
    struct nv_ofi_card ofi;
#endif
};

static netvm_status_t read_mode(int *m)
{
    const char *v = nv_config_str("NETVM_LINKS");
    if (!v || !strcasecmp(v, "auto"))
        *m = MODE_AUTO;
    else if (!strcasecmp(v, "shm"))
        *m = MODE_SHM;
    else if (!strcasecmp(v, "tcp"))
        *m = MODE_TCP;
    else if (!strcasecmp(v, "ofi")) {
#ifdef NETVM_HAVE_OFI
        *m = MODE_OFI;
#else
        nv_error("NETVM_LINKS=ofi: this netvm was built without libfabric (pkg-config libfabric)");
        return NETVM_ERR_UNSUPPORTED;
#endif
    } else {
        nv_error("NETVM_LINKS=%s: expected auto, shm, tcp or ofi", v);
        return NETVM_ERR_INVAL;
    }
    return NETVM_OK;
}

static struct nv_link_upcalls upcalls(netvm_ctx_t *ctx);

int nv_ofi_built(void)
{
#ifdef NETVM_HAVE_OFI
    return 1;
#else
    return 0;
#endif
}

/* The tcp link, opened at init for a job that may span machines, or when
 * the context first listens or connects. */
static netvm_status_t open_tcp_locked(netvm_ctx_t *ctx, int job_listen, struct nv_tcp_card *card)
{
    if (ctx->tcp)
        return NETVM_OK;
    struct nv_tcp_card unused;
    struct nv_tcp_params tp = {
        .timeout_ms = ctx->timeout_ms, .secret = nv_boot_secret(ctx->boot),
        .secret_len = NV_BOOT_SECRET_LEN, .job_hash = nv_hash_str(nv_boot_job_id(ctx->boot)),
        .rank = ctx->rank, .uuid = ctx->uuid, .host_id = nv_shm_host_id(),
        .max_segments = ctx->atu.cap, .max_requests = ctx->nreqs,
        .bind_addr = nv_config_str("NETVM_TCP_ADDR"), .job_listen = job_listen,
        .handshake_ms = (int)nv_config_long("NETVM_HANDSHAKE_MS", 10, 3600000),
        .handshake_max = (int)nv_config_long("NETVM_HANDSHAKE_MAX", 1, 65536), .ep = &ctx->ep };
    struct nv_link_upcalls up = upcalls(ctx);
    struct nv_link *l;
    netvm_status_t st = nv_tcp_link_open(&l, ctx->pfd, &tp, &up, card ? card : &unused);
    if (st != NETVM_OK)
        return st;
    if ((st = nv_links_add(ctx, l)) != NETVM_OK) {
        l->ops->destroy(l);
        return st;
    }
    __atomic_store_n(&ctx->tcp, l, __ATOMIC_RELEASE);
    return NETVM_OK;
}

/* Opening is rare (once per context): one process-wide lock keeps two
 * threads that listen or connect at once from opening two. */
static pthread_mutex_t tcp_open_lock = PTHREAD_MUTEX_INITIALIZER;

netvm_status_t nv_links_open_tcp(netvm_ctx_t *ctx, int job_listen, struct nv_tcp_card *card)
{
    if (__atomic_load_n(&ctx->tcp, __ATOMIC_ACQUIRE))
        return NETVM_OK;
    pthread_mutex_lock(&tcp_open_lock);
    netvm_status_t st = open_tcp_locked(ctx, job_listen, card);
    pthread_mutex_unlock(&tcp_open_lock);
    return st;
}

static struct nv_lpeer *peer_ref_upcall(void *arg, uint32_t id)
{
    struct nv_peer *p;
    return nv_peer_get(arg, (int)id, &p) == NETVM_OK ? &p->lp : NULL;
}

static void peer_unref_upcall(void *arg, struct nv_lpeer *lp)
{
    (void)arg;
    nv_peer_put(nv_peer_of(lp));
}

static struct nv_link_upcalls upcalls(netvm_ctx_t *ctx)
{
    struct nv_link_upcalls up = { .arg = ctx, .am = nv_am_upcall, .am_end = nv_am_end_upcall,
                                  .peer_down = nv_peer_down_upcall, .complete = nv_complete_upcall,
                                  .claim = nv_claim_upcall, .translate = nv_translate_upcall,
                                  .peer_ref = peer_ref_upcall, .peer_unref = peer_unref_upcall,
                                  .hs = &nv_hs_upcalls };
    nv_lreg_upcalls(&up);
    return up;
}

netvm_status_t nv_links_open(netvm_ctx_t *ctx, const void *shm_params, int timeout_ms)
{
    (void)timeout_ms;
    netvm_status_t st = read_mode(&ctx->links_mode);
    if (st != NETVM_OK)
        return st;
    struct nv_link_upcalls up = upcalls(ctx);
    struct nv_shm_card unused;
    st = nv_shm_link_open(&ctx->shm, ctx->pfd, shm_params, &up, &unused);
    if (st != NETVM_OK)
        return st;
    return nv_links_add(ctx, ctx->shm);
}

#ifdef NETVM_HAVE_OFI
static netvm_status_t open_ofi(netvm_ctx_t *ctx, struct nv_ofi_card *card)
{
    struct nv_ofi_params op = { .provider = nv_config_str("NETVM_OFI_PROVIDER"), .max_segments = ctx->atu.cap,
                                .host_id = nv_shm_host_id(), .ep = &ctx->ep, .timeout_ms = ctx->timeout_ms,
                                .force_mr_local = (int)nv_config_long("NETVM_OFI_MR_LOCAL", 0, 1) };
    op.spin_yield = ctx->spin_yield;
    op.odp = (int)nv_config_long("NETVM_OFI_ODP", 0, 1);
    const char *amo = nv_config_str("NETVM_OFI_ATOMICS");
    if (!amo || !strcmp(amo, "emulated"))
        op.atomics = NV_OFI_AMO_EMULATED;
    else if (!strcmp(amo, "native"))
        op.atomics = NV_OFI_AMO_NATIVE;
    else {
        nv_error("NETVM_OFI_ATOMICS=%s: expected native or emulated", amo);
        return NETVM_ERR_INVAL;
    }
    struct nv_link_upcalls up = upcalls(ctx);
    struct nv_link *l;
    netvm_status_t st = nv_ofi_link_open(&l, ctx->pfd, &op, &up, card);
    if (st != NETVM_OK)
        return st;
    if ((st = nv_links_add(ctx, l)) != NETVM_OK) {
        l->ops->destroy(l);
        return st;
    }
    __atomic_store_n(&ctx->ofi, l, __ATOMIC_RELEASE);
    return NETVM_OK;
}
#endif

/* --- the job's ranks ------------------------------------------------------------- */

struct job_connect {
    _Atomic int pending;       /* tcp ranks not yet ready */
    _Atomic int failed;        /* a status, once one failed */
    uint8_t    *use_tcp;
};

static int job_done(void *arg)
{
    struct job_connect *j = arg;
    return !atomic_load(&j->pending) || atomic_load(&j->failed);
}

/* A rank that connects to this one (connect.c's handshake asks). */
netvm_status_t nv_links_job_accept(netvm_ctx_t *ctx, int rank, struct nv_lpeer **lp)
{
    struct job_connect *j = ctx->job_connect;
    if (!j || rank <= ctx->rank || rank >= ctx->size || !j->use_tcp[rank]) {
        nv_warn("tcp link: refused a connection claiming rank %d", rank);
        return NETVM_ERR_RANK;
    }
    struct nv_peer *p = nv_rank_peer(ctx, rank);
    if (p->lp.conn) {
        nv_warn("tcp link: refused a second connection claiming rank %d", rank);
        return NETVM_ERR_EXISTS;
    }
    *lp = &p->lp;
    return NETVM_OK;
}

void nv_links_job_ready(netvm_ctx_t *ctx, netvm_status_t st)
{
    struct job_connect *j = ctx->job_connect;
    if (!j)
        return;
    if (st != NETVM_OK) {
        int none = 0;
        atomic_compare_exchange_strong(&j->failed, &none, (int)st);
    } else {
        atomic_fetch_sub(&j->pending, 1);
    }
}

netvm_status_t nv_links_connect_job(netvm_ctx_t *ctx)
{
    struct card mine;
    memset(&mine, 0, sizeof mine);
    mine.uuid = ctx->uuid;
    netvm_status_t st = NETVM_OK;
#ifdef NETVM_HAVE_OFI
    if (ctx->size > 1 && ctx->links_mode == MODE_OFI)
        st = open_ofi(ctx, &mine.ofi);
    else
#endif
    if (ctx->size > 1 && ctx->links_mode != MODE_SHM)
        st = nv_links_open_tcp(ctx, 1, &mine.tcp);
    if (st != NETVM_OK)
        return st;
    nv_shm_card_of(ctx->shm, &mine.shm);
    if (ctx->size > 1)
        nv_shm_allow_peers();   /* same-machine ranks attach right after the exchange */
    struct card *all = calloc((size_t)ctx->size, sizeof *all);
    struct job_connect j = { .use_tcp = calloc((size_t)ctx->size, 1) };
    if (!all || !j.use_tcp) {
        free(all);
        free(j.use_tcp);
        return NETVM_ERR_NOMEM;
    }
    st = nv_boot_allgather(ctx->boot, &mine, sizeof mine, all);
    int ntcp = 0;
    for (int r = 0; r < ctx->size && st == NETVM_OK; r++) {
        struct nv_peer *p = nv_rank_peer(ctx, r);
        p->lp.remote_id = (uint32_t)ctx->rank;   /* ranks are the same ids everywhere */
        nv_peer_set_uuid(ctx, p, all[r].uuid);
        int local = all[r].shm.host_id == mine.shm.host_id && all[r].shm.version == mine.shm.version;
        if (r != ctx->rank && ctx->links_mode == MODE_OFI) {
#ifdef NETVM_HAVE_OFI
            st = nv_ofi_attach(ctx->ofi, &p->lp, &all[r].ofi);
            nv_info("rank %d: link ofi (NETVM_LINKS=ofi)", r);
#endif
        } else if (r == ctx->rank || (local && ctx->links_mode != MODE_TCP && ctx->links_mode != MODE_OFI)) {
            st = nv_shm_attach(ctx->shm, &p->lp, &all[r].shm, r == ctx->rank);
            nv_info("rank %d: link shm (%s)", r, r == ctx->rank ? "ourselves" : "same machine");
        } else if (ctx->links_mode == MODE_SHM || !ctx->tcp) {
            nv_error("rank %d is not on this machine and NETVM_LINKS=shm", r);
            st = NETVM_ERR_UNSUPPORTED;
        } else {
            j.use_tcp[r] = 1;
            ntcp++;
            nv_info("rank %d: link tcp (%s)", r, ctx->links_mode == MODE_TCP ? "NETVM_LINKS=tcp" : "another machine");
        }
    }
    if (st == NETVM_OK && ntcp) {
        atomic_store(&j.pending, ntcp);
        ctx->job_connect = &j;
        for (int r = 0; r < ctx->rank && st == NETVM_OK; r++)
            if (j.use_tcp[r])
                st = nv_tcp_connect_job(ctx->tcp, &all[r].tcp, r, nv_job_cookie());
        if (st == NETVM_OK) {
            /* the handshakes run in the progress engine; this thread drives it */
            st = nv_progress_wait(ctx, job_done, &j, ctx->timeout_ms, 0);
            if (st == NETVM_ERR_TIMEOUT)
                nv_error("tcp link: %d rank(s) did not connect within NETVM_TIMEOUT", atomic_load(&j.pending));
            else if (atomic_load(&j.failed))
                st = (netvm_status_t)atomic_load(&j.failed);
        }
        ctx->job_connect = NULL;
    }
    free(all);
    free(j.use_tcp);
    return st;
}

void nv_links_destroy(netvm_ctx_t *ctx)
{
    int n = ctx->nlinks;
    ctx->nlinks = 0;
    ctx->tcp = ctx->shm = ctx->ofi = NULL;
    /* the last opened first: shm, the first, carries this process's own endpoint */
    while (n > 0) {
        struct nv_link *l = ctx->links[--n];
        ctx->links[n] = NULL;
        l->ops->destroy(l);
    }
}

const char *nv_link_name(const netvm_ctx_t *ctx, int peer)
{
    struct nv_peer *p;
    if (nv_peer_get((netvm_ctx_t *)ctx, peer, &p) != NETVM_OK)
        return "none";
    const char *n = p->lp.link ? p->lp.link->ops->name : "none";
    nv_peer_put(p);
    return n;
}
