/* The boot server's launcher connections in a multi-host job (server.h):
 *   hub   - the tcp rendezvous: a CHALLENGE to every connection, a node
 *           joins with a proof (node_auth.h) and from then on speaks for
 *           the ranks of its host: their collectives (ENTER), departures
 *           (RANK_GONE), failures and its end;
 *   relay - the connection to the hub: local ranks' collectives go up, the
 *           results come down and are handed to each local rank that asked.
 * A connection that has not authenticated may send one NODE_HELLO-sized
 * frame and gets nothing but its challenge; failing the proof closes it
 * without a word. */
#define _GNU_SOURCE
#include "boot/node_auth.h"
#include "boot/server_int.h"
#include "util/log.h"
#include "util/random.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define EXTRA_PENDING_NODES 64   /* unauthenticated tcp connections beyond one per node */

static int first_rank(const nv_boot_server_t *s, int node) { return node * s->nlocal; }

/* Printable ASCII of at most NV_BOOT_TEXT_MAX bytes: what the wire allows. */
static uint16_t clean_text(const char *in, char *out)
{
    size_t n = 0;
    for (; in && in[n] && n < NV_BOOT_TEXT_MAX; n++)
        out[n] = in[n] >= 0x20 && in[n] <= 0x7e ? in[n] : '?';
    out[n] = 0;
    return (uint16_t)n;
}

/* --- hub: the rendezvous ---------------------------------------------------- */

void nv_srv_accept_nodes(nv_boot_server_t *s)
{
    while (s->tcp_lfd >= 0) {
        int fd = accept4(s->tcp_lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the listener would stay readable: stop watching it until
                 * a connection closes (the pending ones' deadlines free
                 * some), instead of spinning */
                nv_warn("boot: accept on the rendezvous: %s; pausing", strerror(errno));
                if (epoll_ctl(s->ep, EPOLL_CTL_DEL, s->tcp_lfd, NULL) == 0)
                    s->tcp_paused = 1;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                nv_warn("boot: accept on the rendezvous: %s", strerror(errno));
            }
            return;
        }
        char peer[NV_TCP_ADDR_MAX];
        nv_boot_tcp_peer_name(fd, peer, sizeof peer);
        if (s->npending_nodes >= s->nnodes + EXTRA_PENDING_NODES) {
            nv_warn("boot: too many unauthenticated connections on the rendezvous; refused %s", peer);
            close(fd);
            continue;
        }
        nv_boot_tcp_tune(fd);
        struct conn *c = nv_srv_conn_new(s, fd, CONN_NODE_PENDING);
        if (!c)
            continue;
        snprintf(c->peer, sizeof c->peer, "%s", peer);
        s->npending_nodes++;
        if (nv_random_bytes(c->nonce, sizeof c->nonce) != 0) {
            nv_error("boot: getrandom: %s", strerror(errno));
            nv_srv_conn_close(s, c, NULL);
            continue;
        }
        struct nv_boot_msg m = { .type = NV_BOOT_MSG_CHALLENGE };
        m.u.challenge.nonce = c->nonce;
        nv_srv_send_msg(s, c, &m);
        nv_debug("boot: %s connected to the rendezvous", peer);
    }
}

void nv_srv_resume_nodes(nv_boot_server_t *s)
{
    if (!s->tcp_paused || s->tcp_lfd < 0)
        return;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = TAG_TCP_LISTEN };
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->tcp_lfd, &ev) == 0)
        s->tcp_paused = 0;
}

static void stop_rendezvous(nv_boot_server_t *s)
{
    if (s->tcp_lfd < 0)
        return;
    if (!s->tcp_paused)
        epoll_ctl(s->ep, EPOLL_CTL_DEL, s->tcp_lfd, NULL);
    close(s->tcp_lfd);
    s->tcp_lfd = -1;
}

static void send_welcome(nv_boot_server_t *s, struct conn *c, const uint8_t *node_nonce,
                         const struct nv_node_params *p, netvm_status_t st, const char *text)
{
    const char *job = st == NETVM_OK ? s->job_id : "";
    uint8_t proof[NV_HMAC_SHA256_LEN];
    char t[NV_BOOT_TEXT_MAX + 1];
    if (nv_hub_proof(s->secret, node_nonce, c->nonce, p, st, job, strlen(job), proof) != 0) {
        nv_error("boot: cannot compute the rendezvous proof (libcrypto failed)");
        nv_srv_conn_close(s, c, NULL);
        return;
    }
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_WELCOME };
    m.u.welcome.status = st;
    m.u.welcome.job_id = job;
    m.u.welcome.job_id_len = (uint16_t)strlen(job);
    m.u.welcome.proof = proof;
    m.u.welcome.proof_len = sizeof proof;
    m.u.welcome.text_len = clean_text(text, t);
    m.u.welcome.text = t;
    nv_srv_send_msg(s, c, &m);
}

