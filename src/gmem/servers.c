/* The per-context server set: client id, credential, the server table,
 * connecting with HELLO, failure reports, and placement by rendezvous
 * (highest-random-weight) hashing, which moves only the extents whose top
 * R change when a server joins or leaves. */
#include "gmem/servers.h"
#include "core/svc.h"
#include "util/config.h"
#include "util/log.h"
#include "util/random.h"
#include "util/time.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static int notice_proc(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg);

static void *set_create(netvm_ctx_t *ctx)
{
    struct nv_gm_servers *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->ctx = ctx;
    /* the shared bit names regions, never clients (proto.h) */
    if (!(g->client_id = nv_random_key() & ~NV_GM_SHARED_BIT)) {
        nv_error("gmem: no random client id from the kernel");
        free(g);
        return NULL;
    }
    g->next_region = 1;
    pthread_mutex_init(&g->admin, NULL);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    return g;
}

/* netvm_finalize's first step (core/svc.h): no direct read may outlive
 * the imports finalize releases. */
static void set_quiesce(netvm_ctx_t *ctx, void *state)
{
    (void)ctx;
    struct nv_gm_servers *g = state;
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++)
        nv_gm_srv_view_drop(g, i);
}

static void set_destroy(netvm_ctx_t *ctx, void *state)
{
    (void)ctx;
    struct nv_gm_servers *g = state;
    nv_gm_monitor_stop(g);
    nv_gm_embedded_stop(g);
    pthread_mutex_destroy(&g->admin);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
}

struct nv_gm_servers *nv_gm_servers_if(netvm_ctx_t *ctx)
{
    return nv_svc_state_if(ctx, NV_SVC_STATE_GMEM);
}

static netvm_status_t take_credential(struct nv_gm_servers *g, const netvm_gmem_opts_t *opts)
{
    if (opts && opts->credential) {
        if (opts->credential_len < NV_GM_CRED_MIN || opts->credential_len > NV_GM_CRED_MAX) {
            nv_error("gmem: a credential has 16 to 64 bytes, not %zu", opts->credential_len);
            return NETVM_ERR_INVAL;
        }
        memcpy(g->cred, opts->credential, opts->credential_len);
        g->cred_len = opts->credential_len;
        return NETVM_OK;
    }
    const char *path = nv_config_str("NETVM_GMEM_CREDENTIAL_FILE");
    if (!path || !*path) {
        nv_error("gmem: memory servers are named but no credential: set NETVM_GMEM_CREDENTIAL_FILE "
                 "or netvm_gmem_opts_t.credential");
        return NETVM_ERR_AUTH;
    }
    char why[256];
    if (nv_gm_cred_read_file(path, g->cred, &g->cred_len, why, sizeof why) != 0) {
        nv_error("gmem: %s", why);
        return NETVM_ERR_AUTH;
    }
    return NETVM_OK;
}

static netvm_status_t connect_list(struct nv_gm_servers *g, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return NETVM_ERR_NOMEM;
    netvm_status_t st = NETVM_OK;
    for (char *a = strtok_r(copy, ", ", &save); a && st == NETVM_OK; a = strtok_r(NULL, ", ", &save)) {
        int idx;
        if (nv_gm_srv_by_addr(g, a) >= 0)
            continue;
        st = nv_gm_srv_connect(g, a, &idx);
    }
    free(copy);
    if (st == NETVM_OK && atomic_load(&g->nservers) == 0) {
        nv_error("gmem: NETVM_GMEM_SERVERS names no server");
        st = NETVM_ERR_INVAL;
    }
    return st;
}

/* Connect the set on its first use; a failure leaves it empty, so a later
 * region tries again. */
