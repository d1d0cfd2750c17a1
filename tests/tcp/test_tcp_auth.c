/* The tcp link's handshake (link/tcp/tcp_hs.c), between two tcp link
 * instances in one process, each with its own epoll set, driven by this
 * test: it waits on each set without blocking and hands every event to the
 * link (ops->epoll_event), and runs ops->timer so handshake deadlines
 * expire. Core's part of the handshake is played by fake upcalls that hand
 * out peer objects this test owns and record what they are told.
 *
 *   right          the right credential: both sides ready, each peer's
 *                  remote_id is the other side's id, messages flow both ways,
 *                  a goodbye is seen as one
 *   wrong          another credential: the connector's ready says
 *                  NETVM_ERR_AUTH, the acceptor never accepts and drops it
 *   forged         a stranger that speaks the protocol with a wrong proof, or
 *                  the acceptor's own proof reflected: refused, never accepted;
 *                  an acceptor whose HMAC fails sends no proof at all
 *   hmac_*         HMAC failing (nv_hmac_fail_next) where the acceptor proves
 *                  itself, where the connector checks that proof, where the
 *                  connector proves itself and where the acceptor checks
 *                  that: refused every time, nobody accepted
 *   strangers      garbage and a silent connection ahead of the real
 *                  connector: it gets in without waiting; garbage is dropped
 *                  at once, the silent one after handshake_ms
 *   crowd          more silent strangers than handshake_max: the excess are
 *                  closed at once (a real connector too, while it is full);
 *                  once the silent ones expire a real connector gets in
 *   full           accepted says NETVM_ERR_AGAIN: so does the connector's ready
 *   nobody         no listener at the port: NETVM_ERR_PEER, quickly
 *   job_*          job connections (nv_tcp_connect_job): the same job gets in;
 *                  another job hash, another job secret, another rank, or a
 *                  service connection to the job's listener are refused
 *
 * Every loop is bounded, so a bug fails the test rather than hanging it. */
#define _GNU_SOURCE
#include "check.h"
#include "link/tcp/tcp.h"
#include "util/hmac.h"
#include "util/time.h"
#include "wire/am.h"
#include "wire/handshake.h"
#include "wire/tcp_frame.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define LIMIT_S 10.0     /* no wait in this test may take longer */
#define MAXP    32

static const char cred_right[] = "the listener's credential";
static const char cred_wrong[] = "somebody else's credential";

struct ready_rec {
    void            *cookie;
    struct nv_lpeer *lp;
    int              moved;
    netvm_status_t   st;
    double           t;
};

/* One link and the fake core around it. */
struct side {
    const char            *name;
    struct nv_link        *link;
    int                    pfd;
    struct nv_tcp_card     card;
    uint64_t               uuid;
    int                    rank;
    int                    id_base;         /* ids of the peers this side makes */
    struct nv_tcp_listener *listener;
    void                  *listener_cookie;
    /* the handshake's upcalls */
    netvm_status_t         accept_st;       /* what accepted answers */
    int                    n_accepted, n_authenticated, n_welcomed, n_attached, n_aborted;
    int                    fail_in_authenticated;   /* HMAC fails right after authenticated */
    struct nv_tcp_hs_info  accepted_in, authenticated_in;
    struct nv_lpeer       *peers[MAXP];
    int                    npeers;
    struct nv_lpeer       *aborted[MAXP];
    struct ready_rec       ready[MAXP];
    int                    nready;
    /* HMAC fails just before this side's fail_at_in-th EPOLLIN on a connection */
    int                    fail_at_in, conn_in;
    /* the link's upcalls */
    int                    downs, down_graceful;
    struct nv_lpeer       *down_lp;
    int                    n_am;
    struct nv_lpeer       *am_from;
    uint64_t               am_arg;
    char                   am_text[32];
};

static struct side *sides[2];   /* the pair being driven */

/* --- the fake core ------------------------------------------------------------ */

static struct nv_lpeer *new_peer(struct side *s, int id)
{
    CHECK(s->npeers < MAXP);
    struct nv_lpeer *lp = calloc(1, sizeof *lp);
    CHECK(lp);
    lp->id = id;
    s->peers[s->npeers++] = lp;
    return lp;
}

static int ours(struct side *s, struct nv_lpeer *lp)
{
    for (int i = 0; i < s->npeers; i++)
        if (s->peers[i] == lp)
            return 1;
    return 0;
}

static netvm_status_t hs_accepted(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer **lp, int *upgrade,
                                  uint8_t *card, uint32_t *card_len)
{
    struct side *s = arg;
    (void)card;
    s->n_accepted++;
    s->accepted_in = *in;
    s->accepted_in.card = NULL;
    *upgrade = 0;
    *card_len = 0;
    if (s->accept_st != NETVM_OK)
        return s->accept_st;
    if (in->hello.purpose == NV_HS_JOB) {
        /* as core does: the connector must name this rank */
        if (in->their_id != (uint32_t)s->rank)
            return NETVM_ERR_RANK;
        *lp = new_peer(s, in->hello.rank);
    } else {
        *lp = new_peer(s, s->id_base + s->npeers);
    }
    (*lp)->remote_id = in->their_id;   /* accepted()'s part, as core's */
    return NETVM_OK;
}

