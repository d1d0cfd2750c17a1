/* Exported segments: any range of this process under a random key, or
 * memfd-backed memory peers map directly. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "core/svc.h"
#include "util/log.h"
#include "util/random.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NAME_MAX_LEN 63

/* The caller holds seg_lock, or is the application thread (the only writer). */
static struct netvm_seg *find_by_name(netvm_ctx_t *ctx, const char *name)
{
    for (struct netvm_seg *s = ctx->segs; s; s = s->next)
        if (s->name_set && strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

/* A peer imports over a link whose target answers imports (tcp): core's
 * import handler asks here. */
netvm_status_t nv_lookup_segment(netvm_ctx_t *ctx, const char *name, uint32_t slot, uint64_t key,
                                 struct nv_seg_desc *out)
{
    netvm_status_t st = NETVM_OK;
    pthread_mutex_lock(&ctx->seg_lock);
    struct netvm_seg *s = NULL;
    if (name) {
        s = find_by_name(ctx, name);
        if (!s)
            st = NETVM_ERR_NOTFOUND;
    } else {
        for (s = ctx->segs; s && s->slot != slot; s = s->next)
            ;
        if (!s || s->key != key)
            st = NETVM_ERR_KEY;
    }
    if (st == NETVM_OK) {
        memset(out, 0, sizeof *out);
        out->slot = s->slot;
        out->key = s->key;
        out->addr = (uintptr_t)s->addr;
        out->len = s->len;
        out->rights = s->rights;
        out->memfd = -1;
    }
    pthread_mutex_unlock(&ctx->seg_lock);
    return st;
}

/* What link l's mem_reg returned for the segment in slot (the import
 * answer carries its key), or NULL. */
void *nv_segment_mr(netvm_ctx_t *ctx, uint32_t slot, const struct nv_link *l)
{
    void *mr = NULL;
    pthread_mutex_lock(&ctx->seg_lock);
    for (struct netvm_seg *s = ctx->segs; s; s = s->next)
        if (s->slot == slot) {
            for (int i = 0; i < ctx->nlinks; i++)
                if (ctx->links[i] == l)
                    mr = s->mr[i];
            break;
        }
    pthread_mutex_unlock(&ctx->seg_lock);
    return mr;
}

static struct nv_seg_desc desc_of(const struct netvm_seg *s, void *mr)
{
    struct nv_seg_desc d = { .slot = s->slot, .key = s->key, .addr = (uintptr_t)s->addr,
                             .len = s->len, .rights = s->rights, .memfd = s->memfd,
                             .name = s->name_set ? s->name : NULL, .mr = mr };
    return d;
}

/* Undo attach_link for link i (after the segment's accesses are fenced). */
static void detach_link(netvm_ctx_t *ctx, struct netvm_seg *s, int i)
{
    struct nv_link *l = ctx->links[i];
    if (s->mr[i] && l->ops->mem_dereg)
        l->ops->mem_dereg(l, s->mr[i]);
    s->mr[i] = NULL;
}

/* Make segment s known to link l (index i): registered first where the link
 * needs it, then published. Caller holds seg_lock. */
static netvm_status_t attach_link(netvm_ctx_t *ctx, struct netvm_seg *s, struct nv_link *l, int i)
{
    netvm_status_t st;
    s->mr[i] = NULL;
    /* a link whose registrations are the strategy's pins registers buckets
     * as peers ask (reg_core.c), not the segment whole */
    if ((l->ops->caps.flags & NV_LCAP_REGISTER) && l->ops->mem_reg && l != ctx->reg_link) {
        st = l->ops->mem_reg(l, s->addr, s->len, s->rights, &s->mr[i]);
        if (st != NETVM_OK) {
            nv_error("the %s link could not register the segment of %zu bytes at %p: %s",
                     l->ops->name, s->len, s->addr, netvm_strerror(st));
            s->mr[i] = NULL;
            return st;
        }
    }
    struct nv_seg_desc d = desc_of(s, s->mr[i]);
    st = l->ops->seg_publish(l, &d);
    if (st != NETVM_OK && s->mr[i]) {
        l->ops->mem_dereg(l, s->mr[i]);
        s->mr[i] = NULL;
    }
    return st;
}

/* Revoke s on the first n links and the ATU, wait for accesses under way,
 * then drop the links' registrations. */
static void withdraw(netvm_ctx_t *ctx, struct netvm_seg *s, int n)
{
    /* refuse new accesses everywhere first (the links' own tables, then the
     * ATU), so no initiator sees the segment revoked on one path and live on
     * another; then wait for the accesses under way: those this process
     * serves, then each link's (shm: peers' direct accesses; tcp: frames);
     * only then may a registration go */
    for (int i = 0; i < n; i++)
        ctx->links[i]->ops->seg_revoke(ctx->links[i], s->slot);
    nv_atu_revoke(&ctx->atu, s->slot);
    for (int i = 0; i < n; i++)
        ctx->links[i]->ops->seg_fence(ctx->links[i], s->slot);
    for (int i = 0; i < n; i++)
        detach_link(ctx, s, i);
    nv_atu_release(&ctx->atu, s->slot);
}

static netvm_status_t publish(netvm_ctx_t *ctx, void *addr, size_t len, unsigned rights,
                              const char *name, int memfd, size_t map_len, netvm_seg_t **out)
{
    if (!addr || len == 0 || !out || rights == 0 || (rights & ~(unsigned)NETVM_RWA))
        return NETVM_ERR_INVAL;
    if (name && (strlen(name) == 0 || strlen(name) > NAME_MAX_LEN))
        return NETVM_ERR_INVAL;
    if ((uintptr_t)addr + len < (uintptr_t)addr)
        return NETVM_ERR_INVAL;
    struct netvm_seg *s = calloc(1, sizeof *s);
    if (!s)
        return NETVM_ERR_NOMEM;
    s->key = nv_random_key();
    if (s->key == 0) {
        free(s);
        return NETVM_ERR_SYS;
    }
    s->ctx = ctx;
    s->addr = addr;
    s->len = len;
    s->rights = rights;
    s->memfd = memfd;
    s->map_len = map_len;
    if (name) {
        strcpy(s->name, name);
        s->name_set = 1;
    }
    /* seg_lock from the name check to the list: two threads exporting one
     * name cannot both succeed, and a link added meanwhile (nv_links_add)
     * sees the segment either in the list or in ctx->links' count */
    pthread_mutex_lock(&ctx->seg_lock);
    netvm_status_t st = name && find_by_name(ctx, name) ? NETVM_ERR_EXISTS : nv_atu_alloc(&ctx->atu, &s->slot);
    if (st != NETVM_OK) {
        pthread_mutex_unlock(&ctx->seg_lock);
        free(s);
        return st;
    }
    /* pin-all: pinned before any peer can reach it */
    if ((st = nv_regc_export(ctx, addr, len)) != NETVM_OK) {
        nv_atu_release(&ctx->atu, s->slot);
        pthread_mutex_unlock(&ctx->seg_lock);
        free(s);
        return st;
    }
    nv_atu_set(&ctx->atu, s->slot, s->key, (uintptr_t)addr, len, rights, s);
    int n = 0;
    while (n < ctx->nlinks && (st = attach_link(ctx, s, ctx->links[n], n)) == NETVM_OK)
        n++;
    if (st != NETVM_OK) {
        /* the link that failed holds nothing; the ones before it do */
        withdraw(ctx, s, n);
        nv_regc_unexport(ctx, addr, len);
        pthread_mutex_unlock(&ctx->seg_lock);
        free(s);
        return st;
    }
    s->next = ctx->segs;
    if (ctx->segs)
        ctx->segs->prev = s;
    ctx->segs = s;
    pthread_mutex_unlock(&ctx->seg_lock);
    *out = s;
    return NETVM_OK;
}

netvm_status_t nv_links_add(netvm_ctx_t *ctx, struct nv_link *l)
{
    pthread_mutex_lock(&ctx->seg_lock);
    int i = ctx->nlinks;
    if (i == NV_MAX_LINKS) {
        pthread_mutex_unlock(&ctx->seg_lock);
        return NETVM_ERR_NOMEM;
    }
    netvm_status_t st = NETVM_OK;
    struct netvm_seg *s;
    for (s = ctx->segs; s && st == NETVM_OK; s = s->next)
        if ((st = attach_link(ctx, s, l, i)) != NETVM_OK)
            break;
    if (st != NETVM_OK) {
        /* nothing uses l yet: no access to fence, only the registrations */
        for (struct netvm_seg *t = ctx->segs; t != s; t = t->next) {
            l->ops->seg_revoke(l, t->slot);
            if (t->mr[i] && l->ops->mem_dereg)
                l->ops->mem_dereg(l, t->mr[i]);
            t->mr[i] = NULL;
        }
        pthread_mutex_unlock(&ctx->seg_lock);
        return st;
    }
    ctx->links[i] = l;
    atomic_store(&ctx->nlinks, i + 1);
    pthread_mutex_unlock(&ctx->seg_lock);
    return NETVM_OK;
}

netvm_status_t netvm_export(netvm_ctx_t *ctx, void *addr, size_t len, unsigned rights,
                            const char *name, netvm_seg_t **seg)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    return publish(ctx, addr, len, rights, name, -1, 0, seg);
}

static netvm_status_t alloc_shared(netvm_ctx_t *ctx, size_t len, unsigned rights, const char *name, int keep_map,
                                   void **addr, size_t *map_len_out, netvm_seg_t **seg)
{
    if (!ctx || !addr || len == 0)
        return NETVM_ERR_INVAL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t map_len = (len + page - 1) / page * page;
    int fd = memfd_create("netvm-segment", MFD_CLOEXEC);
    if (fd < 0)
        return errno == EMFILE || errno == ENFILE ? NETVM_ERR_NOMEM : NETVM_ERR_SYS;
    if (ftruncate(fd, (off_t)map_len) != 0) {
        close(fd);
        return NETVM_ERR_NOMEM;
    }
    void *p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return NETVM_ERR_NOMEM;
    }
    netvm_status_t st = publish(ctx, p, len, rights, name, fd, map_len, seg);
    if (st != NETVM_OK) {
        munmap(p, map_len);
        close(fd);
        return st;
    }
    (*seg)->keep_map = keep_map;
    *addr = p;
    if (map_len_out)
        *map_len_out = map_len;
    return NETVM_OK;
}

