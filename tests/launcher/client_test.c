/* The boot client (boot.h) outside a launcher: singleton mode, every
 * malformed environment, unsupported addresses, the secret taken out of the
 * environment and kept for the next open, and a scripted fake launcher (a
 * thread) that misbehaves in each way a client must survive: silence
 * (NETVM_ERR_TIMEOUT), refusal, garbage, replies that do not match, going
 * away (NETVM_ERR_BOOT). Nothing may hang. */
#define _GNU_SOURCE   /* accept4 */
#include "check.h"
#include "boot/boot.h"
#include "boot/secret.h"
#include "util/time.h"
#include "wire/boot_msg.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char secret_hex[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
static const char other_hex[] = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
static uint8_t fake_wants[NV_BOOT_SECRET_LEN];     /* the proof the fake launcher accepts */

static void clear_env(void)
{
    static const char *const vars[] = { "NETVM_RANK", "NETVM_SIZE", "NETVM_JOB_ID", "NETVM_SECRET", "NETVM_BOOT" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static void member_env(const char *rank, const char *size)
{
    clear_env();
    setenv("NETVM_RANK", rank, 1);
    setenv("NETVM_SIZE", size, 1);
    setenv("NETVM_JOB_ID", "job-1", 1);
    setenv("NETVM_SECRET", secret_hex, 1);
}

static void singleton(void)
{
    clear_env();
    nv_boot_t *a, *b;
    CHECK_OK(nv_boot_open(&a, NULL, 1000));
    CHECK_OK(nv_boot_open(&b, NULL, 0));
    CHECK(nv_boot_rank(a) == 0 && nv_boot_size(a) == 1);
    CHECK(strncmp(nv_boot_job_id(a), "single-", 7) == 0);
    CHECK(strcmp(nv_boot_job_id(a), nv_boot_job_id(b)) != 0);
    /* a fresh secret each time, not a constant */
    CHECK(memcmp(nv_boot_secret(a), nv_boot_secret(b), NV_BOOT_SECRET_LEN) != 0);
    uint64_t mine = 42, all = 0;
    CHECK_OK(nv_boot_allgather(a, &mine, sizeof mine, &all));
    CHECK(all == 42);
    CHECK_OK(nv_boot_allgather(a, NULL, 0, NULL));
    CHECK_ST(nv_boot_allgather(a, NULL, 8, &all), NETVM_ERR_INVAL);
    CHECK_OK(nv_boot_barrier(a));
    CHECK(nv_boot_dead_rank(a) == -1);
    nv_boot_close(a);
    nv_boot_close(b);
    nv_boot_close(NULL);
    CHECK_ST(nv_boot_open(NULL, NULL, 0), NETVM_ERR_INVAL);

    /* NETVM_SIZE=1 alone is still a singleton; a larger job needs NETVM_BOOT */
    setenv("NETVM_SIZE", "1", 1);
    CHECK_OK(nv_boot_open(&a, NULL, 1000));
    nv_boot_close(a);
    setenv("NETVM_SIZE", "4", 1);
    CHECK_ST(nv_boot_open(&a, NULL, 1000), NETVM_ERR_BOOT);
    CHECK(a == NULL);
}

static void bad_environment(void)
{
    nv_boot_t *b;
    const char *addr = "unix:/nonexistent-dir/boot";
    member_env("0", "2");
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);      /* nobody listening */
    CHECK_ST(nv_boot_open(&b, "tcp:localhost:7777", 1000), NETVM_ERR_UNSUPPORTED);
    CHECK_ST(nv_boot_open(&b, "carrier-pigeon", 1000), NETVM_ERR_INVAL);
    CHECK_ST(nv_boot_open(&b, "unix:", 1000), NETVM_ERR_INVAL);

    member_env("2", "2");                                          /* rank >= size */
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    member_env("-1", "2");
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    member_env("0x1", "2");
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    member_env("0", "0");
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    member_env("0", "2");
    unsetenv("NETVM_RANK");
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    member_env("0", "2");
    setenv("NETVM_SECRET", "0011", 1);
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    char bad[sizeof secret_hex];
    memcpy(bad, secret_hex, sizeof bad);
    bad[10] = 'g';
    setenv("NETVM_SECRET", bad, 1);
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    member_env("0", "2");
    setenv("NETVM_JOB_ID", "a/b", 1);
    CHECK_ST(nv_boot_open(&b, addr, 1000), NETVM_ERR_BOOT);
    /* the environment's NETVM_BOOT is used when addr is NULL */
    member_env("0", "2");
    setenv("NETVM_BOOT", "tcp:10.0.0.1:1", 1);
    CHECK_ST(nv_boot_open(&b, NULL, 1000), NETVM_ERR_UNSUPPORTED);
}

/* --- a fake launcher ---------------------------------------------------- */

enum script {
    SILENT,          /* never accepts, never answers */
    REFUSE,          /* answers HELLO with a refusal */
    GARBAGE,         /* answers HELLO with noise */
    HANG_UP,         /* accepts HELLO, then closes when a collective arrives */
    WRONG_SEQ,       /* answers a barrier with someone else's sequence number */
    WRONG_SIZE,      /* answers an allgather with the wrong amount of data */
    NO_REPLY,        /* accepts HELLO, then ignores the collective */
    EXPECT_BYE,      /* accepts HELLO, then wants BYE and a close */
};

struct fake {
    enum script script;
    int  lfd;
    char dir[64], path[96], addr[104];
    int  saw_bye;
    pthread_t thread;
};

static int read_frame(int fd, struct nv_boot_msg *m, uint8_t *buf, size_t cap)
{
    size_t have = 0, need = NV_BOOT_HDR_LEN;
    for (;;) {
        size_t flen;
        const char *why;
        if (have >= need) {
            enum nv_boot_rc rc = nv_boot_frame_decode(buf, have, NV_BOOT_MAX_PAYLOAD, m, &flen, &why);
            if (rc == NV_BOOT_RC_OK)
                return 1;
            if (rc == NV_BOOT_RC_BAD || flen > cap)
                return 0;
            need = flen;
        }
        ssize_t n = recv(fd, buf + have, need - have, 0);
        if (n <= 0)
            return 0;
        have += (size_t)n;
    }
}

static void write_msg(int fd, const struct nv_boot_msg *m)
{
    uint8_t buf[512];
    size_t n = nv_boot_msg_encode(m, buf, sizeof buf);
    CHECK(n > 0 && send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n);
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
    CHECK(fd >= 0);
    struct timeval tv = { .tv_sec = 10 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t buf[1024];
    struct nv_boot_msg m;
    CHECK(read_frame(fd, &m, buf, sizeof buf) && m.type == NV_BOOT_MSG_HELLO);
    CHECK(m.u.hello.proof_len == NV_BOOT_SECRET_LEN && !memcmp(m.u.hello.proof, fake_wants, NV_BOOT_SECRET_LEN));
    struct nv_boot_msg r = { .type = NV_BOOT_MSG_RESULT };
    r.u.result.dead_rank = -1;
    if (f->script == REFUSE)
        r.u.result.status = NETVM_ERR_BOOT;
    if (f->script == GARBAGE) {
        CHECK(send(fd, "garbage, not a frame", 20, MSG_NOSIGNAL) == 20);
    } else {
        write_msg(fd, &r);
    }
    if (f->script == EXPECT_BYE) {
        f->saw_bye = read_frame(fd, &m, buf, sizeof buf) && m.type == NV_BOOT_MSG_BYE &&
                     recv(fd, buf, 1, 0) == 0;
    } else if (f->script != REFUSE && f->script != GARBAGE) {
        int got = read_frame(fd, &m, buf, sizeof buf);
        CHECK(got);
        if (f->script == WRONG_SEQ) {
            r.type = NV_BOOT_MSG_BARRIER_DONE;
            r.u.result.seq = m.u.coll.seq + 1;
            r.u.result.status = NETVM_OK;
            write_msg(fd, &r);
        } else if (f->script == WRONG_SIZE) {
            uint8_t data[24] = { 0 };
            r.type = NV_BOOT_MSG_ALLGATHER_RESULT;
            r.u.result.seq = m.u.coll.seq;
            r.u.result.count = 2;
            r.u.result.each = 12;         /* the client sent 8 */
            r.u.result.data = data;
            write_msg(fd, &r);
        } else if (f->script == NO_REPLY) {
            /* wait for the client to give up and close */
            read_frame(fd, &m, buf, sizeof buf);
        }
    }
    close(fd);
    return NULL;
}

static void fake_start(struct fake *f, enum script script)
{
    memset(f, 0, sizeof *f);
    f->script = script;
    snprintf(f->dir, sizeof f->dir, "/tmp/netvm-test-XXXXXX");
    CHECK(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/boot", f->dir);
    snprintf(f->addr, sizeof f->addr, "unix:%s", f->path);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->path);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(f->lfd >= 0 && bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(f->lfd, 4) == 0);
    if (script != SILENT)
        CHECK(pthread_create(&f->thread, NULL, fake_main, f) == 0);
}

static void fake_stop(struct fake *f)
{
    if (f->script != SILENT)
        pthread_join(f->thread, NULL);
    close(f->lfd);
    unlink(f->path);
    rmdir(f->dir);
}

static void against_fakes(void)
{
    struct fake f;
    nv_boot_t *b;
    uint64_t mine = 1, all[2];
    member_env("1", "2");

    /* the launcher never answers: bounded by the timeout */
    fake_start(&f, SILENT);
    uint64_t t0 = nv_now_ns();
    CHECK_ST(nv_boot_open(&b, f.addr, 200), NETVM_ERR_TIMEOUT);
    uint64_t took = nv_now_ns() - t0;
    CHECK(took >= 190 * 1000000ull && took < 3000 * 1000000ull);
    fake_stop(&f);

    fake_start(&f, REFUSE);
    CHECK_ST(nv_boot_open(&b, f.addr, 5000), NETVM_ERR_BOOT);
    fake_stop(&f);

    fake_start(&f, GARBAGE);
    CHECK_ST(nv_boot_open(&b, f.addr, 5000), NETVM_ERR_BOOT);
    fake_stop(&f);

    /* the launcher goes away: an error, then the handle stays failed */
    fake_start(&f, HANG_UP);
    CHECK_OK(nv_boot_open(&b, f.addr, 5000));
    CHECK(nv_boot_rank(b) == 1 && nv_boot_size(b) == 2 && !strcmp(nv_boot_job_id(b), "job-1"));
    CHECK(nv_boot_secret(b)[5] == 5);
    CHECK_ST(nv_boot_barrier(b), NETVM_ERR_BOOT);
    CHECK_ST(nv_boot_barrier(b), NETVM_ERR_STATE);
    nv_boot_close(b);
    fake_stop(&f);

    fake_start(&f, WRONG_SEQ);
    CHECK_OK(nv_boot_open(&b, f.addr, 5000));
    CHECK_ST(nv_boot_barrier(b), NETVM_ERR_BOOT);
    nv_boot_close(b);
    fake_stop(&f);

    fake_start(&f, WRONG_SIZE);
    CHECK_OK(nv_boot_open(&b, f.addr, 5000));
    CHECK_ST(nv_boot_allgather(b, &mine, sizeof mine, all), NETVM_ERR_BOOT);
    nv_boot_close(b);
    fake_stop(&f);

    /* a collective nobody completes: bounded too */
    fake_start(&f, NO_REPLY);
    CHECK_OK(nv_boot_open(&b, f.addr, 300));
    t0 = nv_now_ns();
    CHECK_ST(nv_boot_allgather(b, &mine, sizeof mine, all), NETVM_ERR_TIMEOUT);
    CHECK(nv_now_ns() - t0 >= 290 * 1000000ull);
    CHECK_ST(nv_boot_barrier(b), NETVM_ERR_STATE);
    nv_boot_close(b);
    fake_stop(&f);

    /* an allgather whose result could not fit one frame is refused up front */
    fake_start(&f, EXPECT_BYE);
    CHECK_OK(nv_boot_open(&b, f.addr, 5000));
    static uint8_t big[NV_BOOT_MAX_PAYLOAD / 2];
    CHECK_ST(nv_boot_allgather(b, big, sizeof big, big), NETVM_ERR_INVAL);
    /* closing says BYE: a clean exit, not a death */
    nv_boot_close(b);
    fake_stop(&f);
    CHECK(f.saw_bye);
}

/* NETVM_SECRET leaves the environment at the first open, which keeps it
 * for the next; a new value replaces it, a malformed one is an error. */
static void secret_kept(void)
{
    struct fake f;
    nv_boot_t *b;
    const char *nowhere = "unix:/nonexistent-dir/boot";
    member_env("1", "2");
    CHECK_ST(nv_boot_open(&b, nowhere, 1000), NETVM_ERR_BOOT);
    CHECK(getenv("NETVM_SECRET") == NULL);
    fake_start(&f, EXPECT_BYE);
    CHECK_OK(nv_boot_open(&b, f.addr, 5000));
    CHECK(getenv("NETVM_SECRET") == NULL);
    nv_boot_close(b);
    fake_stop(&f);
    CHECK(f.saw_bye);

    setenv("NETVM_SECRET", "0011", 1);
    CHECK_ST(nv_boot_open(&b, nowhere, 1000), NETVM_ERR_BOOT);
    CHECK(getenv("NETVM_SECRET") == NULL);
    setenv("NETVM_SECRET", other_hex, 1);
    CHECK(nv_secret_from_hex(other_hex, strlen(other_hex), fake_wants) == 0);
    fake_start(&f, EXPECT_BYE);
    CHECK_OK(nv_boot_open(&b, f.addr, 5000));
    CHECK(getenv("NETVM_SECRET") == NULL);
    nv_boot_close(b);
    fake_stop(&f);
    CHECK(f.saw_bye);
    /* an empty value is no value: the kept one serves */
    setenv("NETVM_SECRET", "", 1);
    fake_start(&f, EXPECT_BYE);
    CHECK_OK(nv_boot_open(&b, f.addr, 5000));
    CHECK(getenv("NETVM_SECRET") == NULL);
    nv_boot_close(b);
    fake_stop(&f);
    CHECK(nv_secret_from_hex(secret_hex, strlen(secret_hex), fake_wants) == 0);
}

int main(void)
{
    alarm(60);
    CHECK(nv_secret_from_hex(secret_hex, strlen(secret_hex), fake_wants) == 0);
    singleton();
    bad_environment();
    secret_kept();
    against_fakes();
    printf("client: ok\n");
    return 0;
}
