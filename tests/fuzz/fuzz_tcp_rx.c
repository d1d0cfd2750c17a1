/* libFuzzer target: the whole receive path of one READY tcp connection —
 * framing, decoding, the target's checks against the ATU, payloads landing
 * in memory, tripwires matched and events posted, answers queued and sent,
 * answers to this process's own requests, active messages handed to core
 * (eager, and large ones landing where core said) — fed arbitrary bytes
 * through a socket pair, in chunks, as a connected peer would send them.
 *
 * Whatever arrives, nothing may crash, hang or write outside the memory it
 * was given: the one exported buffer (slot 0, key 1, 4096 bytes), the
 * buffers core named for large active messages and the buffers of this
 * process's gets, each with a canary on both sides. A bad frame only kills
 * the connection. The link's upcalls are checked against the contract of
 * link/link.h: a message landing gets exactly one am_end, an answer given
 * up (claim said 0) is never completed nor written, no token completes
 * twice, peer_down comes once and only for a dead connection; the endpoint
 * block's ring holds only events a peer's frames can cause, about the
 * exported buffer.
 *
 * Every input gets a fresh connection (tcp_conn_new over a socketpair, its
 * buffers, a fake peer) and frees it all, so inputs are independent and
 * ASan's leak check stays quiet. The link and the endpoint block live for
 * the whole run. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/log.h"

#include <netvm/netvm.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define EXPORTED_LEN 4096
#define AM_DST_MAX   (1u << 20)   /* core names a buffer for payloads up to this */
#define PAGE         4096u

static void die(const char *why)
{
    fprintf(stderr, "fuzz_tcp_rx: %s\n", why);
    abort();
}

/* --- memory watched on both sides ---------------------------------------------- */

/* A buffer with a page of canary before it and at least a page after it,
 * between two PROT_NONE pages. The canary, not the PROT_NONE pages, is what
 * catches a stray write: the link copies with nv_guarded_copy and receives
 * with recv(2), which turn a fault into a clean EFAULT, so a write running
 * into an unmapped page would look like a vanished buffer instead of the
 * overrun it is. */
struct gbuf {
    uint8_t *map;
    size_t   maplen;
    uint8_t *rw;      /* the canary, the buffer, the canary */
    size_t   rwlen;
    uint8_t *p;       /* len bytes, page-aligned */
    size_t   len;
};

#define CANARY 0xC5

static void gbuf_new(struct gbuf *g, size_t len)
{
    size_t body = (len + PAGE - 1) / PAGE * PAGE;
    g->rwlen = PAGE + body + PAGE;
    g->maplen = g->rwlen + 2 * PAGE;
    g->map = mmap(NULL, g->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->map == MAP_FAILED || mprotect(g->map + PAGE, g->rwlen, PROT_READ | PROT_WRITE) != 0)
        die("mmap");
    g->rw = g->map + PAGE;
    g->p = g->rw + PAGE;
    g->len = len;
    memset(g->rw, CANARY, g->rwlen);   /* the canary, and the buffer's initial bytes */
}

/* 1 if the n bytes at p all hold the canary (memcmp by pages: a byte loop
 * costs more than the rest of an input under libFuzzer's instrumentation). */
static int is_canary(const uint8_t *p, size_t n)
{
    static uint8_t pattern[PAGE];
    if (!pattern[0])
        memset(pattern, CANARY, sizeof pattern);
    for (size_t k; n; p += k, n -= k) {
        k = n < PAGE ? n : PAGE;
        if (memcmp(p, pattern, k) != 0)
            return 0;
    }
    return 1;
}

/* Nothing was written around the buffer. */
static void gbuf_check(const struct gbuf *g, const char *what)
{
    if (!is_canary(g->rw, PAGE))
        fprintf(stderr, "fuzz_tcp_rx: a write before the start of %s\n", what), abort();
    if (!is_canary(g->p + g->len, (size_t)(g->rw + g->rwlen - (g->p + g->len))))
        fprintf(stderr, "fuzz_tcp_rx: a write past the end of %s\n", what), abort();
}

static int gbuf_untouched(const struct gbuf *g) { return is_canary(g->p, g->len); }

static void gbuf_free(struct gbuf *g, const char *what)
{
    if (!g->map)
        return;
    gbuf_check(g, what);
    munmap(g->map, g->maplen);
    memset(g, 0, sizeof *g);
}

/* --- this process's side: one exported buffer, one peer, a few requests ---------- */

