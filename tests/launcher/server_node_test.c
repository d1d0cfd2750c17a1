/* The boot server of a multi-host job, driven directly in one thread with
 * hand-made peers on raw sockets (the server never blocks, so the test pumps
 * it while it waits):
 *   hub   - an unauthenticated peer gets its challenge and nothing else; a
 *           wrong proof or any other first message closes it silently; an
 *           authenticated node with other parameters is told why it is
 *           refused; nodes that join get a hub proof that checks and START
 *           once all are in; collectives span local ranks and nodes'
 *           ENTERs, a node's RANK_GONE fails them with NETVM_ERR_PEER, a
 *           node breaking the protocol is lost with all its ranks; FAILED,
 *           NODE_DONE and ABORT travel as events and messages;
 *   relay - local collectives go up as ENTERs, results come down to each
 *           rank in the form it asked for, departures go up, ABORT and a
 *           lost hub become events, and a rank waiting when the hub is lost
 *           gets an error instead of a hang. */
#define _GNU_SOURCE   /* memmem */
#include "check.h"
#include "boot/node_auth.h"
#include "boot/server.h"
#include "util/time.h"
#include "wire/boot_msg.h"
#include "wire/endian.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define WAIT_MS 5000
#define NLOCAL  2

static nv_boot_server_t *srv;
static uint8_t secret[NV_BOOT_SECRET_LEN];
static const char job[] = "node-test.1";
static int port;

/* --- pumping the server and talking to it ------------------------------- */

static void pump(int ms)
{
    uint64_t end = nv_now_ns() + (uint64_t)ms * 1000000ull;
    for (;;) {
        uint64_t now = nv_now_ns();
        if (now >= end)
            return;
        struct pollfd p = { .fd = nv_boot_server_fd(srv), .events = POLLIN };
        if (poll(&p, 1, (int)((end - now) / 1000000 + 1)) > 0)
            CHECK_OK(nv_boot_server_progress(srv));
    }
}

static void wait_readable(int fd)
{
    uint64_t end = nv_now_ns() + WAIT_MS * 1000000ull;
    for (;;) {
        CHECK(nv_now_ns() < end);
        struct pollfd p[2] = { { .fd = nv_boot_server_fd(srv), .events = POLLIN },
                               { .fd = fd, .events = POLLIN } };
        CHECK(poll(p, 2, 100) >= 0);
        if (p[0].revents)
            CHECK_OK(nv_boot_server_progress(srv));
        if (p[1].revents)
            return;
    }
}

static int read_exact(int fd, uint8_t *buf, size_t n)
{
    while (n) {
        wait_readable(fd);
        ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0)
            return 0;
        buf += r;
        n -= (size_t)r;
    }
    return 1;
}

static void send_msg(int fd, const struct nv_boot_msg *m)
{
    uint8_t buf[4096];
    size_t n = nv_boot_msg_encode(m, buf, sizeof buf);
    CHECK(n > 0 && send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n);
}

/* The next message on fd (payload in *frame, to free), or 0 at EOF. */
static int recv_msg(int fd, struct nv_boot_msg *m, uint8_t **frame)
{
    uint8_t hdr[NV_BOOT_HDR_LEN];
    if (!read_exact(fd, hdr, sizeof hdr))
        return 0;
    struct nv_boot_hdr h;
    const char *why;
    CHECK(nv_boot_hdr_decode(hdr, sizeof hdr, NV_BOOT_MAX_PAYLOAD, &h, &why) == NV_BOOT_RC_OK);
    *frame = malloc(h.len + 1);
    CHECK(*frame && read_exact(fd, *frame, h.len));
    CHECK(nv_boot_payload_decode(h.type, *frame, h.len, m, &why) == NV_BOOT_RC_OK);
    return 1;
}

static uint16_t expect_msg(int fd, uint16_t type, struct nv_boot_msg *m, uint8_t **frame)
{
    CHECK(recv_msg(fd, m, frame) == 1);
    if (m->type != type) {
        fprintf(stderr, "expected %s, got %s\n", nv_boot_msg_type_name(type), nv_boot_msg_type_name(m->type));
        exit(1);
    }
    return m->type;
}

