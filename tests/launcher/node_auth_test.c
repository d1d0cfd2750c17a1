/* The launchers' challenge-response fails closed: with HMAC-SHA-256 made to
 * fail (nv_hmac_fail_next), every check of a proof refuses, even a proof
 * that is right and even an all-zero one (what an unchecked, zero-filled
 * MAC would have matched):
 *   checks - nv_node_proof_check / nv_hub_proof_check directly;
 *   hub    - a real boot server (node 0) pumped in this thread, a node made
 *            by hand: the hub cannot check its proof, so it closes the
 *            connection without a WELCOME and the node is still waited for;
 *            the same node joins once HMAC works again;
 *   node   - nv_rendezvous_join against a fake hub in a thread: a node that
 *            cannot make its own proof, or cannot check the hub's, does not
 *            join; the same fake hub is joined when nothing is injected. */
#include "check.h"
#include "boot/io.h"
#include "boot/node_auth.h"
#include "boot/rendezvous.h"
#include "boot/server.h"
#include "util/hmac.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 5000
#define NLOCAL  1

static uint8_t secret[NV_BOOT_SECRET_LEN];
static const char job[] = "auth-test.1";

/* --- the checks alone --------------------------------------------------- */

static void checks(void)
{
    uint8_t hub_nonce[NV_BOOT_NONCE_LEN], node_nonce[NV_BOOT_NONCE_LEN];
    uint8_t right[NV_HMAC_SHA256_LEN], hub_right[NV_HMAC_SHA256_LEN], zero[NV_HMAC_SHA256_LEN] = { 0 };
    memset(hub_nonce, 0x11, sizeof hub_nonce);
    memset(node_nonce, 0x22, sizeof node_nonce);
    struct nv_node_params p = { .node = 1, .nnodes = 2, .nlocal = NLOCAL };
    CHECK(nv_node_proof(secret, hub_nonce, node_nonce, &p, right) == 0);
    CHECK(nv_hub_proof(secret, node_nonce, hub_nonce, &p, NETVM_OK, job, strlen(job), hub_right) == 0);

    CHECK(nv_node_proof_check(secret, hub_nonce, node_nonce, &p, right, sizeof right) == NV_PROOF_OK);
    CHECK(nv_node_proof_check(secret, hub_nonce, node_nonce, &p, zero, sizeof zero) == NV_PROOF_WRONG);
    CHECK(nv_node_proof_check(secret, hub_nonce, node_nonce, &p, right, sizeof right - 1) == NV_PROOF_WRONG);
    CHECK(nv_node_proof_check(secret, hub_nonce, node_nonce, &p, NULL, 0) == NV_PROOF_WRONG);

    nv_hmac_fail_next(1);
    CHECK(nv_node_proof_check(secret, hub_nonce, node_nonce, &p, right, sizeof right) == NV_PROOF_ERROR);
    nv_hmac_fail_next(1);
    CHECK(nv_node_proof_check(secret, hub_nonce, node_nonce, &p, zero, sizeof zero) == NV_PROOF_ERROR);
    nv_hmac_fail_next(1);
    CHECK(nv_hub_proof_check(secret, node_nonce, hub_nonce, &p, NETVM_OK, job, strlen(job), hub_right,
                             sizeof hub_right) == NV_PROOF_ERROR);
    nv_hmac_fail_next(1);
    CHECK(nv_hub_proof_check(secret, node_nonce, hub_nonce, &p, NETVM_OK, job, strlen(job), zero,
                             sizeof zero) == NV_PROOF_ERROR);
    /* making a proof fails too, and the hook is used up */
    nv_hmac_fail_next(1);
    uint8_t made[NV_HMAC_SHA256_LEN];
    CHECK(nv_node_proof(secret, hub_nonce, node_nonce, &p, made) == -1);
    CHECK(nv_hub_proof_check(secret, node_nonce, hub_nonce, &p, NETVM_OK, job, strlen(job), hub_right,
                             sizeof hub_right) == NV_PROOF_OK);
}

/* --- the hub's side: a real boot server ---------------------------------- */

static nv_boot_server_t *srv;

static void pump_until_readable(int fd)
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

