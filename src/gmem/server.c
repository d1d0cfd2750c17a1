/* The memory server's life: start (pool, procedures, listener), peers
 * leaving, the drain on shutdown, stop. Its state is the context's
 * NV_SVC_STATE_GMEM_SERVER slot, freed at netvm_finalize once no handler
 * runs any more. */
#include "gmem/server_int.h"
#include "core/svc.h"
#include "util/log.h"
#include "util/random.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>

static void *srv_create(netvm_ctx_t *ctx)
{
    struct nv_gm_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx = ctx;
    for (unsigned i = 0; i < NV_GM_BINDS; i++)
        atomic_init(&s->binds[i].peer, NV_GM_BIND_FREE);
    pthread_mutex_init(&s->binds_lock, NULL);
    pthread_mutex_init(&s->clients_lock, NULL);
    pthread_mutex_init(&s->shared_lock, NULL);
    pthread_mutex_init(&s->move_lock, NULL);
    pthread_cond_init(&s->move_cond, NULL);
    pthread_mutex_init(&s->getn_lock, NULL);
    return s;
}

static void srv_destroy(netvm_ctx_t *ctx, void *state)
{
    (void)ctx;
    struct nv_gm_server *s = state;
    nv_gm_move_stop(s);
    nv_gm_table_fini(s);
    nv_gm_shared_fini(s);
    while (s->clients) {
        struct nv_gm_client *c = s->clients;
        s->clients = c->next;
        pthread_mutex_destroy(&c->lock);
        free(c);
    }
    memset(s->cred_buf, 0, sizeof s->cred_buf);
    free(s->getn_buf);
    free(s);
}

netvm_status_t nv_gm_server_start(netvm_ctx_t *ctx, const struct nv_gm_server_opts *o, struct nv_gm_server **out)
{
    if (!ctx || !o || !o->listen || !out || o->size < NV_GM_PAGE || (o->size / NV_GM_PAGE) >= NV_GM_NIL ||
        !o->credential || o->credential_len < 16 || o->credential_len > 64)
        return NETVM_ERR_INVAL;
    if (netvm_thread_level(ctx) != NETVM_THREAD_MULTIPLE)
        return NETVM_ERR_STATE;   /* the move thread calls netvm beside the main thread */
    if (nv_svc_state_if(ctx, NV_SVC_STATE_GMEM_SERVER))
        return NETVM_ERR_EXISTS;
    struct nv_gm_server *s = nv_svc_state(ctx, NV_SVC_STATE_GMEM_SERVER, srv_create, srv_destroy);
    if (!s)
        return NETVM_ERR_NOMEM;
    s->npages = (uint32_t)(o->size / NV_GM_PAGE);
    s->pool_bytes = (size_t)s->npages * NV_GM_PAGE;
    s->direct = !o->no_direct;
    s->client_max = o->client_max ? o->client_max / NV_GM_PAGE : s->npages;
    if (s->client_max > s->npages)
        s->client_max = s->npages;
    memcpy(s->cred_buf, o->credential, o->credential_len);
    s->cred = s->cred_buf;
    s->cred_len = o->credential_len;
    do
        s->server_id = nv_random_key();
    while (!s->server_id);
    s->start_ns = nv_now_ns();
    if (nv_gm_table_init(s) != 0) {
        nv_error("memd: cannot map a pool of %zu bytes", s->pool_bytes);
        return NETVM_ERR_NOMEM;   /* the state is freed at finalize */
    }
    netvm_status_t st = nv_gm_procs_register(s);
    if (st != NETVM_OK)
        return st;
    netvm_listen_opts_t lo = { .credential = s->cred, .credential_len = s->cred_len, .max_peers = o->max_peers };
    st = netvm_listen(ctx, o->listen, &lo, &s->lis);
    if (st != NETVM_OK)
        return st;
    *out = s;
    return NETVM_OK;
}