static netvm_status_t set_setup(struct nv_gm_servers *g, const netvm_gmem_opts_t *opts)
{
    g->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms
                                                 : (int)nv_config_long("NETVM_GMEM_TIMEOUT", 1, 3600000);
    g->direct = (int)nv_config_long("NETVM_GMEM_DIRECT", 0, 1);
    const char *list = opts && opts->servers && *opts->servers ? opts->servers : nv_config_str("NETVM_GMEM_SERVERS");
    netvm_status_t st = nv_rpc_svc_register(g->ctx, nv_gm_k(NV_GM_NOTICE), notice_proc, g);
    if (st != NETVM_OK) {
        nv_error("gmem: cannot register the NOTICE procedure: %s", netvm_strerror(st));
        return st;
    }
    if (list && *list) {
        if ((st = take_credential(g, opts)) == NETVM_OK)
            st = connect_list(g, list);
    } else {
        int n = (int)nv_config_long("NETVM_GMEM_EMBEDDED", 0, NV_GM_MAX_EMBEDDED);
        if (n == 0) {
            nv_error("gmem: no memory servers: NETVM_GMEM_SERVERS is unset and NETVM_GMEM_EMBEDDED is 0");
            return NETVM_ERR_PEER;
        }
        g->cred_len = 32;
        if (nv_random_bytes(g->cred, g->cred_len) != 0)
            return NETVM_ERR_NOMEM;
        st = nv_gm_embedded_start(g, n);
    }
    if (st == NETVM_OK)
        st = nv_gm_monitor_start(g);
    if (st != NETVM_OK) {
        /* leave nothing half made: the next region starts over */
        for (int i = 0; i < atomic_load(&g->nservers); i++)
            if (atomic_load(&g->srv[i].state) != NV_GM_SRV_REMOVED) {
                netvm_disconnect(g->ctx, g->srv[i].peer);
                atomic_store(&g->srv[i].state, NV_GM_SRV_REMOVED);
            }
        nv_gm_embedded_stop(g);
    }
    return st;
}

struct nv_gm_servers *nv_gm_servers_get(netvm_ctx_t *ctx, const netvm_gmem_opts_t *opts, netvm_status_t *st)
{
    struct nv_gm_servers *g = nv_svc_state(ctx, NV_SVC_STATE_GMEM, set_create, set_destroy);
    *st = g ? NETVM_OK : NETVM_ERR_NOMEM;
    if (!g)
        return NULL;
    /* here, not in set_create: nv_svc_state runs create under the lock
     * this takes */
    nv_svc_on_finalize(ctx, NV_SVC_STATE_GMEM, set_quiesce);
    pthread_mutex_lock(&g->admin);
    if (!g->monitor_started)
        *st = set_setup(g, opts);
    pthread_mutex_unlock(&g->admin);
    return *st == NETVM_OK ? g : NULL;
}

netvm_status_t nv_gm_srv_connect(struct nv_gm_servers *g, const char *addr, int *idx)
{
    int n = atomic_load(&g->nservers);
    if (n == NV_GM_MAX_SERVERS) {
        nv_error("gmem: more than %d memory servers over this context's life", NV_GM_MAX_SERVERS);
        return NETVM_ERR_NOMEM;
    }
    if (strlen(addr) >= NV_GM_ADDR_MAX)
        return NETVM_ERR_INVAL;
    int peer;
    netvm_status_t st = netvm_connect(g->ctx, addr, g->cred, g->cred_len, g->timeout_ms > 5000 ? g->timeout_ms : 5000,
                                      &peer);
    if (st != NETVM_OK) {
        nv_error("gmem: cannot connect to memory server %s: %s", addr, netvm_strerror(st));
        return st;
    }
    uint64_t args[4] = { NV_GM_VERSION, NV_GM_ROLE_CLIENT, g->client_id, g->direct ? NV_GM_HELLO_VIEW : 0 };
    netvm_rpc_result_t res;
    netvm_seg_handle_t vh;
    st = nv_rpc_svc_call(g->ctx, peer, nv_gm_k(NV_GM_HELLO), args, 4, NULL, 0, &vh, sizeof vh, g->timeout_ms, &res);
    if (st == NETVM_OK && res.nargs < 4)
        st = NETVM_ERR_UNSUPPORTED;
    if (st != NETVM_OK) {
        nv_error("gmem: memory server %s refused HELLO: %s", addr, netvm_strerror(st));
        netvm_disconnect(g->ctx, peer);
        return st;
    }
    struct nv_gm_srv *s = &g->srv[n];
    memset(s, 0, sizeof *s);
    s->owner = g;
    strcpy(s->addr, addr);
    s->peer = peer;
    s->id = res.args[0];
    s->pool_pages = res.args[1];
    s->client_max_pages = res.args[2];
    atomic_store(&s->state, NV_GM_SRV_ALIVE);
    atomic_store(&s->last_ok_ns, nv_now_ns());
    if (g->direct && res.len == sizeof vh)
        atomic_store(&s->view, nv_gm_view_attach(g->ctx, peer, &vh));
    atomic_store_explicit(&g->nservers, n + 1, memory_order_release);
    nv_info("gmem: memory server %d at %s (id %llx, %llu pages, %llu for this client%s)", n, addr,
            (unsigned long long)s->id, (unsigned long long)s->pool_pages, (unsigned long long)s->client_max_pages,
            atomic_load(&s->view) ? ", read directly" : "");
    *idx = n;
    return NETVM_OK;
}