static netvm_status_t hs_authenticated(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer **lp,
                                       uint8_t *card, uint32_t *card_len)
{
    struct side *s = arg;
    (void)card;
    s->n_authenticated++;
    s->authenticated_in = *in;
    s->authenticated_in.card = NULL;
    *card_len = 0;
    *lp = new_peer(s, in->hello.purpose == NV_HS_JOB ? in->hello.rank : s->id_base + s->npeers);
    if (s->fail_in_authenticated)
        nv_hmac_fail_next(1);   /* the next HMAC is the connector's own proof */
    return NETVM_OK;
}

static netvm_status_t hs_welcomed(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer *lp)
{
    struct side *s = arg;
    (void)in;
    (void)lp;
    s->n_welcomed++;
    return NETVM_ERR_UNSUPPORTED;
}

static void hs_attached(void *arg, struct nv_lpeer *lp, netvm_status_t st)
{
    struct side *s = arg;
    (void)lp;
    (void)st;
    s->n_attached++;
}

static void hs_aborted(void *arg, struct nv_lpeer *lp)
{
    struct side *s = arg;
    if (!ours(s, lp))
        FAILF("%s: aborted a peer this side never handed out", s->name);
    for (int i = 0; i < s->n_aborted; i++)
        if (s->aborted[i] == lp)
            FAILF("%s: peer %d aborted twice", s->name, lp->id);
    CHECK(s->n_aborted < MAXP);
    s->aborted[s->n_aborted++] = lp;
}

static void hs_ready(void *arg, void *cookie, struct nv_lpeer *lp, int moved, netvm_status_t st)
{
    struct side *s = arg;
    CHECK(s->nready < MAXP);
    if (lp && !ours(s, lp))
        FAILF("%s: ready with a peer this side never handed out", s->name);
    s->ready[s->nready++] = (struct ready_rec){ cookie, lp, moved, st, now_s() };
}

static const struct nv_tcp_hs_upcalls hs_up = {
    .accepted = hs_accepted, .authenticated = hs_authenticated, .welcomed = hs_welcomed,
    .attached = hs_attached, .aborted = hs_aborted, .ready = hs_ready,
};

static void up_am(void *arg, struct nv_am_rx *rx)
{
    struct side *s = arg;
    s->n_am++;
    s->am_from = rx->from;
    s->am_arg = rx->h.nargs ? rx->h.args[0] : 0;
    CHECK(rx->payload && rx->h.len < sizeof s->am_text);
    memcpy(s->am_text, rx->payload, (size_t)rx->h.len);
    s->am_text[rx->h.len] = 0;
}

static void up_am_end(void *arg, struct nv_am_rx *rx, netvm_status_t st)
{
    (void)arg;
    (void)rx;
    (void)st;
    FAILF("am_end for a message that came whole");
}

static void up_peer_down(void *arg, struct nv_lpeer *lp, int graceful)
{
    struct side *s = arg;
    s->downs++;
    s->down_lp = lp;
    s->down_graceful = graceful;
}

static void up_complete(void *arg, void *token, netvm_status_t st)
{
    (void)arg;
    (void)token;
    (void)st;
}

static int up_claim(void *arg, void *token)
{
    (void)arg;
    (void)token;
    return 1;
}

static netvm_status_t up_translate(void *arg, uint32_t slot, uint64_t key, uint64_t off, uint64_t len,
                                   unsigned need, uint64_t *addr)
{
    (void)arg; (void)slot; (void)key; (void)off; (void)len; (void)need; (void)addr;
    return NETVM_ERR_KEY;
}

/* --- the two links -------------------------------------------------------------- */

struct side_opts {
    int            handshake_ms;
    int            handshake_max;
    int            job_listen;
    int            rank;
    uint64_t       job_hash;
    const uint8_t *secret;
};

static const uint8_t job_secret[32] = { 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
                                        7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7 };
static const uint8_t other_secret[32] = { 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
                                          8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8 };

static void side_open(struct side *s, const char *name, int which, const struct side_opts *o)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    s->uuid = 0xA000 + (uint64_t)which;
    s->rank = o->rank;
    s->id_base = 100 * (which + 1);
    s->pfd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(s->pfd >= 0);
    /* no HELLO here may share a host_id: no upgrade to another link */
    struct nv_tcp_params p = {
        .timeout_ms = 3000, .secret = o->secret ? o->secret : job_secret, .secret_len = 32,
        .job_hash = o->job_hash, .rank = o->rank, .uuid = s->uuid, .host_id = 0x1000 + (uint64_t)which,
        .max_segments = 8, .max_requests = 64, .bind_addr = "127.0.0.1", .job_listen = o->job_listen,
        .handshake_ms = o->handshake_ms ? o->handshake_ms : 300,
        .handshake_max = o->handshake_max ? o->handshake_max : 4,
    };
    struct nv_link_upcalls up = { .arg = s, .am = up_am, .am_end = up_am_end, .peer_down = up_peer_down,
                                  .complete = up_complete, .claim = up_claim, .translate = up_translate,
                                  .hs = &hs_up };
    CHECK_OK(nv_tcp_link_open(&s->link, s->pfd, &p, &up, &s->card));
    CHECK(s->link && s->link->pfd == s->pfd);
    sides[which] = s;
}