/* The next message from the hub, or 0 at EOF; *frame is the caller's. */
static int hub_says(int fd, struct nv_boot_msg *m, uint8_t **frame)
{
    pump_until_readable(fd);
    const char *why = "";
    netvm_status_t st = nv_boot_recv_msg(fd, NV_BOOT_MAX_PAYLOAD, nv_boot_deadline(WAIT_MS), frame, m, &why);
    if (st == NETVM_ERR_BOOT && !strcmp(why, "connection closed"))
        return 0;
    CHECK_OK(st);
    return 1;
}

static int start_hub(void)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        CHECK(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(s, (struct sockaddr *)&sa, &len) == 0);
        int port = ntohs(sa.sin_port);
        close(s);
        char listen[32];
        snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
        struct nv_boot_server_opts o = { .size = 2 * NLOCAL, .job_id = job, .secret = secret,
                                         .hello_timeout_ms = 3000, .nnodes = 2, .node = 0,
                                         .nlocal = NLOCAL, .listen = listen };
        if (nv_boot_server_create(&srv, &o) == NETVM_OK)
            return port;
    }
    CHECK(!"no port to listen on");
    return -1;
}

/* Connect, take the challenge, send a right proof; with inject, HMAC fails
 * for the hub's next computation, which is its check of that proof.
 * Returns 1 if the hub welcomed the node, 0 if it closed the connection. */
static int node_tries(int port, int inject)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    struct nv_boot_msg m;
    uint8_t *frame;
    CHECK(hub_says(fd, &m, &frame) && m.type == NV_BOOT_MSG_CHALLENGE);
    uint8_t hub_nonce[NV_BOOT_NONCE_LEN], nonce[NV_BOOT_NONCE_LEN], proof[NV_HMAC_SHA256_LEN];
    memcpy(hub_nonce, m.u.challenge.nonce, sizeof hub_nonce);
    free(frame);
    memset(nonce, 0x5a, sizeof nonce);
    struct nv_node_params p = { .node = 1, .nnodes = 2, .nlocal = NLOCAL };
    CHECK(nv_node_proof(secret, hub_nonce, nonce, &p, proof) == 0);
    struct nv_boot_msg h = { .type = NV_BOOT_MSG_NODE_HELLO };
    h.u.node_hello.node = p.node;
    h.u.node_hello.nnodes = p.nnodes;
    h.u.node_hello.nlocal = p.nlocal;
    h.u.node_hello.auth = NV_BOOT_AUTH_HMAC;
    h.u.node_hello.nonce = nonce;
    h.u.node_hello.proof = proof;
    h.u.node_hello.proof_len = sizeof proof;
    if (inject)
        nv_hmac_fail_next(1);       /* this thread runs the hub too: its next HMAC is the check */
    const char *why = "";
    CHECK_OK(nv_boot_send_msg(fd, &h, nv_boot_deadline(WAIT_MS), &why));
    int welcomed = hub_says(fd, &m, &frame);
    if (welcomed) {
        CHECK(m.type == NV_BOOT_MSG_WELCOME && m.u.welcome.status == NETVM_OK);
        CHECK(nv_hub_proof_check(secret, nonce, hub_nonce, &p, NETVM_OK, job, strlen(job), m.u.welcome.proof,
                                 m.u.welcome.proof_len) == NV_PROOF_OK);
        free(frame);
    }
    close(fd);
    return welcomed;
}

static void hub(void)
{
    int port = start_hub();
    CHECK(node_tries(port, 1) == 0);
    CHECK(nv_boot_server_node_state(srv, 1) == NV_BOOT_NODE_WAITING);
    struct nv_boot_event ev;
    CHECK(!nv_boot_server_next_event(srv, &ev));
    /* the hub is unharmed: the same node, HMAC working, joins */
    CHECK(node_tries(port, 0) == 1);
    nv_boot_server_destroy(srv);
    srv = NULL;
}

/* --- the node's side: nv_rendezvous_join against a fake hub -------------- */

enum fake_mode {
    FAKE_HONEST,         /* a right WELCOME proof */
    FAKE_INJECT,         /* a right proof, and the node's check of it fails */
    FAKE_ZERO_INJECT,    /* an all-zero proof, and the node's check fails */
    FAKE_EXPECT_NOTHING, /* the node cannot make its proof: it must send none */
};

struct fake_hub {
    enum fake_mode mode;
    int lfd, port;
    int got_hello;
    pthread_t thread;
};

