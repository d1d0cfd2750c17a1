/* The boot server (server.h): a non-blocking state machine over an epoll set
 * of its own. Three parts, top to bottom:
 *   connections - accept, frame assembly, queued output, deferred frees;
 *   ranks       - HELLO authentication and the rank table;
 *   collectives - one round at a time, completed when every live rank has
 *                 entered it.
 * The launchers of a multi-host job (the hub's node connections, a relay's
 * connection to the hub) are server_node.c's; they share the connection
 * machinery here. */
#define _GNU_SOURCE   /* accept4, SO_PEERCRED, struct ucred */
#include "boot/server_int.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/time.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#define DEFAULT_HELLO_TIMEOUT_MS 10000
#define EXTRA_PENDING            16    /* unauthenticated connections beyond one per rank */

static void handle_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m);
static void round_check(nv_boot_server_t *s);

/* For log messages: a local process by pid, a launcher by its address. */
static const char *who(const struct conn *c, char *buf, size_t cap)
{
    if (c->peer[0])
        snprintf(buf, cap, "%s", c->peer);
    else
        snprintf(buf, cap, "pid %d", (int)c->pid);
    return buf;
}

int nv_srv_is_local(const nv_boot_server_t *s, int rank)
{
    return rank >= s->first_local && rank < s->first_local + s->nlocal;
}

/* --- events for the launcher --------------------------------------------- */

void nv_srv_event(nv_boot_server_t *s, enum nv_boot_event_kind kind, int node, int rank, int code,
                  const char *text)
{
    if (s->destroying)
        return;
    struct event_node *e = calloc(1, sizeof *e);
    if (!e) {
        nv_error("boot: out of memory; an event for the launcher is lost");
        return;
    }
    e->ev = (struct nv_boot_event){ .kind = kind, .node = node, .rank = rank, .code = code };
    snprintf(e->ev.text, sizeof e->ev.text, "%s", text ? text : "");
    if (s->ev_tail)
        s->ev_tail->next = e;
    else
        s->ev_head = e;
    s->ev_tail = e;
}

int nv_boot_server_next_event(nv_boot_server_t *s, struct nv_boot_event *ev)
{
    struct event_node *e = s ? s->ev_head : NULL;
    if (!e)
        return 0;
    *ev = e->ev;
    s->ev_head = e->next;
    if (!s->ev_head)
        s->ev_tail = NULL;
    free(e);
    return 1;
}

/* --- output ----------------------------------------------------------- */

void nv_srv_obuf_put(struct obuf *b)
{
    if (b && --b->refs == 0)
        free(b);
}

struct obuf *nv_srv_obuf_encode(const struct nv_boot_msg *m)
{
    size_t len = nv_boot_msg_size(m);
    if (len == 0)
        return NULL;
    struct obuf *b = malloc(sizeof *b + len);
    if (!b)
        return NULL;
    b->refs = 1;
    b->len = nv_boot_msg_encode(m, b->data, len);
    return b;
}

/* A closing connection is not read any more, so it must not be watched for
 * input either: level-triggered, unread input would wake the loop forever. */
