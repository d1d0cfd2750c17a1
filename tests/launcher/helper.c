/* The rank program that launcher_test.py starts through `netvm run`; the
 * first argument picks what every rank does:
 *   env            print what the launcher told this rank (the NETVM_* variables;
 *                  bootstrap has taken the secret out of the environment)
 *   exit R CODE    rank R exits with CODE, the others with 0
 *   kill R         rank R SIGKILLs itself after a barrier; the others enter
 *                  a second barrier, then sleep (the launcher must end them)
 *   killkg R       as kill, but the others report the second barrier's
 *                  status and exit 0 (for --keep-going)
 *   lines          write lines to stdout and stderr, and a last partial line
 *   intrude        rank 0, before it joins, sends garbage and a forged HELLO
 *                  to the job's boot socket; then every rank checks the job
 *                  still works
 *   sleep          report "ready PID" and sleep until killed
 *   stubborn       as sleep, ignoring SIGINT and SIGTERM */
#include "check.h"
#include "boot/boot.h"
#include "boot/secret.h"
#include "wire/boot_msg.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static nv_boot_t *boot_open(void)
{
    nv_boot_t *b;
    CHECK_OK(nv_boot_open(&b, NULL, 20000));
    check_rank = nv_boot_rank(b);
    return b;
}

/* stdout is a pipe under the tests: flush each line as it is said */
#define say(...) do { printf(__VA_ARGS__); fflush(stdout); } while (0)

static void sleep_forever(void)
{
    for (int i = 0; i < 60; i++)
        sleep(1);
    say("rank %d survived\n", check_rank);
    exit(3);
}

static int connect_boot(void)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", getenv("NETVM_BOOT") + 5);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    struct timeval tv = { .tv_sec = 10 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* What a stranger on the boot socket gets: nothing but a refusal. */
static void intrude(void)
{
    uint8_t buf[512];
    int fd = connect_boot();
    CHECK(send(fd, "garbage garbage garbage", 23, MSG_NOSIGNAL) == 23);
    CHECK(recv(fd, buf, sizeof buf, 0) <= 0);       /* closed (or reset) on us */
    close(fd);

    uint8_t forged[NV_BOOT_SECRET_LEN] = { 0 };
    const char *job = getenv("NETVM_JOB_ID");
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_HELLO };
    m.u.hello.rank = 1;
    m.u.hello.size = atoi(getenv("NETVM_SIZE"));
    m.u.hello.auth = NV_BOOT_AUTH_SECRET;
    m.u.hello.job_id = job;
    m.u.hello.job_id_len = (uint16_t)strlen(job);
    m.u.hello.proof = forged;
    m.u.hello.proof_len = sizeof forged;
    fd = connect_boot();
    size_t n = nv_boot_msg_encode(&m, buf, sizeof buf);
    CHECK(n > 0 && send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n);
    size_t flen;
    const char *why;
    ssize_t got = recv(fd, buf, sizeof buf, MSG_WAITALL);
    CHECK(got > 0);
    CHECK(nv_boot_frame_decode(buf, (size_t)got, NV_BOOT_MAX_PAYLOAD, &m, &flen, &why) == NV_BOOT_RC_OK);
    CHECK(m.type == NV_BOOT_MSG_RESULT && m.u.result.status == NETVM_ERR_BOOT);
    close(fd);
}

