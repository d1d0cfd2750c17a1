/* The process side of bootstrap (boot.h): identity from the environment the
 * launcher set, and the collectives as request/reply over one unix-socket
 * connection to the launcher's boot server (src/boot/server.c).
 *
 * The connection stays open for the life of the handle: the server reads its
 * close without a BYE as this process's death, which is how the survivors'
 * collectives learn of it instead of hanging. */
#define _GNU_SOURCE   /* SO_PEERCRED, struct ucred */
#include "boot/boot.h"
#include "boot/io.h"
#include "boot/pmix.h"
#include "boot/secret.h"
#include "util/config.h"
#include "util/log.h"
#include "util/random.h"
#include "util/time.h"
#include "wire/boot_msg.h"

#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct nv_boot {
    int      rank;
    int      size;
    int      fd;            /* -1: a singleton or PMIx, no launcher socket */
    struct nv_boot_pmix *pmix;  /* started by a PMIx server (pmix.h): collectives are fences */
    int      timeout_ms;    /* < 0: waits are unbounded */
    uint32_t seq;           /* collectives entered so far */
    int      broken;        /* a timeout or protocol error left the stream out of step */
    int      dead_rank;     /* reported by the last collective, else -1 */
    char     job_id[NV_BOOT_JOB_ID_MAX + 1];
    uint8_t  secret[NV_BOOT_SECRET_LEN];
    void   (*idle)(void *arg);  /* run while a collective waits (see nv_boot_set_idle) */
    void    *idle_arg;
};

void nv_boot_set_idle(nv_boot_t *b, void (*fn)(void *arg), void *arg)
{
    if (b) {
        b->idle = fn;
        b->idle_arg = arg;
    }
}

/* Until the launcher's answer is readable, run the idle hook every
 * millisecond (a process without a progress thread serves its peers). */
static netvm_status_t wait_answer(nv_boot_t *b, uint64_t deadline)
{
    if (!b->idle)
        return NETVM_OK;
    for (;;) {
        b->idle(b->idle_arg);
        uint64_t slice = nv_now_ns() + 1000000ull;
        netvm_status_t st = nv_boot_wait_fd(b->fd, POLLIN, deadline && deadline < slice ? deadline : slice);
        if (st != NETVM_ERR_TIMEOUT)
            return st;
        if (deadline && nv_now_ns() >= deadline)
            return st;
    }
}

/* --- environment ------------------------------------------------------ */

static netvm_status_t env_int(const char *name, long lo, long hi, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        nv_error("bootstrap: %s is not set (start the program with `netvm run`)", name);
        return NETVM_ERR_BOOT;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        nv_error("bootstrap: %s=%s is not an integer in [%ld, %ld]", name, v, lo, hi);
        return NETVM_ERR_BOOT;
    }
    *out = (int)x;
    return NETVM_OK;
}

/* The job secret leaves the environment when it is first read, so that
 * nothing this process starts (a shell, a compiler, any child) inherits the
 * job's key. A process may open bootstrap again (netvm_init after
 * netvm_finalize): it finds the secret here. A NETVM_SECRET set since then
 * replaces it. */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t kept_secret[NV_BOOT_SECRET_LEN];
static int kept;

static netvm_status_t env_secret(uint8_t out[NV_BOOT_SECRET_LEN])
{
    uint8_t s[NV_BOOT_SECRET_LEN];
    pthread_mutex_lock(&kept_lock);
    int rc = nv_secret_take_env(s);
    if (rc == 0) {
        memcpy(kept_secret, s, sizeof s);
        kept = 1;
    }
    int ok = rc == 0 || (rc < 0 && kept);
    if (ok)
        memcpy(out, kept_secret, sizeof kept_secret);
    pthread_mutex_unlock(&kept_lock);
    explicit_bzero(s, sizeof s);
    if (!ok) {
        if (rc < 0)
            nv_error("bootstrap: NETVM_SECRET is not set (start the program with `netvm run`)");
        else
            nv_error("bootstrap: NETVM_SECRET must be %d hex digits", NV_BOOT_SECRET_HEX_LEN);
        return NETVM_ERR_BOOT;
    }
    return NETVM_OK;
}

static netvm_status_t env_job_id(char out[NV_BOOT_JOB_ID_MAX + 1])
{
    const char *v = getenv("NETVM_JOB_ID");
    if (!v || !nv_boot_job_id_valid(v, strlen(v))) {
        nv_error("bootstrap: NETVM_JOB_ID is missing or malformed");
        return NETVM_ERR_BOOT;
    }
    snprintf(out, NV_BOOT_JOB_ID_MAX + 1, "%s", v);
    return NETVM_OK;
}

/* --- messages to and from the launcher ------------------------------- */