/* A service listener on an ephemeral port; its address in addr. */
static void side_listen(struct side *s, const char *cred, char *addr, size_t cap)
{
    s->listener_cookie = &s->listener_cookie;
    CHECK_OK(nv_tcp_listen(s->link, "tcp:127.0.0.1:0", cred, strlen(cred), s->listener_cookie, &s->listener,
                           addr, cap));
    CHECK(strncmp(addr, "tcp:127.0.0.1:", 14) == 0 && strcmp(addr, "tcp:127.0.0.1:0") != 0);
}

static uint16_t port_of(const char *addr)
{
    uint32_t ip;
    uint16_t port;
    CHECK(nv_tcp_parse_addr(addr, &ip, &port) == 0);
    return port;
}

/* Take in what is ready on s's epoll set, run its timer; events handled. */
static int pump(struct side *s)
{
    struct epoll_event ev[32];
    int n = epoll_wait(s->pfd, ev, 32, 0);
    CHECK(n >= 0 || errno == EINTR);
    for (int i = 0; i < n; i++) {
        /* the listener's token is the listener (its first member) */
        if ((ev[i].events & EPOLLIN) && ev[i].data.ptr != (void *)s->listener && s->fail_at_in &&
            ++s->conn_in == s->fail_at_in)
            nv_hmac_fail_next(1);
        s->link->ops->epoll_event(s->link, ev[i].data.ptr, ev[i].events);
    }
    s->link->ops->timer(s->link, nv_now_ns());
    s->link->ops->flush_tx(s->link, 1);
    return n > 0 ? n : 0;
}

static int pump_all(void)
{
    int n = 0;
    for (int i = 0; i < 2; i++)
        if (sides[i])
            n += pump(sides[i]);
    if (!n)
        usleep(200);
    return n;
}

#define PUMP_UNTIL(cond, secs, ...) do { \
    double t0_ = now_s(); \
    while (!(cond)) { \
        if (now_s() - t0_ > (secs)) \
            FAILF(__VA_ARGS__); \
        pump_all(); \
    } } while (0)

/* Go on for a while: what must not happen has its chance to. */
static void settle(double secs)
{
    double t0 = now_s();
    while (now_s() - t0 < secs)
        pump_all();
}

static void side_close(struct side *s)
{
    struct nv_link *l = s->link;
    for (int i = 0; i < s->nready; i++) {
        struct nv_lpeer *lp = s->ready[i].lp;
        if (lp && s->ready[i].st == NETVM_OK) {
            CHECK(lp->conn && lp->link == l);
            l->ops->peer_close(l, lp, 0);
            l->ops->peer_free(l, lp);
            CHECK(!lp->conn);
        }
    }
    if (s->listener)
        nv_tcp_listener_close(l, s->listener);
    l->ops->destroy(l);
    close(s->pfd);
    for (int i = 0; i < s->npeers; i++)
        free(s->peers[i]);
    for (int i = 0; i < 2; i++)
        if (sides[i] == s)
            sides[i] = NULL;
    memset(s, 0, sizeof *s);
}

/* nconns of the link is 0: every connection is gone. */
static int idle(struct side *s) { return !s->link->ops->active(s->link); }

static void check_no_peer(struct side *s)
{
    if (s->n_accepted || s->nready || s->npeers)
        FAILF("%s: accepted %d, ready %d, peers %d: a refused connection got somewhere", s->name,
              s->n_accepted, s->nready, s->npeers);
}

/* --- strangers: plain sockets -------------------------------------------------------- */

static int dial(uint16_t port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* 1 once the other end closed the connection (EOF or an error), else 0;
 * whatever it sent is read and dropped. */
static int closed(int fd)
{
    char buf[512];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0)
            continue;
        if (r == 0)
            return 1;
        return errno != EAGAIN && errno != EINTR;
    }
}

static void send_all(int fd, const void *buf, size_t n)
{
    CHECK(send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n);
}

/* Read one frame (header and payload) from a blocking socket, pumping the
 * links meanwhile. */
