/* The boot server driven directly, with hand-made clients speaking the wire
 * format on raw sockets, all in one thread (the server never blocks, so the
 * test pumps it while it waits for replies):
 *   - garbage, oversized frames, wrong secrets, wrong job ids, duplicate
 *     ranks and silent connections are refused, and the job is unharmed;
 *   - allgather and barrier give every rank the right answer;
 *   - a rank that dies (or leaves, or is reported gone by the launcher)
 *     ends the collective for everyone with NETVM_ERR_PEER, zero-filled;
 *   - mismatched collectives and protocol errors fail instead of hanging. */
#include "check.h"
#include "boot/server.h"
#include "util/time.h"
#include "wire/boot_msg.h"
#include "wire/endian.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define WAIT_MS 5000

static nv_boot_server_t *srv;
static uint8_t secret[NV_BOOT_SECRET_LEN];
static const char job[] = "test-job.1";

static void start(int size, int hello_ms)
{
    struct nv_boot_server_opts o = { .size = size, .job_id = job, .secret = secret,
                                     .hello_timeout_ms = hello_ms };
    CHECK_OK(nv_boot_server_create(&srv, &o));
    const char *addr = nv_boot_server_addr(srv);
    CHECK(strncmp(addr, "unix:", 5) == 0);
    /* the socket lives in a directory only its owner may enter */
    char dir[128];
    snprintf(dir, sizeof dir, "%s", addr + 5);
    *strrchr(dir, '/') = 0;
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
}

static void stop(void)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s", nv_boot_server_addr(srv) + 5);
    *strrchr(dir, '/') = 0;
    nv_boot_server_destroy(srv);
    srv = NULL;
    struct stat st;
    CHECK(stat(dir, &st) != 0 && errno == ENOENT);   /* cleaned up */
}

/* Run the server for ms milliseconds. */
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

/* Run the server until fd is readable. */
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

/* 1 with n bytes read, 0 at EOF. */
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

static int try_connect(void)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", nv_boot_server_addr(srv) + 5);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int raw_connect(void)
{
    int fd = try_connect();
    CHECK(fd >= 0);
    return fd;
}

static int dir_exists(void)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s", nv_boot_server_addr(srv) + 5);
    *strrchr(dir, '/') = 0;
    struct stat st;
    return stat(dir, &st) == 0;
}

static void raw_send(int fd, const void *buf, size_t len)
{
    CHECK(send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
}

static void send_msg(int fd, const struct nv_boot_msg *m)
{
    uint8_t buf[4096];
    size_t n = nv_boot_msg_encode(m, buf, sizeof buf);
    CHECK(n > 0);
    raw_send(fd, buf, n);
}

/* The next message on fd (its payload in *frame, to free), or 0 at EOF. */
static int recv_msg(int fd, struct nv_boot_msg *m, uint8_t **frame)
{
    uint8_t hdr[NV_BOOT_HDR_LEN];
    if (!read_exact(fd, hdr, sizeof hdr))
        return 0;
    struct nv_boot_hdr h;
    const char *why;
    CHECK(nv_boot_hdr_decode(hdr, sizeof hdr, NV_BOOT_MAX_PAYLOAD, &h, &why) == NV_BOOT_RC_OK);
    *frame = malloc(h.len + 1);
    CHECK(read_exact(fd, *frame, h.len));
    CHECK(nv_boot_payload_decode(h.type, *frame, h.len, m, &why) == NV_BOOT_RC_OK);
    return 1;
}

/* The server closes fd, possibly after a RESULT carrying a refusal. */
static void expect_closed(int fd, int with_refusal)
{
    struct nv_boot_msg m;
    uint8_t *frame = NULL;
    int got = recv_msg(fd, &m, &frame);
    if (with_refusal) {
        CHECK(got == 1);
        CHECK(m.type == NV_BOOT_MSG_RESULT && m.u.result.status == NETVM_ERR_BOOT);
        free(frame);
        got = recv_msg(fd, &m, &frame);
    }
    CHECK(got == 0);
    close(fd);
}

static struct nv_boot_msg hello_msg(int rank, int size)
{
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_HELLO };
    m.u.hello.rank = rank;
    m.u.hello.size = size;
    m.u.hello.auth = NV_BOOT_AUTH_SECRET;
    m.u.hello.job_id = job;
    m.u.hello.job_id_len = (uint16_t)strlen(job);
    m.u.hello.proof = secret;
    m.u.hello.proof_len = NV_BOOT_SECRET_LEN;
    return m;
}