static void expect_eof(int fd)
{
    struct nv_boot_msg m;
    uint8_t *frame = NULL;
    CHECK(recv_msg(fd, &m, &frame) == 0);
    close(fd);
}

static int expect_event(enum nv_boot_event_kind kind, struct nv_boot_event *ev)
{
    uint64_t end = nv_now_ns() + WAIT_MS * 1000000ull;
    while (nv_now_ns() < end) {
        if (nv_boot_server_next_event(srv, ev)) {
            if (ev->kind != kind) {
                fprintf(stderr, "expected event %d, got %d (%s)\n", (int)kind, (int)ev->kind, ev->text);
                exit(1);
            }
            return 1;
        }
        pump(20);
    }
    fprintf(stderr, "no event %d\n", (int)kind);
    exit(1);
}

static void no_event(void)
{
    struct nv_boot_event ev;
    pump(50);
    CHECK(!nv_boot_server_next_event(srv, &ev));
}

/* --- local processes ------------------------------------------------------ */

static int join_local(int rank, int size, netvm_status_t want)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", nv_boot_server_addr(srv) + 5);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_HELLO }, r;
    m.u.hello.rank = rank;
    m.u.hello.size = size;
    m.u.hello.auth = NV_BOOT_AUTH_SECRET;
    m.u.hello.job_id = job;
    m.u.hello.job_id_len = (uint16_t)strlen(job);
    m.u.hello.proof = secret;
    m.u.hello.proof_len = NV_BOOT_SECRET_LEN;
    send_msg(fd, &m);
    uint8_t *frame;
    expect_msg(fd, NV_BOOT_MSG_RESULT, &r, &frame);
    CHECK(r.u.result.status == want);
    free(frame);
    return fd;
}

static void local_enter(int fd, uint16_t type, uint32_t seq, uint32_t value)
{
    struct nv_boot_msg m = { .type = type };
    m.u.coll.seq = seq;
    if (type == NV_BOOT_MSG_ALLGATHER) {
        m.u.coll.len = sizeof value;
        m.u.coll.data = (const uint8_t *)&value;
    }
    send_msg(fd, &m);
}

/* --- node launchers ------------------------------------------------------- */

static int tcp_connect(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    return fd;
}

/* Connect and take the challenge, which must be all there is. */
static int challenged(uint8_t nonce[NV_BOOT_NONCE_LEN])
{
    int fd = tcp_connect();
    struct nv_boot_msg m;
    uint8_t *frame;
    expect_msg(fd, NV_BOOT_MSG_CHALLENGE, &m, &frame);
    memcpy(nonce, m.u.challenge.nonce, NV_BOOT_NONCE_LEN);
    free(frame);
    return fd;
}

/* A node launcher's NODE_HELLO; wrong_proof spoils it. */
static void node_hello(int fd, const uint8_t hub_nonce[NV_BOOT_NONCE_LEN], uint8_t my_nonce[NV_BOOT_NONCE_LEN],
                       const struct nv_node_params *p, int wrong_proof)
{
    uint8_t proof[NV_HMAC_SHA256_LEN];
    for (int i = 0; i < NV_BOOT_NONCE_LEN; i++)
        my_nonce[i] = (uint8_t)(i * 13 + p->node);
    CHECK(nv_node_proof(secret, hub_nonce, my_nonce, p, proof) == 0);
    proof[0] ^= (uint8_t)wrong_proof;
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_NODE_HELLO };
    m.u.node_hello.node = p->node;
    m.u.node_hello.nnodes = p->nnodes;
    m.u.node_hello.nlocal = p->nlocal;
    m.u.node_hello.flags = p->flags;
    m.u.node_hello.auth = NV_BOOT_AUTH_HMAC;
    m.u.node_hello.nonce = my_nonce;
    m.u.node_hello.proof = proof;
    m.u.node_hello.proof_len = sizeof proof;
    send_msg(fd, &m);
}

