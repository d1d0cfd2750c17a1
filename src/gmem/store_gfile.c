/* A file cache's store (GMS's cooperative file cache, docs/gmem.md "File
 * cache"): a shared region in mode NV_GM_SHARED_CACHE named by the file's
 * identity and content (gfile.c), whose pages are the file's blocks. A
 * block the servers hold is fetched from them (reads are sticky: the
 * servers keep it); one they do not hold is read from the file and stored
 * for the next reader, this client's or another's. Its pages never change
 * (a changed file is another name), so any sharer may store them and none
 * is ever invalidated. */
#include "gmem/store_remote.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Pages a cache's fills may have on their way to the servers: a cold
 * read issues stores faster than the servers take them, and without a
 * bound they would queue until they time out (and the servers be
 * suspected). 8 MiB. */
#define NV_GM_FILL_MAX 2048u

struct fill {
    struct nv_gm_shared_store *sh;
    uint64_t n;
};

static void stored(void *arg, netvm_status_t st)
{
    (void)st;   /* not stored: the next reader reads the file again */
    struct fill *f = arg;
    atomic_fetch_sub_explicit(&f->sh->filling, f->n, memory_order_release);
    free(f);
}

netvm_status_t nv_gm_cache_fill(struct nv_gstore *s, uint64_t first, uint64_t n, void *buf)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    const struct nv_gm_cache_src *src = &r->shared->src;
    if (first >= r->npages || n > r->npages - first)
        return NETVM_ERR_INVAL;
    size_t want = (size_t)(n * NV_GM_PAGE), got = 0;
    uint64_t off = first * NV_GM_PAGE;
    if (off + want > src->size)
        want = off < src->size ? (size_t)(src->size - off) : 0;
    while (got < want) {
        ssize_t k = pread(src->fd, (char *)buf + got, want - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return NETVM_ERR_SYS;
        if (k == 0)
            break;   /* shorter than when opened: what is missing reads as zeros */
        got += (size_t)k;
    }
    memset((char *)buf + got, 0, (size_t)(n * NV_GM_PAGE) - got);
    atomic_fetch_add_explicit(src->file_reads, n, memory_order_relaxed);
    atomic_fetch_add_explicit(src->file_bytes, got, memory_order_relaxed);
    /* for the next reader: a copy each PUT (the caller keeps buf). Not a
     * page whose store is under way here: a second store of it would
     * bump its generation, and the first, seeing it, would free the
     * copies both made (store_remote_put.c) */
    for (uint64_t i = 0; i < n;) {
        if (atomic_load_explicit(&r->dir[first + i], memory_order_acquire) & NV_GM_E_W) {
            i++;
            continue;
        }
        uint64_t k = 1;
        while (i + k < n && k < NV_GM_PUT_MAX &&
               !(atomic_load_explicit(&r->dir[first + i + k], memory_order_acquire) & NV_GM_E_W))
            k++;
        /* wait for room: every store ends (stored, refused or timed out) */
        while (atomic_load_explicit(&r->shared->filling, memory_order_acquire) + k > NV_GM_FILL_MAX &&
               atomic_load_explicit(&r->shared->filling, memory_order_acquire) > 0) {
            struct timespec t = { 0, 100000 };
            nanosleep(&t, NULL);
        }
        struct fill *part = malloc(sizeof *part + (size_t)(k * NV_GM_PAGE));
        if (!part)
            break;
        part->sh = r->shared;
        part->n = k;
        memcpy(part + 1, (char *)buf + i * NV_GM_PAGE, (size_t)(k * NV_GM_PAGE));
        atomic_fetch_add_explicit(&r->shared->filling, k, memory_order_relaxed);
        if (nv_gm_sh_store_nb(s, first + i, k, part + 1, stored, part) != NETVM_OK) {
            atomic_fetch_sub_explicit(&r->shared->filling, k, memory_order_relaxed);
            free(part);
        }
        i += k;
    }
    return NETVM_OK;
}

static netvm_status_t cache_fetch(struct nv_gstore *s, uint64_t page, void *buf)
{
    if (nv_gm_fetch(s, page, buf) == NETVM_OK)
        return NETVM_OK;
    /* not cached, or no holder answered: the file has it */
    return nv_gm_cache_fill(s, page, 1, buf);
}

const struct nv_gstore_ops nv_gm_cache_ops = {
    .has = nv_gm_sh_has,
    .fetch = cache_fetch,
    .fetch_nb = nv_gm_fetch_nb,
    .fetchn_nb = nv_gm_fetchn_nb,
    .store_nb = nv_gm_sh_store_nb,
    .discard = nv_gm_sh_discard,
    .health = nv_gm_health,
    .close = nv_gm_sh_close,
};
