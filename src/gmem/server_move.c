/* NV_GM_MOVE: put a client's pages at another server, then forward GETs
 * for them there. Connecting and putting wait for the destination, so the
 * procedure only queues the move and keeps the call's token; the server's
 * move thread does it and answers. */
#include "gmem/server_int.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nv_gm_move {
    netvm_am_token_t   token;
    uint64_t           client, region, first, n;
    char               addr[64];
    struct nv_gm_move *next;
};

static void *move_main(void *arg);

int nv_gm_proc_move(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    netvm_status_t st = NETVM_OK;
    struct nv_gm_bind b;
    if (call->nargs < 4 || !call->len || call->len >= sizeof ((struct nv_gm_move *)0)->addr ||
        !nv_log_printable(call->payload, call->len))
        st = NETVM_ERR_INVAL;
    else if (atomic_load_explicit(&s->stopped, memory_order_relaxed) || !nv_gm_bind_find(s, call->peer, &b))
        st = NETVM_ERR_STATE;
    else if (b.role == NV_GM_ROLE_OBSERVER)
        st = NETVM_ERR_RIGHTS;
    else if (b.role == NV_GM_ROLE_CLIENT && b.id != call->args[0])
        st = NETVM_ERR_KEY;
    struct nv_gm_move *m = NULL;
    if (st == NETVM_OK && !(m = calloc(1, sizeof *m)))
        st = NETVM_ERR_NOMEM;
    if (st != NETVM_OK) {
        atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
        netvm_rpc_reply(ctx, &call->token, st, NULL, 0, NULL, 0);
        return NETVM_RPC_DONE;
    }
    m->token = call->token;
    m->client = call->args[0];
    m->region = call->args[1];
    m->first = call->args[2];
    m->n = call->args[3];
    memcpy(m->addr, call->payload, call->len);
    pthread_mutex_lock(&s->move_lock);
    if (!s->move_up && pthread_create(&s->move_thread, NULL, move_main, s) == 0)
        s->move_up = 1;
    if (!s->move_up || s->move_stop) {
        pthread_mutex_unlock(&s->move_lock);
        free(m);
        netvm_rpc_reply(ctx, &call->token, NETVM_ERR_STATE, NULL, 0, NULL, 0);
        return NETVM_RPC_DONE;
    }
    if (s->move_tail)
        s->move_tail->next = m;
    else
        s->move_head = m;
    s->move_tail = m;
    pthread_cond_signal(&s->move_cond);
    pthread_mutex_unlock(&s->move_lock);
    return NETVM_RPC_DONE;
}

/* The destination's peer id: connected and greeted as a server once, then
 * kept (nv_gm_server_peer_down forgets it). */
static netvm_status_t dest_peer(struct nv_gm_server *s, const char *addr, int *peer)
{
    pthread_mutex_lock(&s->move_lock);
    for (int i = 0; i < s->ndests; i++)
        if (!strcmp(s->dests[i].addr, addr)) {
            *peer = s->dests[i].peer;
            pthread_mutex_unlock(&s->move_lock);
            return NETVM_OK;
        }
    pthread_mutex_unlock(&s->move_lock);
    netvm_status_t st = netvm_connect(s->ctx, addr, s->cred, s->cred_len, 0, peer);
    if (st != NETVM_OK)
        return st;
    uint64_t a[3] = { NV_GM_VERSION, NV_GM_ROLE_SERVER, s->server_id };
    netvm_rpc_result_t res;
    st = nv_rpc_svc_call(s->ctx, *peer, nv_gm_k(NV_GM_HELLO), a, 3, NULL, 0, NULL, 0, 0, &res);
    if (st != NETVM_OK) {
        netvm_disconnect(s->ctx, *peer);
        return st;
    }
    pthread_mutex_lock(&s->move_lock);
    if (s->ndests == (int)(sizeof s->dests / sizeof s->dests[0])) {
        memmove(s->dests, s->dests + 1, sizeof s->dests - sizeof s->dests[0]);   /* forget the oldest */
        s->ndests--;
    }
    snprintf(s->dests[s->ndests].addr, sizeof s->dests[0].addr, "%s", addr);
    s->dests[s->ndests++].peer = *peer;
    pthread_mutex_unlock(&s->move_lock);
    return NETVM_OK;
}

static int key_cmp(const void *a, const void *b)
{
    const struct nv_gm_key *x = a, *y = b;
    if (x->region != y->region)
        return x->region < y->region ? -1 : 1;
    return x->page < y->page ? -1 : x->page > y->page;
}

/* Put keys[0..n) (one region, consecutive pages) at the destination and
 * turn each into a forward; pages written meanwhile stay here (and their
 * copy there is freed). Pages moved. */