/* A node that joins; the hub's proof must check. */
static int join_node(int node, int nnodes)
{
    uint8_t hub_nonce[NV_BOOT_NONCE_LEN], my_nonce[NV_BOOT_NONCE_LEN];
    struct nv_node_params p = { .node = node, .nnodes = nnodes, .nlocal = NLOCAL };
    int fd = challenged(hub_nonce);
    node_hello(fd, hub_nonce, my_nonce, &p, 0);
    struct nv_boot_msg w;
    uint8_t *frame;
    expect_msg(fd, NV_BOOT_MSG_WELCOME, &w, &frame);
    CHECK(w.u.welcome.status == NETVM_OK);
    CHECK(w.u.welcome.job_id_len == strlen(job) && !memcmp(w.u.welcome.job_id, job, strlen(job)));
    CHECK(nv_hub_proof_check(secret, my_nonce, hub_nonce, &p, NETVM_OK, job, strlen(job), w.u.welcome.proof,
                             w.u.welcome.proof_len) == NV_PROOF_OK);
    free(frame);
    return fd;
}

static void node_enter(int fd, int rank, uint16_t type, uint32_t seq, uint32_t value)
{
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_ENTER };
    m.u.coll.rank = rank;
    m.u.coll.seq = seq;
    m.u.coll.coll = type;
    if (type == NV_BOOT_MSG_ALLGATHER) {
        m.u.coll.len = sizeof value;
        m.u.coll.data = (const uint8_t *)&value;
    }
    send_msg(fd, &m);
}

static void node_report(int fd, uint16_t type, int rank, int code, const char *text)
{
    struct nv_boot_msg m = { .type = type };
    m.u.report.rank = rank;
    m.u.report.code = code;
    m.u.report.state = NV_BOOT_GONE_DEAD;
    m.u.report.text = text;
    m.u.report.text_len = (uint16_t)(text ? strlen(text) : 0);
    send_msg(fd, &m);
}

/* An allgather result carrying rank r's value at slot r, 0 for the dead. */
static void expect_gathered(int fd, uint32_t seq, int size, netvm_status_t st, int dead, uint32_t base)
{
    struct nv_boot_msg m;
    uint8_t *frame;
    expect_msg(fd, NV_BOOT_MSG_ALLGATHER_RESULT, &m, &frame);
    CHECK(m.u.result.seq == seq && m.u.result.status == st && m.u.result.dead_rank == dead);
    CHECK(m.u.result.count == (uint32_t)size && m.u.result.each == 4);
    for (int r = 0; r < size; r++)
        CHECK(nv_get32(m.u.result.data + 4 * r) == (r == dead ? 0 : base + (uint32_t)r));
    free(frame);
}

/* --- the hub ---------------------------------------------------------------- */

static void start_hub(int nnodes)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        /* a port the kernel just called free */
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        CHECK(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(s, (struct sockaddr *)&sa, &len) == 0);
        port = ntohs(sa.sin_port);
        close(s);
        char listen[32];
        snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
        struct nv_boot_server_opts o = { .size = nnodes * NLOCAL, .job_id = job, .secret = secret,
                                         .hello_timeout_ms = 2000, .nnodes = nnodes, .node = 0,
                                         .nlocal = NLOCAL, .listen = listen };
        if (nv_boot_server_create(&srv, &o) == NETVM_OK)
            return;
    }
    CHECK(!"no port to listen on");
}