static void all_joined(nv_boot_server_t *s)
{
    stop_rendezvous(s);
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_START };
    for (struct conn *c = s->conns; c; c = c->next)
        if (!c->gone && c->kind == CONN_NODE)
            nv_srv_send_msg(s, c, &m);
    /* latecomers that never proved anything have no business here now */
    for (struct conn *c = s->conns; c; c = c->next)
        if (!c->gone && c->kind == CONN_NODE_PENDING)
            nv_srv_conn_close(s, c, NULL);
    nv_info("boot: all %d nodes joined", s->nnodes);
    nv_srv_event(s, NV_BOOT_EV_ALL_JOINED, 0, -1, 0, NULL);
}

static void node_hello(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    const typeof(m->u.node_hello) *h = &m->u.node_hello;
    struct nv_node_params p = { .node = h->node, .nnodes = h->nnodes, .nlocal = h->nlocal, .flags = h->flags };
    enum nv_proof_check ck = nv_node_proof_check(s->secret, c->nonce, h->nonce, &p, h->proof, h->proof_len);
    if (ck != NV_PROOF_OK) {
        if (ck == NV_PROOF_ERROR)
            nv_error("boot: refused a launcher at %s: cannot check its proof (libcrypto failed)", c->peer);
        else
            nv_warn("boot: refused a launcher at %s: authentication failed (it does not hold this job's "
                    "secret)", c->peer);
        nv_srv_conn_close(s, c, NULL);
        return;
    }
    /* it holds the secret: from here on it may hear why it is refused */
    char why[NV_BOOT_TEXT_MAX + 32] = "";
    if (h->nnodes != s->nnodes)
        snprintf(why, sizeof why, "--nnodes %d there, %d at node 0", h->nnodes, s->nnodes);
    else if (h->nlocal != s->nlocal)
        snprintf(why, sizeof why, "-n %d there, %d at node 0 (every node runs as many processes)",
                 h->nlocal, s->nlocal);
    else if (h->flags != s->flags)
        snprintf(why, sizeof why, "--keep-going %s there, %s at node 0",
                 h->flags & NV_BOOT_NODE_KEEP_GOING ? "given" : "not given",
                 s->flags & NV_BOOT_NODE_KEEP_GOING ? "given" : "not given");
    else if (s->node_st[h->node] != NV_BOOT_NODE_WAITING)
        snprintf(why, sizeof why, "node %d has joined already", h->node);
    else if (s->aborted)
        snprintf(why, sizeof why, "node 0 ended the job: %.200s", s->abort_text);
    if (why[0]) {
        nv_warn("boot: refused node %d at %s: %s", h->node, c->peer, why);
        c->closing = 1;     /* closed once the refusal is out */
        send_welcome(s, c, h->nonce, &p, NETVM_ERR_BOOT, why);
        nv_srv_update_events(s, c);
        return;
    }
    send_welcome(s, c, h->nonce, &p, NETVM_OK, "");
    if (c->gone)
        return;
    c->kind = CONN_NODE;
    c->node = h->node;
    s->npending_nodes--;
    s->node_st[h->node] = NV_BOOT_NODE_JOINED;
    s->nodes_joined++;
    for (int r = first_rank(s, h->node); r < first_rank(s, h->node + 1); r++) {
        s->ranks[r].st = NV_BOOT_RANK_ACTIVE;
        s->ranks[r].conn = c;
    }
    /* the address the nodes reach this host at, when the listener did not name one */
    if (!s->tcp_addr[0])
        nv_boot_tcp_local_ip(c->fd, s->tcp_addr, sizeof s->tcp_addr);
    nv_info("boot: node %d joined from %s", h->node, c->peer);
    nv_srv_event(s, NV_BOOT_EV_NODE_JOINED, h->node, -1, 0, c->peer);
    if (s->nodes_joined == s->nnodes - 1)
        all_joined(s);
}