static struct gbuf exported_buf;    /* EXPORTED_LEN bytes, watched on both sides */
static uint8_t *exported;
static struct nv_ep ep;             /* the target's event queue, tripwires over the buffer */
static struct tcp_link *link_;
static uint32_t trip_gen = 1;
static int rearm_once;              /* the once-only tripwire fired (or an event was lost) */

/* This process's own requests, whose answers the peer may send (their ids
 * are those of the corpus's answers; 14 is left stray). */
enum { REQ_PUT = 12, REQ_GET = 13, REQ_GET_LATE = 15, REQ_FLUSH = 16, REQ_GET_BIG = 17 };
#define GET_LEN     8
#define GET_BIG_LEN (64 * 1024)

struct token {
    const char *name;
    int         claimed;    /* claim() said 1 */
    int         refused;    /* claim() said 0: the request was given up */
    int         completed;
};

static struct {
    struct tcp_conn *c;
    struct nv_lpeer  lp;
    int              down;          /* peer_down calls */
    /* a large active message landing */
    int              am_open, am_ends;
    struct gbuf      am_dst;
    /* requests */
    struct token     t_put, t_get, t_get_late, t_flush, t_get_big;
    struct gbuf      get_buf, get_late_buf, get_big_buf;
} fz;

static struct token *token_of(void *token)
{
    struct token *all[] = { &fz.t_put, &fz.t_get, &fz.t_get_late, &fz.t_flush, &fz.t_get_big };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (token == all[i])
            return all[i];
    die("an upcall with a token nobody made");
    return NULL;
}

static void up_am(void *arg, struct nv_am_rx *rx)
{
    (void)arg;
    if (rx->from != &fz.lp)
        die("an active message from a peer that is not the connection's");
    if (rx->h.len > NV_AM_MAX_LEN)
        die("an active message longer than the wire allows");
    if (rx->payload) {
        /* all of it must be readable right there */
        volatile uint8_t sum = 0;
        for (uint64_t i = 0; i < rx->h.len; i++)
            sum ^= rx->payload[i];
        (void)sum;
        return;
    }
    if (fz.am_open)
        die("a second active message began before the first one's am_end");
    if (rx->h.len <= AM_DST_MAX) {
        gbuf_new(&fz.am_dst, (size_t)rx->h.len);
        rx->dst = fz.am_dst.p;
    }
    rx->cookie = &fz.am_dst;
    fz.am_open = 1;
}

static void up_am_end(void *arg, struct nv_am_rx *rx, netvm_status_t st)
{
    (void)arg;
    (void)st;
    if (!fz.am_open || rx->cookie != &fz.am_dst)
        die("am_end for no active message landing");
    fz.am_open = 0;
    fz.am_ends++;
    gbuf_free(&fz.am_dst, "a large active message's buffer");
}

static void up_peer_down(void *arg, struct nv_lpeer *p, int graceful)
{
    (void)arg;
    (void)graceful;
    if (p != &fz.lp)
        die("peer_down for another peer");
    if (!atomic_load(&p->down))
        die("peer_down before lp->down is set");
    fz.down++;
}

static void up_complete(void *arg, void *token, netvm_status_t st)
{
    (void)arg;
    (void)st;
    struct token *t = token_of(token);
    if (t->refused)
        die("a request completed after claim said it was given up");
    if (t->completed++)
        die("a request completed twice");
}

static int up_claim(void *arg, void *token)
{
    (void)arg;
    struct token *t = token_of(token);
    if (t->completed || t->claimed || t->refused)
        die("claim for a request that is answered already");
    if (t == &fz.t_get_late) {
        t->refused = 1;   /* it timed out in core meanwhile */
        return 0;
    }
    t->claimed = 1;
    return 1;
}

static netvm_status_t up_translate(void *arg, uint32_t slot, uint64_t key, uint64_t off, uint64_t len,
                                   unsigned need, uint64_t *addr)
{
    (void)arg;
    (void)need;
    if (slot != 0 || key != 1)
        return NETVM_ERR_KEY;
    if (off > EXPORTED_LEN || len > EXPORTED_LEN - off)
        return NETVM_ERR_BOUNDS;
    *addr = (uintptr_t)exported + off;
    return NETVM_OK;
}

static struct nv_lpeer *up_peer_ref(void *arg, uint32_t id)
{
    (void)arg;
    (void)id;
    die("the tcp link asked who sent a message: it knows (the connection)");
    return NULL;
}

static void up_peer_unref(void *arg, struct nv_lpeer *lp) { (void)arg; (void)lp; }

/* Tripwires over the buffer: persistent read+write, once-only write (armed
 * afresh for every input), read, and write reaching past the end. */
