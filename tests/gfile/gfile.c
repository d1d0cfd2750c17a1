/* The file cache, multi-process through the launcher.
 *
 *   gfile drive NETVM CASE PAGES
 * starts three memory servers (R = 2), writes files of 1 byte, 3 pages + 123 bytes
 * and PAGES pages + 7 bytes under /tmp, and runs jobs of `gfile work CASE`:
 *
 *   shared   2 ranks: rank 0 reads each file through pread (reads of odd
 *            sizes crossing blocks, and past the end) and through the
 *            whole-file mapping: the exact bytes, and every block read from
 *            the file once; then rank 1 reads the same and reads nothing
 *            from the file (the cache served it all).
 *   changed  a file rewritten after it was cached (replaced by a new file,
 *            or rewritten in place with the same size) is read anew: its
 *            new bytes, from the file, never the cached old ones (whose
 *            cache stays on the servers under the old content's name).
 *   windows  mapped blocks: 2 windows of 4 pages moved over the file by
 *            odd steps (and past its end) show exactly its bytes.
 *   mount    `netvm gfile mount` (FUSE): unmodified reads (cmp(1), read(2)
 *            and mmap(2) by this driver) see the files' bytes; a job then
 *            reads them through the API without reading the files: the
 *            mount's reads cached every block.
 * Every case removes the caches at the end and the servers are then empty.
 */
#define _GNU_SOURCE
#include "gmem_test.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"   /* gs_servers.h helpers this test does not use */
#include "gs_servers.h"
#pragma GCC diagnostic pop

#include <netvm/gfile.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int npages;
static const char *dir_env = "GFILE_TEST_DIR";

#define NFILES 3
static size_t file_size(int i)
{
    return i == 0 ? 1 : i == 1 ? 3 * GPAGE + 123 : (size_t)npages * GPAGE + 7;
}

static void file_path(int i, char *out, size_t cap)
{
    snprintf(out, cap, "%s/f%d", getenv(dir_env), i);
}

/* Content of version v of file i: bytes that differ per offset and version. */
static unsigned char byte_at(int i, uint64_t off, unsigned v)
{
    uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(i + 1) << 56) ^ ((uint64_t)v << 48);
    x ^= x >> 29;
    return (unsigned char)(x ^ (x >> 17));
}

static void write_file(int i, unsigned v)
{
    char p[512];
    file_path(i, p, sizeof p);
    size_t n = file_size(i);
    unsigned char *b = malloc(n);
    CHECK(b);
    for (size_t k = 0; k < n; k++)
        b[k] = byte_at(i, k, v);
    char tmp[520];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, b, n) == (ssize_t)n);
    close(fd);
    CHECK(rename(tmp, p) == 0);   /* a new inode: what a program rewriting a file often does */
    free(b);
}

static void rewrite_in_place(int i, unsigned v)
{
    char p[512];
    file_path(i, p, sizeof p);
    size_t n = file_size(i);
    unsigned char *b = malloc(n);
    CHECK(b);
    for (size_t k = 0; k < n; k++)
        b[k] = byte_at(i, k, v);
    int fd = open(p, O_WRONLY);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, b, n, 0) == (ssize_t)n);
    close(fd);
    free(b);
}

static int same(int i, const unsigned char *b, uint64_t off, size_t n, unsigned v)
{
    for (size_t k = 0; k < n; k++)
        if (b[k] != byte_at(i, off + k, v))
            return 0;
    return 1;
}

/* --- the jobs ----------------------------------------------------------------- */

/* Read file i every way but windows; the file reads it cost. */
static uint64_t read_all(netvm_ctx_t *ctx, int i, unsigned v)
{
    char p[512];
    file_path(i, p, sizeof p);
    netvm_gfile_t *f;
    CHECK_OK(netvm_gfile_open(ctx, p, NULL, &f));
    uint64_t size;
    CHECK_OK(netvm_gfile_size(f, &size));
    CHECK(size == file_size(i));
    unsigned char *b = malloc(size + 3 * GPAGE);
    CHECK(b);
    /* odd-sized reads that cross blocks, the last one past the end */
    size_t step = 5000, got;
    for (uint64_t off = 0; off < size; off += step) {
        CHECK_OK(netvm_gfile_pread(f, b, step, off, &got));
        CHECK(got == (size - off < step ? size - off : step));
        CHECK(same(i, b, off, got, v));
    }
    CHECK_OK(netvm_gfile_pread(f, b, 10, size, &got));
    CHECK(got == 0);
    CHECK_OK(netvm_gfile_pread(f, b, 10, size + 100000, &got));
    CHECK(got == 0);
    /* the whole file at once: runs of many blocks */
    CHECK_OK(netvm_gfile_pread(f, b, size + GPAGE, 0, &got));
    CHECK(got == size && same(i, b, 0, size, v));
    void *a;
    size_t len;
    CHECK_OK(netvm_gfile_map(f, &a, &len));
    CHECK(len == size && same(i, a, 0, len, v));
    for (size_t k = len; k % GPAGE; k++)
        CHECK(((unsigned char *)a)[k] == 0);   /* the last page's tail */
    netvm_gfile_stats_t s;
    CHECK_OK(netvm_gfile_stats(f, &s));
    fprintf(stderr, "file %d (%llu bytes) version %u: %llu blocks read from the file, %llu from the cache\n", i,
            (unsigned long long)size, v, (unsigned long long)s.file_reads, (unsigned long long)s.cache_blocks);
    CHECK_OK(netvm_gfile_close(f));
    free(b);
    return s.file_reads;
}

