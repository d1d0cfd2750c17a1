/* A private context beside the job's (netvm_config_t.boot "none"): inside
 * a launched job it is a job of one whatever the environment says, it
 * works on its own (segments, RMA to itself, listening), and the job's
 * context is not disturbed: another rank reaches the private one only by
 * connecting to it. */
#include "check.h"

#include <string.h>

int main(void)
{
    netvm_ctx_t *job, *own;
    CHECK_OK(netvm_init(&job, NULL));
    check_rank = netvm_rank(job);
    CHECK(netvm_size(job) == 2);
    netvm_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.boot = "none";
    cfg.thread_level = NETVM_THREAD_MULTIPLE;
    CHECK_OK(netvm_init(&own, &cfg));
    CHECK(netvm_rank(own) == 0 && netvm_size(own) == 1);
    CHECK(netvm_thread_level(own) == NETVM_THREAD_MULTIPLE);
    CHECK_OK(netvm_barrier(own));   /* a job of one: returns at once */

    /* the private context's own segment, reached through itself */
    uint64_t word = 0;
    netvm_seg_t *seg;
    netvm_rseg_t *r;
    CHECK_OK(netvm_export(own, &word, sizeof word, NETVM_RWA, "w", &seg));
    CHECK_OK(netvm_import(own, 0, "w", &r));
    uint64_t v = 41, old;
    CHECK_OK(netvm_put(own, r, 0, &v, 8, 0));
    CHECK_OK(netvm_atomic(own, r, 0, NETVM_AOP_FADD, 1, 0, &old));
    CHECK(old == 41 && word == 42);

    /* rank 1 connects to rank 0's private context by its listener */
    static const char cred[] = "a private context's credential";
    netvm_listener_t *l = NULL;
    char addr[64] = { 0 };
    netvm_seg_t *aseg;
    CHECK_OK(netvm_export(job, addr, sizeof addr, NETVM_RWA, "addr", &aseg));
    if (check_rank == 0) {
        netvm_listen_opts_t lo = { .credential = cred, .credential_len = sizeof cred - 1 };
        CHECK_OK(netvm_listen(own, "tcp:127.0.0.1:0", &lo, &l));
        strncpy(addr, netvm_listener_addr(l), sizeof addr - 1);
    }
    CHECK_OK(netvm_barrier(job));
    if (check_rank == 1) {
        netvm_rseg_t *ra;
        CHECK_OK(netvm_import(job, 0, "addr", &ra));
        CHECK_OK(netvm_get(job, addr, ra, 0, sizeof addr, 0));
        CHECK_OK(netvm_release(ra));
        int peer;
        CHECK_OK(netvm_connect(own, addr, cred, sizeof cred - 1, 0, &peer));
        netvm_rseg_t *rw;
        CHECK_OK(netvm_import(own, peer, "w", &rw));
        CHECK_OK(netvm_atomic(own, rw, 0, NETVM_AOP_ADD, 100, 0, NULL));
        CHECK_OK(netvm_release(rw));
        CHECK_OK(netvm_disconnect(own, peer));
    }
    CHECK_OK(netvm_barrier(job));
    if (check_rank == 0)
        CHECK(word == 142);
    CHECK_OK(netvm_barrier(job));
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_finalize(own));
    CHECK_OK(netvm_unexport(aseg));
    CHECK_OK(netvm_finalize(job));
    return 0;
}
