/* The strategies behind one interface: which initiator policy runs, the
 * pin table shared by all of them, the counters. */
#include "reg/reg_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[] = {
    [NV_REG_NONE] = "none", [NV_REG_PIN_ALL] = "pin-all", [NV_REG_RENDEZVOUS] = "rendezvous",
    [NV_REG_RENDEZVOUS_KEEP] = "rendezvous-keep", [NV_REG_FIREHOSE] = "firehose",
};

int nv_reg_kind_parse(const char *name, enum nv_reg_kind *out)
{
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        if (name && !strcmp(name, names[i])) {
            *out = (enum nv_reg_kind)i;
            return 0;
        }
    return -1;
}

const char *nv_reg_kind_name(enum nv_reg_kind k)
{
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

netvm_status_t nv_reg_create(struct nv_reg **out, const struct nv_reg_params *p, const struct nv_reg_net *net)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    if (!p->bucket || (p->bucket & (p->bucket - 1)) || p->bucket % page || !p->peers || p->m < p->bucket)
        return NETVM_ERR_INVAL;
    struct nv_reg *r = calloc(1, sizeof *r);
    if (!r)
        return NETVM_ERR_NOMEM;
    r->p = *p;
    r->net = *net;
    r->page = page;
    nv_pin_init(r);
    pthread_mutex_init(&r->ilock, NULL);
    uint64_t f = p->m / (p->bucket * p->peers);
    r->fh_per_peer = f ? (f > UINT32_MAX ? UINT32_MAX : (unsigned)f) : 1;
    *out = r;
    return NETVM_OK;
}

void nv_reg_destroy(struct nv_reg *r)
{
    if (!r)
        return;
    nv_fh_fini(r);
    nv_rdv_fini(r);
    nv_pin_fini(r);
    pthread_mutex_destroy(&r->ilock);
    free(r);
}

enum nv_reg_kind nv_reg_kind_of(const struct nv_reg *r) { return r->p.kind; }
const struct nv_reg_params *nv_reg_params_of(const struct nv_reg *r) { return &r->p; }

void nv_reg_set_pinner(struct nv_reg *r, const struct nv_reg_pinner *p, int keyed)
{
    if (p)
        r->pinner = *p;
    r->keyed = keyed;
}

int nv_reg_keyed(const struct nv_reg *r) { return r->keyed; }

uint64_t nv_reg_max_span(const struct nv_reg *r)
{
    /* one access names one registration, so keyed acquires cover one bucket */
    if (r->keyed)
        return r->p.bucket;
    uint64_t n = NV_REG_SPAN_BUCKETS;
    if (r->p.kind == NV_REG_FIREHOSE && r->fh_per_peer < n)
        n = r->fh_per_peer;
    if (r->max_inuse < n)
        n = r->max_inuse;
    return (n ? n : 1) * r->p.bucket;
}

netvm_status_t nv_reg_acquire(struct nv_reg *r, int peer, uint32_t sid, const void *seg, uint64_t addr,
                              uint64_t len, struct nv_reg_key *key)
{
    if (!len)
        return NETVM_OK;
    switch (r->p.kind) {
    case NV_REG_FIREHOSE:        return nv_fh_acquire(r, peer, sid, seg, addr, len, key);
    case NV_REG_RENDEZVOUS:
    case NV_REG_RENDEZVOUS_KEEP: return nv_rdv_acquire(r, peer, seg, addr, len, key);
    default:                     return NETVM_OK;
    }
}

void nv_reg_release(struct nv_reg *r, int peer, uint32_t sid, uint64_t addr, uint64_t len)
{
    if (!len)
        return;
    if (r->p.kind == NV_REG_FIREHOSE)
        nv_fh_release(r, peer, sid, addr, len);
    else if (r->p.kind == NV_REG_RENDEZVOUS)
        nv_rdv_release(r, peer, addr, len);
}

void nv_reg_peer_gone(struct nv_reg *r, int peer)
{
    nv_pin_peer_gone(r, peer);
    nv_fh_peer_gone(r, peer);
    nv_rdv_peer_gone(r, peer);
}

void nv_reg_get_stats(struct nv_reg *r, netvm_reg_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->strategy = nv_reg_kind_name(r->p.kind);
    pthread_mutex_lock(&r->ilock);
    s->hits = r->hits;
    s->misses = r->misses;
    s->moves = r->moves;
    pthread_mutex_unlock(&r->ilock);
    pthread_mutex_lock(&r->tlock);
    s->pins = r->pins;
    s->unpins = r->unpins;
    s->pinned_bytes = r->pinned_bytes;
    s->pinned_high = r->pinned_high;
    s->buckets = r->nbuckets;
    s->victims = r->nvictim;
    s->peer_releases = r->peer_releases;
    pthread_mutex_unlock(&r->tlock);
    s->refused = atomic_load_explicit(&r->refused, memory_order_relaxed);
}
