/* A service for the connect tests: a process started without the launcher
 * (a job of one) that listens and serves whoever connects with the
 * credential. The test driver reads what it sees on stdout, one line per
 * fact, and tells it what to do on stdin:
 *
 *   cserver [--addr tcp:HOST:PORT] [--max-peers N] [--cred STRING]
 *
 * out: ADDR <addr>                       listening
 *      UP <peer> <port> <link>           NETVM_EV_PEER_UP (then H_WELCOME to it)
 *      DOWN <peer> <status> <idx> <last> <count>   NETVM_EV_PEER_DOWN, and the
 *                                        client's W_LAST / W_COUNT words
 *      TRIP <peer> <off> / NOTIFY <peer> <value> / POKE <peer> <status>
 *      PEERS <n> / CLOSED <status> / CHECK <peer> put=<st> get=<st> atomic=<st>
 *      import=<st> am=<st> notify=<st> / KICKED <peer> <status> /
 *      STATS <fds> <heap> / BYE <status>
 * in:  peers | close | check <peer> | kick <peer> | stats | quit (or EOF)
 *
 * Its handlers (cpeer.h): H_HELLO, H_ECHO (large payloads too), H_PING
 * (answers H_PONG from inside the handler), H_HANDLE, H_SLOW (defers). */
#define _GNU_SOURCE
#include "check.h"
#include "cpeer.h"

#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define MAXP 4096

struct speer {
    int           id;
    int           idx;          /* from H_HELLO, -1 until then */
    netvm_rseg_t *cseg;         /* its SEG_CLIENT, imported by CMD_POKE */
};

static netvm_ctx_t *ctx;
static netvm_listener_t *lis;
static uint8_t *priv;
static netvm_seg_handle_t anon_handle;
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct speer tab[MAXP];
static int ntab;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* the entry of a peer id, made if new (under tab_lock) */
static struct speer *entry(int id)
{
    for (int i = 0; i < ntab; i++)
        if (tab[i].id == id)
            return &tab[i];
    if (ntab == MAXP) {
        /* forget one that left: ids are never reused, entries are */
        for (int i = 0; i < ntab; i++)
            if (tab[i].id < 0) {
                tab[i] = (struct speer){ .id = id, .idx = -1 };
                return &tab[i];
            }
        FAILF("more than %d peers at once", MAXP);
    }
    tab[ntab] = (struct speer){ .id = id, .idx = -1 };
    return &tab[ntab++];
}

/* --- handlers (progress engine) ---------------------------------------------------- */

static int h_hello(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)c, (void)arg;
    CHECK(m->nargs == 1);
    pthread_mutex_lock(&tab_lock);
    entry(m->peer)->idx = (int)m->args[0];
    pthread_mutex_unlock(&tab_lock);
    return NETVM_AM_DONE;
}

struct echo_big {
    netvm_am_token_t token;
    unsigned         nargs;
    uint64_t         args[NETVM_AM_MAX_ARGS];
    size_t           len;
    uint8_t          buf[];
};

static void echo_landed(netvm_ctx_t *c, netvm_am_msg_t *m, netvm_status_t st, void *arg)
{
    (void)m;
    struct echo_big *e = arg;
    netvm_status_t r = netvm_am_reply(c, &e->token, st, e->args, e->nargs, st == NETVM_OK ? e->buf : NULL,
                                      st == NETVM_OK ? e->len : 0);
    if (r != NETVM_OK)
        say("ECHOFAIL %s\n", st_name(r));
    free(e);
}

static int h_echo(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token);
    uint64_t a[NETVM_AM_MAX_ARGS];
    for (unsigned i = 0; i < m->nargs; i++)
        a[i] = m->args[i] + 1;
    if (m->payload || !m->len) {
        netvm_status_t r = netvm_am_reply(c, &m->token, NETVM_OK, a, m->nargs, m->payload, m->len);
        if (r != NETVM_OK)
            say("ECHOFAIL %s\n", st_name(r));
        return NETVM_AM_DONE;
    }
    /* large: land it, then answer with it */
    struct echo_big *e = malloc(sizeof *e + m->len);
    CHECK(e);
    e->token = m->token;
    e->nargs = m->nargs;
    memcpy(e->args, a, sizeof a);
    e->len = m->len;
    CHECK_OK(netvm_am_recv(c, m, e->buf, echo_landed, e));
    return NETVM_AM_DONE;
}