int main(int argc, char **argv)
{
    alarm(90);
    const char *mode = argc > 1 ? argv[1] : "";
    int rank = getenv("NETVM_RANK") ? atoi(getenv("NETVM_RANK")) : 0;
    int arg = argc > 2 ? atoi(argv[2]) : 0;

    if (!strcmp(mode, "env")) {
        /* the launcher hands the secret over; bootstrap takes it out of
         * the environment (children must not inherit it) */
        char secret[NV_BOOT_SECRET_HEX_LEN + 1], own[NV_BOOT_SECRET_HEX_LEN + 1];
        const char *given = getenv("NETVM_SECRET");
        CHECK(given && strlen(given) == 64 && strspn(given, "0123456789abcdef") == 64);
        memcpy(secret, given, sizeof secret);
        nv_boot_t *b = boot_open();
        CHECK(getenv("NETVM_SECRET") == NULL);
        nv_secret_to_hex(nv_boot_secret(b), own);
        CHECK(!strcmp(own, secret));
        const char *addr = getenv("NETVM_BOOT");
        CHECK(addr && !strncmp(addr, "unix:", 5));
        const char *node_vars[] = { "NETVM_NODE", "NETVM_NNODES", "NETVM_LOCAL_RANK", "NETVM_LOCAL_SIZE",
                                    "NETVM_TCP_ADDR" };
        for (size_t i = 0; i < sizeof node_vars / sizeof node_vars[0]; i++)
            CHECK(getenv(node_vars[i]) && *getenv(node_vars[i]));
        printf("rank %d size %d job %s secret %s boot %s node %s nnodes %s local %s lsize %s tcp %s\n",
               nv_boot_rank(b), nv_boot_size(b), nv_boot_job_id(b), secret, addr, getenv("NETVM_NODE"),
               getenv("NETVM_NNODES"), getenv("NETVM_LOCAL_RANK"), getenv("NETVM_LOCAL_SIZE"),
               getenv("NETVM_TCP_ADDR"));
        fflush(stdout);
        CHECK_OK(nv_boot_barrier(b));
        nv_boot_close(b);
        return 0;
    }
    if (!strcmp(mode, "intrude")) {
        /* before joining: once every rank has joined, nobody can connect */
        if (rank == 0)
            intrude();
        nv_boot_t *b = boot_open();
        uint32_t v = (uint32_t)rank, all[64];
        CHECK(nv_boot_size(b) <= 64);
        CHECK_OK(nv_boot_allgather(b, &v, sizeof v, all));
        for (int r = 0; r < nv_boot_size(b); r++)
            CHECK(all[r] == (uint32_t)r);
        CHECK_OK(nv_boot_barrier(b));
        nv_boot_close(b);
        return 0;
    }
    if (!strcmp(mode, "exit"))
        return rank == arg ? atoi(argv[3]) : 0;
    if (!strcmp(mode, "kill") || !strcmp(mode, "killkg")) {
        nv_boot_t *b = boot_open();
        CHECK_OK(nv_boot_barrier(b));
        if (rank == arg) {
            say("rank %d dying\n", rank);
            raise(SIGKILL);
        }
        netvm_status_t st = nv_boot_barrier(b);
        if (!strcmp(mode, "kill"))
            sleep_forever();
        CHECK_ST(st, NETVM_ERR_PEER);
        CHECK(nv_boot_dead_rank(b) == arg);
        /* and the next collective does not hang either */
        uint32_t v = (uint32_t)rank + 100, all[64] = { 0 };
        CHECK(nv_boot_size(b) <= 64);
        CHECK_ST(nv_boot_allgather(b, &v, sizeof v, all), NETVM_ERR_PEER);
        for (int r = 0; r < nv_boot_size(b); r++)
            CHECK(all[r] == (r == arg ? 0u : (uint32_t)r + 100));
        say("rank %d saw rank %d gone\n", rank, nv_boot_dead_rank(b));
        nv_boot_close(b);
        return 0;
    }
    if (!strcmp(mode, "lines")) {
        printf("out 1\nout 2\n");
        fflush(stdout);
        fprintf(stderr, "err 1\n");
        printf("tail without newline");
        return 0;
    }
    if (!strcmp(mode, "sleep") || !strcmp(mode, "stubborn")) {
        if (!strcmp(mode, "stubborn")) {
            signal(SIGINT, SIG_IGN);
            signal(SIGTERM, SIG_IGN);
        }
        nv_boot_t *b = boot_open();
        say("ready %d %d\n", (int)getpid(), rank);
        sleep_forever();
        nv_boot_close(b);
    }
    fprintf(stderr, "helper: unknown mode '%s'\n", mode);
    return 2;
}
