/* The memory server's procedures (proto.h): HELLO, PUT, PUTV, GET, GETN, FREE, STAT
 * (MOVE is server_move.c's). They run in the progress engine and never
 * block: the only waits are the table's shard locks and the free list's.
 *
 * GET answers from the pool slot itself. When may the slot be reused? A
 * reply is sent with NV_AMS_REPLY | NV_AMS_COPY (core/am.c, send_reply):
 * the link never keeps a reference to a reply's payload after
 * netvm_rpc_reply returns. tcp copies it into the connection's send arena
 * (or a buffer of its own when the arena is full, or a tcp_mail when
 * another thread owns the connection: tcp_tx.c, tcp_link.c tcp_am_send);
 * shm copies an eager payload into its ring (through a local copy that
 * survives a fault) and a larger one into a malloc'd rendezvous buffer
 * (shm_msg.c shm_am_send). So the only race is a writer of the slot while
 * the reply copies it: GET holds the page's shard lock across the reply,
 * and every writer of a slot (PUT overwriting, a slot freed by FREE, a
 * move or a dead client and then taken by another page) holds that same
 * shard lock when it writes or frees it. The reply never blocks
 * (NV_AMS_REPLY queues what cannot leave at once), so the lock is held for
 * one copy of 4 KiB and at most one send. */
#include "gmem/server_int.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>

static void count(_Atomic uint64_t *c, uint64_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }

static int answer(netvm_ctx_t *ctx, netvm_rpc_call_t *call, netvm_status_t st, const uint64_t *args,
                  unsigned nargs)
{
    netvm_rpc_reply(ctx, &call->token, st, args, nargs, NULL, 0);
    return NETVM_RPC_DONE;
}

static int refuse(struct nv_gm_server *s, netvm_ctx_t *ctx, netvm_rpc_call_t *call, netvm_status_t st)
{
    count(&s->refused, 1);
    return answer(ctx, call, st, NULL, 0);
}

/* Who may make a page call naming client id: the client bound to that id
 * on this connection, a client that opened the named region of a shared
 * id (write: as its writer), or a server. *c: the id's record (made for a server
 * moving pages in when make). */
static netvm_status_t page_caller(struct nv_gm_server *s, const netvm_rpc_call_t *call, uint64_t id, int make,
                                  int write, struct nv_gm_bind *b, struct nv_gm_client **c, uint64_t *bound)
{
    *bound = s->client_max;
    if (atomic_load_explicit(&s->stopped, memory_order_relaxed))
        return NETVM_ERR_STATE;
    if (!nv_gm_bind_find(s, call->peer, b))
        return NETVM_ERR_STATE;   /* no HELLO */
    if (b->role == NV_GM_ROLE_OBSERVER)
        return NETVM_ERR_RIGHTS;
    if (b->role == NV_GM_ROLE_CLIENT && (id & NV_GM_SHARED_BIT))
        return nv_gm_shared_caller(s, call->peer, id, write, c, bound);
    if (b->role == NV_GM_ROLE_CLIENT) {
        if (id != b->id)
            return NETVM_ERR_KEY;
        *c = b->client;
        return NETVM_OK;
    }
    *c = nv_gm_client_get(s, id, make);
    return *c || !make ? NETVM_OK : NETVM_ERR_NOMEM;
}

static int proc_hello(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    if (call->nargs < 3)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    if (call->args[0] != NV_GM_VERSION)
        return refuse(s, ctx, call, NETVM_ERR_UNSUPPORTED);
    if (call->args[1] > NV_GM_ROLE_OBSERVER)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    /* a client id with the shared bit would pass for a named region's pages */
    if (call->args[1] == NV_GM_ROLE_CLIENT && (call->args[2] & NV_GM_SHARED_BIT))
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    if (atomic_load_explicit(&s->stopped, memory_order_relaxed))
        return refuse(s, ctx, call, NETVM_ERR_STATE);
    netvm_status_t st = nv_gm_bind_add(s, call->peer, (int)call->args[1], call->args[2]);
    if (st != NETVM_OK)
        return refuse(s, ctx, call, st);
    uint64_t a[4] = { s->server_id, s->npages, s->client_max, nv_gm_slots_free(s) };
    /* a client on this machine (the shm link) may read the pool itself
     * (direct.h); one across the network never learns the view's key */
    netvm_seg_handle_t vh;
    netvm_peer_info_t pi;
    if (call->args[1] == NV_GM_ROLE_CLIENT && call->nargs >= 4 && (call->args[3] & NV_GM_HELLO_VIEW) &&
        s->view_seg && netvm_peer_info(ctx, call->peer, &pi) == NETVM_OK &&
        pi.link && !strcmp(pi.link, "shm") && netvm_seg_handle(s->view_seg, &vh) == NETVM_OK) {
        netvm_rpc_reply(ctx, &call->token, NETVM_OK, a, 4, &vh, sizeof vh);
        return NETVM_RPC_DONE;
    }
    return answer(ctx, call, NETVM_OK, a, 4);
}