void nv_srv_update_events(nv_boot_server_t *s, struct conn *c)
{
    uint32_t want = (c->closing ? 0 : EPOLLIN) | (c->out_head ? EPOLLOUT : 0);
    if (c->gone || c->events == want)
        return;
    struct epoll_event ev = { .events = want, .data.ptr = c };
    if (epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->events = want;
}

/* Write what the socket takes now; the rest waits for EPOLLOUT. */
static void conn_flush(nv_boot_server_t *s, struct conn *c)
{
    while (c->out_head) {
        struct outq *q = c->out_head;
        ssize_t n = send(c->fd, q->buf->data + q->off, q->buf->len - q->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            nv_srv_update_events(s, c);
            return;
        }
        if (n < 0) {
            nv_srv_conn_close(s, c, strerror(errno));
            return;
        }
        q->off += (size_t)n;
        if (q->off == q->buf->len) {
            c->out_head = q->next;
            if (!c->out_head)
                c->out_tail = NULL;
            nv_srv_obuf_put(q->buf);
            free(q);
        }
    }
    if (c->closing)
        nv_srv_conn_close(s, c, NULL);
    else
        nv_srv_update_events(s, c);
}

void nv_srv_send(nv_boot_server_t *s, struct conn *c, struct obuf *b)
{
    if (c->gone || !b)
        return;
    struct outq *q = malloc(sizeof *q);
    if (!q) {
        nv_srv_conn_close(s, c, "out of memory");
        return;
    }
    b->refs++;
    *q = (struct outq){ .buf = b };
    if (c->out_tail)
        c->out_tail->next = q;
    else
        c->out_head = q;
    c->out_tail = q;
    conn_flush(s, c);
}

void nv_srv_send_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    struct obuf *b = nv_srv_obuf_encode(m);
    if (!b) {
        nv_error("boot: cannot encode a %s", nv_boot_msg_type_name(m->type));
        return;
    }
    nv_srv_send(s, c, b);
    nv_srv_obuf_put(b);
}

static void send_result(nv_boot_server_t *s, struct conn *c, netvm_status_t st)
{
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_RESULT };
    m.u.result.status = st;
    m.u.result.dead_rank = -1;
    nv_srv_send_msg(s, c, &m);
}

/* Refuse a connection: tell it why (a client prints that better than a bare
 * close), then close once the reply is out. */
static void conn_refuse(nv_boot_server_t *s, struct conn *c, netvm_status_t st, const char *why)
{
    char w[NV_TCP_ADDR_MAX];
    nv_warn("boot: refused connection from %s: %s", who(c, w, sizeof w), why);
    c->closing = 1;
    send_result(s, c, st);
    nv_srv_update_events(s, c);
}

/* --- connections -------------------------------------------------------- */

/* Once no local rank can still join, nobody has any business connecting:
 * stop listening and remove the socket and its directory at once, so that
 * even a launcher killed by SIGKILL leaves nothing behind once its job has
 * started. */
static void stop_listening(nv_boot_server_t *s)
{
    if (s->lfd >= 0) {
        if (!s->accept_paused)
            epoll_ctl(s->ep, EPOLL_CTL_DEL, s->lfd, NULL);
        close(s->lfd);
        s->lfd = -1;
    }
    if (s->path[0])
        unlink(s->path);
    if (s->dir[0] && rmdir(s->dir) != 0)
        nv_warn("boot: cannot remove %s: %s", s->dir, strerror(errno));
    s->path[0] = s->dir[0] = 0;
}

static void rank_settled(nv_boot_server_t *s)
{
    if (--s->nwaiting == 0)
        stop_listening(s);
}

void nv_srv_rank_gone(nv_boot_server_t *s, int rank, enum nv_boot_rank_state st)
{
    struct rank_slot *r = &s->ranks[rank];
    if (r->st == NV_BOOT_RANK_LEFT || r->st == NV_BOOT_RANK_DEAD)
        return;
    if (r->st == NV_BOOT_RANK_WAITING && nv_srv_is_local(s, rank))
        rank_settled(s);
    r->st = st;
    r->conn = NULL;
    if (st == NV_BOOT_RANK_DEAD && s->first_dead < 0)
        s->first_dead = rank;
    if (s->first_gone < 0)
        s->first_gone = rank;
    if (s->relay)
        nv_srv_relay_gone(s, rank, st);     /* the hub decides what that means */
    else
        round_check(s);
}

/* Closes now, frees later: events for c may still be pending in the batch
 * progress is working through. */