static const struct { unsigned flags; uint64_t start, end; } trips[] = {
    { NETVM_TRIP_RW, 0, 1500 },
    { NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, 1000, 2500 },
    { NETVM_TRIP_READ, 2000, 3500 },
    { NETVM_TRIP_WRITE, 3000, 4500 },
};
#define NTRIPS (sizeof trips / sizeof *trips)

static struct tcp_link *link_once(void)
{
    if (link_)
        return link_;
    if (!getenv("NETVM_LOG"))
        nv_log_threshold = NV_LOG_ERROR;   /* every bad frame is a warning: 100,000 of them */
    gbuf_new(&exported_buf, EXPORTED_LEN);
    exported = exported_buf.p;
    if (nv_ep_create(&ep, 0, 64, 16, 4) != NETVM_OK)
        die("nv_ep_create");
    for (uint32_t id = 0; id < NTRIPS; id++)
        nv_ep_trip_add(&ep, id, trip_gen, trips[id].flags, id, (uintptr_t)exported + trips[id].start,
                       (uintptr_t)exported + trips[id].end);
    int pfd = epoll_create1(EPOLL_CLOEXEC);
    if (pfd < 0)
        die("epoll_create1");
    /* a secret, though no handshake runs here: nv_tcp_link_open copies it
     * with memcpy, which a NULL pointer makes undefined even for 0 bytes */
    static const uint8_t secret[32] = { 1 };
    struct nv_tcp_params p = { .timeout_ms = 1000, .secret = secret, .secret_len = sizeof secret, .rank = 0, .uuid = 0x5eed, .host_id = 1,
                               .max_segments = 8, .max_requests = 64, .job_listen = 0,
                               .handshake_ms = 1000, .handshake_max = 4, .ep = &ep };
    static struct nv_link_upcalls up = { .am = up_am, .am_end = up_am_end, .peer_down = up_peer_down,
                                         .complete = up_complete, .claim = up_claim,
                                         .translate = up_translate, .peer_ref = up_peer_ref,
                                         .peer_unref = up_peer_unref, .hs = NULL };
    struct nv_link *l;
    struct nv_tcp_card card;
    if (nv_tcp_link_open(&l, pfd, &p, &up, &card) != NETVM_OK)
        die("nv_tcp_link_open");
    link_ = tcp_of(l);
    return link_;
}

/* Read and discard what the connection sent (answers, our requests). */
static void drain(int fd)
{
    uint8_t sink[16384];
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
        ;
}

/* What the owner of the connection does when bytes arrived: take them in,
 * send what they caused, let go. */
static void serve(struct tcp_conn *c)
{
    if (tcp_own(c) != 0)
        die("the connection is owned by nobody else, yet tcp_own failed");
    tcp_rx(c);
    tcp_tx_push(c);
    tcp_release(c);
}