static uint64_t deadline_of(int timeout_ms)
{
    return nv_boot_deadline(timeout_ms);
}

static void log_io_error(const char *what, netvm_status_t st, const char *why)
{
    if (st == NETVM_ERR_BOOT)
        nv_error("bootstrap: %s the launcher: %s", what, why);
    else if (st != NETVM_ERR_TIMEOUT)     /* a timeout is reported by the caller */
        nv_error("bootstrap: %s the launcher: %s (%s)", what, netvm_strerror(st), why);
}

/* Encode and send one message. */
static netvm_status_t send_msg(nv_boot_t *b, const struct nv_boot_msg *m, uint64_t deadline)
{
    const char *why = "";
    netvm_status_t st = nv_boot_send_msg(b->fd, m, deadline, &why);
    if (st != NETVM_OK)
        log_io_error("sending to", st, why);
    return st;
}

/* Receive one message; *frame holds its bytes (m points into it) and is the
 * caller's to free. */
static netvm_status_t recv_msg(nv_boot_t *b, uint64_t deadline, uint8_t **frame,
                               struct nv_boot_msg *m)
{
    const char *why = "";
    netvm_status_t st = nv_boot_recv_msg(b->fd, NV_BOOT_MAX_PAYLOAD, deadline, frame, m, &why);
    if (st != NETVM_OK)
        log_io_error("receiving from", st, why);
    return st;
}

/* --- connecting -------------------------------------------------------- */

static netvm_status_t connect_unix(const char *path, uint64_t deadline, int *out)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) {
        nv_error("bootstrap: socket path too long: %s", path);
        return NETVM_ERR_INVAL;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        nv_error("bootstrap: socket: %s", strerror(errno));
        return NETVM_ERR_SYS;
    }
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        if (errno == EINTR)
            continue;
        /* A unix connect fails with EAGAIN only while the listener's backlog
         * is full (a thousand ranks starting at once): back off briefly. */
        if (errno == EAGAIN && (!deadline || nv_now_ns() < deadline)) {
            usleep(2000);
            continue;
        }
        nv_error("bootstrap: cannot reach the launcher at unix:%s: %s", path, strerror(errno));
        close(fd);
        return errno == EAGAIN ? NETVM_ERR_TIMEOUT : NETVM_ERR_BOOT;
    }
    /* Only a process of our own user may hear the secret. */
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
        nv_error("bootstrap: the socket unix:%s is not served by this user's launcher", path);
        close(fd);
        return NETVM_ERR_BOOT;
    }
    *out = fd;
    return NETVM_OK;
}

/* "unix:PATH": always the launcher of this host, even in a job across
 * hosts (it relays to node 0's). "tcp:" stays reserved: a process that
 * reached a launcher over the network would need the launchers'
 * challenge-response, which processes do not speak. */
static netvm_status_t connect_addr(const char *addr, uint64_t deadline, int *fd)
{
    if (strncmp(addr, "unix:", 5) == 0 && addr[5])
        return connect_unix(addr + 5, deadline, fd);
    if (strncmp(addr, "tcp:", 4) == 0) {
        nv_error("bootstrap: %s: processes reach their launcher over a unix socket only", addr);
        return NETVM_ERR_UNSUPPORTED;
    }
    nv_error("bootstrap: cannot parse the address '%s' (expected unix:PATH)", addr);
    return NETVM_ERR_INVAL;
}

static netvm_status_t hello(nv_boot_t *b, uint64_t deadline)
{
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_HELLO };
    m.u.hello.rank = b->rank;
    m.u.hello.size = b->size;
    m.u.hello.auth = NV_BOOT_AUTH_SECRET;
    m.u.hello.job_id = b->job_id;
    m.u.hello.job_id_len = (uint16_t)strlen(b->job_id);
    m.u.hello.proof = b->secret;
    m.u.hello.proof_len = NV_BOOT_SECRET_LEN;
    netvm_status_t st = send_msg(b, &m, deadline);
    if (st != NETVM_OK)
        return st;
    uint8_t *frame;
    struct nv_boot_msg r;
    st = recv_msg(b, deadline, &frame, &r);
    if (st != NETVM_OK)
        return st;
    if (r.type != NV_BOOT_MSG_RESULT) {
        nv_error("bootstrap: the launcher answered HELLO with %s", nv_boot_msg_type_name(r.type));
        st = NETVM_ERR_BOOT;
    } else if (r.u.result.status != NETVM_OK) {
        nv_error("bootstrap: the launcher refused rank %d: %s", b->rank, netvm_strerror(r.u.result.status));
        st = r.u.result.status;
    }
    free(frame);
    return st;
}