static uint64_t blocks(int i) { return (file_size(i) + GPAGE - 1) / GPAGE; }

static void remove_all(netvm_ctx_t *ctx)
{
    for (int i = 0; i < NFILES; i++) {
        char p[512];
        file_path(i, p, sizeof p);
        CHECK_OK(netvm_gfile_remove(ctx, p, NULL));
    }
}

static void work_shared(netvm_ctx_t *ctx, int rank)
{
    if (rank == 0)
        for (int i = 0; i < NFILES; i++)
            CHECK(read_all(ctx, i, 1) == blocks(i));   /* each block once, the rest from the cache */
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1)
        for (int i = 0; i < NFILES; i++)
            CHECK(read_all(ctx, i, 1) == 0);            /* all of it from network memory */
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        remove_all(ctx);
}

static void work_changed(netvm_ctx_t *ctx)
{
    for (int i = 0; i < NFILES; i++)
        CHECK(read_all(ctx, i, 1) == blocks(i));
    for (int i = 0; i < NFILES; i++) {
        /* the old content's cache stays on the servers; the changed file
         * is another cache: read from the file, the new bytes */
        if (i == 0)
            write_file(i, 2);           /* a new inode */
        else
            rewrite_in_place(i, 2);     /* the same inode and size */
        CHECK(read_all(ctx, i, 2) == blocks(i));
        CHECK(read_all(ctx, i, 2) == 0);
    }
    remove_all(ctx);   /* the new contents' caches (the driver counts the old ones) */
}

static void work_windows(netvm_ctx_t *ctx)
{
    int i = NFILES - 1;
    char p[512];
    file_path(i, p, sizeof p);
    netvm_gfile_t *f;
    CHECK_OK(netvm_gfile_open(ctx, p, NULL, &f));
    netvm_gfile_win_t *w;
    void *a;
    const size_t wsize = 4 * GPAGE;
    CHECK_OK(netvm_gfile_window(f, 2, wsize, &w, &a));
    size_t size = file_size(i);
    int moves = 0;
    /* window k % 2 at block 3k: overlapping, odd steps, the last past the end */
    for (uint64_t blk = 0; blk * GPAGE < size + wsize; blk += 3, moves++) {
        unsigned k = (unsigned)(moves % 2);
        unsigned char *win = (unsigned char *)a + k * wsize;
        CHECK_OK(netvm_gfile_window_move(w, k, blk * GPAGE));
        for (size_t o = 0; o < wsize; o++) {
            uint64_t off = blk * GPAGE + o;
            unsigned char want = off < size ? byte_at(i, off, 1) : 0;
            if (win[o] != want) {
                fprintf(stderr, "window %u at block %llu: byte %zu is %u, not %u\n", k, (unsigned long long)blk, o,
                        win[o], want);
                CHECK(0);
            }
        }
    }
    CHECK_OK(netvm_gfile_window_close(w));
    netvm_gfile_stats_t s;
    CHECK_OK(netvm_gfile_stats(f, &s));
    fprintf(stderr, "windows: %d moves, %llu blocks read from the file\n", moves, (unsigned long long)s.file_reads);
    CHECK(s.file_reads <= blocks(i));   /* each block from the file once at most */
    CHECK_OK(netvm_gfile_close(f));
    CHECK_OK(netvm_gfile_remove(ctx, p, NULL));
}

/* Every block is in the cache already (the mount read them). */
static void work_cached(netvm_ctx_t *ctx)
{
    for (int i = 0; i < NFILES; i++)
        CHECK(read_all(ctx, i, 1) == 0);
    remove_all(ctx);
}

static int work(const char *c)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx);
    if (!strcmp(c, "shared"))
        work_shared(ctx, rank);
    else if (!strcmp(c, "changed"))
        work_changed(ctx);
    else if (!strcmp(c, "windows"))
        work_windows(ctx);
    else if (!strcmp(c, "cached"))
        work_cached(ctx);
    else
        return 2;
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}

/* --- the driver ---------------------------------------------------------------- */

static const char *self;

