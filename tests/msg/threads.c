/* Several threads at NETVM_THREAD_MULTIPLE, 2 ranks: on each rank NT
 * sender threads send N messages each to the other rank (tag = thread,
 * payload = its sequence) while NT receiver threads take them (thread t
 * receives tag t from the other rank: in order, every payload checked) and
 * a prober thread probes with wildcards. Run in the TSan build too. */
#include "msg_test.h"

#include <pthread.h>
#include <stdatomic.h>

#define NT 3
#define LEN 40

static netvm_ctx_t *ctx;
static int rank, other, n;
static _Atomic int receivers_done;

static void *sender(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    uint8_t buf[LEN];
    for (int i = 0; i < n; i++) {
        mt_fill(buf, rank, t << 32 | (uint64_t)i, LEN);
        CHECK_OK(netvm_msg_send(ctx, other, t, buf, LEN));
    }
    return NULL;
}

static void *receiver(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    uint8_t buf[LEN];
    for (int i = 0; i < n; i++) {
        netvm_msg_info_t in;
        netvm_status_t st = i % 2 ? netvm_msg_recv(ctx, other, t, buf, sizeof buf, &in, -1)
                                  : netvm_msg_recv(ctx, NETVM_MSG_ANY_SOURCE, t, buf, sizeof buf, &in, -1);
        CHECK_OK(st);
        CHECK(in.source == other && in.tag == t && in.len == LEN);
        if (!mt_ok(buf, other, t << 32 | (uint64_t)i, LEN))
            FAILF("thread %llu: message %d out of order or damaged", (unsigned long long)t, i);
    }
    atomic_fetch_add(&receivers_done, 1);
    return NULL;
}

static void *prober(void *arg)
{
    (void)arg;
    long seen = 0;
    while (atomic_load(&receivers_done) < NT) {
        netvm_msg_info_t in;
        netvm_status_t st = netvm_msg_probe(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, &in);
        if (st == NETVM_OK) {
            CHECK(in.source == other && in.tag < NT && in.len == LEN);
            seen++;
        } else {
            CHECK_ST(st, NETVM_ERR_AGAIN);
        }
    }
    return (void *)seen;
}

int main(int argc, char **argv)
{
    n = argc > 1 ? atoi(argv[1]) : 2000;
    netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
    CHECK_OK(netvm_init(&ctx, &cfg));
    rank = netvm_rank(ctx);
    check_rank = rank;
    CHECK(netvm_size(ctx) == 2);
    other = 1 - rank;
    CHECK_OK(netvm_barrier(ctx));
    pthread_t s[NT], r[NT], p;
    for (uintptr_t t = 0; t < NT; t++) {
        CHECK(pthread_create(&r[t], NULL, receiver, (void *)t) == 0);
        CHECK(pthread_create(&s[t], NULL, sender, (void *)t) == 0);
    }
    CHECK(pthread_create(&p, NULL, prober, NULL) == 0);
    for (int t = 0; t < NT; t++) {
        CHECK(pthread_join(s[t], NULL) == 0);
        CHECK(pthread_join(r[t], NULL) == 0);
    }
    CHECK(pthread_join(p, NULL) == 0);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    printf("rank %d ok\n", rank);
    return 0;
}