/* PUT and PUTV: store n pages, page i being list[i] (PUTV) or first + i
 * (PUT), its bytes at src + i * NV_GM_PAGE. */
static int put_pages(struct nv_gm_server *s, netvm_ctx_t *ctx, netvm_rpc_call_t *call, uint64_t id,
                     uint64_t region, const uint64_t *list, uint64_t first, uint64_t n, const uint8_t *src)
{
    struct nv_gm_bind b;
    struct nv_gm_client *c = NULL;
    uint64_t bound;
    netvm_status_t st = page_caller(s, call, id, 1, 1, &b, &c, &bound);
    if (st != NETVM_OK)
        return refuse(s, ctx, call, st);

    /* pages not held yet take slots and count against the client's bound;
     * they are reserved first, so a refused PUT changes nothing */
    uint32_t missing = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct nv_gm_key k = { id, region, list ? list[i] : first + i };
        uint64_t h = nv_gm_key_hash(&k);
        struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
        pthread_mutex_lock(&sh->lock);
        missing += nv_gm_lookup_locked(s, h, &k) == NV_GM_NIL;
        pthread_mutex_unlock(&sh->lock);
    }
    uint32_t slots[NV_GM_PUT_MAX], used = 0;
    if (missing) {
        /* a racing PUT or FREE of the same client can make this count
         * stale: the bound may then be passed by those few pages, and the
         * count of pages (c->pages) stays exact */
        if (atomic_load_explicit(&s->draining, memory_order_relaxed) ||
            atomic_load_explicit(&c->pages, memory_order_relaxed) + missing > bound ||
            nv_gm_slots_take(s, slots, missing) != 0)
            return refuse(s, ctx, call, NETVM_ERR_NOMEM);
    }
    for (uint64_t i = 0; i < n; i++) {
        struct nv_gm_key k = { id, region, list ? list[i] : first + i };
        uint64_t h = nv_gm_key_hash(&k);
        struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
        pthread_mutex_lock(&sh->lock);
        uint32_t slot = nv_gm_lookup_locked(s, h, &k);
        if (slot == NV_GM_NIL && used < missing) {
            slot = slots[used++];
            memcpy(nv_gm_slot_addr(s, slot), src + i * NV_GM_PAGE, NV_GM_PAGE);
            nv_gm_insert_locked(s, h, &k, slot, c);
        } else if (slot != NV_GM_NIL) {
            nv_gm_shard_wbegin(s, h);
            memcpy(nv_gm_slot_addr(s, slot), src + i * NV_GM_PAGE, NV_GM_PAGE);
            s->meta[slot].gen++;
            nv_gm_shard_wend(s, h);
        } else {
            /* freed by a racing FREE after the count: the reservation ran out */
            pthread_mutex_unlock(&sh->lock);
            if (used < missing)
                nv_gm_slots_give(s, slots + used, missing - used);
            return refuse(s, ctx, call, NETVM_ERR_NOMEM);
        }
        /* the client takes a page it moved back: the forward is stale */
        if (b.role == NV_GM_ROLE_CLIENT)
            nv_gm_fwd_drop_locked(s, h, &k);
        pthread_mutex_unlock(&sh->lock);
    }
    if (used < missing)
        nv_gm_slots_give(s, slots + used, missing - used);
    count(&s->puts, 1);
    count(&s->bytes_in, n * NV_GM_PAGE);
    if (b.role == NV_GM_ROLE_SERVER)
        count(&s->moves_in, n);
    uint64_t a[1] = { nv_gm_slots_free(s) };
    return answer(ctx, call, NETVM_OK, a, 1);
}

static int proc_put(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    if (call->nargs < 4)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    uint64_t id = call->args[0], region = call->args[1], first = call->args[2], n = call->args[3];
    if (!n || n > NV_GM_PUT_MAX || call->len != n * NV_GM_PAGE || first + n < first)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    return put_pages(s, ctx, call, id, region, NULL, first, n, call->payload);
}