/* --- hub: a node's messages ---------------------------------------------------- */

static int node_owns(const nv_boot_server_t *s, const struct conn *c, int rank)
{
    return rank >= first_rank(s, c->node) && rank < first_rank(s, c->node + 1);
}

static void node_protocol_error(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    nv_error("boot: node %d sent an unexpected %s (rank %d)", c->node, nv_boot_msg_type_name(m->type),
             m->type == NV_BOOT_MSG_ENTER ? m->u.coll.rank : m->u.report.rank);
    nv_srv_conn_close(s, c, "protocol error");
}

static void hub_node_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    switch (m->type) {
    case NV_BOOT_MSG_ENTER: {
        int r = m->u.coll.rank;
        if (!node_owns(s, c, r) || s->ranks[r].st != NV_BOOT_RANK_ACTIVE || s->ranks[r].conn != c) {
            node_protocol_error(s, c, m);
            return;
        }
        nv_srv_round_enter(s, c, r, m->u.coll.coll, m->u.coll.seq, m->u.coll.data, m->u.coll.len);
        break;
    }
    case NV_BOOT_MSG_RANK_GONE:
        if (!node_owns(s, c, m->u.report.rank)) {
            node_protocol_error(s, c, m);
            return;
        }
        nv_srv_rank_gone(s, m->u.report.rank,
                         m->u.report.state == NV_BOOT_GONE_LEFT ? NV_BOOT_RANK_LEFT : NV_BOOT_RANK_DEAD);
        break;
    case NV_BOOT_MSG_FAILED: {
        if (m->u.report.rank >= 0 && !node_owns(s, c, m->u.report.rank)) {
            node_protocol_error(s, c, m);
            return;
        }
        char t[NV_BOOT_TEXT_MAX + 1];
        memcpy(t, m->u.report.text, m->u.report.text_len);
        t[m->u.report.text_len] = 0;
        nv_srv_event(s, NV_BOOT_EV_NODE_FAILED, c->node, m->u.report.rank, m->u.report.code, t);
        break;
    }
    case NV_BOOT_MSG_NODE_DONE:
        s->node_st[c->node] = NV_BOOT_NODE_DONE;
        nv_srv_event(s, NV_BOOT_EV_NODE_DONE, c->node, -1, m->u.report.code, NULL);
        break;
    default:
        node_protocol_error(s, c, m);
        break;
    }
}

/* --- relay: the connection to the hub ------------------------------------------- */

/* A local rank waiting for a collective the hub will never answer. */
static void refuse_waiting(nv_boot_server_t *s)
{
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_RESULT };
    m.u.result.status = NETVM_ERR_BOOT;
    m.u.result.dead_rank = -1;
    for (int r = s->first_local; r < s->first_local + s->nlocal; r++) {
        struct rank_slot *slot = &s->ranks[r];
        if (slot->entered && slot->conn)
            nv_srv_send_msg(s, slot->conn, &m);
        slot->entered = 0;
    }
}

void nv_srv_relay_enter(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    struct rank_slot *slot = &s->ranks[c->rank];
    /* what fits a process's frame may not fit an ENTER: refuse it here
     * rather than leave the hub waiting for an entry that never comes
     * (a well-behaved client never sends that much) */
    if (m->u.coll.len > NV_BOOT_MAX_PAYLOAD - 64) {
        nv_error("boot: rank %d sent an allgather of %u bytes, more than a job may gather", c->rank,
                 m->u.coll.len);
        nv_srv_conn_close(s, c, "protocol error");
        return;
    }
    if (m->u.coll.seq != s->round.seq || slot->entered) {
        nv_error("boot: rank %d sent %s #%u while collective #%u is running", c->rank,
                 nv_boot_msg_type_name(m->type), m->u.coll.seq, s->round.seq);
        nv_srv_conn_close(s, c, "protocol error");
        return;
    }
    slot->entered = m->type;
    if (!s->upstream) {
        refuse_waiting(s);
        return;
    }
    struct nv_boot_msg e = { .type = NV_BOOT_MSG_ENTER };
    e.u.coll.rank = c->rank;
    e.u.coll.seq = m->u.coll.seq;
    e.u.coll.coll = m->type;
    e.u.coll.len = m->u.coll.len;
    e.u.coll.data = m->u.coll.data;
    nv_srv_send_msg(s, s->upstream, &e);
}