static int h_ping(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    netvm_status_t st = netvm_am_send(c, m->peer, H_PONG, m->args, m->nargs, NULL, 0, NULL);
    if (st == NETVM_ERR_AGAIN)
        return NETVM_AM_DEFER;   /* no credit now: again later */
    if (st != NETVM_OK)
        say("PONGFAIL %d %s\n", m->peer, st_name(st));
    return NETVM_AM_DONE;
}

static int h_handle(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    uint64_t a[3] = { (uint64_t)(int64_t)anon_handle.rank, anon_handle.slot, anon_handle.key };
    CHECK_OK(netvm_am_reply(c, &m->token, NETVM_OK, a, 3, NULL, 0));
    return NETVM_AM_DONE;
}

static int h_slow(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    if (m->deferred < m->args[0])
        return NETVM_AM_DEFER;
    uint64_t a[1] = { m->deferred };
    CHECK_OK(netvm_am_reply(c, &m->token, NETVM_OK, a, 1, NULL, 0));
    return NETVM_AM_DONE;
}

static void sink_landed(netvm_ctx_t *c, netvm_am_msg_t *m, netvm_status_t st, void *arg)
{
    uint8_t *buf = arg;
    uint64_t a[2] = { st == NETVM_OK && pattern_ok(buf, m->len, (unsigned)m->args[0]), m->len };
    free(buf);
    netvm_status_t r = netvm_am_send(c, m->peer, H_SUNK, a, 2, NULL, 0, NULL);
    if (r != NETVM_OK)
        say("SUNKFAIL %d %s\n", m->peer, st_name(r));
}

static int h_sink(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    uint8_t *buf = malloc(m->len ? m->len : 1);
    CHECK(buf && m->nargs == 1);
    CHECK_OK(netvm_am_recv(c, m, buf, sink_landed, buf));
    return NETVM_AM_DONE;
}

static int h_big(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs == 2 && m->args[0] <= (64u << 20));
    size_t n = (size_t)m->args[0];
    uint8_t *buf = malloc(n ? n : 1);
    CHECK(buf);
    pattern(buf, n, (unsigned)m->args[1]);
    netvm_status_t r = netvm_am_reply(c, &m->token, NETVM_OK, m->args, 1, buf, n);
    free(buf);   /* a reply never references its payload after the call */
    if (r != NETVM_OK)
        say("BIGFAIL %d %s\n", m->peer, st_name(r));
    return NETVM_AM_DONE;
}

/* --- events and commands (main thread) --------------------------------------------- */

static netvm_status_t first(netvm_status_t a, netvm_status_t b) { return a != NETVM_OK ? a : b; }

static void poke(int id)
{
    pthread_mutex_lock(&tab_lock);
    struct speer *e = entry(id);
    netvm_rseg_t *r = e->cseg;
    pthread_mutex_unlock(&tab_lock);
    netvm_status_t st = NETVM_OK;
    if (!r) {
        st = netvm_import(ctx, id, SEG_CLIENT, &r);
        if (st == NETVM_OK) {
            pthread_mutex_lock(&tab_lock);
            entry(id)->cseg = r;
            pthread_mutex_unlock(&tab_lock);
        }
    }
    uint64_t v = POKE_MAGIC | (uint32_t)id;
    if (st == NETVM_OK) {
        uint64_t old = 0, got[2] = { 0, 0 };
        st = first(st, netvm_put(ctx, r, 0, &v, 8, 0));
        st = first(st, netvm_atomic(ctx, r, 8, NETVM_AOP_FADD, 1, 0, &old));
        st = first(st, netvm_get(ctx, got, r, 0, 16, 0));
        if (st == NETVM_OK && (got[0] != v || got[1] != old + 1))
            st = NETVM_ERR_SYS;
        uint64_t a[2] = { 7, (uint64_t)id };
        netvm_am_result_t res;
        st = first(st, netvm_am_request(ctx, id, H_CECHO, a, 2, NULL, 0, NULL, 0, &res, NULL));
        if (st == NETVM_OK && (res.status != NETVM_OK || res.nargs != 2 || res.args[0] != 8 ||
                               res.args[1] != (uint64_t)id + 1 || res.peer != id))
            st = NETVM_ERR_SYS;
    }
    say("POKE %d %s\n", id, st_name(st));
    uint64_t a[2] = { (uint64_t)st, v };
    netvm_am_send(ctx, id, H_POKED, a, 2, NULL, 0, NULL);
}

