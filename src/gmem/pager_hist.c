/* Fault latency percentiles from a fixed log-linear histogram: bucket
 * 8k + j holds [2^(k+6) (1 + j/8), 2^(k+6) (1 + (j+1)/8)) ns, so a
 * percentile is within 12.5% and recording one costs two adds. */
#include "gmem/pager.h"

static unsigned bucket_of(uint64_t ns)
{
    if (ns < 64)
        return 0;
    unsigned k = 63u - (unsigned)__builtin_clzll(ns);    /* 2^k <= ns */
    unsigned j = (unsigned)((ns >> (k - 3)) & (NV_GM_HIST_SUB - 1));
    unsigned b = (k - 6) * NV_GM_HIST_SUB + j;
    return b < NV_GM_HIST_N ? b : NV_GM_HIST_N - 1;
}

static uint64_t bucket_top(unsigned b)
{
    unsigned k = b / NV_GM_HIST_SUB + 6, j = b % NV_GM_HIST_SUB;
    return ((uint64_t)1 << k) + ((uint64_t)(j + 1) << (k - 3));
}

void nv_gm_hist_add(struct nv_gm_hist *h, uint64_t ns)
{
    __atomic_fetch_add(&h->bucket[bucket_of(ns)], 1, __ATOMIC_RELAXED);
    uint64_t m = __atomic_load_n(&h->max, __ATOMIC_RELAXED);
    while (ns > m && !__atomic_compare_exchange_n(&h->max, &m, ns, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

uint64_t nv_gm_hist_pct(const struct nv_gm_hist *h, double q)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < NV_GM_HIST_N; b++)
        total += __atomic_load_n(&h->bucket[b], __ATOMIC_RELAXED);
    if (!total)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total);
    if (want >= total)
        want = total - 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < NV_GM_HIST_N; b++) {
        seen += __atomic_load_n(&h->bucket[b], __ATOMIC_RELAXED);
        if (seen > want) {
            uint64_t top = bucket_top(b), m = __atomic_load_n(&h->max, __ATOMIC_RELAXED);
            return top < m ? top : m;
        }
    }
    return __atomic_load_n(&h->max, __ATOMIC_RELAXED);
}