static netvm_status_t open_singleton(nv_boot_t *b, int alone)
{
    const char *size = getenv("NETVM_SIZE");
    if (!alone && size && *size && strcmp(size, "1") != 0) {
        nv_error("bootstrap: NETVM_SIZE=%s but NETVM_BOOT is not set", size);
        return NETVM_ERR_BOOT;
    }
    uint8_t id[8];
    if (nv_random_bytes(b->secret, sizeof b->secret) != 0 || nv_random_bytes(id, sizeof id) != 0) {
        nv_error("bootstrap: getrandom: %s", strerror(errno));
        return NETVM_ERR_SYS;
    }
    int n = snprintf(b->job_id, sizeof b->job_id, "single-");
    for (size_t i = 0; i < sizeof id; i++)
        n += snprintf(b->job_id + n, sizeof b->job_id - (size_t)n, "%02x", id[i]);
    b->rank = 0;
    b->size = 1;
    return NETVM_OK;
}

static struct nv_boot_pmix_wait pmix_wait(const nv_boot_t *b)
{
    return (struct nv_boot_pmix_wait){ .timeout_ms = b->timeout_ms, .idle = b->idle, .idle_arg = b->idle_arg };
}

static netvm_status_t open_pmix(nv_boot_t *b)
{
    struct nv_boot_pmix_wait w = pmix_wait(b);
    return nv_boot_pmix_open(&b->pmix, &w, &b->rank, &b->size, b->job_id, b->secret);
}

static netvm_status_t open_member(nv_boot_t *b, const char *addr)
{
    netvm_status_t st;
    /* the secret first: it leaves the environment even if the rest is wrong */
    if ((st = env_secret(b->secret)) ||
        (st = env_int("NETVM_SIZE", 1, NV_BOOT_MAX_RANKS, &b->size)) ||
        (st = env_int("NETVM_RANK", 0, b->size - 1, &b->rank)) ||
        (st = env_job_id(b->job_id)))
        return st;
    uint64_t deadline = deadline_of(b->timeout_ms);
    if ((st = connect_addr(addr, deadline, &b->fd)))
        return st;
    return hello(b, deadline);
}

netvm_status_t nv_boot_open(nv_boot_t **boot, const char *addr, int timeout_ms)
{
    if (!boot)
        return NETVM_ERR_INVAL;
    *boot = NULL;
    nv_boot_t *b = calloc(1, sizeof *b);
    if (!b)
        return NETVM_ERR_NOMEM;
    b->fd = -1;
    b->dead_rank = -1;
    b->timeout_ms = timeout_ms ? timeout_ms : (int)nv_config_long("NETVM_TIMEOUT", 1, 86400000);
    int alone = addr && strcmp(addr, "none") == 0;   /* a private context: a job of one, whatever the environment says */
    if (!addr)
        addr = getenv("NETVM_BOOT");
    /* the netvm launcher first: a `netvm run` under mpirun is its own job */
    netvm_status_t st = alone                   ? open_singleton(b, 1)
                        : addr && *addr         ? open_member(b, addr)
                        : nv_boot_pmix_started() ? open_pmix(b)
                                                 : open_singleton(b, 0);
    if (st != NETVM_OK) {
        b->broken = 1;      /* no BYE from a process that never joined */
        nv_boot_close(b);
        return st;
    }
    nv_debug("bootstrap: rank %d of %d, job %s%s", b->rank, b->size, b->job_id, b->pmix ? " (PMIx)" : "");
    *boot = b;
    return NETVM_OK;
}

void nv_boot_close(nv_boot_t *b)
{
    if (!b)
        return;
    if (b->fd >= 0) {
        if (!b->broken) {
            /* best effort and brief: a launcher that is gone changes nothing */
            struct nv_boot_msg bye = { .type = NV_BOOT_MSG_BYE };
            (void)send_msg(b, &bye, deadline_of(1000));
        }
        close(b->fd);
    }
    nv_boot_pmix_close(b->pmix);
    explicit_bzero(b->secret, sizeof b->secret);
    free(b);
}

int nv_boot_rank(const nv_boot_t *b) { return b ? b->rank : -1; }
int nv_boot_size(const nv_boot_t *b) { return b ? b->size : 0; }
const char *nv_boot_job_id(const nv_boot_t *b) { return b ? b->job_id : NULL; }
const uint8_t *nv_boot_secret(const nv_boot_t *b) { return b ? b->secret : NULL; }
int nv_boot_dead_rank(const nv_boot_t *b) { return b ? b->dead_rank : -1; }

/* --- collectives -------------------------------------------------------- */

/* Send a collective request and wait for its reply, checking that the reply
 * answers this request. *frame is the caller's to free on NETVM_OK. */
