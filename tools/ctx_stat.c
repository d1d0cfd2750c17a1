/* netvm stat pid:PID: the live statistics files of a process's netvm
 * contexts (wire/ctx_stats.h), written where NETVM_STATS_DIR said. */
#include "commands.h"
#include "util/seqfile.h"
#include "wire/ctx_stats.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A consistent copy of the file at path of this version: 0, or -1. */
static int read_file(const char *path, struct nv_ctx_stats_file *out)
{
    if (nv_seqfile_read(path, out, sizeof *out, offsetof(struct nv_ctx_stats_file, seq), NV_CTX_STATS_MAGIC) != 0)
        return -1;
    return out->version == NV_CTX_STATS_VERSION ? 0 : -1;
}

static double pct(uint64_t a, uint64_t b) { return a + b ? 100.0 * (double)a / (double)(a + b) : 0.0; }

static void print_text(const char *path, const struct nv_ctx_stats_file *s)
{
    printf("%s  pid %" PRId64 "  rank %d of %d  %s  (%s)\n", s->prog, s->pid, s->rank, s->size,
           s->finalized ? "finalized" : "live", path);
    printf("registration  NETVM_REG=%s\n", s->strategy);
    printf("  initiator   hits %" PRIu64 "  misses %" PRIu64 " (%.2f%% hits)  moves %" PRIu64 "\n", s->reg_hits,
           s->reg_misses, pct(s->reg_hits, s->reg_misses), s->reg_moves);
    printf("  target      pins %" PRIu64 "  unpins %" PRIu64 "  pinned %" PRIu64 " B (most %" PRIu64
           " B)  buckets %" PRIu64 " (%" PRIu64 " victims)\n",
           s->reg_pins, s->reg_unpins, s->reg_pinned_bytes, s->reg_pinned_high, s->reg_buckets, s->reg_victims);
    printf("              holds given back by peers gone %" PRIu64 "  accesses refused unpinned %" PRIu64 "\n",
           s->reg_peer_releases, s->reg_refused);
    printf("local registration cache  hits %" PRIu64 "  misses %" PRIu64 "  uncached %" PRIu64
           "  invalidations %" PRIu64 "  evictions %" PRIu64 "  registrations %" PRIu64 "  deregistrations %" PRIu64
           "\n",
           s->lreg_hits, s->lreg_misses, s->lreg_uncached, s->lreg_invalidations, s->lreg_evictions, s->lreg_regs,
           s->lreg_deregs);
}

static void print_json(const char *path, const struct nv_ctx_stats_file *s)
{
    printf("{\"file\": \"%s\", \"prog\": \"%s\", \"pid\": %" PRId64 ", \"rank\": %d, \"size\": %d, "
           "\"finalized\": %s, \"updated_ns\": %" PRIu64 ", \"reg\": {\"strategy\": \"%s\", \"hits\": %" PRIu64
           ", \"misses\": %" PRIu64 ", \"moves\": %" PRIu64 ", \"pins\": %" PRIu64 ", \"unpins\": %" PRIu64
           ", \"pinned_bytes\": %" PRIu64 ", \"pinned_high\": %" PRIu64 ", \"buckets\": %" PRIu64
           ", \"victims\": %" PRIu64 ", \"peer_releases\": %" PRIu64 ", \"refused\": %" PRIu64
           "}, \"lreg\": {\"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"uncached\": %" PRIu64
           ", \"invalidations\": %" PRIu64 ", \"evictions\": %" PRIu64 ", \"regs\": %" PRIu64
           ", \"deregs\": %" PRIu64 "}}\n",
           path, s->prog, s->pid, s->rank, s->size, s->finalized ? "true" : "false", s->updated_ns, s->strategy,
           s->reg_hits, s->reg_misses, s->reg_moves, s->reg_pins, s->reg_unpins, s->reg_pinned_bytes,
           s->reg_pinned_high, s->reg_buckets, s->reg_victims, s->reg_peer_releases, s->reg_refused, s->lreg_hits,
           s->lreg_misses, s->lreg_uncached, s->lreg_invalidations, s->lreg_evictions, s->lreg_regs,
           s->lreg_deregs);
}

int nv_stat_ctx(const char *pid, const char *dir, int json)
{
    char *end;
    long p = strtol(pid, &end, 10);
    if (!*pid || *end || p <= 0) {
        fprintf(stderr, "netvm stat: pid:%s: not a process id\n", pid);
        return 2;
    }
    if (!dir || !*dir) {
        fprintf(stderr, "netvm stat: pid:%ld: no directory: --dir DIR or NETVM_STATS_DIR (the one the "
                        "process was started with)\n", p);
        return 2;
    }
    int found = 0;
    for (int n = 0; n < 1000; n++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%ld.%d%s", dir, p, n, NV_CTX_STATS_SUFFIX);
        if (access(path, F_OK) != 0)
            break;
        struct nv_ctx_stats_file s;
        if (read_file(path, &s) != 0) {
            fprintf(stderr, "netvm stat: %s: not a netvm statistics file of this version\n", path);
            continue;
        }
        found++;
        if (json)
            print_json(path, &s);
        else
            print_text(path, &s);
    }
    if (!found) {
        fprintf(stderr, "netvm stat: no statistics of pid %ld in %s (was it started with NETVM_STATS_DIR=%s?)\n",
                p, dir, dir);
        return 1;
    }
    return 0;
}
