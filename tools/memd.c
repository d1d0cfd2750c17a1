/* netvm memd: a memory server (docs/memd.md). The server itself is library
 * code (src/gmem/server*.c); this is its process: options and the config
 * file, the credential, the main loop over the event queue and a signalfd,
 * the drain on SIGTERM/SIGINT. */
#define _GNU_SOURCE
#include "commands.h"
#include "gmem/server.h"
#include "gmem/server_cred.h"
#include "util/config.h"
#include "util/time.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

struct memd_opts {
    char      listen[128];
    long long size, client_max, drain_ms;
    char      cred_file[512];
    int       cred_fd, ready_fd, embedded, max_peers, no_direct;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: netvm memd --listen tcp:HOST:PORT --size BYTES\n"
            "                  (--credential-file PATH | --credential-fd N)\n"
            "                  [--client-max BYTES] [--drain-ms MS] [--ready-fd N] [--embedded]\n"
            "                  [--max-peers N] [--no-direct] [--config FILE]\n"
            "  --listen       address to serve (PORT 0: the kernel picks one)\n"
            "  --size         pool donated, with K, M, G or T suffix\n"
            "  --credential-file  16-64 bytes clients must prove; readable by its owner only\n"
            "  --credential-fd    read the credential from this fd until EOF\n"
            "  --client-max   bytes one client may hold (default: the whole pool)\n"
            "  --drain-ms     on SIGTERM/SIGINT, how long clients get to move their pages (10000)\n"
            "  --ready-fd     write the address and a newline to this fd once listening, close it\n"
            "  --embedded     exit when the parent process dies; no banner on stdout\n"
            "  --no-direct    clients on this machine ask for every page (by default they read the pool\n"
            "                 directly, as they could with process_vm_readv; remote clients always ask)\n"
            "  --config       key = value lines: listen, size, credential-file, client-max, drain-ms,\n"
            "                 max-peers (flags given as well win)\n");
}

static int set_opt(struct memd_opts *o, const char *key, const char *val)
{
    long long v;
    if (!strcmp(key, "listen")) {
        if (snprintf(o->listen, sizeof o->listen, "%s", val) >= (int)sizeof o->listen)
            return -1;
    } else if (!strcmp(key, "size")) {
        if (nv_parse_size(val, &o->size) != 0 || o->size <= 0)
            return -1;
    } else if (!strcmp(key, "client-max")) {
        if (nv_parse_size(val, &o->client_max) != 0 || o->client_max <= 0)
            return -1;
    } else if (!strcmp(key, "drain-ms")) {
        if (nv_parse_size(val, &v) != 0 || v < 0 || v > 3600 * 1000)
            return -1;
        o->drain_ms = v;
    } else if (!strcmp(key, "max-peers")) {
        if (nv_parse_size(val, &v) != 0 || v < 1 || v > 1 << 20)
            return -1;
        o->max_peers = (int)v;
    } else if (!strcmp(key, "credential-file")) {
        if (snprintf(o->cred_file, sizeof o->cred_file, "%s", val) >= (int)sizeof o->cred_file)
            return -1;
    } else {
        return -2;
    }
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

static int read_config(struct memd_opts *o, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "netvm memd: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *l = trim(line);
        if (!*l)
            continue;
        char *eq = strchr(l, '=');
        if (!eq) {
            fprintf(stderr, "netvm memd: %s:%d: not 'key = value'\n", path, n);
            bad = 1;
            continue;
        }
        *eq = 0;
        char *key = trim(l), *val = trim(eq + 1);
        int r = set_opt(o, key, val);
        if (r == -2)
            fprintf(stderr, "netvm memd: %s:%d: unknown key '%s'\n", path, n, key);
        else if (r != 0)
            fprintf(stderr, "netvm memd: %s:%d: bad value for %s: '%s'\n", path, n, key, val);
        bad |= r != 0;
    }
    fclose(f);
    return bad ? -1 : 0;
}

static int parse(struct memd_opts *o, int argc, char **argv)
{
    /* the config file first, so that flags win whatever their order */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config") && read_config(o, argv[i + 1]) != 0)
            return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--embedded")) {
            o->embedded = 1;
            continue;
        }
        if (!strcmp(a, "--no-direct")) {
            o->no_direct = 1;
            continue;
        }
        if (i + 1 >= argc || strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "netvm memd: unknown or incomplete option '%s'\n", a);
            return -1;
        }
        const char *v = argv[++i];
        char *end;
        if (!strcmp(a, "--config"))
            continue;
        if (!strcmp(a, "--credential-fd") || !strcmp(a, "--ready-fd")) {
            long fd = strtol(v, &end, 10);
            if (*end || fd < 0 || fd > 1 << 20) {
                fprintf(stderr, "netvm memd: %s wants a file descriptor, not '%s'\n", a, v);
                return -1;
            }
            *(a[2] == 'c' ? &o->cred_fd : &o->ready_fd) = (int)fd;
            continue;
        }
        int r = set_opt(o, a + 2, v);
        if (r != 0) {
            fprintf(stderr, r == -2 ? "netvm memd: unknown option '%s'\n" : "netvm memd: bad value for %s: '%s'\n",
                    a, v);
            return -1;
        }
    }
    if (!o->listen[0] || o->size <= 0) {
        fprintf(stderr, "netvm memd: --listen and --size are required\n");
        return -1;
    }
    if (!o->cred_file[0] == (o->cred_fd < 0)) {
        fprintf(stderr, "netvm memd: give the credential with exactly one of --credential-file, --credential-fd\n");
        return -1;
    }
    return 0;
}