static void hub_refusals(void)
{
    uint8_t hub_nonce[NV_BOOT_NONCE_LEN], my_nonce[NV_BOOT_NONCE_LEN];
    struct nv_node_params p = { .node = 1, .nnodes = 3, .nlocal = NLOCAL };

    /* a wrong proof: closed without a word */
    int fd = challenged(hub_nonce);
    node_hello(fd, hub_nonce, my_nonce, &p, 1);
    expect_eof(fd);
    /* a proof made for another connection's challenge */
    uint8_t other[NV_BOOT_NONCE_LEN];
    int fd2 = challenged(other);
    fd = challenged(hub_nonce);
    node_hello(fd, other, my_nonce, &p, 0);
    expect_eof(fd);
    close(fd2);
    /* anything but NODE_HELLO first */
    fd = challenged(hub_nonce);
    node_enter(fd, 2, NV_BOOT_MSG_BARRIER, 1, 0);
    expect_eof(fd);
    /* silence: closed at the deadline */
    fd = challenged(hub_nonce);
    uint64_t t0 = nv_now_ns();
    expect_eof(fd);
    CHECK(nv_now_ns() - t0 < 4000000000ull);
    /* authenticated, with other parameters: told why */
    struct nv_node_params odd = { .node = 1, .nnodes = 3, .nlocal = NLOCAL + 1 };
    fd = challenged(hub_nonce);
    node_hello(fd, hub_nonce, my_nonce, &odd, 0);
    struct nv_boot_msg w;
    uint8_t *frame;
    expect_msg(fd, NV_BOOT_MSG_WELCOME, &w, &frame);
    CHECK(w.u.welcome.status == NETVM_ERR_BOOT && w.u.welcome.job_id_len == 0);
    CHECK(w.u.welcome.text_len > 0 && memmem(w.u.welcome.text, w.u.welcome.text_len, "-n 3 there", 10));
    free(frame);
    t0 = nv_now_ns();
    expect_eof(fd);
    CHECK(nv_now_ns() - t0 < 1000000000ull);     /* at once, not at the deadline */
    CHECK(nv_boot_server_node_state(srv, 1) == NV_BOOT_NODE_WAITING);
    no_event();
}