/* A rank that authenticates. */
static int join(int rank, int size)
{
    int fd = raw_connect();
    struct nv_boot_msg m = hello_msg(rank, size), r;
    send_msg(fd, &m);
    uint8_t *frame;
    CHECK(recv_msg(fd, &r, &frame) == 1);
    CHECK(r.type == NV_BOOT_MSG_RESULT && r.u.result.status == NETVM_OK);
    free(frame);
    CHECK(nv_boot_server_rank_state(srv, rank) == NV_BOOT_RANK_ACTIVE);
    return fd;
}

static void enter_barrier(int fd, uint32_t seq)
{
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_BARRIER };
    m.u.coll.seq = seq;
    send_msg(fd, &m);
}

static void enter_allgather(int fd, uint32_t seq, const void *data, uint32_t len)
{
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_ALLGATHER };
    m.u.coll.seq = seq;
    m.u.coll.len = len;
    m.u.coll.data = data;
    send_msg(fd, &m);
}

static void expect_done(int fd, uint32_t seq, netvm_status_t st, int dead)
{
    struct nv_boot_msg r;
    uint8_t *frame;
    CHECK(recv_msg(fd, &r, &frame) == 1);
    CHECK(r.type == NV_BOOT_MSG_BARRIER_DONE);
    CHECK(r.u.result.seq == seq);
    CHECK(r.u.result.status == st);
    CHECK(r.u.result.dead_rank == dead);
    free(frame);
}

/* No reply may be waiting on fd. */
static void expect_quiet(int fd)
{
    pump(50);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    CHECK(poll(&p, 1, 0) == 0);
}

/* --- the scenarios -------------------------------------------------------- */

static void refuses_bad_clients(void)
{
    start(2, 300);
    int r0 = join(0, 2);

    /* text instead of a frame */
    int fd = raw_connect();
    raw_send(fd, "GET / HTTP/1.0\r\n\r\n", 18);
    expect_closed(fd, 0);

    /* a valid header announcing a payload far larger than a HELLO */
    fd = raw_connect();
    uint8_t hdr[NV_BOOT_HDR_LEN];
    nv_put32(hdr, NV_BOOT_MAGIC);
    nv_put16(hdr + 4, NV_BOOT_VERSION);
    nv_put16(hdr + 6, NV_BOOT_MSG_HELLO);
    nv_put32(hdr + 8, 1u << 24);
    raw_send(fd, hdr, sizeof hdr);
    expect_closed(fd, 0);

    /* a collective before authenticating */
    fd = raw_connect();
    enter_barrier(fd, 1);
    expect_closed(fd, 1);

    /* wrong secret, wrong job id, wrong size, a rank already taken */
    struct nv_boot_msg m = hello_msg(1, 2);
    uint8_t wrong[NV_BOOT_SECRET_LEN];
    memcpy(wrong, secret, sizeof wrong);
    wrong[31] ^= 1;
    m.u.hello.proof = wrong;
    fd = raw_connect();
    send_msg(fd, &m);
    expect_closed(fd, 1);

    m = hello_msg(1, 2);
    m.u.hello.proof_len = 16;
    fd = raw_connect();
    send_msg(fd, &m);
    expect_closed(fd, 1);

    m = hello_msg(1, 2);
    m.u.hello.job_id = "other-job";
    m.u.hello.job_id_len = 9;
    fd = raw_connect();
    send_msg(fd, &m);
    expect_closed(fd, 1);

    m = hello_msg(1, 3);
    fd = raw_connect();
    send_msg(fd, &m);
    expect_closed(fd, 1);

    m = hello_msg(0, 2);
    fd = raw_connect();
    send_msg(fd, &m);
    expect_closed(fd, 1);

    /* a connection that never speaks is dropped after hello_timeout_ms */
    fd = raw_connect();
    uint64_t t0 = nv_now_ns();
    expect_closed(fd, 0);
    CHECK(nv_now_ns() - t0 >= 250 * 1000000ull);

    /* a header trickling in byte by byte is fine */
    fd = raw_connect();
    m = hello_msg(1, 2);
    uint8_t buf[256];
    size_t n = nv_boot_msg_encode(&m, buf, sizeof buf);
    for (size_t i = 0; i < n; i++) {
        raw_send(fd, buf + i, 1);
        pump(1);
    }
    struct nv_boot_msg r;
    uint8_t *frame;
    CHECK(recv_msg(fd, &r, &frame) == 1 && r.u.result.status == NETVM_OK);
    free(frame);
    int r1 = fd;

    /* none of it harmed the job */
    CHECK(nv_boot_server_rank_state(srv, 0) == NV_BOOT_RANK_ACTIVE);
    CHECK(nv_boot_server_first_dead(srv) == -1);
    enter_barrier(r0, 1);
    expect_quiet(r0);
    enter_barrier(r1, 1);
    expect_done(r0, 1, NETVM_OK, -1);
    expect_done(r1, 1, NETVM_OK, -1);
    close(r0);
    close(r1);
    stop();
}

