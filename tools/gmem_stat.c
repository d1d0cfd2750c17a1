/* Printing and finding `netvm gmem run`'s statistics files (gmem_stat.h). */
#define _GNU_SOURCE
#include "gmem_stat.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *nv_gmem_stats_base(void)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && *x && access(x, W_OK | X_OK) == 0)
        return x;
    if (access("/dev/shm", W_OK | X_OK) == 0)
        return "/dev/shm";
    return "/tmp";
}

int nv_gmem_stats_find(int pid, char *path, size_t cap)
{
    const char *base = nv_gmem_stats_base();
    DIR *d = opendir(base);
    if (!d)
        return -1;
    int best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "netvm-gmem-run.", 15) != 0)
            continue;
        for (int n = 0; n < 1000; n++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s/%d.%d%s", base, e->d_name, pid, n, NVP_STATS_SUFFIX);
            if (access(p, R_OK) != 0)
                break;
            if (n > best) {
                best = n;
                snprintf(path, cap, "%s", p);
            }
        }
    }
    closedir(d);
    return best >= 0 ? 0 : -1;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }
static double us(uint64_t ns) { return (double)ns / 1000.0; }

void nv_gmem_stats_print(FILE *f, const struct nvp_stats_file *s)
{
    const netvm_gmem_stats_t *g = &s->gm;
    fprintf(f, "  pid %lld (%s)%s: budget %.1f MiB, reserve %.0f GiB, threshold %.0f KiB, malloc %s\n",
            (long long)s->pid, s->prog, s->exited ? "" : " running", mib(s->budget),
            (double)s->reserve / (1024.0 * 1024.0 * 1024.0), (double)s->threshold / 1024.0,
            s->glibc_malloc ? "glibc's (intercepted)" : "the program's own (its mmap intercepted)");
    fprintf(f, "    faults %llu (zero-filled %llu), fetched %llu pages (%llu read directly), read ahead %llu (used %llu, "
               "wasted %llu)\n",
            (unsigned long long)g->faults, (unsigned long long)g->zero_fills, (unsigned long long)g->remote_fetches,
            (unsigned long long)g->direct_fetches,
            (unsigned long long)g->readahead_issued, (unsigned long long)g->readahead_hits,
            (unsigned long long)g->readahead_waste);
    fprintf(f, "    write-protect faults %llu, pages placed dirty %llu\n", (unsigned long long)g->wp_faults,
            (unsigned long long)g->placed_dirty);
    fprintf(f, "    evictions %llu (dirty %llu), page copies written %llu; bytes in %.1f MiB, out %.1f MiB\n",
            (unsigned long long)g->evictions, (unsigned long long)g->evictions_dirty,
            (unsigned long long)g->writebacks, mib(g->bytes_in), mib(g->bytes_out));
    fprintf(f, "    resident %llu pages now, %llu at most (%.1f MiB) of %llu; pages on servers %llu, lost %llu\n",
            (unsigned long long)g->resident_pages, (unsigned long long)g->resident_peak,
            mib(g->resident_peak * NETVM_GMEM_PAGE), (unsigned long long)g->budget_pages,
            (unsigned long long)s->health.pages_stored, (unsigned long long)s->health.pages_lost);
    fprintf(f, "    fault latency (fetched): p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n",
            us(g->fault_ns_p50), us(g->fault_ns_p99), us(g->fault_ns_p999), us(g->fault_ns_max));
    fprintf(f, "    intercepted: %llu mmap, %llu munmap, %llu mremap, %llu malloc, %llu free, %llu realloc "
               "(%llu moved), %llu discards; %.1f MiB in use, %.1f MiB at most\n",
            (unsigned long long)s->n.mmaps, (unsigned long long)s->n.munmaps, (unsigned long long)s->n.mremaps,
            (unsigned long long)s->n.mallocs, (unsigned long long)s->n.frees, (unsigned long long)s->n.reallocs,
            (unsigned long long)s->n.realloc_moves, (unsigned long long)s->n.discards, mib(s->n.live_bytes),
            mib(s->n.peak_live_bytes));
}

void nv_gmem_stats_json(FILE *f, const struct nvp_stats_file *s)
{
    const netvm_gmem_stats_t *g = &s->gm;
    fprintf(f,
            "{\"pid\": %lld, \"program\": \"%s\", \"exited\": %s, \"budget\": %llu, \"reserve\": %llu, "
            "\"threshold\": %llu, \"glibc_malloc\": %s, \"faults\": %llu, \"zero_fills\": %llu, "
            "\"remote_fetches\": %llu, \"readahead_issued\": %llu, \"readahead_hits\": %llu, "
            "\"readahead_waste\": %llu, \"evictions\": %llu, \"evictions_dirty\": %llu, \"writebacks\": %llu, "
            "\"bytes_in\": %llu, \"bytes_out\": %llu, \"resident_pages\": %llu, \"resident_peak\": %llu, "
            "\"budget_pages\": %llu, \"pages_stored\": %llu, \"pages_lost\": %llu, \"fault_ns_p50\": %llu, "
            "\"fault_ns_p99\": %llu, \"fault_ns_p999\": %llu, \"fault_ns_max\": %llu, \"mmaps\": %llu, "
            "\"munmaps\": %llu, \"mremaps\": %llu, \"mallocs\": %llu, \"frees\": %llu, \"reallocs\": %llu, "
            "\"realloc_moves\": %llu, \"discards\": %llu, \"live_bytes\": %llu, \"peak_live_bytes\": %llu, "
            "\"wp_faults\": %llu, \"placed_dirty\": %llu, \"direct_fetches\": %llu}\n",
            (long long)s->pid, s->prog, s->exited ? "true" : "false", (unsigned long long)s->budget,
            (unsigned long long)s->reserve, (unsigned long long)s->threshold, s->glibc_malloc ? "true" : "false",
            (unsigned long long)g->faults, (unsigned long long)g->zero_fills, (unsigned long long)g->remote_fetches,
            (unsigned long long)g->readahead_issued, (unsigned long long)g->readahead_hits,
            (unsigned long long)g->readahead_waste, (unsigned long long)g->evictions,
            (unsigned long long)g->evictions_dirty, (unsigned long long)g->writebacks,
            (unsigned long long)g->bytes_in, (unsigned long long)g->bytes_out,
            (unsigned long long)g->resident_pages, (unsigned long long)g->resident_peak,
            (unsigned long long)g->budget_pages, (unsigned long long)s->health.pages_stored,
            (unsigned long long)s->health.pages_lost, (unsigned long long)g->fault_ns_p50,
            (unsigned long long)g->fault_ns_p99, (unsigned long long)g->fault_ns_p999,
            (unsigned long long)g->fault_ns_max, (unsigned long long)s->n.mmaps, (unsigned long long)s->n.munmaps,
            (unsigned long long)s->n.mremaps, (unsigned long long)s->n.mallocs, (unsigned long long)s->n.frees,
            (unsigned long long)s->n.reallocs, (unsigned long long)s->n.realloc_moves,
            (unsigned long long)s->n.discards, (unsigned long long)s->n.live_bytes,
            (unsigned long long)s->n.peak_live_bytes, (unsigned long long)g->wp_faults,
            (unsigned long long)g->placed_dirty, (unsigned long long)g->direct_fetches);
}
