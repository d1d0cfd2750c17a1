/* netvm stat ADDRESS: a memory server's state (NV_GM_STAT), as an
 * observer that may do nothing else there. netvm stat gmem:PID: the live
 * statistics of a program under `netvm gmem run` (its interposer's file).
 * netvm stat pid:PID: a netvm process's own counters (registration), from
 * the files its contexts keep under NETVM_STATS_DIR (ctx_stat.c). */
#include "commands.h"
#include "gmem_stat.h"
#include "gmem/proto.h"
#include "gmem/server_cred.h"
#include "util/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: netvm stat tcp:HOST:PORT [--credential-file PATH] [--json]\n"
               "       netvm stat gmem:PID [--json]   (or --pid PID): a program under netvm gmem run\n"
               "       netvm stat pid:PID [--dir DIR] [--json]: a netvm process started with NETVM_STATS_DIR=DIR\n"
               "         (registration strategies and the local registration cache; DIR defaults to NETVM_STATS_DIR)\n"
               "  the credential file defaults to NETVM_GMEM_CREDENTIAL_FILE\n");
}

static double rate(uint64_t bytes, uint64_t ms) { return ms ? (double)bytes * 1000.0 / (double)ms : 0.0; }

static void print_json(const char *addr, const struct nv_gm_stat *s)
{
    printf("{\"address\": \"%s\", \"version\": %llu, \"server_id\": \"%016llx\", \"pool_pages\": %llu, "
           "\"page_size\": %u, \"used_pages\": %llu, \"client_max_pages\": %llu, \"clients\": %llu, "
           "\"servers\": %llu, \"forwards\": %llu, \"puts\": %llu, \"gets\": %llu, \"frees\": %llu, "
           "\"moves_out\": %llu, \"moves_in\": %llu, \"delegated\": %llu, \"refused\": %llu, "
           "\"bytes_in\": %llu, \"bytes_out\": %llu, \"uptime_ms\": %llu, \"draining\": %s, "
           "\"bytes_in_per_s\": %.1f, \"bytes_out_per_s\": %.1f, \"shared_regions\": %llu, \"shared_pages\": %llu}\n",
           addr, (unsigned long long)s->version, (unsigned long long)s->server_id,
           (unsigned long long)s->pool_pages, NV_GM_PAGE, (unsigned long long)s->used_pages,
           (unsigned long long)s->client_max_pages, (unsigned long long)s->clients,
           (unsigned long long)s->servers, (unsigned long long)s->forwards, (unsigned long long)s->puts,
           (unsigned long long)s->gets, (unsigned long long)s->frees, (unsigned long long)s->moves_out,
           (unsigned long long)s->moves_in, (unsigned long long)s->delegated, (unsigned long long)s->refused,
           (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out, (unsigned long long)s->uptime_ms,
           s->draining ? "true" : "false", rate(s->bytes_in, s->uptime_ms), rate(s->bytes_out, s->uptime_ms),
           (unsigned long long)s->shared_regions, (unsigned long long)s->shared_pages);
}

static double mib(uint64_t pages) { return (double)pages * NV_GM_PAGE / (1024.0 * 1024.0); }

static void print_text(const char *addr, const struct nv_gm_stat *s)
{
    double up = (double)s->uptime_ms / 1000.0;
    printf("memd %s  server %016llx  up %.1f s%s\n", addr, (unsigned long long)s->server_id, up,
           s->draining ? "  DRAINING" : "");
    printf("pool      %llu pages (%.1f MiB), used %llu (%.1f%%, %.1f MiB), free %llu\n",
           (unsigned long long)s->pool_pages, mib(s->pool_pages), (unsigned long long)s->used_pages,
           s->pool_pages ? 100.0 * (double)s->used_pages / (double)s->pool_pages : 0.0, mib(s->used_pages),
           (unsigned long long)(s->pool_pages - s->used_pages));
    printf("per client at most %llu pages (%.1f MiB)\n", (unsigned long long)s->client_max_pages,
           mib(s->client_max_pages));
    printf("peers     %llu client(s), %llu server(s); %llu page(s) forwarded elsewhere\n",
           (unsigned long long)s->clients, (unsigned long long)s->servers, (unsigned long long)s->forwards);
    printf("calls     put %llu  get %llu  free %llu  delegated %llu  refused %llu\n",
           (unsigned long long)s->puts, (unsigned long long)s->gets, (unsigned long long)s->frees,
           (unsigned long long)s->delegated, (unsigned long long)s->refused);
    printf("shared    %llu named region(s), %llu page(s) of them\n", (unsigned long long)s->shared_regions,
           (unsigned long long)s->shared_pages);
    printf("moves     %llu page(s) out, %llu in\n", (unsigned long long)s->moves_out,
           (unsigned long long)s->moves_in);
    printf("bytes     in %llu (%.0f B/s), out %llu (%.0f B/s) since start\n", (unsigned long long)s->bytes_in,
           rate(s->bytes_in, s->uptime_ms), (unsigned long long)s->bytes_out, rate(s->bytes_out, s->uptime_ms));
}

static int stat_gmem(const char *pid_s, int json)
{
    char *end;
    long pid = strtol(pid_s, &end, 10);
    char path[4096];
    struct nvp_stats_file s;
    if (*end || pid <= 0) {
        fprintf(stderr, "netvm stat: gmem:%s: not a process id\n", pid_s);
        return 2;
    }
    if (nv_gmem_stats_find((int)pid, path, sizeof path) != 0 || nvp_stats_read(path, &s) != 0) {
        fprintf(stderr, "netvm stat: process %ld has no network-memory statistics (not run by netvm gmem run, "
                        "not yet using network memory, or its run ended)\n", pid);
        return 1;
    }
    if (json)
        nv_gmem_stats_json(stdout, &s);
    else
        nv_gmem_stats_print(stdout, &s);
    return 0;
}

int nv_cmd_stat(int argc, char **argv)
{
    const char *addr = NULL, *cred_file = NULL, *gmem_pid = NULL, *ctx_pid = NULL, *dir = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--pid") && i + 1 < argc)
            gmem_pid = argv[++i];
        else if (!strncmp(argv[i], "gmem:", 5))
            gmem_pid = argv[i] + 5;
        else if (!strncmp(argv[i], "pid:", 4))
            ctx_pid = argv[i] + 4;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--credential-file") && i + 1 < argc)
            cred_file = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!addr && strncmp(argv[i], "--", 2) != 0)
            addr = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (gmem_pid)
        return stat_gmem(gmem_pid, json);
    if (ctx_pid)
        return nv_stat_ctx(ctx_pid, dir ? dir : nv_config_str("NETVM_STATS_DIR"), json);
    if (!cred_file)
        cred_file = nv_config_str("NETVM_GMEM_CREDENTIAL_FILE");
    if (!addr || !cred_file) {
        if (addr)
            fprintf(stderr, "netvm stat: no credential: --credential-file or NETVM_GMEM_CREDENTIAL_FILE\n");
        usage(stderr);
        return 2;
    }
    uint8_t cred[NV_GM_CRED_MAX];
    size_t cred_len;
    char err[600];
    if (nv_gm_cred_read_file(cred_file, cred, &cred_len, err, sizeof err) != 0) {
        fprintf(stderr, "netvm stat: %s\n", err);
        return 1;
    }
    netvm_ctx_t *ctx;
    netvm_config_t cfg = { .boot = "none" };   /* an observer, never a job's rank */
    netvm_status_t st = netvm_init(&ctx, &cfg);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm stat: netvm_init: %s\n", netvm_strerror(st));
        return 1;
    }
    int peer;
    struct nv_gm_stat s;
    netvm_rpc_result_t res;
    st = netvm_connect(ctx, addr, cred, cred_len, 0, &peer);
    memset(cred, 0, sizeof cred);
    if (st == NETVM_OK) {
        uint64_t a[3] = { NV_GM_VERSION, NV_GM_ROLE_OBSERVER, 0 };
        st = nv_rpc_svc_call(ctx, peer, nv_gm_k(NV_GM_HELLO), a, 3, NULL, 0, NULL, 0, 0, &res);
        if (st == NETVM_OK)
            st = nv_rpc_svc_call(ctx, peer, nv_gm_k(NV_GM_STAT), NULL, 0, NULL, 0, &s, sizeof s, 0, &res);
        if (st == NETVM_OK && res.len != sizeof s)
            st = NETVM_ERR_UNSUPPORTED;
        netvm_disconnect(ctx, peer);
    }
    netvm_finalize(ctx);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm stat: %s: %s\n", addr, netvm_strerror(st));
        return 1;
    }
    if (json)
        print_json(addr, &s);
    else
        print_text(addr, &s);
    return 0;
}
