/* The memory server's page table: pool slots, the free list, the sharded
 * hash of (client, region, page) -> slot, clients' lists and forwarding
 * entries of pages moved away. */
#define _GNU_SOURCE
#include "gmem/server_int.h"

#include "util/log.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(offsetof(struct nv_gm_meta, key.client) == offsetof(struct nv_gm_view_entry, client) &&
                   offsetof(struct nv_gm_meta, key.region) == offsetof(struct nv_gm_view_entry, region) &&
                   offsetof(struct nv_gm_meta, key.page) == offsetof(struct nv_gm_view_entry, page) &&
                   offsetof(struct nv_gm_meta, next) == offsetof(struct nv_gm_view_entry, next),
               "direct readers see a page table entry as struct nv_gm_view_entry");

uint64_t nv_gm_key_hash(const struct nv_gm_key *k) { return nv_gm_hash3(k->client, k->region, k->page); }

static void *map_zero(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Pool, buckets, entries and sequence words in one segment that clients
 * on this machine may map (direct.h); 0 when it cannot be made. */
static int view_init(struct nv_gm_server *s)
{
    struct nv_gm_view_hdr h;
    nv_gm_view_layout(s->npages, s->nbuckets, NV_GM_SHARDS, sizeof(struct nv_gm_meta), &h);
    void *base;
    if (netvm_alloc_shared(s->ctx, h.total, NETVM_READ, NULL, &base, &s->view_seg) != NETVM_OK) {
        nv_warn("memd: cannot share a pool of %zu bytes with clients on this machine; they read through GET",
                s->pool_bytes);
        s->view_seg = NULL;
        return 0;
    }
    uint8_t *b = base;
    h.pid = (uint64_t)getpid();
    memcpy(b, &h, sizeof h);
    s->seq = b + h.off_seq;
    s->buckets = (uint32_t *)(b + h.off_buckets);
    s->meta = (struct nv_gm_meta *)(b + h.off_meta);
    s->pool = b + h.off_pool;
    return 1;
}

int nv_gm_table_init(struct nv_gm_server *s)
{
    uint32_t nb = NV_GM_SHARDS;
    while (nb < s->npages && nb < (1u << 31))
        nb <<= 1;
    s->nbuckets = nb;
    if (!s->direct || !view_init(s)) {
        s->seq = calloc(NV_GM_SHARDS, NV_GM_VIEW_SEQ_STRIDE);
        s->pool = map_zero(s->pool_bytes);
        s->meta = map_zero((size_t)s->npages * sizeof *s->meta);
        s->buckets = map_zero((size_t)nb * sizeof *s->buckets);
    }
    s->free_stack = map_zero((size_t)s->npages * sizeof *s->free_stack);
    if (!s->seq || !s->pool || !s->meta || !s->buckets || !s->free_stack)
        return -1;
    memset(s->buckets, 0xff, (size_t)nb * sizeof *s->buckets);
    /* lowest slots on top: a small load touches a small part of the pool */
    for (uint32_t i = 0; i < s->npages; i++)
        s->free_stack[i] = s->npages - 1 - i;
    s->nfree = s->npages;
    for (unsigned i = 0; i < NV_GM_SHARDS; i++)
        pthread_mutex_init(&s->shards[i].lock, NULL);
    pthread_mutex_init(&s->free_lock, NULL);
    return 0;
}

void nv_gm_table_fini(struct nv_gm_server *s)
{
    /* a view was unexported (and freed) by netvm_finalize before this */
    if (!s->view_seg) {
        if (s->pool)
            munmap(s->pool, s->pool_bytes);
        if (s->meta)
            munmap(s->meta, (size_t)s->npages * sizeof *s->meta);
        if (s->buckets)
            munmap(s->buckets, (size_t)s->nbuckets * sizeof *s->buckets);
        free(s->seq);
    }
    if (s->free_stack)
        munmap(s->free_stack, (size_t)s->npages * sizeof *s->free_stack);
    for (unsigned i = 0; i < NV_GM_FWD_BUCKETS; i++)
        while (s->fwd[i]) {
            struct nv_gm_fwd *f = s->fwd[i];
            s->fwd[i] = f->next;
            free(f);
        }
}

static int key_eq(const struct nv_gm_key *a, const struct nv_gm_key *b)
{
    return a->client == b->client && a->region == b->region && a->page == b->page;
}

static uint32_t *bucket_of(struct nv_gm_server *s, uint64_t h)
{
    return &s->buckets[h & (s->nbuckets - 1)];
}

uint32_t nv_gm_lookup_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k)
{
    for (uint32_t i = *bucket_of(s, h); i != NV_GM_NIL; i = s->meta[i].next)
        if (key_eq(&s->meta[i].key, k))
            return i;
    return NV_GM_NIL;
}