void nv_srv_conn_close(nv_boot_server_t *s, struct conn *c, const char *why)
{
    if (c->gone)
        return;
    c->gone = 1;
    epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (c->kind == CONN_PENDING)
        s->npending--;
    if (c->kind == CONN_NODE_PENDING)
        s->npending_nodes--;
    if (s->destroying)
        return;
    if (s->accept_paused && s->lfd >= 0) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = TAG_LISTEN };
        if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd, &ev) == 0)
            s->accept_paused = 0;
    }
    nv_srv_resume_nodes(s);
    if (c->kind == CONN_PROCESS && s->ranks[c->rank].conn == c) {
        if (why)
            nv_info("boot: rank %d (pid %d) lost without BYE: %s", c->rank, (int)c->pid, why);
        nv_srv_rank_gone(s, c->rank, NV_BOOT_RANK_DEAD);
    }
    if (c->kind == CONN_NODE || c->kind == CONN_UPSTREAM)
        nv_srv_node_closed(s, c, why ? why : "connection closed");
}

static void conn_free(struct conn *c)
{
    while (c->out_head) {
        struct outq *q = c->out_head;
        c->out_head = q->next;
        nv_srv_obuf_put(q->buf);
        free(q);
    }
    free(c->payload);
    free(c);
}

static void reap_gone(nv_boot_server_t *s)
{
    for (struct conn **pp = &s->conns; *pp;) {
        struct conn *c = *pp;
        if (c->gone) {
            *pp = c->next;
            conn_free(c);
        } else {
            pp = &c->next;
        }
    }
}

/* Watch fd as a new connection of the given kind; closes fd on failure. */
struct conn *nv_srv_conn_new(nv_boot_server_t *s, int fd, enum conn_kind kind)
{
    struct conn *c = calloc(1, sizeof *c);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    if (!c || epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        nv_warn("boot: cannot watch a new connection: %s", c ? strerror(errno) : "out of memory");
        free(c);
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->events = EPOLLIN;
    c->kind = kind;
    c->rank = c->node = -1;
    c->deadline_ns = nv_now_ns() + (uint64_t)s->hello_timeout_ms * 1000000ull;
    c->next = s->conns;
    s->conns = c;
    return c;
}

static void accept_all(nv_boot_server_t *s)
{
    while (s->lfd >= 0) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the listener would stay readable: stop watching it until
                 * a connection closes, instead of spinning */
                nv_warn("boot: accept: %s; pausing", strerror(errno));
                if (epoll_ctl(s->ep, EPOLL_CTL_DEL, s->lfd, NULL) == 0)
                    s->accept_paused = 1;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                nv_warn("boot: accept: %s", strerror(errno));
            }
            return;
        }
        struct ucred cred = { .pid = 0 };
        socklen_t clen = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
            nv_warn("boot: refused a connection from uid %d", (int)cred.uid);
            close(fd);
            continue;
        }
        if (s->npending >= s->nlocal + EXTRA_PENDING) {
            nv_warn("boot: too many unauthenticated connections; refused pid %d", (int)cred.pid);
            close(fd);
            continue;
        }
        struct conn *c = nv_srv_conn_new(s, fd, CONN_PENDING);
        if (!c)
            continue;
        c->pid = cred.pid;
        s->npending++;
    }
}

/* The largest frame a connection may send: a HELLO's worth until it has
 * authenticated. */
static uint32_t max_payload(const struct conn *c)
{
    return c->kind == CONN_PENDING || c->kind == CONN_NODE_PENDING ? NV_BOOT_HELLO_MAX : NV_BOOT_MAX_PAYLOAD;
}