static netvm_status_t exchange(nv_boot_t *b, const struct nv_boot_msg *req, uint16_t want,
                               uint8_t **frame, struct nv_boot_msg *r)
{
    if (b->broken) {
        nv_error("bootstrap: an earlier collective failed midway; the connection is unusable");
        return NETVM_ERR_STATE;
    }
    uint64_t deadline = deadline_of(b->timeout_ms);
    netvm_status_t st = send_msg(b, req, deadline);
    if (st == NETVM_OK)
        st = wait_answer(b, deadline);
    if (st == NETVM_OK)
        st = recv_msg(b, deadline, frame, r);
    if (st == NETVM_OK && r->type == NV_BOOT_MSG_RESULT && r->u.result.status != NETVM_OK) {
        /* the server's way of refusing a request before closing */
        nv_error("bootstrap: the launcher refused %s: %s", nv_boot_msg_type_name(req->type),
                 netvm_strerror(r->u.result.status));
        st = r->u.result.status;
        free(*frame);
    } else if (st == NETVM_OK && (r->type != want || r->u.result.seq != req->u.coll.seq)) {
        nv_error("bootstrap: expected %s #%u, the launcher sent %s #%u", nv_boot_msg_type_name(want),
                 req->u.coll.seq, nv_boot_msg_type_name(r->type), r->u.result.seq);
        st = NETVM_ERR_BOOT;
        free(*frame);
    }
    if (st != NETVM_OK) {
        /* a reply may still be on its way, or half a request was sent: the
         * stream cannot be trusted to line up again */
        b->broken = 1;
        if (st == NETVM_ERR_TIMEOUT)
            nv_error("bootstrap: %s timed out after %d ms", nv_boot_msg_type_name(req->type), b->timeout_ms);
        return st;
    }
    b->dead_rank = r->u.result.dead_rank;
    return NETVM_OK;
}

netvm_status_t nv_boot_allgather(nv_boot_t *b, const void *mine, size_t len, void *all)
{
    if (!b || (len && (!mine || !all)))
        return NETVM_ERR_INVAL;
    b->dead_rank = -1;
    if (b->pmix) {
        struct nv_boot_pmix_wait w = pmix_wait(b);
        return nv_boot_pmix_allgather(b->pmix, &w, mine, len, all, &b->dead_rank);
    }
    if (b->fd < 0) {
        if (len)
            memmove(all, mine, len);
        return NETVM_OK;
    }
    /* The whole result travels in one frame. */
    if ((uint64_t)len * (uint64_t)b->size > NV_BOOT_MAX_PAYLOAD - 64) {
        nv_error("bootstrap: allgather of %zu bytes x %d ranks exceeds %u bytes", len, b->size,
                 NV_BOOT_MAX_PAYLOAD - 64);
        return NETVM_ERR_INVAL;
    }
    struct nv_boot_msg req = { .type = NV_BOOT_MSG_ALLGATHER };
    req.u.coll.seq = ++b->seq;
    req.u.coll.len = (uint32_t)len;
    req.u.coll.data = mine;
    uint8_t *frame;
    struct nv_boot_msg r;
    netvm_status_t st = exchange(b, &req, NV_BOOT_MSG_ALLGATHER_RESULT, &frame, &r);
    if (st != NETVM_OK)
        return st;
    if (r.u.result.status != NETVM_OK && r.u.result.each == 0) {
        /* the collective failed as a whole (ranks disagreed on it): no data */
        st = r.u.result.status;
        free(frame);
        return st;
    }
    if (r.u.result.count != (uint32_t)b->size || r.u.result.each != len) {
        nv_error("bootstrap: allgather result of %u x %u bytes, expected %d x %zu",
                 r.u.result.count, r.u.result.each, b->size, len);
        free(frame);
        b->broken = 1;
        return NETVM_ERR_BOOT;
    }
    if (len)
        memcpy(all, r.u.result.data, len * (size_t)b->size);
    st = r.u.result.status;
    free(frame);
    return st;
}

netvm_status_t nv_boot_barrier(nv_boot_t *b)
{
    if (!b)
        return NETVM_ERR_INVAL;
    b->dead_rank = -1;
    if (b->pmix) {
        struct nv_boot_pmix_wait w = pmix_wait(b);
        return nv_boot_pmix_barrier(b->pmix, &w, &b->dead_rank);
    }
    if (b->fd < 0)
        return NETVM_OK;
    struct nv_boot_msg req = { .type = NV_BOOT_MSG_BARRIER };
    req.u.coll.seq = ++b->seq;
    uint8_t *frame;
    struct nv_boot_msg r;
    netvm_status_t st = exchange(b, &req, NV_BOOT_MSG_BARRIER_DONE, &frame, &r);
    if (st != NETVM_OK)
        return st;
    st = r.u.result.status;
    free(frame);
    return st;
}