static uint64_t move_run(struct nv_gm_server *s, int dest, const struct nv_gm_key *keys, uint32_t n, uint8_t *buf,
                         netvm_status_t *stp)
{
    uint32_t gen[NV_GM_BATCH];
    uint32_t have = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t h = nv_gm_key_hash(&keys[i]);
        struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
        pthread_mutex_lock(&sh->lock);
        uint32_t slot = nv_gm_lookup_locked(s, h, &keys[i]);
        if (slot != NV_GM_NIL) {
            memcpy(buf + (size_t)i * NV_GM_PAGE, nv_gm_slot_addr(s, slot), NV_GM_PAGE);
            gen[i] = s->meta[slot].gen;
            have++;
        }
        pthread_mutex_unlock(&sh->lock);
        if (slot == NV_GM_NIL)
            break;   /* freed meanwhile: the run ends here */
    }
    if (!have)
        return 0;
    uint64_t a[4] = { keys[0].client, keys[0].region, keys[0].page, have };
    netvm_rpc_result_t res;
    netvm_status_t st = nv_rpc_svc_call(s->ctx, dest, nv_gm_k(NV_GM_PUT), a, 4, buf, (size_t)have * NV_GM_PAGE,
                                        NULL, 0, 0, &res);
    if (st != NETVM_OK) {
        *stp = st;
        return 0;
    }
    uint64_t moved = 0;
    for (uint32_t i = 0; i < have; i++) {
        uint64_t h = nv_gm_key_hash(&keys[i]);
        struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
        pthread_mutex_lock(&sh->lock);
        uint32_t slot = nv_gm_lookup_locked(s, h, &keys[i]);
        int same = slot != NV_GM_NIL && s->meta[slot].gen == gen[i];
        if (same) {
            nv_gm_remove_locked(s, h, &keys[i]);
            nv_gm_fwd_set_locked(s, h, &keys[i], dest);
        }
        pthread_mutex_unlock(&sh->lock);
        if (same) {
            moved++;
            continue;
        }
        /* written or freed here while it travelled: the copy there is stale */
        uint64_t f[4] = { keys[i].client, keys[i].region, keys[i].page, 1 };
        nv_rpc_svc_call(s->ctx, dest, nv_gm_k(NV_GM_FREE), f, 4, NULL, 0, NULL, 0, 0, &res);
    }
    return moved;
}

static netvm_status_t do_move(struct nv_gm_server *s, const struct nv_gm_move *m, uint64_t *moved)
{
    *moved = 0;
    struct nv_gm_client *c = nv_gm_client_get(s, m->client, 0);
    if (!c)
        return NETVM_OK;
    int dest;
    netvm_status_t st = dest_peer(s, m->addr, &dest);
    if (st != NETVM_OK) {
        nv_warn("memd: move to %s: %s", m->addr, netvm_strerror(st));
        return st;
    }
    uint64_t want = atomic_load_explicit(&c->pages, memory_order_relaxed);
    uint64_t region = m->region;
    struct nv_gm_key *keys = malloc((want ? want : 1) * sizeof *keys);
    uint8_t *buf = malloc((size_t)NV_GM_BATCH * NV_GM_PAGE);
    if (!keys || !buf) {
        free(keys);
        free(buf);
        return NETVM_ERR_NOMEM;
    }
    uint32_t n = nv_gm_client_keys(c, region, m->n == UINT64_MAX ? 0 : m->first, m->n, keys,
                                   (uint32_t)(want < UINT32_MAX ? want : UINT32_MAX));
    qsort(keys, n, sizeof *keys, key_cmp);
    for (uint32_t i = 0; i < n && st == NETVM_OK;) {
        uint32_t run = 1;
        while (i + run < n && run < NV_GM_BATCH && keys[i + run].region == keys[i].region &&
               keys[i + run].page == keys[i].page + run)
            run++;
        *moved += move_run(s, dest, keys + i, run, buf, &st);
        i += run;
    }
    free(keys);
    free(buf);
    atomic_fetch_add_explicit(&s->moves_out, *moved, memory_order_relaxed);
    return st;
}

static void *move_main(void *arg)
{
    struct nv_gm_server *s = arg;
    pthread_mutex_lock(&s->move_lock);
    for (;;) {
        while (!s->move_head && !s->move_stop)
            pthread_cond_wait(&s->move_cond, &s->move_lock);
        struct nv_gm_move *m = s->move_head;
        if (!m)
            break;
        s->move_head = m->next;
        if (!s->move_head)
            s->move_tail = NULL;
        int stop = s->move_stop;
        pthread_mutex_unlock(&s->move_lock);
        uint64_t moved = 0;
        netvm_status_t st = stop ? NETVM_ERR_STATE : do_move(s, m, &moved);
        netvm_rpc_reply(s->ctx, &m->token, st, &moved, 1, NULL, 0);
        free(m);
        pthread_mutex_lock(&s->move_lock);
    }
    pthread_mutex_unlock(&s->move_lock);
    return NULL;
}

void nv_gm_move_stop(struct nv_gm_server *s)
{
    pthread_mutex_lock(&s->move_lock);
    s->move_stop = 1;
    int up = s->move_up;
    pthread_cond_signal(&s->move_cond);
    pthread_mutex_unlock(&s->move_lock);
    if (up)
        pthread_join(s->move_thread, NULL);
    pthread_mutex_lock(&s->move_lock);
    s->move_up = 0;
    pthread_mutex_unlock(&s->move_lock);
}