/* Read whatever has arrived and act on each complete frame. */
static void conn_read(nv_boot_server_t *s, struct conn *c)
{
    char w[NV_TCP_ADDR_MAX];
    while (!c->gone && !c->closing) {
        uint8_t *dst;
        size_t want;
        if (c->hdr_have < NV_BOOT_HDR_LEN) {
            dst = c->hdr + c->hdr_have;
            want = NV_BOOT_HDR_LEN - c->hdr_have;
        } else {
            dst = c->payload + c->payload_have;
            want = c->h.len - c->payload_have;
        }
        ssize_t n = want ? recv(c->fd, dst, want, MSG_DONTWAIT) : 0;
        if (want && n < 0 && errno == EINTR)
            continue;
        if (want && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (want && n <= 0) {
            nv_srv_conn_close(s, c, n < 0 ? strerror(errno) : "connection closed");
            return;
        }
        const char *why = "";
        if (c->hdr_have < NV_BOOT_HDR_LEN) {
            c->hdr_have += (size_t)n;
            enum nv_boot_rc rc = nv_boot_hdr_decode(c->hdr, c->hdr_have, max_payload(c), &c->h, &why);
            if (rc == NV_BOOT_RC_BAD) {
                nv_warn("boot: malformed frame from %s: %s", who(c, w, sizeof w), why);
                nv_srv_conn_close(s, c, why);
                return;
            }
            if (rc == NV_BOOT_RC_MORE)
                continue;
            c->payload = malloc(c->h.len ? c->h.len : 1);
            c->payload_have = 0;
            if (!c->payload) {
                nv_srv_conn_close(s, c, "out of memory");
                return;
            }
            if (c->h.len)
                continue;
        } else {
            c->payload_have += (size_t)n;
            if (c->payload_have < c->h.len)
                continue;
        }
        struct nv_boot_msg m;
        if (nv_boot_payload_decode(c->h.type, c->payload, c->h.len, &m, &why) != NV_BOOT_RC_OK) {
            nv_warn("boot: malformed %s from %s: %s", nv_boot_msg_type_name(c->h.type), who(c, w, sizeof w), why);
            nv_srv_conn_close(s, c, why);
            return;
        }
        handle_msg(s, c, &m);
        free(c->payload);
        c->payload = NULL;
        c->hdr_have = 0;
    }
}

/* --- ranks ---------------------------------------------------------------- */

static void handle_hello(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    const typeof(m->u.hello) *h = &m->u.hello;
    if (h->auth != NV_BOOT_AUTH_SECRET || h->proof_len != NV_BOOT_SECRET_LEN ||
        !nv_ct_equal(h->proof, s->secret, NV_BOOT_SECRET_LEN)) {
        conn_refuse(s, c, NETVM_ERR_BOOT, "wrong job secret");
        return;
    }
    if (h->job_id_len != strlen(s->job_id) || memcmp(h->job_id, s->job_id, h->job_id_len) != 0) {
        conn_refuse(s, c, NETVM_ERR_BOOT, "wrong job id");
        return;
    }
    if (h->size != s->size) {
        conn_refuse(s, c, NETVM_ERR_BOOT, "wrong job size");
        return;
    }
    char why[64];
    if (!nv_srv_is_local(s, h->rank)) {
        snprintf(why, sizeof why, "rank %d does not run on this host", h->rank);
        conn_refuse(s, c, NETVM_ERR_BOOT, why);
        return;
    }
    struct rank_slot *r = &s->ranks[h->rank];
    if (r->st != NV_BOOT_RANK_WAITING) {
        snprintf(why, sizeof why, "rank %d is %s", h->rank,
                 r->st == NV_BOOT_RANK_ACTIVE ? "already connected" : "no longer in the job");
        conn_refuse(s, c, NETVM_ERR_BOOT, why);
        return;
    }
    c->kind = CONN_PROCESS;
    c->rank = h->rank;
    s->npending--;
    r->st = NV_BOOT_RANK_ACTIVE;
    r->conn = c;
    nv_debug("boot: rank %d (pid %d) joined", c->rank, (int)c->pid);
    send_result(s, c, NETVM_OK);
    rank_settled(s);
}

/* --- collectives ---------------------------------------------------------- */

static void round_reset(nv_boot_server_t *s)
{
    free(s->round.data);
    uint32_t next = s->round.seq + 1;
    s->round = (struct round){ .seq = next, .fail = NETVM_OK };
    for (int i = 0; i < s->size; i++)
        s->ranks[i].entered = 0;
}

/* The reply to a rank that entered the round with a request of type t: each
 * rank gets the answer to what it asked, even when ranks disagreed. */
static struct obuf *round_reply(nv_boot_server_t *s, uint16_t t)
{
    struct round *rd = &s->round;
    struct nv_boot_msg m = { .type = t == NV_BOOT_MSG_ALLGATHER ? NV_BOOT_MSG_ALLGATHER_RESULT
                                                                : NV_BOOT_MSG_BARRIER_DONE };
    m.u.result.seq = rd->seq;
    m.u.result.status = rd->fail;
    m.u.result.dead_rank = -1;
    if (rd->fail == NETVM_OK && s->first_gone >= 0) {
        m.u.result.status = NETVM_ERR_PEER;
        m.u.result.dead_rank = s->first_gone;
    }
    if (m.type == NV_BOOT_MSG_ALLGATHER_RESULT) {
        m.u.result.count = (uint32_t)s->size;
        if (rd->fail == NETVM_OK && rd->data) {     /* a failed round carries no data */
            m.u.result.each = rd->each;
            m.u.result.data = rd->data;
        }
    }
    struct obuf *b = nv_srv_obuf_encode(&m);
    if (!b)
        nv_error("boot: cannot encode the result of collective #%u", rd->seq);
    nv_debug("boot: collective #%u (%s) complete: %s", rd->seq, nv_boot_msg_type_name(t),
             netvm_strerror(m.u.result.status));
    return b;
}

static void round_complete(nv_boot_server_t *s)
{
    struct round *rd = &s->round;
    for (int i = 0; rd->data && i < s->size; i++)
        if (s->ranks[i].st == NV_BOOT_RANK_LEFT || s->ranks[i].st == NV_BOOT_RANK_DEAD)
            memset(rd->data + (size_t)i * rd->each, 0, rd->each);
    /* sending can fail and close a connection, which marks a rank dead and
     * would check this very round again */
    s->completing = 1;
    struct obuf *reply[2] = { NULL, NULL };     /* to ALLGATHER, to BARRIER */
    /* once per connection, not per rank: a node's connection speaks for
     * many ranks, and its launcher hands the result to each of them */
    for (int i = 0; i < s->size; i++) {
        struct conn *c = s->ranks[i].conn;
        uint16_t t = s->ranks[i].entered;
        if (!t || !c || c->replied_seq == rd->seq)
            continue;
        c->replied_seq = rd->seq;
        struct obuf **b = &reply[t == NV_BOOT_MSG_BARRIER];
        if (!*b)
            *b = round_reply(s, t);
        if (*b)
            nv_srv_send(s, c, *b);
        else
            nv_srv_conn_close(s, c, "out of memory");
    }
    nv_srv_obuf_put(reply[0]);
    nv_srv_obuf_put(reply[1]);
    round_reset(s);
    s->completing = 0;
}

/* Complete the round if nobody it waits for can still come. */
static void round_check(nv_boot_server_t *s)
{
    if (s->round.entered == 0 || s->completing)
        return;
    for (int i = 0; i < s->size; i++) {
        const struct rank_slot *r = &s->ranks[i];
        if (!r->entered && (r->st == NV_BOOT_RANK_WAITING || r->st == NV_BOOT_RANK_ACTIVE))
            return;
    }
    round_complete(s);
}

/* rank (spoken for by c) entered the collective of the given type. */
void nv_srv_round_enter(nv_boot_server_t *s, struct conn *c, int rank, uint16_t type, uint32_t seq,
                        const uint8_t *data, uint32_t len)
{
    struct round *rd = &s->round;
    struct rank_slot *r = &s->ranks[rank];
    if (seq != rd->seq || r->entered) {
        nv_error("boot: rank %d sent %s #%u while collective #%u is running", rank,
                 nv_boot_msg_type_name(type), seq, rd->seq);
        nv_srv_conn_close(s, c, "protocol error");
        return;
    }
    uint32_t each = type == NV_BOOT_MSG_ALLGATHER ? len : 0;
    if (rd->entered == 0) {
        rd->type = type;
        rd->each = each;
        if (rd->type == NV_BOOT_MSG_ALLGATHER) {
            size_t total = (size_t)each * (size_t)s->size;
            if (total > NV_BOOT_MAX_PAYLOAD - 64) {
                nv_error("boot: allgather of %u bytes x %d ranks is too large", each, s->size);
                rd->fail = NETVM_ERR_INVAL;
            } else if (total && !(rd->data = calloc(1, total))) {
                rd->fail = NETVM_ERR_NOMEM;
            }
        }
    } else if (rd->type != type || rd->each != each) {
        /* a program bug, but one every rank should hear about, not hang on */
        nv_error("boot: collective #%u: rank %d entered %s(%u bytes), others %s(%u bytes)", rd->seq,
                 rank, nv_boot_msg_type_name(type), each, nv_boot_msg_type_name(rd->type), rd->each);
        rd->fail = NETVM_ERR_INVAL;
    }
    if (rd->fail == NETVM_OK && rd->data && each)
        memcpy(rd->data + (size_t)rank * each, data, each);
    r->entered = type;
    rd->entered++;
    round_check(s);
}

static void handle_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m)
{
    if (c->kind == CONN_NODE_PENDING || c->kind == CONN_NODE || c->kind == CONN_UPSTREAM) {
        nv_srv_node_msg(s, c, m);
        return;
    }
    if (c->kind == CONN_PENDING) {
        if (m->type == NV_BOOT_MSG_HELLO)
            handle_hello(s, c, m);
        else
            conn_refuse(s, c, NETVM_ERR_BOOT, "a message before HELLO");
        return;
    }
    switch (m->type) {
    case NV_BOOT_MSG_ALLGATHER:
    case NV_BOOT_MSG_BARRIER:
        if (s->relay)
            nv_srv_relay_enter(s, c, m);
        else
            nv_srv_round_enter(s, c, c->rank, m->type, m->u.coll.seq, m->u.coll.data, m->u.coll.len);
        break;
    case NV_BOOT_MSG_BYE:
        nv_debug("boot: rank %d said BYE", c->rank);
        nv_srv_rank_gone(s, c->rank, NV_BOOT_RANK_LEFT);
        c->closing = 1;
        if (!c->out_head)
            nv_srv_conn_close(s, c, NULL);
        break;
    default:
        nv_error("boot: rank %d sent an unexpected %s", c->rank, nv_boot_msg_type_name(m->type));
        nv_srv_conn_close(s, c, "protocol error");
        break;
    }
}