static int proc_putv(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    if (call->nargs < 3)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    uint64_t id = call->args[0], region = call->args[1], n = call->args[2];
    if (!n || n > NV_GM_PUT_MAX || call->len != n * (sizeof(uint64_t) + NV_GM_PAGE))
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    /* the payload need not be aligned for u64 loads */
    uint64_t list[NV_GM_PUT_MAX];
    memcpy(list, call->payload, n * sizeof(uint64_t));
    for (uint64_t i = 1; i < n; i++)
        if (list[i] <= list[i - 1])
            return refuse(s, ctx, call, NETVM_ERR_INVAL);   /* unsorted, or a page twice */
    return put_pages(s, ctx, call, id, region, list, 0, n, (const uint8_t *)call->payload + n * sizeof(uint64_t));
}

static int proc_get(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    if (call->nargs < 3)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    struct nv_gm_bind b;
    struct nv_gm_client *c;
    uint64_t bound;
    netvm_status_t st = page_caller(s, call, call->args[0], 0, 0, &b, &c, &bound);
    if (st != NETVM_OK)
        return refuse(s, ctx, call, st);
    struct nv_gm_key k = { call->args[0], call->args[1], call->args[2] };
    uint64_t h = nv_gm_key_hash(&k);
    struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
    pthread_mutex_lock(&sh->lock);
    uint32_t slot = nv_gm_lookup_locked(s, h, &k);
    if (slot != NV_GM_NIL) {
        netvm_rpc_reply(ctx, &call->token, NETVM_OK, NULL, 0, nv_gm_slot_addr(s, slot), NV_GM_PAGE);
        pthread_mutex_unlock(&sh->lock);
        count(&s->gets, 1);
        count(&s->bytes_out, NV_GM_PAGE);
        return NETVM_RPC_DONE;
    }
    int to = nv_gm_fwd_find_locked(s, h, &k);
    pthread_mutex_unlock(&sh->lock);
    count(&s->gets, 1);
    if (to < 0)
        return answer(ctx, call, NETVM_ERR_NOTFOUND, NULL, 0);
    /* the 3-way getpage: the server holding it answers the client */
    st = nv_rpc_svc_delegate(ctx, call, to, nv_gm_k(NV_GM_GET), call->args, 3, NULL, 0);
    /* never NOTFOUND (that would read as zeros) nor PEER (the client would
     * take this server for gone): AGAIN, it asks the page's other holders */
    if (st != NETVM_OK)
        return answer(ctx, call, NETVM_ERR_AGAIN, NULL, 0);
    count(&s->delegated, 1);
    return NETVM_RPC_DONE;
}

/* GETN copies each held slot into one reply buffer under that page's shard
 * lock (the slot rule above) and replies from the buffer after the locks
 * are released: a copy of at most 256 KiB here is cheap next to the round
 * trips it saves. Pages not held (moved away included) stay zeros and
 * their bit clear: the client GETs those one by one, which follows moves. */
static uint64_t getn_copy(struct nv_gm_server *s, const uint64_t *args, uint64_t n, uint8_t *out)
{
    uint64_t held = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct nv_gm_key k = { args[0], args[1], args[2] + i };
        uint64_t h = nv_gm_key_hash(&k);
        struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
        pthread_mutex_lock(&sh->lock);
        uint32_t slot = nv_gm_lookup_locked(s, h, &k);
        if (slot != NV_GM_NIL) {
            memcpy(out + i * NV_GM_PAGE, nv_gm_slot_addr(s, slot), NV_GM_PAGE);
            held |= (uint64_t)1 << i;
        } else {
            memset(out + i * NV_GM_PAGE, 0, NV_GM_PAGE);
        }
        pthread_mutex_unlock(&sh->lock);
    }
    return held;
}

static int proc_getn(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    if (call->nargs < 4)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    uint64_t n = call->args[3];
    if (!n || n > NV_GM_GETN_MAX || call->args[2] + n < call->args[2])
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    struct nv_gm_bind b;
    struct nv_gm_client *c;
    uint64_t bound;
    netvm_status_t st = page_caller(s, call, call->args[0], 0, 0, &b, &c, &bound);
    if (st != NETVM_OK)
        return refuse(s, ctx, call, st);
    int mine = pthread_mutex_trylock(&s->getn_lock) == 0;
    if (mine && !s->getn_buf)
        s->getn_buf = malloc((size_t)NV_GM_GETN_MAX * NV_GM_PAGE);
    uint8_t *out = mine && s->getn_buf ? s->getn_buf : malloc(n * NV_GM_PAGE);
    if (!out) {
        if (mine)
            pthread_mutex_unlock(&s->getn_lock);
        return refuse(s, ctx, call, NETVM_ERR_NOMEM);
    }
    uint64_t held = getn_copy(s, call->args, n, out);
    uint64_t a[1] = { held };
    netvm_rpc_reply(ctx, &call->token, NETVM_OK, a, 1, out, n * NV_GM_PAGE);   /* copies it (NV_AMS_COPY) */
    if (out != s->getn_buf)
        free(out);
    if (mine)
        pthread_mutex_unlock(&s->getn_lock);
    count(&s->gets, 1);
    count(&s->bytes_out, (uint64_t)__builtin_popcountll(held) * NV_GM_PAGE);
    return NETVM_RPC_DONE;
}

