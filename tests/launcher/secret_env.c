/* A rank started by `netvm run` does not pass the job secret on: once
 * netvm_init has read NETVM_SECRET it is gone from the environment (getenv,
 * a child's environment, /proc/self/environ), and a second netvm_init in the
 * same process still authenticates with it. The first netvm_init is made to
 * fail after it has taken the secret (a bootstrap address where nobody
 * listens), the second joins the job; the ranks then put to each other, over
 * tcp too (NETVM_LINKS=tcp: the links' handshake proves the secret again).
 * (A rank that finalized has left its job: the launcher refuses it a second
 * time, so init after finalize is not what this can test.) */
#define _GNU_SOURCE
#include "check.h"

#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* All of a file or a child's output, NUL bytes and all, into buf; its length. */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        CHECK(n < cap - 1);
    }
    buf[n] = 0;
    return n;
}

static int has_entry(const char *buf, size_t len, char sep, const char *prefix)
{
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < len; ) {
        if (len - i >= plen && !memcmp(buf + i, prefix, plen))
            return 1;
        const char *next = memchr(buf + i, sep, len - i);
        if (!next)
            break;
        i = (size_t)(next - buf) + 1;
    }
    return 0;
}

static int proc_environ_has(const char *prefix)
{
    static char buf[1 << 16];
    int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    size_t n = read_all(fd, buf, sizeof buf);
    close(fd);
    return has_entry(buf, n, 0, prefix);
}

/* /usr/bin/env run as a child with this process's environment: does its
 * output have a line starting with prefix? */
static int child_env_has(const char *prefix)
{
    static char buf[1 << 16];
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(p[1], STDOUT_FILENO);
        char *argv[] = { "env", NULL };
        execve("/usr/bin/env", argv, environ);
        _exit(127);
    }
    close(p[1]);
    size_t n = read_all(p[0], buf, sizeof buf);
    close(p[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return has_entry(buf, n, '\n', prefix);
}

int main(void)
{
    alarm(60);
    /* what the launcher gave: the secret is there to be taken */
    CHECK(getenv("NETVM_SECRET") && strlen(getenv("NETVM_SECRET")) == 64);
    CHECK(proc_environ_has("NETVM_SECRET="));
    CHECK(child_env_has("NETVM_SECRET=") && child_env_has("NETVM_RANK="));

    /* a netvm_init that fails after reading the secret */
    netvm_ctx_t *ctx;
    netvm_config_t nowhere = { .boot = "unix:/nonexistent-netvm-test-dir/boot", .timeout_ms = 2000 };
    CHECK(netvm_init(&ctx, &nowhere) != NETVM_OK && ctx == NULL);
    CHECK(getenv("NETVM_SECRET") == NULL);

    /* the next one joins the job with the secret it kept */
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx), size = netvm_size(ctx);
    check_rank = rank;
    CHECK(getenv("NETVM_SECRET") == NULL);
    CHECK(!proc_environ_has("NETVM_SECRET="));
    CHECK(!child_env_has("NETVM_SECRET="));
    CHECK(child_env_has("NETVM_RANK="));        /* the rest of the environment is passed on */
    CHECK(system("test -z \"${NETVM_SECRET+set}\"") == 0);

    uint64_t inbox = 0;
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, &inbox, sizeof inbox, NETVM_RW, "inbox", &seg));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *right;
    CHECK_OK(netvm_import(ctx, (rank + 1) % size, "inbox", &right));
    uint64_t v = 1000 + (uint64_t)rank;
    CHECK_OK(netvm_put(ctx, right, 0, &v, sizeof v, 0));
    CHECK_OK(netvm_barrier(ctx));
    CHECK(inbox == 1000 + (uint64_t)((rank + size - 1) % size));
    CHECK_OK(netvm_finalize(ctx));
    CHECK(getenv("NETVM_SECRET") == NULL);
    printf("secret_env: rank %d ok\n", rank);
    return 0;
}