/* --- timer: unauthenticated connections must not linger ---------------- */

static void expire_pending(nv_boot_server_t *s)
{
    uint64_t now = nv_now_ns(), next = 0;
    char w[NV_TCP_ADDR_MAX];
    for (struct conn *c = s->conns; c; c = c->next) {
        if (c->gone || (c->kind != CONN_PENDING && c->kind != CONN_NODE_PENDING))
            continue;
        if (c->deadline_ns <= now) {
            nv_warn("boot: %s did not authenticate in time", who(c, w, sizeof w));
            nv_srv_conn_close(s, c, NULL);
        } else if (!next || c->deadline_ns < next) {
            next = c->deadline_ns;
        }
    }
    struct itimerspec its = { .it_value = { 0, 0 } };
    if (next) {
        uint64_t d = next - now;
        its.it_value.tv_sec = (time_t)(d / 1000000000ull);
        its.it_value.tv_nsec = (long)(d % 1000000000ull);
    }
    timerfd_settime(s->tfd, 0, &its, NULL);
}

/* --- the public face ------------------------------------------------------ */

netvm_status_t nv_boot_server_progress(nv_boot_server_t *s)
{
    struct epoll_event evs[64];
    int n = epoll_wait(s->ep, evs, 64, 0);
    if (n < 0) {
        if (errno == EINTR)
            return NETVM_OK;
        nv_error("boot: epoll_wait: %s", strerror(errno));
        return NETVM_ERR_SYS;
    }
    for (int i = 0; i < n; i++) {
        void *tag = evs[i].data.ptr;
        if (tag == TAG_LISTEN) {
            accept_all(s);
        } else if (tag == TAG_TCP_LISTEN) {
            nv_srv_accept_nodes(s);
        } else if (tag == TAG_TIMER) {
            uint64_t ticks;
            ssize_t r = read(s->tfd, &ticks, sizeof ticks);
            (void)r;
        } else {
            struct conn *c = tag;
            if (!c->gone && (evs[i].events & EPOLLOUT))
                conn_flush(s, c);
            if (!c->gone && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                conn_read(s, c);
            /* a closing connection reads no more; its peer hanging up ends it */
            if (!c->gone && c->closing && (evs[i].events & (EPOLLHUP | EPOLLERR)))
                nv_srv_conn_close(s, c, NULL);
        }
    }
    expire_pending(s);
    reap_gone(s);
    return NETVM_OK;
}

void nv_boot_server_rank_exited(nv_boot_server_t *s, int rank, int clean)
{
    if (!s || !nv_srv_is_local(s, rank))
        return;
    struct rank_slot *r = &s->ranks[rank];
    if (r->st == NV_BOOT_RANK_ACTIVE && r->conn) {
        /* its last words (a BYE, a collective) are already in the socket */
        conn_read(s, r->conn);
        if (r->st == NV_BOOT_RANK_ACTIVE)
            nv_srv_conn_close(s, r->conn, "process ended");
    } else if (r->st == NV_BOOT_RANK_WAITING) {
        nv_srv_rank_gone(s, rank, clean ? NV_BOOT_RANK_LEFT : NV_BOOT_RANK_DEAD);
    }
    reap_gone(s);
}

void nv_boot_server_flush(nv_boot_server_t *s, int timeout_ms)
{
    if (!s)
        return;
    uint64_t end = nv_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        int busy = 0;
        for (struct conn *c = s->conns; c && !busy; c = c->next)
            busy = !c->gone && c->out_head != NULL;
        uint64_t now = nv_now_ns();
        if (!busy || now >= end)
            return;
        struct epoll_event ev;
        /* the server's own epoll fd says when any of its sockets can take more */
        if (epoll_wait(s->ep, &ev, 1, (int)((end - now) / 1000000 + 1)) < 0 && errno != EINTR)
            return;
        nv_boot_server_progress(s);
    }
}