/* This process's requests to the peer, as core makes them through the ops. */
static void make_requests(struct tcp_link *t)
{
    struct nv_link *l = &t->base;
    struct nv_rdesc d = { .peer = &fz.lp, .slot = 0, .key = 1, .addr = 0, .len = 1 << 20, .rights = NETVM_RWA };
    static const uint8_t src[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    fz.t_put.name = "put";
    fz.t_get.name = "get";
    fz.t_get_late.name = "get (given up)";
    fz.t_flush.name = "flush";
    fz.t_get_big.name = "get (large)";
    gbuf_new(&fz.get_buf, GET_LEN);
    gbuf_new(&fz.get_late_buf, GET_LEN);
    gbuf_new(&fz.get_big_buf, GET_BIG_LEN);
    if (l->ops->put(l, &d, 0, src, sizeof src, 1, &fz.t_put, REQ_PUT, NULL) != NV_LINK_PENDING ||
        l->ops->get(l, &d, 0, fz.get_buf.p, GET_LEN, &fz.t_get, REQ_GET, NULL) != NV_LINK_PENDING ||
        l->ops->get(l, &d, 8, fz.get_late_buf.p, GET_LEN, &fz.t_get_late, REQ_GET_LATE, NULL) != NV_LINK_PENDING ||
        l->ops->flush(l, &fz.lp, &fz.t_flush, REQ_FLUSH) != NV_LINK_PENDING ||
        l->ops->get(l, &d, 0, fz.get_big_buf.p, GET_BIG_LEN, &fz.t_get_big, REQ_GET_BIG, NULL) != NV_LINK_PENDING)
        die("a request on a fresh connection did not go out");
}

/* A small generator for the chunk sizes, seeded from the input so a crash
 * reproduces from the input alone. */
static uint64_t rng_state;
static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tcp_link *t = link_once();
    memset(&fz, 0, sizeof fz);

    /* the once-only tripwire, armed afresh if the last input used it up */
    if (rearm_once) {
        nv_ep_trip_del(&ep, 1, (uintptr_t)exported + trips[1].start);
        nv_ep_trip_add(&ep, 1, ++trip_gen, trips[1].flags, 1, (uintptr_t)exported + trips[1].start,
                       (uintptr_t)exported + trips[1].end);
        rearm_once = 0;
    }

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
        die("socketpair");
    struct tcp_conn *c = tcp_conn_new(t, sv[1]);
    if (!c || tcp_conn_buffers(c) != 0 || tcp_conn_publish(c, EPOLLIN) != 0)
        die("tcp_conn_new");
    fz.c = c;
    fz.lp.id = 1;
    fz.lp.remote_id = 0;
    fz.lp.link = &t->base;
    fz.lp.conn = c;
    c->lp = &fz.lp;
    atomic_store(&c->state, CONN_READY);
    make_requests(t);
    drain(sv[0]);

    uint64_t seed = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 1099511628211ull;
    rng_state = seed ^ size;

    size_t off = 0;
    int stuck = 0;
    while (off < size && atomic_load(&c->state) == CONN_READY) {
        /* chunks: mostly small (frames split anywhere), some large */
        uint32_t r = rng();
        size_t chunk = (r & 3) == 0 ? 1 + r % 4096 : 1 + (r >> 2) % 64;
        if (chunk > size - off)
            chunk = size - off;
        ssize_t w = send(sv[0], data + off, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            stuck = 0;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            break;   /* the connection shut its end */
        } else if (++stuck > 1000) {
            die("the connection takes no more bytes yet is alive");
        }
        serve(c);
        drain(sv[0]);
    }
    shutdown(sv[0], SHUT_WR);
    /* the end of the stream: the connection must notice it */
    for (int i = 0; i < 64 && atomic_load(&c->state) == CONN_READY; i++) {
        serve(c);
        drain(sv[0]);
    }
    if (atomic_load(&c->state) != CONN_DEAD)
        die("the peer closed, yet the connection lives on");
    if (fz.down != 1 || !atomic_load(&fz.lp.down))
        die("a dead connection must say peer_down exactly once");

    /* what core does once the peer is down: close, then free it */
    t->base.ops->peer_close(&t->base, &fz.lp, 0);
    t->base.ops->peer_free(&t->base, &fz.lp);
    if (fz.lp.conn)
        die("peer_free left the connection attached");
    if (atomic_load(&t->nconns) != 0)
        die("a connection outlived peer_free");
    if (fz.am_open)
        die("an active message began landing and never got its am_end (the connection died under it)");
    if (fz.down != 1)
        die("peer_down again after the connection was freed");

    /* this process's buffers: written only where allowed */
    if (!fz.t_get_late.claimed && !gbuf_untouched(&fz.get_late_buf))
        die("a given-up get's buffer was written");
    if (!fz.t_get.claimed && !gbuf_untouched(&fz.get_buf))
        die("an unanswered get's buffer was written");
    if (!fz.t_get_big.claimed && !gbuf_untouched(&fz.get_big_buf))
        die("an unanswered get's buffer was written");
    gbuf_free(&fz.get_buf, "a get's buffer");
    gbuf_free(&fz.get_late_buf, "a given-up get's buffer");
    gbuf_free(&fz.get_big_buf, "a large get's buffer");
    gbuf_check(&exported_buf, "the exported buffer");
    /* requests left in the link's table would be core's to time out; the
     * next input starts with none */
    memset(t->pending, 0, t->p.max_requests * sizeof *t->pending);

    struct nv_ep_rec r;
    while (nv_ep_pop(&ep, &r)) {
        if (r.type != NETVM_EV_TRIPWIRE && r.type != NETVM_EV_COMPLETER && r.type != NETVM_EV_RESPONDER)
            die("an event a peer's frame cannot cause");
        if (r.rank != fz.lp.id)
            die("an event names another peer");
        if (r.addr < (uintptr_t)exported || r.len > EXPORTED_LEN ||
            r.addr - (uintptr_t)exported > EXPORTED_LEN - r.len)
            die("an event about memory outside the exported buffer");
        if (r.type == NETVM_EV_TRIPWIRE && (r.id >= NTRIPS || !r.len))
            die("a tripwire event for no tripwire");
        if (r.type == NETVM_EV_TRIPWIRE && r.id == 1)
            rearm_once = 1;
    }
    if (nv_ep_take_overflow(&ep))
        rearm_once = 1;
    close(sv[0]);
    return 0;
}