static int proc_free(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    if (call->nargs < 4)
        return refuse(s, ctx, call, NETVM_ERR_INVAL);
    struct nv_gm_bind b;
    struct nv_gm_client *c = NULL;
    uint64_t bound;
    netvm_status_t st = page_caller(s, call, call->args[0], 0, 1, &b, &c, &bound);
    if (st != NETVM_OK)
        return refuse(s, ctx, call, st);
    uint64_t region = call->args[1], first = call->args[2], n = call->args[3];
    if (n == UINT64_MAX)
        first = 0;
    uint64_t dropped = nv_gm_drop_range(s, c, call->args[0], region, first, n);
    count(&s->frees, 1);
    uint64_t a[1] = { dropped };
    return answer(ctx, call, NETVM_OK, a, 1);
}

void nv_gm_server_stat(struct nv_gm_server *s, struct nv_gm_stat *st)
{
    memset(st, 0, sizeof *st);
    st->version = NV_GM_VERSION;
    st->server_id = s->server_id;
    st->pool_pages = s->npages;
    st->used_pages = atomic_load_explicit(&s->used, memory_order_relaxed);
    st->client_max_pages = s->client_max;
    st->clients = atomic_load_explicit(&s->clients_now, memory_order_relaxed);
    st->servers = atomic_load_explicit(&s->servers_now, memory_order_relaxed);
    st->forwards = atomic_load_explicit(&s->forwards, memory_order_relaxed);
    st->puts = atomic_load_explicit(&s->puts, memory_order_relaxed);
    st->gets = atomic_load_explicit(&s->gets, memory_order_relaxed);
    st->frees = atomic_load_explicit(&s->frees, memory_order_relaxed);
    st->moves_out = atomic_load_explicit(&s->moves_out, memory_order_relaxed);
    st->moves_in = atomic_load_explicit(&s->moves_in, memory_order_relaxed);
    st->delegated = atomic_load_explicit(&s->delegated, memory_order_relaxed);
    st->refused = atomic_load_explicit(&s->refused, memory_order_relaxed);
    st->bytes_in = atomic_load_explicit(&s->bytes_in, memory_order_relaxed);
    st->bytes_out = atomic_load_explicit(&s->bytes_out, memory_order_relaxed);
    st->uptime_ms = (nv_now_ns() - s->start_ns) / 1000000u;
    st->draining = (uint64_t)atomic_load_explicit(&s->draining, memory_order_relaxed);
    nv_gm_shared_stat(s, &st->shared_regions, &st->shared_pages);
}

static int proc_stat(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    struct nv_gm_bind b;
    if (!nv_gm_bind_find(s, call->peer, &b))
        return refuse(s, ctx, call, NETVM_ERR_STATE);
    struct nv_gm_stat st;
    nv_gm_server_stat(s, &st);
    netvm_rpc_reply(ctx, &call->token, NETVM_OK, NULL, 0, &st, sizeof st);
    return NETVM_RPC_DONE;
}

netvm_status_t nv_gm_procs_register(struct nv_gm_server *s)
{
    static const struct { unsigned op; netvm_rpc_proc_fn fn; } procs[] = {
        { NV_GM_HELLO, proc_hello }, { NV_GM_PUT, proc_put },   { NV_GM_GET, proc_get },
        { NV_GM_FREE, proc_free },   { NV_GM_MOVE, nv_gm_proc_move }, { NV_GM_STAT, proc_stat },
        { NV_GM_GETN, proc_getn },   { NV_GM_PUTV, proc_putv },
    };
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        netvm_status_t st = nv_rpc_svc_register(s->ctx, nv_gm_k(procs[i].op), procs[i].fn, s);
        if (st != NETVM_OK)
            return st;
    }
    return nv_gm_shared_register(s);
}