enum nv_boot_rank_state nv_boot_server_rank_state(const nv_boot_server_t *s, int rank)
{
    if (!s || rank < 0 || rank >= s->size)
        return NV_BOOT_RANK_DEAD;
    return s->ranks[rank].st;
}

int nv_boot_server_first_dead(const nv_boot_server_t *s) { return s ? s->first_dead : -1; }
unsigned nv_boot_server_rounds(const nv_boot_server_t *s) { return s ? s->round.seq - 1 : 0; }
const char *nv_boot_server_addr(const nv_boot_server_t *s) { return s ? s->addr : NULL; }
int nv_boot_server_fd(const nv_boot_server_t *s) { return s ? s->ep : -1; }

static netvm_status_t make_socket_dir(nv_boot_server_t *s)
{
    const char *tmp = getenv("TMPDIR");
    /* the socket path must fit sun_path; a long TMPDIR falls back to /tmp */
    if (!tmp || !*tmp || strlen(tmp) > 64)
        tmp = "/tmp";
    snprintf(s->dir, sizeof s->dir, "%s/netvm-XXXXXX", tmp);
    if (!mkdtemp(s->dir)) {           /* mkdtemp makes it 0700 */
        nv_error("boot: cannot create a directory in %s: %s", tmp, strerror(errno));
        s->dir[0] = 0;
        return NETVM_ERR_SYS;
    }
    snprintf(s->path, sizeof s->path, "%s/boot", s->dir);
    snprintf(s->addr, sizeof s->addr, "unix:%s", s->path);
    return NETVM_OK;
}