netvm_status_t netvm_alloc_shared(netvm_ctx_t *ctx, size_t len, unsigned rights,
                                  const char *name, void **addr, netvm_seg_t **seg)
{
    return alloc_shared(ctx, len, rights, name, 0, addr, NULL, seg);
}

netvm_status_t nv_alloc_shared_kept(netvm_ctx_t *ctx, size_t len, unsigned rights, const char *name,
                                    void **addr, size_t *map_len, netvm_seg_t **seg)
{
    return alloc_shared(ctx, len, rights, name, 1, addr, map_len, seg);
}

netvm_status_t netvm_unexport(netvm_seg_t *s)
{
    if (!s)
        return NETVM_ERR_INVAL;
    netvm_ctx_t *ctx = s->ctx;
    pthread_mutex_lock(&ctx->seg_lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        ctx->segs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    int n = ctx->nlinks;   /* a link added from now on never saw s */
    pthread_mutex_unlock(&ctx->seg_lock);
    withdraw(ctx, s, n);
    nv_regc_unexport(ctx, s->addr, s->len);   /* no access is under way any more */
    if (s->memfd >= 0) {
        if (!s->keep_map)
            munmap(s->addr, s->map_len);
        close(s->memfd);
    }
    free(s);
    return NETVM_OK;
}

netvm_status_t netvm_seg_handle(const netvm_seg_t *s, netvm_seg_handle_t *h)
{
    if (!s || !h)
        return NETVM_ERR_INVAL;
    h->rank = s->ctx->rank;   /* a connected peer imports it with netvm_import_handle_peer */
    h->slot = s->slot;
    h->key = s->key;
    return NETVM_OK;
}

void  *netvm_seg_addr(const netvm_seg_t *s) { return s ? s->addr : NULL; }
size_t netvm_seg_len(const netvm_seg_t *s)  { return s ? s->len : 0; }