static void hub(void)
{
    start_hub(3);
    CHECK(!strcmp(nv_boot_server_tcp_addr(srv), "127.0.0.1"));
    hub_refusals();
    struct nv_boot_event ev;
    int n1 = join_node(1, 3);
    expect_event(NV_BOOT_EV_NODE_JOINED, &ev);
    CHECK(ev.node == 1);
    CHECK(nv_boot_server_rank_state(srv, 2) == NV_BOOT_RANK_ACTIVE);
    CHECK(nv_boot_server_rank_state(srv, 4) == NV_BOOT_RANK_WAITING);
    /* node 1 again, authenticated: refused, the first one unharmed */
    uint8_t hub_nonce[NV_BOOT_NONCE_LEN], my_nonce[NV_BOOT_NONCE_LEN];
    struct nv_node_params p = { .node = 1, .nnodes = 3, .nlocal = NLOCAL };
    int dup = challenged(hub_nonce);
    node_hello(dup, hub_nonce, my_nonce, &p, 0);
    struct nv_boot_msg m;
    uint8_t *frame;
    expect_msg(dup, NV_BOOT_MSG_WELCOME, &m, &frame);
    CHECK(m.u.welcome.status == NETVM_ERR_BOOT);
    free(frame);
    expect_eof(dup);
    int n2 = join_node(2, 3);
    expect_event(NV_BOOT_EV_NODE_JOINED, &ev);
    expect_event(NV_BOOT_EV_ALL_JOINED, &ev);
    expect_msg(n1, NV_BOOT_MSG_START, &m, &frame);
    free(frame);
    expect_msg(n2, NV_BOOT_MSG_START, &m, &frame);
    free(frame);
    /* the rendezvous is closed now */
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int late = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(connect(late, (struct sockaddr *)&sa, sizeof sa) != 0);
    close(late);

    /* an allgather across hosts: each node gets one result for its ranks */
    int stranger = join_local(2, 6, NETVM_ERR_BOOT);   /* rank 2 runs on node 1 */
    expect_eof(stranger);
    int l0 = join_local(0, 6, NETVM_OK), l1 = join_local(1, 6, NETVM_OK);
    local_enter(l0, NV_BOOT_MSG_ALLGATHER, 1, 100);
    node_enter(n1, 2, NV_BOOT_MSG_ALLGATHER, 1, 102);
    node_enter(n2, 5, NV_BOOT_MSG_ALLGATHER, 1, 105);
    node_enter(n1, 3, NV_BOOT_MSG_ALLGATHER, 1, 103);
    node_enter(n2, 4, NV_BOOT_MSG_ALLGATHER, 1, 104);
    pump(50);
    CHECK(nv_boot_server_rounds(srv) == 0);
    local_enter(l1, NV_BOOT_MSG_ALLGATHER, 1, 101);
    expect_gathered(l0, 1, 6, NETVM_OK, -1, 100);
    expect_gathered(l1, 1, 6, NETVM_OK, -1, 100);
    expect_gathered(n1, 1, 6, NETVM_OK, -1, 100);
    expect_gathered(n2, 1, 6, NETVM_OK, -1, 100);
    CHECK(nv_boot_server_rounds(srv) == 1);

    /* a rank a node reports dead: the next collective fails, naming it */
    node_report(n2, NV_BOOT_MSG_RANK_GONE, 5, 0, NULL);
    node_report(n2, NV_BOOT_MSG_FAILED, 5, 137, "rank 5 (pid 9) on node 2 killed by signal 9 (Killed)");
    expect_event(NV_BOOT_EV_NODE_FAILED, &ev);
    CHECK(ev.node == 2 && ev.rank == 5 && ev.code == 137 && strstr(ev.text, "killed by signal 9"));
    CHECK(nv_boot_server_rank_state(srv, 5) == NV_BOOT_RANK_DEAD);
    local_enter(l0, NV_BOOT_MSG_ALLGATHER, 2, 200);
    local_enter(l1, NV_BOOT_MSG_ALLGATHER, 2, 201);
    node_enter(n1, 2, NV_BOOT_MSG_ALLGATHER, 2, 202);
    node_enter(n1, 3, NV_BOOT_MSG_ALLGATHER, 2, 203);
    node_enter(n2, 4, NV_BOOT_MSG_ALLGATHER, 2, 204);
    expect_gathered(l0, 2, 6, NETVM_ERR_PEER, 5, 200);
    expect_gathered(n1, 2, 6, NETVM_ERR_PEER, 5, 200);
    expect_gathered(n2, 2, 6, NETVM_ERR_PEER, 5, 200);
    expect_gathered(l1, 2, 6, NETVM_ERR_PEER, 5, 200);

    /* node 2 speaks for a rank that is not its own: it is lost, and so are
     * its ranks; the barrier waiting for them completes */
    local_enter(l0, NV_BOOT_MSG_BARRIER, 3, 0);
    local_enter(l1, NV_BOOT_MSG_BARRIER, 3, 0);
    node_enter(n1, 2, NV_BOOT_MSG_BARRIER, 3, 0);
    node_enter(n1, 3, NV_BOOT_MSG_BARRIER, 3, 0);
    node_enter(n2, 0, NV_BOOT_MSG_BARRIER, 3, 0);
    expect_eof(n2);
    expect_event(NV_BOOT_EV_NODE_LOST, &ev);
    CHECK(ev.node == 2 && nv_boot_server_node_state(srv, 2) == NV_BOOT_NODE_LOST);
    CHECK(nv_boot_server_rank_state(srv, 4) == NV_BOOT_RANK_DEAD);
    expect_msg(l0, NV_BOOT_MSG_BARRIER_DONE, &m, &frame);
    CHECK(m.u.result.status == NETVM_ERR_PEER);
    free(frame);
    expect_msg(n1, NV_BOOT_MSG_BARRIER_DONE, &m, &frame);
    free(frame);
    expect_msg(l1, NV_BOOT_MSG_BARRIER_DONE, &m, &frame);
    free(frame);

    /* the launcher ends the job: the nodes left hear it */
    nv_boot_server_abort(srv, 5, 2, 137, "rank 5 (pid 9) on node 2 killed by signal 9 (Killed)\n");
    expect_msg(n1, NV_BOOT_MSG_ABORT, &m, &frame);
    CHECK(m.u.report.rank == 5 && m.u.report.node == 2 && m.u.report.code == 137);
    CHECK(m.u.report.text_len > 10 && m.u.report.text[m.u.report.text_len - 1] == '?');  /* no newline */
    free(frame);
    /* a node that finished is not lost when it goes */
    node_report(n1, NV_BOOT_MSG_RANK_GONE, 2, 0, NULL);
    node_report(n1, NV_BOOT_MSG_RANK_GONE, 3, 0, NULL);
    node_report(n1, NV_BOOT_MSG_NODE_DONE, -1, 3, NULL);
    expect_event(NV_BOOT_EV_NODE_DONE, &ev);
    CHECK(ev.node == 1 && ev.code == 3 && nv_boot_server_node_state(srv, 1) == NV_BOOT_NODE_DONE);
    close(n1);
    no_event();
    CHECK(nv_boot_server_node_state(srv, 1) == NV_BOOT_NODE_DONE);
    close(l0);
    close(l1);
    nv_boot_server_destroy(srv);
    srv = NULL;
}