int nv_gm_srv_by_peer(struct nv_gm_servers *g, int peer)
{
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (g->srv[i].peer == peer && atomic_load(&g->srv[i].state) != NV_GM_SRV_REMOVED)
            return i;
    return -1;
}

int nv_gm_srv_by_addr(struct nv_gm_servers *g, const char *addr)
{
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (!strcmp(g->srv[i].addr, addr) && atomic_load(&g->srv[i].state) != NV_GM_SRV_REMOVED)
            return i;
    return -1;
}

void nv_gm_srv_report(struct nv_gm_servers *g, int idx, netvm_status_t st)
{
    struct nv_gm_srv *s = &g->srv[idx];
    int cur = atomic_load(&s->state);
    if (st == NETVM_ERR_PEER) {
        if (cur != NV_GM_SRV_DEAD && cur != NV_GM_SRV_REMOVED &&
            atomic_compare_exchange_strong(&s->state, &cur, NV_GM_SRV_DEAD)) {
            nv_warn("gmem: memory server %s is gone; its pages are read from replicas and re-replicated", s->addr);
            nv_gm_monitor_kick(g);
        }
    } else if (st == NETVM_ERR_TIMEOUT) {
        if (cur == NV_GM_SRV_ALIVE && atomic_compare_exchange_strong(&s->state, &cur, NV_GM_SRV_SUSPECT))
            nv_warn("gmem: memory server %s did not answer within %d ms: suspected, its replicas are read instead",
                    s->addr, g->timeout_ms);
    } else if (st == NETVM_OK || st == NETVM_ERR_NOMEM || st == NETVM_ERR_NOTFOUND) {
        if (cur != NV_GM_SRV_ALIVE)
            atomic_store_explicit(&s->last_ok_ns, nv_now_ns(), memory_order_relaxed);
        if (cur == NV_GM_SRV_SUSPECT && atomic_compare_exchange_strong(&s->state, &cur, NV_GM_SRV_ALIVE))
            nv_info("gmem: memory server %s answers again", s->addr);
    }
}

int nv_gm_srv_readable(const struct nv_gm_servers *g, int idx)
{
    int st = atomic_load(&g->srv[idx].state);
    return st == NV_GM_SRV_ALIVE || st == NV_GM_SRV_SUSPECT || st == NV_GM_SRV_DRAINING;
}

uint64_t nv_gm_srv_view_read(struct nv_gm_servers *g, int idx, uint64_t owner, uint64_t region, uint64_t first,
                             uint64_t n, void *buf, uint64_t want)
{
    struct nv_gm_srv *s = &g->srv[idx];
    if (!atomic_load_explicit(&s->view, memory_order_relaxed))
        return 0;
    /* seq_cst both here and in view_drop: the dropper sees this count or
     * this reader sees the view gone */
    atomic_fetch_add(&s->view_users, 1);
    struct nv_gm_view *v = atomic_load(&s->view);
    uint64_t got = 0;
    if (v && nv_gm_srv_readable(g, idx)) {
        if (n == 1)
            got = (want & 1) && nv_gm_view_read(v, owner, region, first, buf);
        else
            got = nv_gm_view_read_run(v, owner, region, first, n, buf, want);
        if (got && !nv_gm_view_alive(v))
            got = 0;
    }
    atomic_fetch_sub_explicit(&s->view_users, 1, memory_order_release);
    return got;
}