static void event(const netvm_event_t *ev)
{
    switch (ev->type) {
    case NETVM_EV_PEER_UP: {
        netvm_peer_info_t info = { 0 };
        netvm_status_t st = netvm_peer_info(ctx, ev->rank, &info);
        pthread_mutex_lock(&tab_lock);
        entry(ev->rank);
        pthread_mutex_unlock(&tab_lock);
        say("UP %d %llu %s %s\n", ev->rank, (unsigned long long)ev->value, st == NETVM_OK ? info.link : "?",
            st == NETVM_OK && !info.is_rank && info.alive ? "ok" : "bad-info");
        uint64_t a[2] = { (uint64_t)ev->rank, ev->value };
        st = netvm_am_send(ctx, ev->rank, H_WELCOME, a, 2, NULL, 0, NULL);
        if (st != NETVM_OK)
            say("WELCOMEFAIL %d %s\n", ev->rank, st_name(st));
        break;
    }
    case NETVM_EV_PEER_DOWN: {
        pthread_mutex_lock(&tab_lock);
        struct speer *e = entry(ev->rank);
        int idx = e->idx;
        netvm_rseg_t *r = e->cseg;
        e->cseg = NULL;
        pthread_mutex_unlock(&tab_lock);
        uint64_t last = 0, count = 0;
        if (idx >= 0 && idx < (int)MAX_CLIENTS) {
            last = __atomic_load_n((uint64_t *)(priv + (size_t)idx * CLIENT_AREA + W_LAST), __ATOMIC_ACQUIRE);
            count = __atomic_load_n((uint64_t *)(priv + (size_t)idx * CLIENT_AREA + W_COUNT), __ATOMIC_ACQUIRE);
        }
        /* an import of the peer that left: it fails now, and is released */
        const char *after = "none";
        if (r) {
            uint64_t v = 1;
            after = st_name(netvm_put(ctx, r, 16, &v, 8, 0));
            CHECK_OK(netvm_release(r));
        }
        say("DOWN %d %s %d %llu %llu %s\n", ev->rank, st_name((netvm_status_t)ev->status), idx,
            (unsigned long long)last, (unsigned long long)count, after);
        pthread_mutex_lock(&tab_lock);
        entry(ev->rank)->id = -1;
        pthread_mutex_unlock(&tab_lock);
        break;
    }
    case NETVM_EV_TRIPWIRE: {
        uint64_t off = ev->addr - (uint64_t)(uintptr_t)priv;
        say("TRIP %d %llu\n", ev->rank, (unsigned long long)off);
        uint64_t a[2] = { NETVM_EV_TRIPWIRE, off };
        netvm_am_send(ctx, ev->rank, H_SEEN, a, 2, NULL, 0, NULL);
        break;
    }
    case NETVM_EV_NOTIFY: {
        say("NOTIFY %d %llu\n", ev->rank, (unsigned long long)ev->value);
        if (ev->value == CMD_POKE)
            poke(ev->rank);
        uint64_t a[2] = { NETVM_EV_NOTIFY, ev->value };
        netvm_am_send(ctx, ev->rank, H_SEEN, a, 2, NULL, 0, NULL);
        break;
    }
    default:
        say("EVENT %u %d\n", ev->type, ev->rank);
        break;
    }
}

static void check_peer(int id)
{
    pthread_mutex_lock(&tab_lock);
    netvm_rseg_t *r = NULL;
    for (int i = 0; i < ntab; i++)
        if (tab[i].id == id)
            r = tab[i].cseg;
    pthread_mutex_unlock(&tab_lock);
    uint64_t v = 1, got;
    const char *put = "none", *get = "none", *atomic = "none";
    if (r) {
        put = st_name(netvm_put(ctx, r, 16, &v, 8, 0));
        get = st_name(netvm_get(ctx, &got, r, 16, 8, 0));
        atomic = st_name(netvm_atomic(ctx, r, 24, NETVM_AOP_FADD, 1, 0, &got));
    }
    netvm_rseg_t *r2 = NULL;
    netvm_status_t ist = netvm_import(ctx, id, SEG_CLIENT, &r2);
    if (ist == NETVM_OK)
        CHECK_OK(netvm_release(r2));
    netvm_status_t ast = netvm_am_send(ctx, id, H_PONG, &v, 1, NULL, 0, NULL);
    netvm_status_t nst = netvm_notify(ctx, id, 1);
    say("CHECK %d put=%s get=%s atomic=%s import=%s am=%s notify=%s\n", id, put, get, atomic, st_name(ist),
        st_name(ast), st_name(nst));
}

