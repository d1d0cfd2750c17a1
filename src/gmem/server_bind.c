/* Who a peer of the memory server is (its HELLO: client, server or
 * observer, and the id it named) and the records of client ids.
 *
 * Bindings sit in an open-addressed table read without a lock on every
 * call: peer ids are never reused by a context, a writer fills an entry
 * and publishes its peer id last, a reader checks the id again after
 * copying the entry. Removed entries become tombstones that a later
 * binding on their probe path takes again. */
#include "gmem/server_int.h"

#include <stdlib.h>

static unsigned home(int peer) { return ((unsigned)peer * 2654435761u) & (NV_GM_BINDS - 1); }

struct nv_gm_bind *nv_gm_bind_find(struct nv_gm_server *s, int peer, struct nv_gm_bind *copy)
{
    unsigned i = home(peer);
    for (unsigned n = 0; n < NV_GM_BINDS; n++, i = (i + 1) & (NV_GM_BINDS - 1)) {
        struct nv_gm_bind *b = &s->binds[i];
        int p = atomic_load_explicit(&b->peer, memory_order_acquire);
        if (p == NV_GM_BIND_FREE)
            return NULL;
        if (p != peer)
            continue;
        copy->role = b->role;
        copy->id = b->id;
        copy->client = b->client;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&b->peer, memory_order_relaxed) != peer)
            return NULL;   /* removed meanwhile: the peer left */
        atomic_store_explicit(&copy->peer, peer, memory_order_relaxed);
        return b;
    }
    return NULL;
}

struct nv_gm_client *nv_gm_client_get(struct nv_gm_server *s, uint64_t id, int make)
{
    pthread_mutex_lock(&s->clients_lock);
    struct nv_gm_client *c = s->clients;
    while (c && c->id != id)
        c = c->next;
    if (!c && make && (c = calloc(1, sizeof *c))) {
        c->id = id;
        c->peer = -1;
        c->head = NV_GM_NIL;
        c->meta = s->meta;
        pthread_mutex_init(&c->lock, NULL);
        c->next = s->clients;
        s->clients = c;
    }
    pthread_mutex_unlock(&s->clients_lock);
    return c;
}

netvm_status_t nv_gm_bind_add(struct nv_gm_server *s, int peer, int role, uint64_t id)
{
    struct nv_gm_bind old;
    if (nv_gm_bind_find(s, peer, &old))
        return old.role == role && old.id == id ? NETVM_OK : NETVM_ERR_STATE;   /* a repeated HELLO */
    struct nv_gm_client *c = NULL;
    if (role == NV_GM_ROLE_CLIENT && !(c = nv_gm_client_get(s, id, 1)))
        return NETVM_ERR_NOMEM;
    pthread_mutex_lock(&s->binds_lock);
    if (c) {
        /* one connection per client id: another would take the first's pages */
        pthread_mutex_lock(&s->clients_lock);
        int taken = c->peer >= 0;
        if (!taken)
            c->peer = peer;
        pthread_mutex_unlock(&s->clients_lock);
        if (taken) {
            pthread_mutex_unlock(&s->binds_lock);
            return NETVM_ERR_EXISTS;
        }
    }
    unsigned i = home(peer);
    for (unsigned n = 0; n < NV_GM_BINDS; n++, i = (i + 1) & (NV_GM_BINDS - 1)) {
        struct nv_gm_bind *b = &s->binds[i];
        int p = atomic_load_explicit(&b->peer, memory_order_relaxed);
        if (p != NV_GM_BIND_FREE && p != NV_GM_BIND_GONE)
            continue;
        b->role = role;
        b->id = id;
        b->client = c;
        atomic_store_explicit(&b->peer, peer, memory_order_release);
        pthread_mutex_unlock(&s->binds_lock);
        if (role == NV_GM_ROLE_CLIENT)
            atomic_fetch_add_explicit(&s->clients_now, 1, memory_order_relaxed);
        else if (role == NV_GM_ROLE_SERVER)
            atomic_fetch_add_explicit(&s->servers_now, 1, memory_order_relaxed);
        return NETVM_OK;
    }
    if (c) {
        pthread_mutex_lock(&s->clients_lock);
        c->peer = -1;
        pthread_mutex_unlock(&s->clients_lock);
    }
    pthread_mutex_unlock(&s->binds_lock);
    return NETVM_ERR_NOMEM;
}

int nv_gm_bind_remove(struct nv_gm_server *s, int peer, struct nv_gm_bind *copy)
{
    pthread_mutex_lock(&s->binds_lock);
    struct nv_gm_bind *b = nv_gm_bind_find(s, peer, copy);
    if (b)
        atomic_store_explicit(&b->peer, NV_GM_BIND_GONE, memory_order_release);
    pthread_mutex_unlock(&s->binds_lock);
    if (!b)
        return 0;
    if (copy->role == NV_GM_ROLE_CLIENT)
        atomic_fetch_sub_explicit(&s->clients_now, 1, memory_order_relaxed);
    else if (copy->role == NV_GM_ROLE_SERVER)
        atomic_fetch_sub_explicit(&s->servers_now, 1, memory_order_relaxed);
    return 1;
}
