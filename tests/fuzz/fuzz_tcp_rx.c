/* libFuzzer target: a tcp link connection's whole receive path — framing,
 * decoding, the target's checks, payloads landing in memory, tripwires
 * matched and events posted, replies — fed arbitrary bytes through a socket
 * pair. Whatever arrives, the process must
 * not crash or write outside the one exported buffer; a bad frame only
 * closes the connection. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"

#include <netvm/netvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint8_t exported[4096];

static void am(void *arg, int src, const uint8_t *msg, size_t len) { (void)arg; (void)src; (void)msg; (void)len; }
static void down(void *arg, int rank) { (void)arg; (void)rank; }
static void complete(void *arg, void *token, netvm_status_t st) { (void)arg; (void)token; (void)st; }
static int claim(void *arg, void *token) { (void)arg; (void)token; return 1; }

static netvm_status_t translate(void *arg, uint32_t slot, uint64_t key, uint64_t off, uint64_t len,
                                unsigned need, uint64_t *addr)
{
    (void)arg; (void)need;
    if (slot != 0 || key != 1)
        return NETVM_ERR_KEY;
    if (off > sizeof exported || len > sizeof exported - off)
        return NETVM_ERR_BOUNDS;
    *addr = (uintptr_t)exported + off;
    return NETVM_OK;
}

static netvm_status_t lookup(void *arg, const char *name, uint32_t slot, uint64_t key, struct nv_seg_desc *out)
{
    (void)arg;
    if ((name && strcmp(name, "seg")) || (!name && (slot != 0 || key != 1)))
        return NETVM_ERR_NOTFOUND;
    memset(out, 0, sizeof *out);
    out->key = 1;
    out->len = sizeof exported;
    out->rights = NETVM_RWA;
    return NETVM_OK;
}

static struct nv_ep ep;   /* the target's event queue, with tripwires over the buffer */

static struct tcp_link *link_once(void)
{
    static struct nv_link *l;
    if (!l) {
        static const uint8_t secret[32] = { 1 };
        if (nv_ep_create(&ep, 0, 64, 16, 4) != NETVM_OK)
            abort();
        for (uint32_t id = 0; id < 4; id++)   /* persistent, once-only, reads, writes; one past the end */
            nv_ep_trip_add(&ep, id, 1, id == 0 ? NETVM_TRIP_RW : id == 1 ? NETVM_TRIP_WRITE | NETVM_TRIP_ONCE
                                       : id == 2 ? NETVM_TRIP_READ : NETVM_TRIP_WRITE,
                           id, (uintptr_t)exported + id * 1000, (uintptr_t)exported + id * 1000 + 1500);
        struct nv_tcp_params p = { .timeout_ms = 1000, .secret = secret, .secret_len = 32,
                                   .max_segments = 16, .bind_addr = "127.0.0.1", .ep = &ep };
        struct nv_link_upcalls up = { .am = am, .peer_down = down, .complete = complete, .claim = claim,
                                      .translate = translate, .lookup = lookup };
        struct nv_tcp_card card;
        if (nv_tcp_link_open(&l, 0, 2, &p, &up, &card) != NETVM_OK)
            abort();
    }
    return tcp_of(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tcp_link *t = link_once();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv))
        abort();
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    struct tcp_conn *c = tcp_conn_new(t, sv[1], 1);
    atomic_store(&c->state, CONN_READY);
    t->conns[1] = c;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(sv[0], data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
        tcp_rx(c);
    }
    shutdown(sv[0], SHUT_WR);
    for (int i = 0; i < 4 && atomic_load(&c->state) != CONN_DEAD; i++)
        tcp_rx(c);
    t->conns[1] = NULL;
    tcp_conn_free(c);
    struct nv_ep_rec r;
    while (nv_ep_pop(&ep, &r))
        if (r.type != NETVM_EV_TRIPWIRE && r.type != NETVM_EV_COMPLETER && r.type != NETVM_EV_RESPONDER)
            abort();   /* a peer's frames can only cause these */
    nv_ep_take_overflow(&ep);
    close(sv[0]);
    return 0;
}