/* --- a relay -------------------------------------------------------------- */

static void relay(void)
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
    int hub_fd = sp[0];
    struct nv_boot_server_opts o = { .size = 2 * NLOCAL, .job_id = job, .secret = secret, .nnodes = 2,
                                     .node = 1, .nlocal = NLOCAL, .upstream_fd = sp[1] };
    CHECK_OK(nv_boot_server_create(&srv, &o));
    expect_eof(join_local(0, 4, NETVM_ERR_BOOT));     /* rank 0 runs on node 0 */
    int r2 = join_local(2, 4, NETVM_OK), r3 = join_local(3, 4, NETVM_OK);
    struct nv_boot_msg m;
    uint8_t *frame;
    struct nv_boot_event ev;

    /* ranks that disagree: each gets the failure in the form it asked */
    local_enter(r2, NV_BOOT_MSG_ALLGATHER, 1, 7);
    expect_msg(hub_fd, NV_BOOT_MSG_ENTER, &m, &frame);
    CHECK(m.u.coll.rank == 2 && m.u.coll.seq == 1 && m.u.coll.coll == NV_BOOT_MSG_ALLGATHER);
    CHECK(m.u.coll.len == 4 && nv_get32(m.u.coll.data) == 7);
    free(frame);
    local_enter(r3, NV_BOOT_MSG_BARRIER, 1, 0);
    expect_msg(hub_fd, NV_BOOT_MSG_ENTER, &m, &frame);
    CHECK(m.u.coll.rank == 3 && m.u.coll.coll == NV_BOOT_MSG_BARRIER && m.u.coll.len == 0);
    free(frame);
    struct nv_boot_msg res = { .type = NV_BOOT_MSG_BARRIER_DONE };
    res.u.result.seq = 1;
    res.u.result.status = NETVM_ERR_INVAL;
    res.u.result.dead_rank = -1;
    send_msg(hub_fd, &res);
    expect_msg(r2, NV_BOOT_MSG_ALLGATHER_RESULT, &m, &frame);
    CHECK(m.u.result.seq == 1 && m.u.result.status == NETVM_ERR_INVAL && m.u.result.count == 4 &&
          m.u.result.each == 0);
    free(frame);
    expect_msg(r3, NV_BOOT_MSG_BARRIER_DONE, &m, &frame);
    CHECK(m.u.result.seq == 1 && m.u.result.status == NETVM_ERR_INVAL);
    free(frame);

    /* an allgather: the hub's result reaches both, data and all */
    local_enter(r2, NV_BOOT_MSG_ALLGATHER, 2, 2);
    local_enter(r3, NV_BOOT_MSG_ALLGATHER, 2, 3);
    for (int i = 0; i < 2; i++) {
        expect_msg(hub_fd, NV_BOOT_MSG_ENTER, &m, &frame);
        free(frame);
    }
    uint8_t all[16];
    for (int r = 0; r < 4; r++)
        nv_put32(all + 4 * r, (uint32_t)r);
    struct nv_boot_msg g = { .type = NV_BOOT_MSG_ALLGATHER_RESULT };
    g.u.result.seq = 2;
    g.u.result.dead_rank = -1;
    g.u.result.count = 4;
    g.u.result.each = 4;
    g.u.result.data = all;
    send_msg(hub_fd, &g);
    expect_gathered(r2, 2, 4, NETVM_OK, -1, 0);
    expect_gathered(r3, 2, 4, NETVM_OK, -1, 0);

    /* departures and failures go up; ABORT comes down as an event */
    struct nv_boot_msg bye = { .type = NV_BOOT_MSG_BYE };
    send_msg(r3, &bye);
    expect_msg(hub_fd, NV_BOOT_MSG_RANK_GONE, &m, &frame);
    CHECK(m.u.report.rank == 3 && m.u.report.state == NV_BOOT_GONE_LEFT);
    free(frame);
    close(r3);
    nv_boot_server_report_failure(srv, 2, 134, "rank 2 (pid 8) on node 1 killed by signal 6 (Aborted)");
    expect_msg(hub_fd, NV_BOOT_MSG_FAILED, &m, &frame);
    CHECK(m.u.report.rank == 2 && m.u.report.node == 1 && m.u.report.code == 134);
    free(frame);
    node_report(hub_fd, NV_BOOT_MSG_ABORT, 2, 134, "rank 2 (pid 8) on node 1 killed by signal 6 (Aborted)");
    expect_event(NV_BOOT_EV_ABORT, &ev);
    CHECK(ev.rank == 2 && ev.code == 134 && strstr(ev.text, "Aborted"));

    /* the hub goes away while rank 2 waits: an error, not a hang */
    local_enter(r2, NV_BOOT_MSG_BARRIER, 3, 0);
    expect_msg(hub_fd, NV_BOOT_MSG_ENTER, &m, &frame);
    free(frame);
    close(hub_fd);
    expect_msg(r2, NV_BOOT_MSG_RESULT, &m, &frame);
    CHECK(m.u.result.status == NETVM_ERR_BOOT);
    free(frame);
    expect_event(NV_BOOT_EV_HUB_LOST, &ev);
    nv_boot_server_node_done(srv, 0);       /* nobody to tell: harmless */
    close(r2);
    nv_boot_server_destroy(srv);
    srv = NULL;
}