static void recv_frame(int fd, struct nv_tcp_hdr *h, uint8_t *pay, size_t cap)
{
    uint8_t buf[NV_TCP_HDR_LEN + NV_TCP_HS_MAX];
    size_t got = 0, want = NV_TCP_HDR_LEN;
    double t0 = now_s();
    while (got < want) {
        if (now_s() - t0 > LIMIT_S)
            FAILF("no frame from the acceptor");
        ssize_t r = recv(fd, buf + got, want - got, MSG_DONTWAIT);
        if (r == 0)
            FAILF("the acceptor closed the connection during the handshake");
        if (r < 0) {
            CHECK(errno == EAGAIN || errno == EINTR);
            pump_all();
            continue;
        }
        got += (size_t)r;
        if (got == NV_TCP_HDR_LEN) {
            CHECK(nv_tcp_hdr_decode(buf, got, h, NULL) == 0);
            CHECK(h->len <= cap && h->len <= NV_TCP_HS_MAX);
            want += (size_t)h->len;
        }
    }
    memcpy(pay, buf + NV_TCP_HDR_LEN, (size_t)h->len);
}

/* --- the cases ------------------------------------------------------------------------- */

static const struct side_opts plain = { 0 };

/* A pair: A listens with cred_right, B connects with cred. */
static void pair(struct side *a, struct side *b, const struct side_opts *ao, char *addr, size_t cap)
{
    side_open(a, "acceptor", 0, ao ? ao : &plain);
    side_open(b, "connector", 1, &plain);
    side_listen(a, cred_right, addr, cap);
}

static void send_am(struct side *s, struct nv_lpeer *lp, uint64_t arg, const char *text)
{
    struct nv_am_hdr h = { .handler = 7, .nargs = 1, .args = { arg }, .len = strlen(text) };
    uint8_t hdr[NV_AM_HDR_MAX];
    size_t hlen = nv_am_hdr_encode(&h, hdr);
    CHECK_OK(s->link->ops->am_send(s->link, lp, hdr, hlen, text, strlen(text), NV_AMS_COPY | NV_AMS_NOW, NULL, 0));
}

static void case_right(void)
{
    struct side a, b;
    char addr[64];
    pair(&a, &b, NULL, addr, sizeof addr);
    int cookie;
    double t0 = now_s();
    CHECK_OK(nv_tcp_connect(b.link, addr, cred_right, strlen(cred_right), &cookie));
    PUMP_UNTIL(a.nready && b.nready, LIMIT_S, "both sides ready (acceptor %d, connector %d)", a.nready, b.nready);
    settle(0.05);
    CHECK(a.nready == 1 && b.nready == 1);
    struct ready_rec ra = a.ready[0], rb = b.ready[0];
    CHECK_OK(ra.st);
    CHECK_OK(rb.st);
    CHECK(!ra.moved && !rb.moved);
    CHECK(ra.cookie == a.listener_cookie && rb.cookie == &cookie);
    CHECK(ra.lp && rb.lp && ra.lp->conn && rb.lp->conn);
    CHECK(ra.lp->link == a.link && rb.lp->link == b.link);
    CHECK(a.npeers == 1 && b.npeers == 1 && ra.lp == a.peers[0] && rb.lp == b.peers[0]);
    if (ra.lp->remote_id != (uint32_t)rb.lp->id || rb.lp->remote_id != (uint32_t)ra.lp->id)
        FAILF("remote ids: the acceptor's peer %d says %u, the connector's peer %d says %u", ra.lp->id,
              ra.lp->remote_id, rb.lp->id, rb.lp->remote_id);
    /* what each side learnt of the other */
    CHECK(a.n_accepted == 1 && b.n_authenticated == 1);
    CHECK(a.accepted_in.hello.uuid == b.uuid && a.accepted_in.hello.purpose == NV_HS_SERVICE &&
          a.accepted_in.hello.rank == -1 && a.accepted_in.hello.job_hash == 0);
    CHECK(a.accepted_in.their_id == (uint32_t)rb.lp->id && a.accepted_in.cookie == a.listener_cookie);
    CHECK(b.authenticated_in.hello.uuid == a.uuid && b.authenticated_in.hello.purpose == NV_HS_SERVICE);
    CHECK(b.authenticated_in.cookie == &cookie);
    CHECK(!a.n_aborted && !b.n_aborted && !a.n_welcomed && !b.n_welcomed && !a.n_attached && !b.n_attached);
    CHECK(!a.downs && !b.downs);
    printf("right: ready in %.1f ms\n", (rb.t - t0) * 1e3);
    /* the connection carries traffic, both ways */
    send_am(&b, rb.lp, 0xfeed, "ping");
    PUMP_UNTIL(a.n_am == 1, LIMIT_S, "the connector's message");
    CHECK(a.am_from == ra.lp && a.am_arg == 0xfeed && !strcmp(a.am_text, "ping"));
    send_am(&a, ra.lp, 0xbeef, "pong");
    PUMP_UNTIL(b.n_am == 1, LIMIT_S, "the acceptor's message");
    CHECK(b.am_from == rb.lp && b.am_arg == 0xbeef && !strcmp(b.am_text, "pong"));
    /* a goodbye is seen as one */
    b.link->ops->peer_close(b.link, rb.lp, 1);
    PUMP_UNTIL(a.downs, LIMIT_S, "the acceptor to see the connector leave");
    CHECK(a.downs == 1 && a.down_lp == ra.lp && a.down_graceful && atomic_load(&ra.lp->down));
    side_close(&b);
    side_close(&a);
}

