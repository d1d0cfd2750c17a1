/* Nonblocking sends from a polling loop (netvm_msg_isend), 2 ranks:
 *  - gathered: rank 0 polls (its loop holds the connections), sends a
 *    window of W messages with isend, then polls for rank 1's answer, R
 *    times. Every message arrives once, in order, its payload intact. On
 *    tcp (NETVM_LINKS=tcp) the windows must leave gathered: the fewest
 *    sendmsg calls rank 0 made in one window, counted by the kernel's
 *    sys_enter_sendmsg tracepoint for this process and its threads, is at
 *    most W / 8 (one each: at least W). Where the tracepoint cannot be
 *    opened the count is skipped, said so on stderr;
 *  - held, then left: rank 0 sends one message with isend from its
 *    polling loop and then calls nothing netvm: it watches a word of its
 *    own memory, which rank 1 puts into once the message came. A message
 *    that waited for the sender's next call would hang here.
 *  - netvm_msg_send between isends keeps the order. */
#include "msg_test.h"
#include "syscount.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define W 64
#define R 20
enum { T_DATA = 1, T_ACK, T_PING, T_STOP };

/* A polling loop: from its second call the loop holds the connections. */
static void poll_a_while(netvm_ctx_t *ctx)
{
    for (int i = 0; i < 100; i++)
        netvm_progress(ctx);
}

static void take(netvm_ctx_t *ctx, uint64_t tag, uint64_t *v)
{
    netvm_status_t st;
    while ((st = netvm_msg_try_recv(ctx, 1, tag, v, sizeof *v, NULL)) == NETVM_ERR_AGAIN)
        ;
    CHECK_OK(st);
}

static void sender(netvm_ctx_t *ctx, int counter, int on_tcp, volatile uint64_t *flag)
{
    uint64_t seq = 0, best = UINT64_MAX;
    for (int r = 0; r < R; r++) {
        poll_a_while(ctx);
        uint64_t before = counter >= 0 ? syscount_read(counter) : 0;
        for (int k = 0; k < W; k++, seq++) {
            uint8_t buf[24];
            mt_fill(buf, 0, seq, sizeof buf);
            netvm_req_t *req;
            if (k == W / 2) {
                CHECK_OK(netvm_msg_send(ctx, 1, T_DATA, buf, sizeof buf));   /* blocking, in the middle */
                continue;
            }
            CHECK_OK(netvm_msg_isend(ctx, 1, T_DATA, buf, sizeof buf, &req));
            if (req)
                CHECK_OK(netvm_wait(&req));
        }
        uint64_t v;
        take(ctx, T_ACK, &v);
        CHECK(v == seq);
        if (counter >= 0) {
            uint64_t n = syscount_read(counter) - before;
            if (n < best)
                best = n;
        }
    }
    if (counter >= 0 && on_tcp) {
        fprintf(stderr, "isend_batch: fewest sendmsg calls in a window of %d: %llu\n", W,
                (unsigned long long)best);
        CHECK(best <= W / 8);
    }
    /* held, then left: no netvm call after the isend until rank 1 has it */
    poll_a_while(ctx);
    uint64_t ping = 4242;
    netvm_req_t *req;
    CHECK_OK(netvm_msg_isend(ctx, 1, T_PING, &ping, sizeof ping, &req));
    if (req)
        CHECK_OK(netvm_wait(&req));
    struct timespec ts = { 0, 1000 * 1000 };
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != ping + 1)
        nanosleep(&ts, NULL);   /* a lost message: the launcher's timeout */
    CHECK_OK(netvm_msg_send(ctx, 1, T_STOP, NULL, 0));
}

static void receiver(netvm_ctx_t *ctx)
{
    netvm_rseg_t *flag;
    CHECK_OK(netvm_import(ctx, 0, "isend_batch_flag", &flag));
    uint64_t seq = 0;
    for (;;) {
        uint8_t buf[64];
        netvm_msg_info_t in;
        CHECK_OK(netvm_msg_recv(ctx, 0, NETVM_MSG_ANY_TAG, buf, sizeof buf, &in, -1));
        if (in.tag == T_STOP)
            break;
        if (in.tag == T_PING) {
            uint64_t v;
            memcpy(&v, buf, sizeof v);
            v++;
            CHECK_OK(netvm_put(ctx, flag, 0, &v, sizeof v, 0));
            continue;
        }
        CHECK(in.tag == T_DATA && in.len == 24);
        if (!mt_ok(buf, 0, seq, 24))
            FAILF("message %llu out of order or damaged", (unsigned long long)seq);
        if (++seq % W == 0)
            CHECK_OK(netvm_msg_send(ctx, 0, T_ACK, &seq, sizeof seq));
    }
    CHECK(seq == (uint64_t)W * R);
}

int main(void)
{
    const char *links = getenv("NETVM_LINKS");
    int on_tcp = links && strcmp(links, "tcp") == 0;
    int counter = syscount_open("sendmsg");
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    if (check_rank == 0 && on_tcp && counter < 0)
        fprintf(stderr, "isend_batch: no sys_enter_sendmsg tracepoint here: the count is skipped\n");
    void *flag = NULL;
    netvm_seg_t *seg = NULL;
    if (check_rank == 0)
        CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RW, "isend_batch_flag", &flag, &seg));
    CHECK_OK(netvm_barrier(ctx));
    if (check_rank == 0)
        sender(ctx, counter, on_tcp, flag);
    else
        receiver(ctx);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
