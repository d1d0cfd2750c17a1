/* The budget: a page is counted from the moment a placement is reserved
 * until it has left the region, so the count never exceeds the budget and
 * measured resident memory stays within it (docs/gmem.md). */
#include "gmem/pager.h"

/* The evictor wakes when the count is half the gap below the budget and
 * takes victims until it is the whole gap below. 1/32 of the budget, but
 * at least two of the evictor's batches (NV_GM_STAGE) where the budget
 * allows it (an eighth of it at most): with a 4 MiB budget the gap was 32
 * pages, the evictor woke every 16 faults for less than a batch, and
 * faults caught up with it and waited for room. Two batches gave 1.38x
 * the random fault rate and 1.29x the scan there (docs/performance.md,
 * "The evictor's gap"). */
uint64_t nv_gm_evict_gap(uint64_t budget)
{
    uint64_t gap = budget / 32, floor = 2 * NV_GM_STAGE;
    if (floor > budget / 8)
        floor = budget / 8;
    if (gap < floor)
        gap = floor;
    return gap > 4 ? gap : 4;
}

int nv_gm_try_reserve(struct nv_gm_region *r)
{
    uint64_t cur = __atomic_load_n(&r->resident, __ATOMIC_RELAXED);
    while (cur < r->budget)
        if (__atomic_compare_exchange_n(&r->resident, &cur, cur + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            uint64_t peak = __atomic_load_n(&r->resident_peak, __ATOMIC_RELAXED);
            while (peak < cur + 1 && !__atomic_compare_exchange_n(&r->resident_peak, &peak, cur + 1, 1,
                                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            }
            return 1;
        }
    return 0;
}

static void kick(struct nv_gm_region *r)
{
    pthread_mutex_lock(&r->ev_lock);
    pthread_cond_signal(&r->ev_cond);
    pthread_mutex_unlock(&r->ev_lock);
}

/* Blocks the fault thread until the evictor made room (never while the
 * evictor waits on this thread: it reads no uffd and touches no region
 * page, see pager.h). During a fork, room is granted anyway: the forking
 * thread holds the write-back lock and waits for a fault thread to read
 * its event. */
void nv_gm_reserve(struct nv_gm_region *r)
{
    if (nv_gm_try_reserve(r)) {
        if (__atomic_load_n(&r->resident, __ATOMIC_RELAXED) + (r->budget - r->low_water) / 2 >= r->budget)
            kick(r);
        return;
    }
    pthread_mutex_lock(&r->ev_lock);
    r->room_waiters++;
    __atomic_store_n(&r->room_waiters_hint, r->room_waiters, __ATOMIC_SEQ_CST);
    while (!nv_gm_try_reserve(r)) {
        if (r->stopping || __atomic_load_n(&r->forking, __ATOMIC_ACQUIRE) || r->room_grants > 0) {
            if (r->room_grants > 0)
                r->room_grants--;
            __atomic_fetch_add(&r->resident, 1, __ATOMIC_ACQ_REL);
            break;
        }
        pthread_cond_signal(&r->ev_cond);
        pthread_cond_wait(&r->room_cond, &r->ev_lock);
    }
    r->room_waiters--;
    __atomic_store_n(&r->room_waiters_hint, r->room_waiters, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&r->ev_lock);
}

void nv_gm_unreserve(struct nv_gm_region *r, uint64_t n)
{
    __atomic_fetch_sub(&r->resident, n, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&r->room_waiters_hint, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&r->ev_lock);
        pthread_cond_broadcast(&r->room_cond);
        pthread_mutex_unlock(&r->ev_lock);
    }
}

void nv_gm_page_gone(struct nv_gm_region *r, uint32_t old)
{
    if (old & NV_GM_RA)
        NV_GM_CNT(r, ra_waste);
    nv_gm_unreserve(r, 1);
}
