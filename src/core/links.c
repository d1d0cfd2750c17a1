/* Choosing a link per peer, at connect time: shm between processes of one
 * machine (same kernel boot, network and pid namespaces, host name), tcp
 * between machines. NETVM_LINKS forces a choice: "tcp" uses tcp for every
 * other rank even on one machine (for tests and comparison), "shm" refuses
 * peers it cannot reach by shm. A process always reaches itself by shm. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "link/shm/shm.h"
#include "link/tcp/tcp.h"
#include "util/config.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct card {
    struct nv_shm_card shm;
    struct nv_tcp_card tcp;
};

enum mode { MODE_AUTO, MODE_SHM, MODE_TCP };

static netvm_status_t read_mode(enum mode *m)
{
    const char *v = nv_config_str("NETVM_LINKS");
    if (!v || !strcasecmp(v, "auto"))
        *m = MODE_AUTO;
    else if (!strcasecmp(v, "shm"))
        *m = MODE_SHM;
    else if (!strcasecmp(v, "tcp"))
        *m = MODE_TCP;
    else {
        nv_error("NETVM_LINKS=%s: expected auto, shm or tcp", v);
        return NETVM_ERR_INVAL;
    }
    return NETVM_OK;
}

static void finish_links(netvm_ctx_t *ctx)
{
    ctx->nlinks = 0;
    ctx->links[ctx->nlinks++] = ctx->shm;
    if (ctx->tcp)
        ctx->links[ctx->nlinks++] = ctx->tcp;
    /* the shm ring of a peer holds every request and reply in flight to it:
     * bounding each initiator's requests per peer keeps it from filling */
    ctx->credits = 4096u / (2u * (unsigned)ctx->size);
    if (ctx->credits > 256)
        ctx->credits = 256;
    if (ctx->credits < 1)
        ctx->credits = 1;
}

netvm_status_t nv_links_connect(netvm_ctx_t *ctx, const void *shm_params, int timeout_ms)
{
    enum mode mode;
    netvm_status_t st = read_mode(&mode);
    if (st != NETVM_OK)
        return st;
    struct nv_link_upcalls up = { .arg = ctx, .am = nv_am_upcall, .peer_down = nv_peer_down_upcall,
                                  .complete = nv_complete_upcall, .claim = nv_claim_upcall,
                                  .translate = nv_translate_upcall,
                                  .lookup = nv_lookup_upcall };
    struct card mine = { 0 }, *all = calloc((size_t)ctx->size, sizeof *all);
    uint8_t *use_shm = calloc((size_t)ctx->size, 1), *use_tcp = calloc((size_t)ctx->size, 1);
    if (!all || !use_shm || !use_tcp) {
        st = NETVM_ERR_NOMEM;
        goto out;
    }
    st = nv_shm_link_open(&ctx->shm, ctx->rank, ctx->size, shm_params, &up, &mine.shm);
    if (st == NETVM_OK && ctx->size > 1 && mode != MODE_SHM) {
        const struct nv_shm_params *sp = shm_params;
        struct nv_tcp_params tp = { .timeout_ms = timeout_ms, .secret = nv_boot_secret(ctx->boot),
                                    .secret_len = NV_BOOT_SECRET_LEN, .max_segments = sp->max_segments,
                                    .bind_addr = nv_config_str("NETVM_TCP_ADDR"), .ep = sp->ep };
        st = nv_tcp_link_open(&ctx->tcp, ctx->rank, ctx->size, &tp, &up, &mine.tcp);
    }
    if (st == NETVM_OK)
        st = nv_boot_allgather(ctx->boot, &mine, sizeof mine, all);
    if (st != NETVM_OK)
        goto out;
    int ntcp = 0;
    for (int r = 0; r < ctx->size; r++) {
        int local = all[r].shm.host_id == mine.shm.host_id && all[r].shm.version == mine.shm.version;
        if (r == ctx->rank || (local && mode != MODE_TCP)) {
            use_shm[r] = 1;
        } else if (mode == MODE_SHM || !ctx->tcp) {
            nv_error("rank %d is not on this machine and NETVM_LINKS=shm", r);
            st = NETVM_ERR_UNSUPPORTED;
            goto out;
        } else {
            use_tcp[r] = 1;
            ntcp++;
        }
        ctx->peers[r].link = use_shm[r] ? ctx->shm : ctx->tcp;
        nv_info("rank %d: link %s (%s)", r, ctx->peers[r].link->ops->name,
                r == ctx->rank ? "ourselves" : use_shm[r] ? "same machine" :
                mode == MODE_TCP ? "NETVM_LINKS=tcp" : "another machine");
    }
    st = nv_shm_link_connect(ctx->shm, &all[0].shm, sizeof *all, use_shm);
    if (st == NETVM_OK && ntcp) {
        struct nv_tcp_card *tc = calloc((size_t)ctx->size, sizeof *tc);
        if (!tc) {
            st = NETVM_ERR_NOMEM;
            goto out;
        }
        for (int r = 0; r < ctx->size; r++)
            tc[r] = all[r].tcp;
        st = nv_tcp_link_connect(ctx->tcp, tc, use_tcp);
        free(tc);
    } else if (ctx->tcp) {
        ctx->tcp->ops->destroy(ctx->tcp);
        ctx->tcp = NULL;
    }
    if (st == NETVM_OK)
        finish_links(ctx);
out:
    free(all);
    free(use_shm);
    free(use_tcp);
    return st;
}

void nv_links_destroy(netvm_ctx_t *ctx)
{
    if (ctx->tcp)
        ctx->tcp->ops->destroy(ctx->tcp);
    if (ctx->shm)
        ctx->shm->ops->destroy(ctx->shm);
    ctx->tcp = ctx->shm = NULL;
    ctx->nlinks = 0;
}

const char *nv_link_name(const netvm_ctx_t *ctx, int rank)
{
    if (rank < 0 || rank >= ctx->size || !ctx->peers[rank].link)
        return "none";
    return ctx->peers[rank].link->ops->name;
}