static netvm_status_t listen_on(nv_boot_server_t *s)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", s->path);
    s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s->lfd, SOMAXCONN) != 0) {
        nv_error("boot: cannot listen on %s: %s", s->path, strerror(errno));
        return NETVM_ERR_SYS;
    }
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = TAG_LISTEN };
    struct epoll_event tev = { .events = EPOLLIN, .data.ptr = TAG_TIMER };
    if (s->ep < 0 || s->tfd < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd, &lev) != 0 ||
        epoll_ctl(s->ep, EPOLL_CTL_ADD, s->tfd, &tev) != 0) {
        nv_error("boot: epoll/timerfd: %s", strerror(errno));
        return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

static int opts_valid(const struct nv_boot_server_opts *o)
{
    if (o->size < 1 || o->size > NV_BOOT_MAX_RANKS || !o->secret || !o->job_id ||
        !nv_boot_job_id_valid(o->job_id, strlen(o->job_id)))
        return 0;
    if (o->nnodes <= 1)
        return 1;
    return o->nnodes <= NV_BOOT_MAX_NODES && o->node >= 0 && o->node < o->nnodes && o->nlocal >= 1 &&
           (int64_t)o->nnodes * o->nlocal == o->size && (o->node > 0 ? o->upstream_fd >= 0 : !!o->listen);
}

netvm_status_t nv_boot_server_create(nv_boot_server_t **out, const struct nv_boot_server_opts *o)
{
    /* a relay's connection to the hub is the server's from the call on,
     * even when the call fails */
    int up = o && o->nnodes > 1 && o->node > 0 ? o->upstream_fd : -1;
    nv_boot_server_t *s = NULL;
    if (!out || !o || !opts_valid(o) || !(s = calloc(1, sizeof *s))) {
        if (up >= 0)
            close(up);
        return !out || !o || !opts_valid(o) ? NETVM_ERR_INVAL : NETVM_ERR_NOMEM;
    }
    *out = NULL;
    s->ep = s->lfd = s->tfd = s->tcp_lfd = -1;
    s->size = o->size;
    s->nnodes = o->nnodes > 1 ? o->nnodes : 0;
    s->node = s->nnodes ? o->node : 0;
    s->nlocal = s->nnodes ? o->nlocal : o->size;
    s->first_local = s->node * s->nlocal;
    s->nwaiting = s->nlocal;
    s->first_dead = s->first_gone = -1;
    s->round = (struct round){ .seq = 1, .fail = NETVM_OK };
    s->hello_timeout_ms = o->hello_timeout_ms > 0 ? o->hello_timeout_ms : DEFAULT_HELLO_TIMEOUT_MS;
    snprintf(s->job_id, sizeof s->job_id, "%s", o->job_id);
    memcpy(s->secret, o->secret, NV_BOOT_SECRET_LEN);
    s->ranks = calloc((size_t)o->size, sizeof *s->ranks);
    netvm_status_t st = s->ranks ? NETVM_OK : NETVM_ERR_NOMEM;
    if (st == NETVM_OK)
        st = make_socket_dir(s);
    if (st == NETVM_OK)
        st = listen_on(s);
    if (st == NETVM_OK && s->nnodes) {
        st = nv_srv_node_setup(s, o);   /* owns the upstream fd now, whatever happens */
        up = -1;
    }
    if (up >= 0)
        close(up);
    if (st != NETVM_OK) {
        nv_boot_server_destroy(s);
        return st;
    }
    *out = s;
    return NETVM_OK;
}

void nv_boot_server_destroy(nv_boot_server_t *s)
{
    if (!s)
        return;
    s->destroying = 1;      /* no rank bookkeeping while tearing down */
    for (struct conn *c = s->conns; c; c = c->next)
        nv_srv_conn_close(s, c, NULL);
    reap_gone(s);
    stop_listening(s);
    nv_srv_node_teardown(s);
    while (s->ev_head) {
        struct event_node *e = s->ev_head;
        s->ev_head = e->next;
        free(e);
    }
    if (s->tfd >= 0)
        close(s->tfd);
    if (s->ep >= 0)
        close(s->ep);
    free(s->round.data);
    free(s->ranks);
    explicit_bzero(s->secret, sizeof s->secret);
    free(s);
}