static void case_wrong(void)
{
    struct side a, b;
    char addr[64];
    /* a long handshake_ms: the acceptor must drop it because it is refused,
     * not because it timed out */
    struct side_opts ao = { .handshake_ms = 60000 };
    pair(&a, &b, &ao, addr, sizeof addr);
    int cookie;
    CHECK_OK(nv_tcp_connect(b.link, addr, cred_wrong, strlen(cred_wrong), &cookie));
    PUMP_UNTIL(b.nready, LIMIT_S, "the connector's ready");
    CHECK(b.ready[0].cookie == &cookie && !b.ready[0].lp);
    CHECK_ST(b.ready[0].st, NETVM_ERR_AUTH);
    CHECK(!b.n_authenticated && !b.npeers);
    PUMP_UNTIL(idle(&a) && idle(&b), LIMIT_S, "both sides to drop the connection");
    settle(0.05);
    check_no_peer(&a);
    CHECK(b.nready == 1);
    side_close(&b);
    side_close(&a);
}

/* A stranger speaking the protocol without the credential: its AUTH carries
 * random bytes (FORGED), or the acceptor's own proof sent back
 * (REFLECTED). Or (NO_MAC) HMAC fails as the acceptor is about to prove
 * itself: it must not send a proof it could not compute, and closes. */
enum { FORGED, REFLECTED, NO_MAC };