void nv_gm_insert_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k, uint32_t slot,
                         struct nv_gm_client *c)
{
    struct nv_gm_meta *m = &s->meta[slot];
    uint32_t *b = bucket_of(s, h);
    nv_gm_shard_wbegin(s, h);
    m->key = *k;
    m->next = *b;
    m->client = c;
    m->gen++;
    *b = slot;
    nv_gm_shard_wend(s, h);
    pthread_mutex_lock(&c->lock);
    m->cprev = NV_GM_NIL;
    m->cnext = c->head;
    if (c->head != NV_GM_NIL)
        s->meta[c->head].cprev = slot;
    c->head = slot;
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add_explicit(&c->pages, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->used, 1, memory_order_relaxed);
}

int nv_gm_remove_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k)
{
    uint32_t *link = bucket_of(s, h);
    while (*link != NV_GM_NIL && !key_eq(&s->meta[*link].key, k))
        link = &s->meta[*link].next;
    if (*link == NV_GM_NIL)
        return 0;
    uint32_t slot = *link;
    struct nv_gm_meta *m = &s->meta[slot];
    nv_gm_shard_wbegin(s, h);
    *link = m->next;
    nv_gm_shard_wend(s, h);
    struct nv_gm_client *c = m->client;
    pthread_mutex_lock(&c->lock);
    if (m->cprev != NV_GM_NIL)
        s->meta[m->cprev].cnext = m->cnext;
    else
        c->head = m->cnext;
    if (m->cnext != NV_GM_NIL)
        s->meta[m->cnext].cprev = m->cprev;
    pthread_mutex_unlock(&c->lock);
    m->client = NULL;
    m->gen++;
    atomic_fetch_sub_explicit(&c->pages, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->used, 1, memory_order_relaxed);
    /* Safe to reuse at once: a GET answers from a slot while it holds the
     * shard lock taken here (server_proc.c says why that suffices). */
    nv_gm_slots_give(s, &slot, 1);
    return 1;
}

int nv_gm_slots_take(struct nv_gm_server *s, uint32_t *out, uint32_t n)
{
    pthread_mutex_lock(&s->free_lock);
    if (s->nfree < n) {
        pthread_mutex_unlock(&s->free_lock);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        out[i] = s->free_stack[--s->nfree];
    pthread_mutex_unlock(&s->free_lock);
    return 0;
}

void nv_gm_slots_give(struct nv_gm_server *s, const uint32_t *slots, uint32_t n)
{
    pthread_mutex_lock(&s->free_lock);
    for (uint32_t i = 0; i < n; i++)
        s->free_stack[s->nfree++] = slots[i];
    pthread_mutex_unlock(&s->free_lock);
}

uint64_t nv_gm_slots_free(struct nv_gm_server *s)
{
    pthread_mutex_lock(&s->free_lock);
    uint64_t n = s->nfree;
    pthread_mutex_unlock(&s->free_lock);
    return n;
}

/* --- forwarding entries ---------------------------------------------------- */

static struct nv_gm_fwd **fwd_bucket(struct nv_gm_server *s, uint64_t h)
{
    return &s->fwd[h & (NV_GM_FWD_BUCKETS - 1)];
}

int nv_gm_fwd_find_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k)
{
    for (struct nv_gm_fwd *f = *fwd_bucket(s, h); f; f = f->next)
        if (key_eq(&f->key, k))
            return f->peer;
    return -1;
}

void nv_gm_fwd_set_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k, int peer)
{
    struct nv_gm_fwd **b = fwd_bucket(s, h);
    for (struct nv_gm_fwd *f = *b; f; f = f->next)
        if (key_eq(&f->key, k)) {
            f->peer = peer;
            return;
        }
    struct nv_gm_fwd *f = malloc(sizeof *f);
    if (!f)
        return;   /* the page is then not found here: the client's directory still knows */
    f->key = *k;
    f->peer = peer;
    f->next = *b;
    *b = f;
    atomic_fetch_add_explicit(&s->forwards, 1, memory_order_relaxed);
}