static void collectives(void)
{
    enum { N = 4, ROUNDS = 5 };
    start(N, 0);
    int fd[N];
    for (int r = N - 1; r >= 0; r--)     /* any order */
        fd[r] = join(r, N);
    uint32_t seq = 0;
    for (int round = 0; round < ROUNDS; round++) {
        uint32_t each = (uint32_t)(round * 37);     /* 0 included */
        seq++;
        uint8_t mine[N][200];
        for (int r = 0; r < N; r++) {
            for (uint32_t i = 0; i < each; i++)
                mine[r][i] = (uint8_t)(r * 31 + i + round);
            enter_allgather(fd[r], seq, mine[r], each);
            if (r < N - 1)
                expect_quiet(fd[r]);        /* nobody leaves early */
        }
        for (int r = 0; r < N; r++) {
            struct nv_boot_msg m;
            uint8_t *frame;
            CHECK(recv_msg(fd[r], &m, &frame) == 1);
            CHECK(m.type == NV_BOOT_MSG_ALLGATHER_RESULT && m.u.result.seq == seq);
            CHECK(m.u.result.status == NETVM_OK && m.u.result.dead_rank == -1);
            CHECK(m.u.result.count == N && m.u.result.each == each);
            for (int k = 0; k < N; k++)
                CHECK(!memcmp(m.u.result.data + (size_t)k * each, mine[k], each));
            free(frame);
        }
        seq++;
        for (int r = 0; r < N; r++)
            enter_barrier(fd[r], seq);
        for (int r = 0; r < N; r++)
            expect_done(fd[r], seq, NETVM_OK, -1);
    }
    CHECK(nv_boot_server_rounds(srv) == 2 * ROUNDS);
    /* clean exits */
    struct nv_boot_msg bye = { .type = NV_BOOT_MSG_BYE };
    for (int r = 0; r < N; r++) {
        send_msg(fd[r], &bye);
        close(fd[r]);
    }
    pump(50);
    for (int r = 0; r < N; r++)
        CHECK(nv_boot_server_rank_state(srv, r) == NV_BOOT_RANK_LEFT);
    CHECK(nv_boot_server_first_dead(srv) == -1);
    stop();
}