static void tell_ready(const struct memd_opts *o, const char *addr)
{
    if (!o->embedded) {
        printf("memd listening %s\n", addr);
        fflush(stdout);
    }
    if (o->ready_fd >= 0) {
        char line[160];
        int n = snprintf(line, sizeof line, "%s\n", addr);
        if (write(o->ready_fd, line, (size_t)n) != n)
            fprintf(stderr, "netvm memd: writing the address to fd %d: %s\n", o->ready_fd, strerror(errno));
        close(o->ready_fd);
    }
}

/* Serve until a signal's drain ends; returns the exit status. */
static int serve(netvm_ctx_t *ctx, struct nv_gm_server *srv, int sfd, const struct memd_opts *o)
{
    int efd = netvm_evq_fd(ctx), draining = 0;
    uint64_t deadline = 0;
    for (;;) {
        netvm_event_t ev[32];
        int n;
        while ((n = netvm_evq_poll(ctx, ev, 32)) > 0)
            for (int i = 0; i < n; i++)
                if (ev[i].type == NETVM_EV_PEER_DOWN)
                    nv_gm_server_peer_down(srv, ev[i].rank);
        if (draining) {
            int left = nv_gm_server_drain_pending(srv);
            if (!left || nv_now_ns() > deadline) {
                struct nv_gm_stat st;
                nv_gm_server_stat(srv, &st);
                if (!o->embedded || left || st.used_pages)   /* an embedded server's clean end is no news */
                    fprintf(stderr,
                            "netvm memd: %s: %d client(s) had not answered the drain, %llu page(s) of %llu "
                            "client(s) left, %llu forward(s)\n",
                            left ? "drain deadline passed" : "drained", left, (unsigned long long)st.used_pages,
                            (unsigned long long)st.clients, (unsigned long long)st.forwards);
                return 0;
            }
        }
        if (netvm_evq_arm(ctx) == NETVM_ERR_AGAIN)
            continue;
        struct pollfd pf[2] = { { .fd = efd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
        /* draining: look at the clients' answers now and then (they come
         * through continuations, not events) */
        int r = poll(pf, 2, draining ? 20 : -1);
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "netvm memd: poll: %s\n", strerror(errno));
            return 1;
        }
        if (r > 0 && pf[1].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
                continue;
            if (draining) {
                fprintf(stderr, "netvm memd: second signal: stopping without waiting for the drain\n");
                return 0;
            }
            draining = 1;
            deadline = nv_now_ns() + (uint64_t)o->drain_ms * 1000000u;
            if (!o->embedded)
                fprintf(stderr, "netvm memd: signal %u: draining (clients have %lld ms)\n", si.ssi_signo,
                        o->drain_ms);
            nv_gm_server_drain_begin(srv, (int)o->drain_ms);
        }
    }
}

int nv_cmd_memd(int argc, char **argv)
{
    struct memd_opts o = { .drain_ms = 10000, .cred_fd = -1, .ready_fd = -1 };
    if (parse(&o, argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    uint8_t cred[NV_GM_CRED_MAX];
    size_t cred_len = 0;
    char err[600];
    int rc = o.cred_file[0] ? nv_gm_cred_read_file(o.cred_file, cred, &cred_len, err, sizeof err)
                            : nv_gm_cred_read_fd(o.cred_fd, cred, &cred_len, err, sizeof err);
    if (o.cred_fd >= 0)
        close(o.cred_fd);
    if (rc != 0) {
        fprintf(stderr, "netvm memd: %s\n", err);
        return 1;
    }
    pid_t parent = getppid();
    if (o.embedded) {
        /* the signal goes to the drain, which ends at once: the client is gone */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            return 0;
    }
    /* blocked before netvm starts its threads, so they inherit the mask
     * and the signals reach the signalfd only */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "netvm memd: signalfd: %s\n", strerror(errno));
        return 1;
    }
    /* a server is a job of its own even when started from inside a job
     * (an embedded server inherits its client's launcher environment) */
    netvm_config_t cfg = { .boot = "none", .thread_level = NETVM_THREAD_MULTIPLE };
    netvm_ctx_t *ctx;
    netvm_status_t st = netvm_init(&ctx, &cfg);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm memd: netvm_init: %s\n", netvm_strerror(st));
        return 1;
    }
    struct nv_gm_server_opts so = { .listen = o.listen, .size = (size_t)o.size, .client_max = (size_t)o.client_max,
                                    .credential = cred, .credential_len = cred_len, .max_peers = o.max_peers,
                                    .no_direct = o.no_direct };
    struct nv_gm_server *srv;
    st = nv_gm_server_start(ctx, &so, &srv);
    memset(cred, 0, sizeof cred);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm memd: cannot serve %s with a pool of %lld bytes: %s\n", o.listen, o.size,
                netvm_strerror(st));
        netvm_finalize(ctx);
        return 1;
    }
    tell_ready(&o, nv_gm_server_addr(srv));
    rc = serve(ctx, srv, sfd, &o);
    nv_gm_server_stop(srv);
    netvm_finalize(ctx);
    close(sfd);
    return rc;
}
