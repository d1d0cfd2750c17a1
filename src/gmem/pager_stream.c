/* The sequential streams read-ahead follows (pager_ra.c): which stream a
 * missing fault goes on with, or begins.
 *
 * Streams: up to NV_GM_STREAMS at once, each with its own last fault,
 * direction and window. A merge reads two sorted runs and writes a third,
 * a copy reads one array and writes another: with one stream for the
 * whole region their faults alternated, none followed the one before,
 * and nothing was read ahead. And streams go down as well as up: glibc's
 * memcpy of a large block, which a merge sort's copy back is, went down
 * page by page here (two streams going down, one read and one written,
 * made nine in ten of a sort's faults). A fault that goes on with no
 * stream begins one in the place of the least recently used, taking lone
 * (random) faults' places first, so random faults between a stream's
 * windows do not push it out. A stream going down reads ahead the window
 * below the fault, runs nearest first, each run fetched in one call like
 * one going up. */
#include "gmem/pager.h"

int nv_gm_stream_of(struct nv_gm_region *r, uint64_t p, int *dir)
{
    *dir = 0;
    if (r->ra_window <= 0)
        return -1;
    pthread_mutex_lock(&r->ra_lock);
    uint64_t now = ++r->ra_clock, vkey = UINT64_MAX;
    int v = 0;
    for (int i = 0; i < NV_GM_STREAMS; i++) {
        struct nv_gm_stream *s = &r->ra_stream[i];
        uint64_t next = __atomic_load_n(&s->next, __ATOMIC_RELAXED);
        int d = !s->used ? 0
                : (s->dir >= 0 && p == s->prev + 1) || (s->dir > 0 && p == next)  ? 1
                : (s->dir <= 0 && p + 1 == s->prev) || (s->dir < 0 && p == next) ? -1
                                                                                   : 0;
        if (d) {
            s->prev = p;
            s->used = now;
            s->dir = d;
            pthread_mutex_unlock(&r->ra_lock);
            *dir = d;
            return i;
        }
        /* free first, then lone faults, then streams; the oldest of each */
        uint64_t key = s->used ? (uint64_t)(s->dir != 0) << 63 | s->used : 0;
        if (key < vkey) {
            vkey = key;
            v = i;
        }
    }
    struct nv_gm_stream *s = &r->ra_stream[v];
    s->prev = p;
    __atomic_store_n(&s->next, UINT64_MAX, __ATOMIC_RELAXED);
    s->used = now;
    s->dir = 0;
    pthread_mutex_unlock(&r->ra_lock);
    return v;
}
