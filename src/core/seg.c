/* Exported segments: any range of this process under a random key, or
 * memfd-backed memory peers map directly. */
#define _GNU_SOURCE
#include "core/internal.h"
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

static netvm_status_t publish(netvm_ctx_t *ctx, void *addr, size_t len, unsigned rights,
                              const char *name, int memfd, size_t map_len, netvm_seg_t **out)
{
    if (!addr || len == 0 || !out || rights == 0 || (rights & ~(unsigned)NETVM_RWA))
        return NETVM_ERR_INVAL;
    if (name && (strlen(name) == 0 || strlen(name) > NAME_MAX_LEN))
        return NETVM_ERR_INVAL;
    if ((uintptr_t)addr + len < (uintptr_t)addr)
        return NETVM_ERR_INVAL;
    if (name && find_by_name(ctx, name))
        return NETVM_ERR_EXISTS;
    struct netvm_seg *s = calloc(1, sizeof *s);
    if (!s)
        return NETVM_ERR_NOMEM;
    s->key = nv_random_key();
    if (s->key == 0) {
        free(s);
        return NETVM_ERR_SYS;
    }
    netvm_status_t st = nv_atu_alloc(&ctx->atu, &s->slot);
    if (st != NETVM_OK) {
        free(s);
        return st;
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
    nv_atu_set(&ctx->atu, s->slot, s->key, (uintptr_t)addr, len, rights, s);
    struct nv_seg_desc d = { .slot = s->slot, .key = s->key, .addr = (uintptr_t)addr, .len = len,
                             .rights = rights, .memfd = memfd, .name = name };
    for (int i = 0; i < ctx->nlinks && st == NETVM_OK; i++)
        st = ctx->links[i]->ops->seg_publish(ctx->links[i], &d);
    if (st != NETVM_OK) {
        nv_atu_revoke(&ctx->atu, s->slot);
        for (int i = 0; i < ctx->nlinks; i++) {
            ctx->links[i]->ops->seg_revoke(ctx->links[i], s->slot);
            ctx->links[i]->ops->seg_fence(ctx->links[i], s->slot);
        }
        nv_atu_release(&ctx->atu, s->slot);
        free(s);
        return st;
    }
    pthread_mutex_lock(&ctx->seg_lock);
    s->next = ctx->segs;
    if (ctx->segs)
        ctx->segs->prev = s;
    ctx->segs = s;
    pthread_mutex_unlock(&ctx->seg_lock);
    *out = s;
    return NETVM_OK;
}

netvm_status_t netvm_export(netvm_ctx_t *ctx, void *addr, size_t len, unsigned rights,
                            const char *name, netvm_seg_t **seg)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    return publish(ctx, addr, len, rights, name, -1, 0, seg);
}

netvm_status_t netvm_alloc_shared(netvm_ctx_t *ctx, size_t len, unsigned rights,
                                  const char *name, void **addr, netvm_seg_t **seg)
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
    *addr = p;
    return NETVM_OK;
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
    pthread_mutex_unlock(&ctx->seg_lock);
    /* refuse new accesses everywhere first (the links' own tables, then the
     * ATU), so no initiator sees the segment revoked on one path and live on
     * another; then wait for the accesses under way: those this process
     * serves, then each link's (shm: peers' direct accesses; tcp: frames) */
    for (int i = 0; i < ctx->nlinks; i++)
        ctx->links[i]->ops->seg_revoke(ctx->links[i], s->slot);
    nv_atu_revoke(&ctx->atu, s->slot);
    for (int i = 0; i < ctx->nlinks; i++)
        ctx->links[i]->ops->seg_fence(ctx->links[i], s->slot);
    nv_atu_release(&ctx->atu, s->slot);
    if (s->memfd >= 0) {
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
