/* The node launcher's side of the rendezvous (rendezvous.h). */
#include "boot/rendezvous.h"
#include "boot/io.h"
#include "boot/node_auth.h"
#include "util/random.h"
#include "util/time.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ATTEMPT_MS  2000    /* one connection attempt */
#define RETRY_MS    250     /* pause between attempts */

static int remaining_ms(uint64_t deadline)
{
    uint64_t now = nv_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

static void pause_ms(int ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Connected and challenged: 1; a failure worth another attempt: 0 (err
 * says what happened); a failure that another attempt will not mend: -1. */
static int attempt(const struct nv_rendezvous_opts *o, uint64_t deadline, int *fd_out,
                   uint8_t hub_nonce[NV_BOOT_NONCE_LEN], char *err, size_t errcap)
{
    int retry;
    int ms = remaining_ms(deadline);
    int fd = nv_boot_tcp_connect(o->addr, ms < ATTEMPT_MS ? ms : ATTEMPT_MS, &retry, err, errcap);
    if (fd < 0)
        return retry ? 0 : -1;
    nv_boot_tcp_tune(fd);
    uint8_t *frame;
    struct nv_boot_msg m;
    const char *why = "";
    netvm_status_t st = nv_boot_recv_msg(fd, NV_BOOT_WELCOME_MAX, deadline, &frame, &m, &why);
    if (st == NETVM_OK && m.type != NV_BOOT_MSG_CHALLENGE) {
        free(frame);
        st = NETVM_ERR_BOOT;
        why = "its first message was not a CHALLENGE";
    }
    if (st != NETVM_OK) {
        close(fd);
        snprintf(err, errcap, "%s did not greet this launcher as a netvm rendezvous: %s", o->addr, why);
        /* closed before a word: a hub busy with other connections, or one
         * just going away; anything else at that address is not a hub */
        return st == NETVM_ERR_BOOT && !strcmp(why, "connection closed") ? 0 : -1;
    }
    memcpy(hub_nonce, m.u.challenge.nonce, NV_BOOT_NONCE_LEN);
    free(frame);
    *fd_out = fd;
    return 1;
}

/* Prove ourselves, check the hub's proof, take the job id. */
static int authenticate(const struct nv_rendezvous_opts *o, struct nv_rendezvous *r, int fd,
                        const uint8_t hub_nonce[NV_BOOT_NONCE_LEN], uint64_t deadline,
                        char *err, size_t errcap)
{
    struct nv_node_params p = { .node = o->node, .nnodes = o->nnodes, .nlocal = o->nlocal, .flags = o->flags };
    uint8_t nonce[NV_BOOT_NONCE_LEN], proof[NV_HMAC_SHA256_LEN];
    if (nv_random_bytes(nonce, sizeof nonce) != 0) {
        snprintf(err, errcap, "cannot make a nonce: getrandom: %s", strerror(errno));
        return -1;
    }
    if (nv_node_proof(o->secret, hub_nonce, nonce, &p, proof) != 0) {
        snprintf(err, errcap, "cannot make a proof for node 0 at %s (libcrypto failed)", o->addr);
        return -1;
    }
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_NODE_HELLO };
    m.u.node_hello.node = o->node;
    m.u.node_hello.nnodes = o->nnodes;
    m.u.node_hello.nlocal = o->nlocal;
    m.u.node_hello.flags = o->flags;
    m.u.node_hello.auth = NV_BOOT_AUTH_HMAC;
    m.u.node_hello.nonce = nonce;
    m.u.node_hello.proof = proof;
    m.u.node_hello.proof_len = sizeof proof;
    const char *why = "";
    uint8_t *frame = NULL;
    struct nv_boot_msg w;
    netvm_status_t st = nv_boot_send_msg(fd, &m, deadline, &why);
    if (st == NETVM_OK)
        st = nv_boot_recv_msg(fd, NV_BOOT_WELCOME_MAX, deadline, &frame, &w, &why);
    if (st == NETVM_ERR_BOOT && !strcmp(why, "connection closed")) {
        /* the hub closes on a proof it cannot verify, without a word;
         * it may also just have been going away */
        snprintf(err, errcap, "node 0 at %s refused this launcher's proof (or went away): was every node "
                 "given the same secret?", o->addr);
        return -1;
    }
    if (st != NETVM_OK) {
        snprintf(err, errcap, "authenticating with node 0 at %s: %s", o->addr, why);
        return -1;
    }
    int rc = -1;
    enum nv_proof_check ck = NV_PROOF_WRONG;
    if (w.type == NV_BOOT_MSG_WELCOME)
        ck = nv_hub_proof_check(o->secret, nonce, hub_nonce, &p, w.u.welcome.status, w.u.welcome.job_id,
                                w.u.welcome.job_id_len, w.u.welcome.proof, w.u.welcome.proof_len);
    if (w.type != NV_BOOT_MSG_WELCOME) {
        snprintf(err, errcap, "node 0 at %s answered with %s", o->addr, nv_boot_msg_type_name(w.type));
    } else if (ck == NV_PROOF_ERROR) {
        snprintf(err, errcap, "cannot check the proof of the launcher at %s (libcrypto failed); not joining it",
                 o->addr);
    } else if (ck != NV_PROOF_OK) {
        snprintf(err, errcap, "the launcher at %s could not prove that it holds the job secret; not joining it",
                 o->addr);
    } else if (w.u.welcome.status != NETVM_OK) {
        snprintf(err, errcap, "node 0 at %s refused node %d: %.*s", o->addr, o->node,
                 (int)w.u.welcome.text_len, w.u.welcome.text);
    } else {
        memcpy(r->job_id, w.u.welcome.job_id, w.u.welcome.job_id_len);
        r->job_id[w.u.welcome.job_id_len] = 0;
        rc = 0;
    }
    free(frame);
    return rc;
}

int nv_rendezvous_join(const struct nv_rendezvous_opts *o, struct nv_rendezvous *r, char *err, size_t errcap)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    uint64_t deadline = nv_boot_deadline(o->timeout_ms);
    char last[256] = "";
    for (;;) {
        int fd = -1;
        uint8_t hub_nonce[NV_BOOT_NONCE_LEN];
        int rc = attempt(o, deadline, &fd, hub_nonce, last, sizeof last);
        if (rc < 0) {
            snprintf(err, errcap, "%s", last);
            return -1;
        }
        if (rc > 0) {
            if (authenticate(o, r, fd, hub_nonce, deadline, err, errcap) != 0) {
                close(fd);
                return -1;
            }
            r->fd = fd;
            nv_boot_tcp_local_ip(fd, r->local_ip, sizeof r->local_ip);
            return 0;
        }
        int left = remaining_ms(deadline);
        if (left == 0) {
            snprintf(err, errcap, "could not reach node 0 within %.3g s (%s)", o->timeout_ms / 1000.0, last);
            return -1;
        }
        pause_ms(left < RETRY_MS ? left : RETRY_MS);
    }
}

