/* The pager on real memory servers (`netvm memd`, started here):
 *  clean:  unmap frees every page at the servers (their used pages go
 *          back to 0);
 *  poison: with the only server killed, a page that was evicted to it has
 *          no copy left: its access gets SIGBUS (UFFDIO_POISON), not zeros
 *          and not a hang, and the region's health counts it lost; and
 *          fresh pages written after it, which need room that only the
 *          eviction of dirty pages (now impossible) could make, are
 *          written anyway: the region goes past its budget rather than
 *          hang the program.
 * Usage: servers NETVM_TOOL clean|poison */
#include "gmem_test.h"
#include "gs_servers.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static sigjmp_buf jb;
static void on_bus(int sig)
{
    (void)sig;
    siglongjmp(jb, 1);
}

static uint64_t used(netvm_ctx_t *ctx, struct gs_server *s, int n)
{
    uint64_t u = 0;
    for (int i = 0; i < n; i++) {
        struct nv_gm_stat st;
        gs_stat(ctx, &s[i], &st);
        u += st.used_pages;
    }
    return u;
}

int main(int argc, char **argv)
{
    (void)gs_signal, (void)gs_fill, (void)gs_check;   /* gs_servers.h's, used by other tests */
    CHECK(argc > 2);
    gs_netvm = argv[1];
    int poison = !strcmp(argv[2], "poison");
    gs_write_cred();
    netvm_ctx_t *ctx = gt_ctx();
    int nsrv = poison ? 1 : 2;
    struct gs_server srv[2];
    char addrs[160] = "";
    for (int i = 0; i < nsrv; i++) {
        gs_start(&srv[i], "64M", "2000");
        if (i)
            strcat(addrs, ",");
        strcat(addrs, srv[i].addr);
    }
    size_t budget = 256, filled = 4 * budget, fresh = 64, npages = filled + fresh;
    netvm_gmem_opts_t o = { .budget = budget * GPAGE, .servers = addrs, .credential = gs_cred,
                            .credential_len = strlen(gs_cred), .timeout_ms = 500 };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(ctx, npages * GPAGE, &o, &g, (void **)&m));
    for (size_t p = 0; p < filled; p++)
        gt_fill(m + p * GPAGE, p, 1);
    CHECK(gt_resident(m, GPAGE) == 0);      /* page 0 lives on the servers only */
    uint64_t u = used(ctx, srv, nsrv);
    printf("servers: %d server(s) hold %llu pages of a region of %zu\n", nsrv, (unsigned long long)u, npages);
    CHECK(u >= (filled - budget) * (size_t)nsrv);
    if (!poison) {
        CHECK_OK(netvm_gmem_unmap(g));
        u = used(ctx, srv, nsrv);
        printf("servers: after unmap they hold %llu pages\n", (unsigned long long)u);
        CHECK(u == 0);
        for (int i = 0; i < nsrv; i++)
            gs_stop(&srv[i]);
        printf("servers: ok\n");
        return 0;
    }
    gs_stop(&srv[0]);
    struct sigaction sa = { .sa_handler = on_bus };
    sigaction(SIGBUS, &sa, NULL);
    volatile int bus = 0;
    if (sigsetjmp(jb, 1) == 0) {
        volatile unsigned char c = m[0];
        (void)c;
    } else {
        bus = 1;
    }
    CHECK(bus);
    /* the store finds the pages lost in the background (its repair) */
    netvm_gmem_health_t h;
    for (int i = 0; i < 100000; i++) {
        CHECK_OK(netvm_gmem_health(g, &h));
        if (h.pages_lost)
            break;
        usleep(1000);
    }
    printf("servers: the only server killed: the access to an evicted page got SIGBUS; health: %d of %d servers "
           "alive, %llu pages lost\n", h.servers_alive, h.servers, (unsigned long long)h.pages_lost);
    CHECK(h.servers_alive == 0 && h.pages_lost > 0);
    /* every resident page is dirty and cannot be written back */
    for (size_t p = filled; p < npages; p++)
        gt_fill(m + p * GPAGE, p, 2);
    for (size_t p = filled; p < npages; p++)
        CHECK(gt_check(m + p * GPAGE, p, 2));
    netvm_gmem_stats_t st;
    CHECK_OK(netvm_gmem_stats(g, &st));
    printf("servers: %zu fresh pages written with no server left: %llu resident, budget %llu\n", fresh,
           (unsigned long long)st.resident_pages, (unsigned long long)st.budget_pages);
    printf("servers: ok\n");
    fflush(stdout);
    _exit(0);   /* the region's write-backs have nowhere to go: not unmapped */
}