void nv_srv_relay_gone(nv_boot_server_t *s, int rank, enum nv_boot_rank_state st)
{
    if (!s->upstream)
        return;
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_RANK_GONE };
    m.u.report.rank = rank;
    m.u.report.state = st == NV_BOOT_RANK_LEFT ? NV_BOOT_GONE_LEFT : NV_BOOT_GONE_DEAD;
    nv_srv_send_msg(s, s->upstream, &m);
}

/* The hub's answer to a round: each local rank that entered it gets the
 * answer to what it asked (ranks that disagreed get a failure either way). */
static void relay_result(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    if (m->u.result.seq != s->round.seq ||
        (m->type == NV_BOOT_MSG_ALLGATHER_RESULT && m->u.result.count != (uint32_t)s->size)) {
        nv_error("boot: the hub sent %s #%u (%u ranks) during collective #%u of %d ranks",
                 nv_boot_msg_type_name(m->type), m->u.result.seq, m->u.result.count, s->round.seq, s->size);
        nv_srv_conn_close(s, c, "protocol error");
        return;
    }
    struct obuf *reply[2] = { NULL, NULL };     /* to ALLGATHER, to BARRIER */
    for (int r = s->first_local; r < s->first_local + s->nlocal; r++) {
        struct rank_slot *slot = &s->ranks[r];
        uint16_t t = slot->entered;
        slot->entered = 0;
        if (!t || !slot->conn)
            continue;
        int i = t == NV_BOOT_MSG_BARRIER;
        if (!reply[i]) {
            struct nv_boot_msg x = *m;
            x.type = i ? NV_BOOT_MSG_BARRIER_DONE : NV_BOOT_MSG_ALLGATHER_RESULT;
            if (x.type != m->type) {
                /* the ranks disagreed: a failure without data either way */
                x.u.result.count = x.type == NV_BOOT_MSG_ALLGATHER_RESULT ? (uint32_t)s->size : 0;
                x.u.result.each = 0;
                x.u.result.data = NULL;
            }
            reply[i] = nv_srv_obuf_encode(&x);
        }
        if (reply[i])
            nv_srv_send(s, slot->conn, reply[i]);
        else
            nv_srv_conn_close(s, slot->conn, "cannot encode a result");
    }
    nv_srv_obuf_put(reply[0]);
    nv_srv_obuf_put(reply[1]);
    s->round.seq++;
}

static void relay_upstream_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    switch (m->type) {
    case NV_BOOT_MSG_ALLGATHER_RESULT:
    case NV_BOOT_MSG_BARRIER_DONE:
        relay_result(s, c, m);
        break;
    case NV_BOOT_MSG_ABORT: {
        char t[NV_BOOT_TEXT_MAX + 1];
        memcpy(t, m->u.report.text, m->u.report.text_len);
        t[m->u.report.text_len] = 0;
        nv_srv_event(s, NV_BOOT_EV_ABORT, m->u.report.node, m->u.report.rank, m->u.report.code, t);
        break;
    }
    default:
        nv_error("boot: the hub sent an unexpected %s", nv_boot_msg_type_name(m->type));
        nv_srv_conn_close(s, c, "protocol error");
        break;
    }
}

/* --- shared ------------------------------------------------------------------ */

void nv_srv_node_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    if (c->kind == CONN_NODE_PENDING) {
        if (m->type == NV_BOOT_MSG_NODE_HELLO) {
            node_hello(s, c, m);
        } else {
            nv_warn("boot: %s sent %s before authenticating", c->peer, nv_boot_msg_type_name(m->type));
            nv_srv_conn_close(s, c, NULL);
        }
    } else if (c->kind == CONN_NODE) {
        hub_node_msg(s, c, m);
    } else {
        relay_upstream_msg(s, c, m);
    }
}