const char *nv_gm_server_addr(const struct nv_gm_server *s) { return netvm_listener_addr(s->lis); }

void nv_gm_server_peer_down(struct nv_gm_server *s, int peer)
{
    pthread_mutex_lock(&s->move_lock);
    for (int i = 0; i < s->ndests; i++)
        if (s->dests[i].peer == peer) {
            s->dests[i] = s->dests[--s->ndests];
            break;
        }
    pthread_mutex_unlock(&s->move_lock);
    struct nv_gm_bind b;
    if (!nv_gm_bind_remove(s, peer, &b) || b.role != NV_GM_ROLE_CLIENT)
        return;
    /* its named regions stay; a writer's name is free again */
    nv_gm_shared_peer_down(s, peer);
    /* a client that dies leaves no pages behind */
    struct nv_gm_client *c = b.client;
    uint64_t had = atomic_load_explicit(&c->pages, memory_order_relaxed);
    uint64_t dropped = nv_gm_drop_range(s, c, c->id, UINT64_MAX, 0, UINT64_MAX);
    pthread_mutex_lock(&s->clients_lock);
    c->peer = -1;
    pthread_mutex_unlock(&s->clients_lock);
    nv_debug("memd: client %016llx (peer %d) left: %llu of %llu pages freed", (unsigned long long)c->id, peer,
             (unsigned long long)dropped, (unsigned long long)had);
}

/* --- the drain ------------------------------------------------------------------- */

static int drain_answered(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *out, void *arg)
{
    (void)ctx;
    (void)out;   /* any outcome: the client answered, has no such procedure, or is gone */
    struct nv_gm_client *c = arg;
    atomic_store_explicit(&c->drain_answered, 1, memory_order_release);
    return NETVM_RPC_DONE;
}

void nv_gm_server_drain_begin(struct nv_gm_server *s, int deadline_ms)
{
    atomic_store(&s->draining, 1);
    s->drain_deadline_ns = nv_now_ns() + (uint64_t)deadline_ms * 1000000u;
    pthread_mutex_lock(&s->clients_lock);
    for (struct nv_gm_client *c = s->clients; c; c = c->next) {
        if (c->peer < 0 || c->drain_told)
            continue;
        c->drain_told = 1;
        netvm_rpc_handle_t *h;
        uint64_t a[3] = { NV_GM_NOTICE_DRAIN, s->server_id, (uint64_t)deadline_ms };
        if (netvm_rpc_begin(s->ctx, &h) != NETVM_OK) {
            atomic_store(&c->drain_answered, 1);
            continue;
        }
        netvm_rpc_push(h, drain_answered, c);
        /* the answer may take until the deadline: the client moves its pages first */
        if (nv_rpc_svc_issue(h, c->peer, nv_gm_k(NV_GM_NOTICE), a, 3, NULL, 0, NULL, 0, deadline_ms + 1000) !=
            NETVM_OK)
            atomic_store(&c->drain_answered, 1);
        netvm_rpc_drop(h);
    }
    pthread_mutex_unlock(&s->clients_lock);
}

int nv_gm_server_drain_pending(struct nv_gm_server *s)
{
    int n = 0;
    pthread_mutex_lock(&s->clients_lock);
    for (struct nv_gm_client *c = s->clients; c; c = c->next)
        n += c->drain_told && c->peer >= 0 && !atomic_load_explicit(&c->drain_answered, memory_order_acquire) &&
             atomic_load_explicit(&c->pages, memory_order_relaxed) > 0;
    pthread_mutex_unlock(&s->clients_lock);
    return n;
}

int nv_gm_server_drain_done(struct nv_gm_server *s) { return nv_gm_server_drain_pending(s) == 0; }

void nv_gm_server_stop(struct nv_gm_server *s)
{
    if (atomic_exchange(&s->stopped, 1))
        return;
    netvm_listener_close(s->lis);
    nv_gm_move_stop(s);
}