/* A relay whose hub breaks the protocol loses it. */
static void relay_protocol_error(void)
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
    struct nv_boot_server_opts o = { .size = 2 * NLOCAL, .job_id = job, .secret = secret, .nnodes = 2,
                                     .node = 1, .nlocal = NLOCAL, .upstream_fd = sp[1] };
    CHECK_OK(nv_boot_server_create(&srv, &o));
    struct nv_boot_msg res = { .type = NV_BOOT_MSG_BARRIER_DONE };
    res.u.result.seq = 9;        /* no such round */
    res.u.result.dead_rank = -1;
    send_msg(sp[0], &res);
    struct nv_boot_event ev;
    expect_event(NV_BOOT_EV_HUB_LOST, &ev);
    CHECK(strstr(ev.text, "protocol error"));
    expect_eof(sp[0]);
    nv_boot_server_destroy(srv);
    srv = NULL;
    /* bad options are refused, and the upstream fd is closed even then */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
    o.upstream_fd = sp[1];
    o.size = 3;                  /* not nnodes * nlocal */
    CHECK_ST(nv_boot_server_create(&srv, &o), NETVM_ERR_INVAL);
    uint8_t b;
    CHECK(recv(sp[0], &b, 1, 0) == 0);
    close(sp[0]);
}

int main(void)
{
    alarm(60);
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (uint8_t)(i * 5 + 3);
    hub();
    relay();
    relay_protocol_error();
    printf("server_node: ok\n");
    return 0;
}