/* Rank 2 dies without BYE: before a collective and in the middle of one. */
static void dead_rank(void)
{
    start(3, 0);
    int a = join(0, 3), b = join(1, 3), c = join(2, 3);
    enter_barrier(a, 1);
    enter_barrier(b, 1);
    expect_quiet(a);
    close(c);                               /* dies while the others wait */
    expect_done(a, 1, NETVM_ERR_PEER, 2);
    expect_done(b, 1, NETVM_ERR_PEER, 2);
    CHECK(nv_boot_server_rank_state(srv, 2) == NV_BOOT_RANK_DEAD);
    CHECK(nv_boot_server_first_dead(srv) == 2);

    /* later collectives still complete, with the dead slot zeroed */
    uint64_t va = 0x1111111111111111ull, vb = 0x2222222222222222ull;
    enter_allgather(a, 2, &va, 8);
    enter_allgather(b, 2, &vb, 8);
    for (int k = 0; k < 2; k++) {
        struct nv_boot_msg m;
        uint8_t *frame;
        CHECK(recv_msg(k ? b : a, &m, &frame) == 1);
        CHECK(m.type == NV_BOOT_MSG_ALLGATHER_RESULT && m.u.result.status == NETVM_ERR_PEER);
        CHECK(m.u.result.dead_rank == 2 && m.u.result.count == 3 && m.u.result.each == 8);
        uint64_t got[3];
        memcpy(got, m.u.result.data, sizeof got);
        CHECK(got[0] == va && got[1] == vb && got[2] == 0);
        free(frame);
    }
    close(a);
    close(b);
    stop();
}

/* While some rank may still join, the socket stays; a rank that died
 * cannot come back; once nobody can join, the socket and its directory go. */
static void settling(void)
{
    start(3, 0);
    int a = join(0, 3), b = join(1, 3);
    close(b);
    pump(20);
    CHECK(nv_boot_server_rank_state(srv, 1) == NV_BOOT_RANK_DEAD);
    int again = raw_connect();
    struct nv_boot_msg h = hello_msg(1, 3);
    send_msg(again, &h);
    expect_closed(again, 1);
    CHECK(dir_exists());
    int c = join(2, 3);
    CHECK(!dir_exists());
    CHECK(try_connect() < 0);
    enter_barrier(a, 1);
    enter_barrier(c, 1);
    expect_done(a, 1, NETVM_ERR_PEER, 1);
    expect_done(c, 1, NETVM_ERR_PEER, 1);
    close(a);
    close(c);
    stop();

    /* ranks that end before joining settle too */
    start(2, 0);
    nv_boot_server_rank_exited(srv, 0, 1);
    CHECK(dir_exists());
    nv_boot_server_rank_exited(srv, 1, 0);
    CHECK(!dir_exists());
    stop();
}

/* A rank that entered and then died: its contribution does not leak out. */
static void dead_after_entering(void)
{
    start(2, 0);
    int a = join(0, 2), b = join(1, 2);
    uint32_t vb = 0xdeadbeef, va = 7;
    enter_allgather(b, 1, &vb, 4);
    pump(20);
    close(b);
    pump(20);
    enter_allgather(a, 1, &va, 4);
    struct nv_boot_msg m;
    uint8_t *frame;
    CHECK(recv_msg(a, &m, &frame) == 1);
    CHECK(m.u.result.status == NETVM_ERR_PEER && m.u.result.dead_rank == 1);
    uint32_t got[2];
    memcpy(got, m.u.result.data, sizeof got);
    CHECK(got[0] == 7 && got[1] == 0);
    free(frame);
    close(a);
    stop();
}

/* The launcher reports exits: a rank that never connected, and one whose
 * BYE is still unread in its socket. */