void nv_srv_node_closed(nv_boot_server_t *s, struct conn *c, const char *why)
{
    if (c->kind == CONN_UPSTREAM) {
        s->upstream = NULL;
        refuse_waiting(s);
        nv_srv_event(s, NV_BOOT_EV_HUB_LOST, 0, -1, 0, why);
        return;
    }
    int lost = s->node_st[c->node] == NV_BOOT_NODE_JOINED;
    if (lost)
        s->node_st[c->node] = NV_BOOT_NODE_LOST;
    /* its ranks can speak no more: a node that said NODE_DONE has reported
     * every one of them already, one that did not takes them with it */
    for (int r = first_rank(s, c->node); r < first_rank(s, c->node + 1); r++)
        if (s->ranks[r].conn == c || s->ranks[r].st == NV_BOOT_RANK_WAITING)
            nv_srv_rank_gone(s, r, NV_BOOT_RANK_DEAD);
    if (lost) {
        nv_info("boot: lost node %d (%s): %s", c->node, c->peer, why);
        nv_srv_event(s, NV_BOOT_EV_NODE_LOST, c->node, -1, 0, why);
    }
}

/* --- the launcher's side ---------------------------------------------------------- */

void nv_boot_server_abort(nv_boot_server_t *s, int rank, int node, int code, const char *text)
{
    if (!s || !s->node_st)
        return;
    char t[NV_BOOT_TEXT_MAX + 1];
    /* a node still on its way must hear that there is no job to join */
    s->aborted = 1;
    clean_text(text, s->abort_text);
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_ABORT };
    m.u.report.rank = rank < 0 ? -1 : rank;
    m.u.report.node = node;
    m.u.report.code = code < 0 || code > 255 ? 1 : code;
    m.u.report.text_len = clean_text(text, t);
    m.u.report.text = t;
    for (struct conn *c = s->conns; c; c = c->next)
        if (!c->gone && c->kind == CONN_NODE)
            nv_srv_send_msg(s, c, &m);
}

void nv_boot_server_report_failure(nv_boot_server_t *s, int rank, int code, const char *text)
{
    if (!s || !s->upstream)
        return;
    char t[NV_BOOT_TEXT_MAX + 1];
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_FAILED };
    m.u.report.rank = rank < 0 ? -1 : rank;
    m.u.report.node = s->node;
    m.u.report.code = code < 0 || code > 255 ? 1 : code;
    m.u.report.text_len = clean_text(text, t);
    m.u.report.text = t;
    nv_srv_send_msg(s, s->upstream, &m);
}

void nv_boot_server_node_done(nv_boot_server_t *s, int code)
{
    if (!s || !s->upstream)
        return;
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_NODE_DONE };
    m.u.report.code = code < 0 || code > 255 ? 1 : code;
    nv_srv_send_msg(s, s->upstream, &m);
}

enum nv_boot_node_state nv_boot_server_node_state(const nv_boot_server_t *s, int node)
{
    if (!s || !s->node_st || node < 0 || node >= s->nnodes)
        return NV_BOOT_NODE_LOST;
    return s->node_st[node];
}

const char *nv_boot_server_tcp_addr(const nv_boot_server_t *s)
{
    return s ? s->tcp_addr : "";
}

netvm_status_t nv_srv_node_setup(nv_boot_server_t *s, const struct nv_boot_server_opts *o)
{
    s->flags = o->flags;
    if (o->node > 0) {
        s->relay = 1;
        int fd = o->upstream_fd;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        nv_boot_tcp_tune(fd);
        struct conn *c = nv_srv_conn_new(s, fd, CONN_UPSTREAM);    /* closes fd on failure */
        if (!c)
            return NETVM_ERR_SYS;
        nv_boot_tcp_peer_name(fd, c->peer, sizeof c->peer);
        s->upstream = c;
        return NETVM_OK;
    }
    s->node_st = calloc((size_t)s->nnodes, sizeof *s->node_st);
    if (!s->node_st)
        return NETVM_ERR_NOMEM;
    s->node_st[0] = NV_BOOT_NODE_JOINED;
    int specific = 0;
    char ip[NV_TCP_ADDR_MAX], err[256];
    s->tcp_lfd = nv_boot_tcp_listen(o->listen, &specific, ip, sizeof ip, err, sizeof err);
    if (s->tcp_lfd < 0) {
        nv_error("boot: %s", err);
        return NETVM_ERR_SYS;
    }
    if (specific)
        snprintf(s->tcp_addr, sizeof s->tcp_addr, "%s", ip);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = TAG_TCP_LISTEN };
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->tcp_lfd, &ev) != 0) {
        nv_error("boot: epoll: %s", strerror(errno));
        return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

void nv_srv_node_teardown(nv_boot_server_t *s)
{
    stop_rendezvous(s);
    free(s->node_st);
    s->node_st = NULL;
}