int nv_gm_fwd_drop_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k)
{
    for (struct nv_gm_fwd **l = fwd_bucket(s, h); *l; l = &(*l)->next)
        if (key_eq(&(*l)->key, k)) {
            struct nv_gm_fwd *f = *l;
            *l = f->next;
            free(f);
            atomic_fetch_sub_explicit(&s->forwards, 1, memory_order_relaxed);
            return 1;
        }
    return 0;
}

static int in_range(const struct nv_gm_key *k, uint64_t client, uint64_t region, uint64_t first, uint64_t n)
{
    return k->client == client && (region == UINT64_MAX || k->region == region) && k->page >= first &&
           k->page - first < n;
}

uint64_t nv_gm_fwd_drop_range(struct nv_gm_server *s, uint64_t client, uint64_t region, uint64_t first,
                              uint64_t n)
{
    if (!atomic_load_explicit(&s->forwards, memory_order_relaxed))
        return 0;
    uint64_t dropped = 0;
    /* bucket b belongs to shard b % NV_GM_SHARDS */
    for (unsigned b = 0; b < NV_GM_FWD_BUCKETS; b++) {
        struct nv_gm_shard *sh = &s->shards[b & (NV_GM_SHARDS - 1)];
        pthread_mutex_lock(&sh->lock);
        for (struct nv_gm_fwd **l = &s->fwd[b]; *l;) {
            if (in_range(&(*l)->key, client, region, first, n)) {
                struct nv_gm_fwd *f = *l;
                *l = f->next;
                free(f);
                dropped++;
                atomic_fetch_sub_explicit(&s->forwards, 1, memory_order_relaxed);
            } else {
                l = &(*l)->next;
            }
        }
        pthread_mutex_unlock(&sh->lock);
    }
    return dropped;
}

uint32_t nv_gm_client_keys(struct nv_gm_client *c, uint64_t region, uint64_t first, uint64_t n,
                           struct nv_gm_key *out, uint32_t max)
{
    uint32_t got = 0;
    pthread_mutex_lock(&c->lock);
    const struct nv_gm_meta *meta = c->meta;   /* the server's: c's list threads through it */
    for (uint32_t i = c->head; i != NV_GM_NIL && got < max; i = meta[i].cnext)
        if (in_range(&meta[i].key, c->id, region, first, n))
            out[got++] = meta[i].key;
    pthread_mutex_unlock(&c->lock);
    return got;
}

int nv_gm_drop_page(struct nv_gm_server *s, const struct nv_gm_key *k)
{
    uint64_t h = nv_gm_key_hash(k);
    struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
    pthread_mutex_lock(&sh->lock);
    int r = nv_gm_remove_locked(s, h, k);
    pthread_mutex_unlock(&sh->lock);
    return r;
}

uint64_t nv_gm_drop_range(struct nv_gm_server *s, struct nv_gm_client *c, uint64_t client, uint64_t region,
                          uint64_t first, uint64_t n)
{
    uint64_t dropped = 0;
    if (c && n <= 1024 && region != UINT64_MAX) {
        /* a short range: by key, no walk of the client's list */
        for (uint64_t p = first; p - first < n; p++) {
            struct nv_gm_key k = { client, region, p };
            uint64_t h = nv_gm_key_hash(&k);
            struct nv_gm_shard *sh = nv_gm_shard_of(s, h);
            pthread_mutex_lock(&sh->lock);
            dropped += (uint64_t)nv_gm_remove_locked(s, h, &k);
            nv_gm_fwd_drop_locked(s, h, &k);
            pthread_mutex_unlock(&sh->lock);
        }
        return dropped;
    }
    if (c) {
        struct nv_gm_key keys[256];
        uint32_t got;
        /* each pass drops what it found, so the next starts further on */
        while ((got = nv_gm_client_keys(c, region, first, n, keys, 256)) > 0)
            for (uint32_t i = 0; i < got; i++)
                dropped += (uint64_t)nv_gm_drop_page(s, &keys[i]);
    }
    nv_gm_fwd_drop_range(s, client, region, first, n);
    return dropped;
}
