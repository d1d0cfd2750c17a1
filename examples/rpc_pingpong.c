/* RPC ping-pong: rank 0 calls a procedure on rank 1, one call at a time.
 *
 * This is the RPC use of the CLAN Tripwire paper's simple protocol (section
 * 4.1: the client writes a request into the server's buffer, the result is
 * written back into the client's), with the synchronisation done by
 * notifications and signals instead of flags and tripwires:
 *  - the request is a put with a completer notification (EXTOLL's RMA unit,
 *    Nüssle section 7.5.1): the server learns that the request is in its
 *    memory, and which call it is, from its event queue (netvm_evq_wait);
 *    in mode "notify" it is a plain put followed by a notification put
 *    (netvm_notify), which netvm orders after the put;
 *  - the reply is a netvm_put_signal into the client's reply slot that sets
 *    the slot's sequence word only once the reply is visible, and the client
 *    sleeps in netvm_wait_until on that word.
 * All cross-process accesses are writes; neither side polls the other.
 *
 *   netvm run -n 2 ./rpc_pingpong [calls] [completer|notify]
 */
#include <netvm/netvm.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY(x) do { netvm_status_t s_ = (x); if (s_) { \
    fprintf(stderr, "rpc_pingpong rank %d: %s: %s\n", rank, #x, netvm_strerror(s_)); exit(1); } } while (0)

enum { CLIENT = 0, SERVER = 1 };
enum { OP_CALL = 1, OP_QUIT = 2 };
#define NARGS   14
#define WARMUP  200
#define WAIT_MS 20000             /* a silent peer is a failure, not a hang */

struct request {                  /* in the server's memory */
    uint64_t call;
    uint32_t op;
    uint32_t nargs;
    uint64_t args[NARGS];
};

struct reply {
    uint64_t call;
    uint64_t sum;
    uint64_t hash;
};

struct reply_slot {               /* in the client's memory */
    uint64_t done;                /* signal word: call + 1 once that call's reply is here */
    uint8_t  pad[56];
    struct reply r;
};

static int rank;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The procedure: both sides run it, the client to check the server's answer. */
static struct reply compute(const struct request *q)
{
    struct reply r = { .call = q->call, .sum = 0, .hash = 0xcbf29ce484222325ull };
    for (uint32_t i = 0; i < q->nargs && i < NARGS; i++) {
        r.sum += q->args[i];
        r.hash = (r.hash ^ q->args[i]) * 0x100000001b3ull;
    }
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_client(netvm_ctx_t *ctx, struct reply_slot *slot, netvm_rseg_t *server,
                      uint64_t calls, int notify_mode)
{
    static struct request q;      /* the put's source must outlive the call that issues it */
    double *rtt = malloc((calls + 1) * sizeof *rtt);
    if (!rtt) {
        fprintf(stderr, "rpc_pingpong: out of memory\n");
        return 1;
    }
    uint64_t bad = 0, total = WARMUP + calls;
    for (uint64_t call = 0; call <= total; call++) {
        q.call = call;
        q.op = call < total ? OP_CALL : OP_QUIT;
        q.nargs = NARGS;
        for (int i = 0; i < NARGS; i++)
            q.args[i] = call * 0x9e3779b97f4a7c15ull + (uint64_t)i * 1000003;
        double t0 = now_us();
        netvm_req_t *req = NULL;
        if (notify_mode) {
            TRY(netvm_put_nb(ctx, server, 0, &q, sizeof q, 0, &req));
            TRY(netvm_notify(ctx, SERVER, call));
        } else {
            TRY(netvm_put_notify(ctx, server, 0, &q, sizeof q, NETVM_F_NOTIFY_COMPLETER, call));
        }
        if (q.op == OP_QUIT) {
            if (req)
                TRY(netvm_wait(&req));
            break;
        }
        uint64_t seen;
        netvm_status_t s = netvm_wait_until(ctx, &slot->done, NETVM_CMP_GE, call + 1, 0, WAIT_MS, &seen);
        if (s == NETVM_ERR_TIMEOUT) {
            fprintf(stderr, "rpc_pingpong: no reply to call %llu in %d ms\n",
                    (unsigned long long)call, WAIT_MS);
            exit(1);
        }
        TRY(s);
        double t1 = now_us();
        /* The server read the request before replying, so the put is
         * complete; this only frees its request. */
        if (req)
            TRY(netvm_wait(&req));
        if (call >= WARMUP)
            rtt[call - WARMUP] = t1 - t0;
        struct reply want = compute(&q), got = slot->r;
        if ((seen != call + 1 || memcmp(&got, &want, sizeof got) != 0) && bad++ < 5)
            fprintf(stderr, "rpc_pingpong: call %llu: signal %llu, reply for call %llu sum %016llx hash %016llx"
                    " (want sum %016llx hash %016llx)\n", (unsigned long long)call,
                    (unsigned long long)seen, (unsigned long long)got.call, (unsigned long long)got.sum,
                    (unsigned long long)got.hash, (unsigned long long)want.sum,
                    (unsigned long long)want.hash);
    }
    TRY(netvm_flush(ctx, SERVER));   /* reports a request put that failed at the server */
    if (bad) {
        printf("rpc_pingpong: FAILED: %llu of %llu replies wrong\n",
               (unsigned long long)bad, (unsigned long long)total);
        free(rtt);
        return 1;
    }
    double sum = 0;
    for (uint64_t i = 0; i < calls; i++)
        sum += rtt[i];
    qsort(rtt, calls, sizeof *rtt, cmp_double);
    printf("rpc_pingpong: %llu calls (%s), every reply verified\n",
           (unsigned long long)total, notify_mode ? "put + notification put" : "put with completer notification");
    if (calls > 0)
        printf("rpc_pingpong: round trip over %llu calls: mean %.2f us, median %.2f us, min %.2f us, p99 %.2f us\n",
               (unsigned long long)calls, sum / (double)calls, rtt[calls / 2], rtt[0],
               rtt[calls * 99 / 100]);
    free(rtt);
    return 0;
}

static int run_server(netvm_ctx_t *ctx, struct request *q, netvm_rseg_t *client, int notify_mode)
{
    uint64_t expect = 0, served = 0;
    for (;;) {
        netvm_event_t ev[4];
        int n;
        netvm_status_t s = netvm_evq_wait(ctx, ev, 4, &n, WAIT_MS);
        if (s == NETVM_ERR_TIMEOUT) {
            fprintf(stderr, "rpc_pingpong: server: no request in %d ms (after %llu)\n",
                    WAIT_MS, (unsigned long long)served);
            exit(1);
        }
        TRY(s);
        for (int i = 0; i < n; i++) {
            /* One call is outstanding at a time, so exactly the next one may arrive. */
            int ok = ev[i].rank == CLIENT && ev[i].value == expect &&
                     (notify_mode ? ev[i].type == NETVM_EV_NOTIFY
                                  : ev[i].type == NETVM_EV_COMPLETER && ev[i].len == sizeof *q);
            if (!ok || q->call != expect) {
                fprintf(stderr, "rpc_pingpong: server: expected call %llu, got event type %u rank %d"
                        " value %llu len %llu, request for call %llu\n", (unsigned long long)expect,
                        ev[i].type, ev[i].rank, (unsigned long long)ev[i].value,
                        (unsigned long long)ev[i].len, (unsigned long long)q->call);
                exit(1);
            }
            if (q->op == OP_QUIT) {
                printf("rpc_pingpong: server: served %llu calls\n", (unsigned long long)served);
                return 0;
            }
            struct reply r = compute(q);
            TRY(netvm_put_signal(ctx, client, offsetof(struct reply_slot, r), &r, sizeof r,
                                 client, offsetof(struct reply_slot, done), expect + 1,
                                 NETVM_SIGNAL_SET, 0));
            served++;
            expect++;
        }
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t calls = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000;
    int notify_mode = argc > 2 && strcmp(argv[2], "notify") == 0;
    if (argc > 2 && !notify_mode && strcmp(argv[2], "completer") != 0) {
        fprintf(stderr, "usage: rpc_pingpong [calls] [completer|notify]\n");
        return 2;
    }
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    rank = netvm_rank(ctx);
    if (netvm_size(ctx) != 2) {
        if (rank == 0)
            fprintf(stderr, "rpc_pingpong: run with exactly 2 ranks (netvm run -n 2)\n");
        netvm_finalize(ctx);
        return 2;
    }

    void *area;
    netvm_seg_t *seg;
    if (rank == SERVER)
        TRY(netvm_alloc_shared(ctx, sizeof(struct request), NETVM_RW, "request", &area, &seg));
    else
        TRY(netvm_alloc_shared(ctx, sizeof(struct reply_slot), NETVM_RW, "reply", &area, &seg));
    TRY(netvm_barrier(ctx));

    netvm_rseg_t *peer;
    TRY(netvm_import(ctx, 1 - rank, rank == SERVER ? "reply" : "request", &peer));
    int rc = rank == CLIENT ? run_client(ctx, area, peer, calls, notify_mode)
                            : run_server(ctx, area, peer, notify_mode);

    TRY(netvm_barrier(ctx));
    TRY(netvm_release(peer));
    TRY(netvm_unexport(seg));
    TRY(netvm_finalize(ctx));
    return rc;
}