static int command(char *line)
{
    int id;
    if (!strcmp(line, "peers")) {
        say("PEERS %d\n", netvm_listener_peers(lis));
    } else if (!strcmp(line, "close")) {
        say("CLOSED %s\n", st_name(netvm_listener_close(lis)));
    } else if (sscanf(line, "check %d", &id) == 1) {
        check_peer(id);
    } else if (sscanf(line, "kick %d", &id) == 1) {
        say("KICKED %d %s\n", id, st_name(netvm_disconnect(ctx, id)));
    } else if (!strcmp(line, "stats")) {
        say("STATS %d %zu\n", count_fds(), heap_in_use());
    } else if (!strcmp(line, "quit")) {
        return 1;
    } else {
        FAILF("unknown command '%s'", line);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *addr = "tcp:127.0.0.1:0", *cred = "connect-test-credential-0123456789";
    int max_peers = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--addr") && i + 1 < argc)
            addr = argv[++i];
        else if (!strcmp(argv[i], "--max-peers") && i + 1 < argc)
            max_peers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cred") && i + 1 < argc)
            cred = argv[++i];
        else
            FAILF("usage: cserver [--addr A] [--max-peers N] [--cred S]");
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_OK(netvm_init(&ctx, NULL));
    check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 1);   /* a job of one */

    void *data;
    netvm_seg_t *s_data, *s_priv, *s_anon;
    CHECK_OK(netvm_alloc_shared(ctx, SEG_LEN, NETVM_RWA, SEG_DATA, &data, &s_data));
    priv = calloc(1, SEG_LEN);
    uint8_t *anon = calloc(1, ANON_LEN);
    CHECK(priv && anon);
    CHECK_OK(netvm_export(ctx, priv, SEG_LEN, NETVM_RWA, SEG_PRIV, &s_priv));
    CHECK_OK(netvm_export(ctx, anon, ANON_LEN, NETVM_RWA, NULL, &s_anon));
    CHECK_OK(netvm_seg_handle(s_anon, &anon_handle));
    netvm_tripwire_t *tw;
    CHECK_OK(netvm_tripwire_arm(ctx, priv + TRIP_OFF, TRIP_LEN, NETVM_TRIP_WRITE, 0x77, NULL, &tw));
    CHECK_OK(netvm_am_register(ctx, H_HELLO, h_hello, NULL));
    CHECK_OK(netvm_am_register(ctx, H_ECHO, h_echo, NULL));
    CHECK_OK(netvm_am_register(ctx, H_PING, h_ping, NULL));
    CHECK_OK(netvm_am_register(ctx, H_HANDLE, h_handle, NULL));
    CHECK_OK(netvm_am_register(ctx, H_SLOW, h_slow, NULL));
    CHECK_OK(netvm_am_register(ctx, H_SINK, h_sink, NULL));
    CHECK_OK(netvm_am_register(ctx, H_BIG, h_big, NULL));

    netvm_listen_opts_t o = { .credential = cred, .credential_len = strlen(cred), .max_peers = max_peers };
    CHECK_OK(netvm_listen(ctx, addr, &o, &lis));
    CHECK(netvm_listener_peers(lis) == 0);
    say("ADDR %s\n", netvm_listener_addr(lis));

    char buf[4096];
    size_t have = 0;
    int efd = netvm_evq_fd(ctx), quit = 0;
    CHECK(efd >= 0);
    while (!quit) {
        netvm_event_t ev[16];
        int n;
        while ((n = netvm_evq_poll(ctx, ev, 16)) > 0)
            for (int i = 0; i < n; i++)
                event(&ev[i]);
        CHECK(n == 0);
        /* commands waiting in the buffer first */
        char *nl;
        while (!quit && (nl = memchr(buf, '\n', have))) {
            *nl = 0;
            quit = command(buf);
            size_t used = (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, have - used);
            have -= used;
        }
        if (quit)
            break;
        netvm_status_t arm = netvm_evq_arm(ctx);
        if (arm == NETVM_ERR_AGAIN)
            continue;
        CHECK_OK(arm);
        struct pollfd pf[2] = { { .fd = 0, .events = POLLIN }, { .fd = efd, .events = POLLIN } };
        int r = poll(pf, 2, -1);
        CHECK(r > 0 || errno == EINTR);
        if (pf[0].revents) {
            ssize_t got = read(0, buf + have, sizeof buf - 1 - have);
            if (got <= 0)
                quit = 1;   /* the driver is gone */
            else
                have += (size_t)got;
        }
    }
    netvm_status_t st = netvm_finalize(ctx);
    say("BYE %s\n", st_name(st));
    free(priv);
    free(anon);
    return st == NETVM_OK ? 0 : 1;
}