static void launcher_reports(void)
{
    start(3, 0);
    int a = join(0, 3), b = join(1, 3);
    struct nv_boot_msg bye = { .type = NV_BOOT_MSG_BYE };
    send_msg(b, &bye);
    close(b);
    nv_boot_server_rank_exited(srv, 1, 1);          /* before the server read the BYE */
    CHECK(nv_boot_server_rank_state(srv, 1) == NV_BOOT_RANK_LEFT);
    enter_barrier(a, 1);
    expect_quiet(a);                                /* rank 2 may still come */
    nv_boot_server_rank_exited(srv, 2, 0);          /* it never will */
    CHECK(nv_boot_server_rank_state(srv, 2) == NV_BOOT_RANK_DEAD);
    expect_done(a, 1, NETVM_ERR_PEER, 1);           /* the first rank gone */
    CHECK(nv_boot_server_first_dead(srv) == 2);
    nv_boot_server_rank_exited(srv, 0, 0);          /* connected, no BYE: dead */
    CHECK(nv_boot_server_rank_state(srv, 0) == NV_BOOT_RANK_DEAD);
    nv_boot_server_rank_exited(srv, 7, 0);          /* no such rank: ignored */
    close(a);
    stop();
}

/* Ranks that disagree about the collective all hear about it. */
static void mismatch_and_protocol_errors(void)
{
    start(2, 0);
    int a = join(0, 2), b = join(1, 2);
    uint64_t v = 1;
    enter_allgather(a, 1, &v, 8);
    enter_barrier(b, 1);
    struct nv_boot_msg m;
    uint8_t *frame;
    CHECK(recv_msg(a, &m, &frame) == 1);
    CHECK(m.type == NV_BOOT_MSG_ALLGATHER_RESULT && m.u.result.status == NETVM_ERR_INVAL);
    free(frame);
    expect_done(b, 1, NETVM_ERR_INVAL, -1);
    enter_allgather(a, 2, &v, 8);
    enter_allgather(b, 2, &v, 4);
    CHECK(recv_msg(a, &m, &frame) == 1 && m.u.result.status == NETVM_ERR_INVAL);
    free(frame);
    CHECK(recv_msg(b, &m, &frame) == 1 && m.u.result.status == NETVM_ERR_INVAL);
    free(frame);
    /* and the job goes on */
    enter_barrier(a, 3);
    enter_barrier(b, 3);
    expect_done(a, 3, NETVM_OK, -1);
    expect_done(b, 3, NETVM_OK, -1);

    /* a wrong sequence number is a broken client: dropped, counted dead */
    enter_barrier(b, 9);
    expect_closed(b, 0);
    CHECK(nv_boot_server_rank_state(srv, 1) == NV_BOOT_RANK_DEAD);
    enter_barrier(a, 4);
    expect_done(a, 4, NETVM_ERR_PEER, 1);
    /* so is garbage after authenticating */
    raw_send(a, "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
    expect_closed(a, 0);
    CHECK(nv_boot_server_rank_state(srv, 0) == NV_BOOT_RANK_DEAD);
    stop();
}

/* Closing the server while ranks are connected closes them, nothing more. */
static void destroy_with_clients(void)
{
    start(2, 0);
    int a = join(0, 2);
    int p = raw_connect();
    enter_barrier(a, 1);
    pump(20);
    stop();
    char c;
    CHECK(recv(a, &c, 1, 0) == 0);
    CHECK(recv(p, &c, 1, 0) == 0);
    close(a);
    close(p);
}

int main(void)
{
    alarm(120);     /* a hang is a failure, not a stuck ctest */
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (uint8_t)(0xa5 ^ i);
    struct nv_boot_server_opts bad = { .size = 0, .job_id = job, .secret = secret };
    CHECK_ST(nv_boot_server_create(&srv, &bad), NETVM_ERR_INVAL);
    bad.size = 2;
    bad.job_id = "no spaces";
    CHECK_ST(nv_boot_server_create(&srv, &bad), NETVM_ERR_INVAL);

    refuses_bad_clients();
    collectives();
    dead_rank();
    settling();
    dead_after_entering();
    launcher_reports();
    mismatch_and_protocol_errors();
    destroy_with_clients();
    printf("server: ok\n");
    return 0;
}