static int job(int n, const char *c)
{
    char ns[16], ps[16];
    snprintf(ns, sizeof ns, "%d", n);
    snprintf(ps, sizeof ps, "%d", npages);
    char *argv[] = { (char *)gs_netvm, "run", "-n", ns, "--", (char *)self, "work", (char *)c, ps, NULL };
    pid_t pid;
    CHECK(posix_spawn(&pid, gs_netvm, NULL, NULL, argv, environ) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    fprintf(stderr, "gfile: job %s (%d ranks): %d\n", c, n, rc);
    return rc;
}

static int run_wait(char *const argv[])
{
    pid_t pid;
    CHECK(posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The files through `netvm gfile mount`, by programs that know nothing of
 * netvm; then a job finds every block cached. */
static int drive_mount(const char *dir)
{
    char mnt[600];
    snprintf(mnt, sizeof mnt, "%s/mnt", dir);
    char src[600];
    snprintf(src, sizeof src, "%s", dir);
    CHECK(mkdir(mnt, 0700) == 0);
    char *argv[] = { (char *)gs_netvm, "gfile", "mount", mnt, src, "--foreground", NULL };
    pid_t pid;
    CHECK(posix_spawn(&pid, gs_netvm, NULL, NULL, argv, environ) == 0);
    char p[700];
    snprintf(p, sizeof p, "%s/f%d", mnt, NFILES - 1);
    struct stat st;
    int up = 0;
    for (int i = 0; i < 3000 && !up; i++) {   /* mounted when the file shows */
        up = stat(p, &st) == 0 && (size_t)st.st_size == file_size(NFILES - 1);
        if (!up)
            usleep(10000);
    }
    CHECK(up);
    for (int i = 0; i < NFILES; i++) {
        char a[700], b[700];
        file_path(i, a, sizeof a);
        snprintf(b, sizeof b, "%s/f%d", mnt, i);
        char *cmp[] = { "cmp", a, b, NULL };
        CHECK(run_wait(cmp) == 0);
        /* read(2) in odd sizes and mmap(2) */
        size_t n = file_size(i);
        unsigned char *buf = malloc(n + 1);
        int fd = open(b, O_RDONLY);
        CHECK(fd >= 0 && buf);
        size_t got = 0;
        ssize_t k;
        while ((k = read(fd, buf + got, got + 777 < n + 1 ? 777 : n + 1 - got)) > 0)
            got += (size_t)k;
        CHECK(got == n && same(i, buf, 0, n, 1));
        unsigned char *m = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
        CHECK(m != MAP_FAILED && same(i, m, 0, n, 1));
        munmap(m, n);
        close(fd);
        free(buf);
    }
    char *umount[] = { "fusermount3", "-u", mnt, NULL };
    CHECK(run_wait(umount) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    rmdir(mnt);
    return job(1, "cached");
}

static int drive(const char *c)
{
    gs_write_cred();
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "32M", "2000");
    char list[256];
    snprintf(list, sizeof list, "%s,%s,%s", srv[0].addr, srv[1].addr, srv[2].addr);
    CHECK(setenv("NETVM_GMEM_SERVERS", list, 1) == 0);
    CHECK(setenv("NETVM_GMEM_CREDENTIAL_FILE", gs_cred_path, 1) == 0);
    CHECK(setenv("NETVM_GMEM_TIMEOUT", "30000", 1) == 0);
    unsetenv("NETVM_GMEM_STORE");
    char dir[] = "/tmp/gfile-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(setenv(dir_env, dir, 1) == 0);
    for (int i = 0; i < NFILES; i++)
        write_file(i, 1);
    int rc = !strcmp(c, "mount") ? drive_mount(dir) : job(!strcmp(c, "shared") ? 2 : 1, c);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    uint64_t used = 0, regions = 0;
    for (int i = 0; i < 3; i++) {
        struct nv_gm_stat st;
        gs_stat(ctx, &srv[i], &st);
        used += st.used_pages;
        regions += st.shared_regions;
    }
    CHECK_OK(netvm_finalize(ctx));
    for (int i = 0; i < 3; i++)
        gs_stop(&srv[i]);
    for (int i = 0; i < NFILES; i++) {
        char p[512];
        file_path(i, p, sizeof p);
        unlink(p);
    }
    rmdir(dir);
    unlink(gs_cred_path);
    CHECK(rc == 0);
    if (!strcmp(c, "changed"))
        CHECK(regions == 3 * NFILES);   /* the old contents' caches (a record on each server) stay */
    else
        CHECK(used == 0 && regions == 0);   /* the removes emptied the servers */
    printf("gfile %s: ok\n", c);
    return 0;
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc == 4 && !strcmp(argv[1], "work")) {
        npages = atoi(argv[3]);
        return work(argv[2]);
    }
    if (argc == 5 && !strcmp(argv[1], "drive")) {
        gs_netvm = argv[2];
        npages = atoi(argv[4]);
        char *abs = realpath(argv[0], NULL);
        CHECK(abs != NULL);
        self = abs;
        return drive(argv[3]);
    }
    fprintf(stderr, "usage: gfile drive NETVM CASE PAGES | gfile work CASE PAGES\n");
    return 2;
}