int nv_rendezvous_wait_start(struct nv_rendezvous *r, int timeout_ms, int *code, char *err, size_t errcap)
{
    *code = 1;
    uint8_t *frame = NULL;
    struct nv_boot_msg m;
    const char *why = "";
    netvm_status_t st = nv_boot_recv_msg(r->fd, NV_BOOT_WELCOME_MAX, nv_boot_deadline(timeout_ms), &frame, &m, &why);
    int rc = -1;
    if (st == NETVM_ERR_TIMEOUT)
        snprintf(err, errcap, "node 0 did not start the job within %.3g s of this node joining", timeout_ms / 1000.0);
    else if (st != NETVM_OK)
        snprintf(err, errcap, "lost node 0 while waiting for the other nodes: %s", why);
    else if (m.type == NV_BOOT_MSG_START)
        rc = 0;
    else if (m.type == NV_BOOT_MSG_ABORT) {
        snprintf(err, errcap, "node 0 ended the job before it started: %.*s", (int)m.u.report.text_len,
                 m.u.report.text);
        *code = m.u.report.code;
    } else
        snprintf(err, errcap, "node 0 sent %s while the nodes were joining", nv_boot_msg_type_name(m.type));
    free(frame);
    if (rc != 0) {
        close(r->fd);
        r->fd = -1;
    }
    return rc;
}