static void case_forged(int how)
{
    static const char *names[] = { "forged", "reflected", "no MAC" };
    struct side a;
    char addr[64];
    struct side_opts ao = { .handshake_ms = 60000 };
    side_open(&a, "acceptor", 0, &ao);
    side_listen(&a, cred_right, addr, sizeof addr);
    int fd = dial(port_of(addr));
    struct nv_hs_hello hc = { .proto = NV_HS_PROTO, .purpose = NV_HS_SERVICE, .uuid = 0xBAD, .rank = -1,
                              .host_id = 0xBAD };
    memset(hc.nonce, 0x5a, sizeof hc.nonce);
    uint8_t frame[NV_TCP_HDR_LEN + NV_TCP_HS_MAX];
    struct nv_tcp_hdr h = { .kind = NV_TCP_HELLO, .len = NV_HS_HELLO_LEN };
    nv_tcp_hdr_encode(&h, frame);
    nv_hs_hello_encode(&hc, frame + NV_TCP_HDR_LEN);
    if (how == NO_MAC)
        nv_hmac_fail_next(1);
    send_all(fd, frame, NV_TCP_HDR_LEN + NV_HS_HELLO_LEN);
    if (how == NO_MAC) {
        /* whatever comes before the close holds no AUTH */
        uint8_t got[1024];
        size_t n = 0, off = 0;
        double t0 = now_s();
        for (;;) {
            if (now_s() - t0 > LIMIT_S)
                FAILF("the acceptor did not close although its HMAC failed");
            ssize_t r = recv(fd, got + n, sizeof got - n, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                break;
            if (r < 0) {
                pump_all();
                continue;
            }
            n += (size_t)r;
            CHECK(n < sizeof got);
            for (; off + NV_TCP_HDR_LEN <= n; off += NV_TCP_HDR_LEN + (size_t)h.len) {
                CHECK(nv_tcp_hdr_decode(got + off, NV_TCP_HDR_LEN, &h, NULL) == 0 && h.len <= NV_TCP_HS_MAX);
                if (h.kind == NV_TCP_AUTH)
                    FAILF("the acceptor sent a proof although its HMAC failed");
            }
        }
        nv_hmac_fail_next(0);
    } else {
        /* the acceptor's HELLO and proof */
        uint8_t pay[NV_TCP_HS_MAX];
        struct nv_hs_hello ha;
        struct nv_hs_auth aa;
        recv_frame(fd, &h, pay, sizeof pay);
        CHECK(h.kind == NV_TCP_HELLO && nv_hs_hello_decode(pay, (size_t)h.len, &ha) == 0 && ha.uuid == a.uuid);
        recv_frame(fd, &h, pay, sizeof pay);
        CHECK(h.kind == NV_TCP_AUTH && nv_hs_auth_decode(pay, (size_t)h.len, &aa) == 0);
        struct nv_hs_auth mine = { .peer_id = 5 };
        if (how == REFLECTED)
            memcpy(mine.mac, aa.mac, sizeof mine.mac);
        else
            memset(mine.mac, 0x33, sizeof mine.mac);
        h = (struct nv_tcp_hdr){ .kind = NV_TCP_AUTH };
        h.len = nv_hs_auth_encode(&mine, frame + NV_TCP_HDR_LEN);
        nv_tcp_hdr_encode(&h, frame);
        send_all(fd, frame, NV_TCP_HDR_LEN + (size_t)h.len);
        PUMP_UNTIL(closed(fd), LIMIT_S, "the acceptor to close on a %s proof", names[how]);
    }
    PUMP_UNTIL(idle(&a), LIMIT_S, "the acceptor to drop it (%s)", names[how]);
    check_no_peer(&a);
    printf("stranger, %s proof: refused\n", names[how]);
    close(fd);
    side_close(&a);
}

/* HMAC fails at one step: 1 the acceptor's proof, 2 the connector's check
 * of it, 3 the connector's own proof, 4 the acceptor's check of that. */
static void case_hmac(int step)
{
    struct side a, b;
    char addr[64];
    struct side_opts ao = { .handshake_ms = 60000 };
    pair(&a, &b, &ao, addr, sizeof addr);
    switch (step) {
    case 1: nv_hmac_fail_next(1); break;       /* nothing computes a MAC before the acceptor */
    case 2: b.fail_at_in = 1; break;          /* the acceptor's HELLO and AUTH arrive */
    case 3: b.fail_in_authenticated = 1; break;
    case 4: a.fail_at_in = 2; break;          /* the first is HELLO, the second AUTH */
    }
    int cookie;
    CHECK_OK(nv_tcp_connect(b.link, addr, cred_right, strlen(cred_right), &cookie));
    PUMP_UNTIL(b.nready, LIMIT_S, "the connector's ready (HMAC failing at step %d)", step);
    PUMP_UNTIL(idle(&a) && idle(&b), LIMIT_S, "both sides to drop the connection (step %d)", step);
    settle(0.05);
    nv_hmac_fail_next(0);
    CHECK(b.nready == 1 && !b.ready[0].lp && b.ready[0].cookie == &cookie);
    if (b.ready[0].st == NETVM_OK)
        FAILF("HMAC failing at step %d: the connector got in", step);
    if (step == 2 || step == 3)
        CHECK_ST(b.ready[0].st, NETVM_ERR_AUTH);
    /* the connector made a peer only once it had checked the acceptor's
     * proof; that peer is dropped again */
    CHECK(b.n_authenticated == (step >= 3));
    CHECK(b.n_aborted == b.n_authenticated && (!b.n_aborted || b.aborted[0] == b.peers[0]));
    check_no_peer(&a);
    printf("hmac step %d: connector refused with %s\n", step, netvm_strerror(b.ready[0].st));
    side_close(&b);
    side_close(&a);
}

static void case_strangers(void)
{
    struct side a, b;
    char addr[64];
    const int hs_ms = 1000;   /* the real connector must be in well before (sanitizers, a busy host) */
    struct side_opts ao = { .handshake_ms = hs_ms };
    pair(&a, &b, &ao, addr, sizeof addr);
    uint16_t port = port_of(addr);
    int junk = dial(port);
    char bytes[300];
    memset(bytes, 0xA5, sizeof bytes);
    send_all(junk, bytes, sizeof bytes);
    double t_silent = now_s();
    int silent = dial(port);
    /* the acceptor takes both in before the real connector arrives */
    settle(0.02);
    int cookie;
    CHECK_OK(nv_tcp_connect(b.link, addr, cred_right, strlen(cred_right), &cookie));
    PUMP_UNTIL(b.nready && a.nready, LIMIT_S, "the real connector to get in");
    CHECK_OK(b.ready[0].st);
    CHECK_OK(a.ready[0].st);
    if (closed(silent))
        FAILF("the silent stranger was closed before the real connector got in (%.0f ms)",
              (now_s() - t_silent) * 1e3);
    printf("strangers: the real connector got in after %.1f ms; the silent one waits\n",
           (b.ready[0].t - t_silent) * 1e3);
    PUMP_UNTIL(closed(junk), LIMIT_S, "the garbage stranger to be closed");
    double dt_junk = now_s() - t_silent;
    PUMP_UNTIL(closed(silent), LIMIT_S, "the silent stranger to be closed");
    double dt = now_s() - t_silent;
    printf("strangers: garbage closed after %.1f ms, the silent one after %.1f ms (handshake_ms %d)\n",
           dt_junk * 1e3, dt * 1e3, hs_ms);
    if (dt_junk * 1e3 >= hs_ms)
        FAILF("garbage was only dropped by the deadline (%.0f ms)", dt_junk * 1e3);
    if (dt * 1e3 < hs_ms - 1)
        FAILF("the silent stranger was closed after %.0f ms, before handshake_ms %d", dt * 1e3, hs_ms);
    if (dt * 1e3 > hs_ms + 3000)
        FAILF("the silent stranger was closed only after %.0f ms (handshake_ms %d)", dt * 1e3, hs_ms);
    CHECK(a.n_accepted == 1 && a.nready == 1 && b.nready == 1);
    CHECK(!a.n_aborted && !b.n_aborted);
    close(junk);
    close(silent);
    side_close(&b);
    side_close(&a);
}

static void case_crowd(void)
{
    struct side a, b;
    char addr[64];
    const int hs_ms = 800, max = 4, n = max + 2;
    struct side_opts ao = { .handshake_ms = hs_ms, .handshake_max = max };
    pair(&a, &b, &ao, addr, sizeof addr);
    uint16_t port = port_of(addr);
    int fd[8];
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        fd[i] = dial(port);
    int shut = 0;
    PUMP_UNTIL((shut = closed(fd[0]) + closed(fd[1]) + closed(fd[2]) + closed(fd[3]) + closed(fd[4]) +
                       closed(fd[5])) >= n - max,
               LIMIT_S, "the excess strangers to be closed");
    double dt = now_s() - t0;
    settle(0.05);
    shut = 0;
    for (int i = 0; i < n; i++)
        shut += closed(fd[i]);
    printf("crowd: %d of %d silent strangers closed at once (%.1f ms)\n", shut, n, dt * 1e3);
    if (shut != n - max || dt * 1e3 >= hs_ms / 2)
        FAILF("%d strangers closed after %.0f ms; wanted %d closed at once (handshake_max %d)", shut, dt * 1e3,
              n - max, max);
    /* full: the real connector is turned away too, at once */
    int cookie;
    CHECK_OK(nv_tcp_connect(b.link, addr, cred_right, strlen(cred_right), &cookie));
    double t1 = now_s();
    PUMP_UNTIL(b.nready, LIMIT_S, "the connector to be turned away");
    if (b.ready[0].st == NETVM_OK)
        FAILF("a connector got in while %d connections were authenticating (handshake_max %d)", max, max);
    if ((b.ready[0].t - t1) * 1e3 >= hs_ms / 2)
        FAILF("the connector was turned away only after %.0f ms", (b.ready[0].t - t1) * 1e3);
    printf("crowd: a connector while full: %s after %.1f ms\n", netvm_strerror(b.ready[0].st),
           (b.ready[0].t - t1) * 1e3);
    /* the silent ones go at their deadline, and free their places */
    PUMP_UNTIL(closed(fd[0]) + closed(fd[1]) + closed(fd[2]) + closed(fd[3]) + closed(fd[4]) + closed(fd[5]) == n,
               LIMIT_S, "the silent strangers to expire");
    CHECK((now_s() - t0) * 1e3 >= hs_ms - 1);
    PUMP_UNTIL(idle(&a), LIMIT_S, "the acceptor to drop every stranger");
    int cookie2;
    CHECK_OK(nv_tcp_connect(b.link, addr, cred_right, strlen(cred_right), &cookie2));
    PUMP_UNTIL(b.nready == 2 && a.nready == 1, LIMIT_S, "a connector to get in once the crowd is gone");
    CHECK(b.ready[1].cookie == &cookie2);
    CHECK_OK(b.ready[1].st);
    CHECK_OK(a.ready[0].st);
    CHECK(a.n_accepted == 1);
    for (int i = 0; i < n; i++)
        close(fd[i]);
    side_close(&b);
    side_close(&a);
}

static void case_full(void)
{
    struct side a, b;
    char addr[64];
    struct side_opts ao = { .handshake_ms = 60000 };
    pair(&a, &b, &ao, addr, sizeof addr);
    a.accept_st = NETVM_ERR_AGAIN;
    int cookie;
    CHECK_OK(nv_tcp_connect(b.link, addr, cred_right, strlen(cred_right), &cookie));
    PUMP_UNTIL(b.nready, LIMIT_S, "the connector's ready");
    CHECK_ST(b.ready[0].st, NETVM_ERR_AGAIN);
    CHECK(!b.ready[0].lp && b.ready[0].cookie == &cookie);
    /* the connector had made its peer: dropped */
    CHECK(b.n_authenticated == 1 && b.n_aborted == 1 && b.aborted[0] == b.peers[0]);
    PUMP_UNTIL(idle(&a) && idle(&b), LIMIT_S, "both sides to drop the connection");
    settle(0.05);
    CHECK(a.n_accepted == 1 && !a.nready && !a.npeers && !a.n_aborted);
    side_close(&b);
    side_close(&a);
}

static void case_nobody(void)
{
    struct side b;
    side_open(&b, "connector", 1, &plain);
    /* a port that was free a moment ago */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(s, (struct sockaddr *)&sa, &sl) == 0);
    close(s);
    char addr[64];
    snprintf(addr, sizeof addr, "tcp:127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    int cookie;
    double t0 = now_s();
    netvm_status_t st = nv_tcp_connect(b.link, addr, cred_right, strlen(cred_right), &cookie);
    if (st == NETVM_OK) {
        PUMP_UNTIL(b.nready, 2.0, "the connector's ready (nobody listens)");
        CHECK(b.ready[0].cookie == &cookie && !b.ready[0].lp);
        st = b.ready[0].st;
    }
    CHECK_ST(st, NETVM_ERR_PEER);
    printf("nobody: %s after %.1f ms\n", netvm_strerror(st), (now_s() - t0) * 1e3);
    CHECK(!b.n_authenticated && !b.npeers);
    PUMP_UNTIL(idle(&b), LIMIT_S, "the connector to drop its socket");
    /* not an address */
    CHECK_ST(nv_tcp_connect(b.link, "tcp:127.0.0.1", cred_right, 4, &cookie), NETVM_ERR_INVAL);
    CHECK_ST(nv_tcp_connect(b.link, "udp:127.0.0.1:1", cred_right, 4, &cookie), NETVM_ERR_INVAL);
    settle(0.02);
    CHECK(b.nready <= 1);
    side_close(&b);
}

/* Job connections: A (rank 0) listens for the job; B (rank 1) connects to
 * rank `to` with job hash and secret. */
enum { JOB_SAME, JOB_HASH, JOB_SECRET, JOB_RANK, JOB_AS_SERVICE };

static void case_job(int how)
{
    static const char *names[] = { "same job", "another job hash", "another job secret", "another rank",
                                   "a service connection to the job's listener" };
    struct side a, b;
    const uint64_t hash = 0x10b10b10b;
    struct side_opts ao = { .job_listen = 1, .rank = 0, .job_hash = hash, .handshake_ms = 60000 };
    struct side_opts bo = { .rank = 1, .job_hash = how == JOB_HASH ? hash + 1 : hash,
                            .secret = how == JOB_SECRET ? other_secret : job_secret };
    side_open(&a, "job rank 0", 0, &ao);
    side_open(&b, "job rank 1", 1, &bo);
    CHECK(a.card.version == NV_TCP_VERSION && a.card.port != 0 && a.card.ipv4 == htonl(INADDR_LOOPBACK));
    CHECK(b.card.port == 0);   /* no listener: job_listen 0 */
    int cookie;
    if (how == JOB_AS_SERVICE) {
        char addr[64];
        snprintf(addr, sizeof addr, "tcp:127.0.0.1:%u", (unsigned)ntohs(a.card.port));
        CHECK_OK(nv_tcp_connect(b.link, addr, job_secret, sizeof job_secret, &cookie));
    } else {
        CHECK_OK(nv_tcp_connect_job(b.link, &a.card, how == JOB_RANK ? 2 : 0, &cookie));
    }
    PUMP_UNTIL(b.nready && (how != JOB_SAME || a.nready), LIMIT_S, "job connection (%s)", names[how]);
    PUMP_UNTIL(how == JOB_SAME || (idle(&a) && idle(&b)), LIMIT_S, "both to drop it (%s)", names[how]);
    settle(0.05);
    CHECK(b.ready[0].cookie == &cookie);
    if (how == JOB_SAME) {
        CHECK(a.nready == 1 && b.nready == 1);
        CHECK_OK(a.ready[0].st);
        CHECK_OK(b.ready[0].st);
        struct nv_lpeer *la = a.ready[0].lp, *lb = b.ready[0].lp;
        /* peers of a job are their ranks */
        CHECK(la && lb && la->id == 1 && lb->id == 0);
        CHECK(la->remote_id == (uint32_t)lb->id && lb->remote_id == (uint32_t)la->id);
        CHECK(a.accepted_in.hello.purpose == NV_HS_JOB && a.accepted_in.hello.rank == 1 &&
              a.accepted_in.hello.job_hash == hash && a.accepted_in.their_id == 0);
        CHECK(b.authenticated_in.hello.purpose == NV_HS_JOB && b.authenticated_in.hello.rank == 0 &&
              b.authenticated_in.hello.job_hash == hash);
        send_am(&b, lb, 1, "rank 1");
        PUMP_UNTIL(a.n_am == 1, LIMIT_S, "a message between ranks");
        CHECK(a.am_from == la && !strcmp(a.am_text, "rank 1"));
    } else {
        if (b.ready[0].st == NETVM_OK)
            FAILF("job connection (%s): the connector got in", names[how]);
        if (how != JOB_AS_SERVICE)
            CHECK_ST(b.ready[0].st, NETVM_ERR_AUTH);
        CHECK(!b.ready[0].lp && !b.n_authenticated && !b.npeers);
        check_no_peer(&a);
    }
    printf("job, %s: %s\n", names[how], netvm_strerror(b.ready[0].st));
    side_close(&b);
    side_close(&a);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    case_right();
    case_wrong();
    case_forged(FORGED);
    case_forged(REFLECTED);
    case_forged(NO_MAC);
    for (int step = 1; step <= 4; step++)
        case_hmac(step);
    case_strangers();
    case_crowd();
    case_nobody();
    for (int how = JOB_SAME; how <= JOB_AS_SERVICE; how++)
        case_job(how);
    case_full();
    printf("tcp_auth: ok\n");
    return 0;
}