void nv_gm_srv_view_drop(struct nv_gm_servers *g, int idx)
{
    struct nv_gm_srv *s = &g->srv[idx];
    struct nv_gm_view *v = atomic_exchange(&s->view, NULL);
    if (!v)
        return;
    /* a reader holds it for one copy of a page */
    while (atomic_load_explicit(&s->view_users, memory_order_acquire))
        sched_yield();
    nv_gm_view_detach(v);
}

int nv_gm_srv_placeable(const struct nv_gm_servers *g, int idx)
{
    return atomic_load(&g->srv[idx].state) == NV_GM_SRV_ALIVE;
}

int nv_gm_servers_placeable_count(struct nv_gm_servers *g)
{
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire), c = 0;
    for (int i = 0; i < n; i++)
        c += nv_gm_srv_placeable(g, i);
    return c;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int nv_gm_place(struct nv_gm_servers *g, uint64_t region, uint64_t extent, uint8_t *order, int max)
{
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire), k = 0;
    uint64_t w[NV_GM_MAX_SERVERS];
    uint64_t key = mix64(region * 0x9e3779b97f4a7c15ull ^ mix64(extent));
    for (int i = 0; i < n; i++) {
        if (!nv_gm_srv_placeable(g, i))
            continue;
        uint64_t wi = mix64(key ^ g->srv[i].id);
        /* insertion into the first max by weight, highest first */
        int j = k < max ? k++ : max;
        while (j > 0 && w[j - 1] < wi) {
            if (j < max) {
                w[j] = w[j - 1];
                order[j] = order[j - 1];
            }
            j--;
        }
        if (j < max) {
            w[j] = wi;
            order[j] = (uint8_t)i;
        }
    }
    return k;
}

/* A server says it is shutting down: take its pages elsewhere (the
 * monitor does, reading from it meanwhile) and answer when they are off.
 * Or a shared region's writer synced: drop the pages it wrote, then
 * answer (store_shared.c). */
static int notice_proc(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_servers *g = arg;
    int idx = nv_gm_srv_by_peer(g, call->peer);
    if (call->nargs >= 4 && call->args[0] == NV_GM_NOTICE_INVALIDATE && idx >= 0) {
        netvm_status_t st;
        if (nv_gm_shared_invalidate(g, &call->token, call->args[3], call->payload, call->len, &st))
            netvm_rpc_reply(ctx, &call->token, st, NULL, 0, NULL, 0);
        else
            nv_gm_monitor_kick(g);
        return NETVM_RPC_DONE;
    }
    if (call->nargs < 1 || call->args[0] != NV_GM_NOTICE_DRAIN || idx < 0) {
        netvm_rpc_reply(ctx, &call->token, idx < 0 ? NETVM_ERR_NOTFOUND : NETVM_ERR_INVAL, NULL, 0, NULL, 0);
        return NETVM_RPC_DONE;
    }
    struct nv_gm_srv *s = &g->srv[idx];
    s->drain_token = call->token;
    atomic_store(&s->drain_token_set, 1);
    int cur = NV_GM_SRV_ALIVE;
    if (!atomic_compare_exchange_strong(&s->state, &cur, NV_GM_SRV_DRAINING) && cur == NV_GM_SRV_SUSPECT)
        atomic_compare_exchange_strong(&s->state, &cur, NV_GM_SRV_DRAINING);
    nv_info("gmem: memory server %s is shutting down: moving this client's pages off it", s->addr);
    nv_gm_monitor_kick(g);
    return NETVM_RPC_DONE;
}