static void *fake_hub_main(void *arg)
{
    struct fake_hub *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    CHECK(fd >= 0);
    uint64_t deadline = nv_boot_deadline(WAIT_MS);
    const char *why = "";
    uint8_t hub_nonce[NV_BOOT_NONCE_LEN];
    memset(hub_nonce, 0xc3, sizeof hub_nonce);
    struct nv_boot_msg c = { .type = NV_BOOT_MSG_CHALLENGE };
    c.u.challenge.nonce = hub_nonce;
    CHECK_OK(nv_boot_send_msg(fd, &c, deadline, &why));
    uint8_t *frame;
    struct nv_boot_msg h;
    netvm_status_t st = nv_boot_recv_msg(fd, NV_BOOT_MAX_PAYLOAD, deadline, &frame, &h, &why);
    if (f->mode == FAKE_EXPECT_NOTHING) {
        CHECK(st == NETVM_ERR_BOOT && !strcmp(why, "connection closed"));
        close(fd);
        return NULL;
    }
    CHECK_OK(st);
    CHECK(h.type == NV_BOOT_MSG_NODE_HELLO);
    struct nv_node_params p = { .node = h.u.node_hello.node, .nnodes = h.u.node_hello.nnodes,
                                .nlocal = h.u.node_hello.nlocal, .flags = h.u.node_hello.flags };
    CHECK(nv_node_proof_check(secret, hub_nonce, h.u.node_hello.nonce, &p, h.u.node_hello.proof,
                              h.u.node_hello.proof_len) == NV_PROOF_OK);
    f->got_hello = 1;
    uint8_t proof[NV_HMAC_SHA256_LEN] = { 0 };
    if (f->mode != FAKE_ZERO_INJECT)
        CHECK(nv_hub_proof(secret, h.u.node_hello.nonce, hub_nonce, &p, NETVM_OK, job, strlen(job), proof) == 0);
    free(frame);
    /* the node is blocked reading this WELCOME: its next HMAC is the check */
    if (f->mode != FAKE_HONEST)
        nv_hmac_fail_next(1);
    struct nv_boot_msg w = { .type = NV_BOOT_MSG_WELCOME };
    w.u.welcome.status = NETVM_OK;
    w.u.welcome.job_id = job;
    w.u.welcome.job_id_len = (uint16_t)strlen(job);
    w.u.welcome.proof = proof;
    w.u.welcome.proof_len = sizeof proof;
    CHECK_OK(nv_boot_send_msg(fd, &w, deadline, &why));
    close(fd);
    return NULL;
}

static int fake_join(enum fake_mode mode, char *err, size_t errcap)
{
    struct fake_hub f = { .mode = mode };
    f.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    CHECK(f.lfd >= 0 && bind(f.lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(f.lfd, 4) == 0 &&
          getsockname(f.lfd, (struct sockaddr *)&sa, &len) == 0);
    CHECK(pthread_create(&f.thread, NULL, fake_hub_main, &f) == 0);
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sa.sin_port));
    struct nv_rendezvous_opts o = { .addr = addr, .node = 1, .nnodes = 2, .nlocal = NLOCAL, .secret = secret,
                                    .timeout_ms = WAIT_MS };
    struct nv_rendezvous r;
    if (mode == FAKE_EXPECT_NOTHING)
        nv_hmac_fail_next(1);       /* the node's first HMAC is its own proof */
    err[0] = 0;
    int rc = nv_rendezvous_join(&o, &r, err, errcap);
    CHECK(pthread_join(f.thread, NULL) == 0);
    close(f.lfd);
    if (rc == 0) {
        CHECK(!strcmp(r.job_id, job));
        close(r.fd);
    } else {
        CHECK(r.fd == -1);
    }
    CHECK(f.got_hello == (mode != FAKE_EXPECT_NOTHING));
    return rc;
}

static void node(void)
{
    char err[512];
    CHECK(fake_join(FAKE_HONEST, err, sizeof err) == 0);
    CHECK(fake_join(FAKE_INJECT, err, sizeof err) == -1);
    CHECK(strstr(err, "libcrypto failed") && strstr(err, "not joining"));
    CHECK(fake_join(FAKE_ZERO_INJECT, err, sizeof err) == -1);
    CHECK(strstr(err, "libcrypto failed") && strstr(err, "not joining"));
    CHECK(fake_join(FAKE_EXPECT_NOTHING, err, sizeof err) == -1);
    CHECK(strstr(err, "cannot make a proof"));
}

int main(void)
{
    alarm(60);
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (uint8_t)(i * 7 + 1);
    checks();
    hub();
    node();
    printf("node_auth: ok\n");
    return 0;
}
