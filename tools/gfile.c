/* netvm gfile mount DIR SRC: SRC's files, read-only at DIR, read through
 * network memory's file cache (include/netvm/gfile.h), so that unmodified
 * programs read() and mmap() them from it: a FUSE file system (libfuse3).
 * The kernel's page cache turns a program's mmap of a file here into
 * reads, which the cache serves like any other. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#ifdef NV_HAVE_FUSE3
#define FUSE_USE_VERSION 31
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <netvm/gfile.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char src_root[PATH_MAX];
static netvm_ctx_t *gf_ctx;

static int full_path(const char *path, char *out)
{
    return snprintf(out, PATH_MAX, "%s%s", src_root, path) >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static void *gf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    (void)conn;
    cfg->kernel_cache = 1;   /* the files do not change under us: a changed file is another cache */
    netvm_config_t c = { .boot = "none" };
    netvm_status_t st = netvm_init(&gf_ctx, &c);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm gfile mount: netvm_init: %s\n", netvm_strerror(st));
        exit(1);
    }
    return NULL;
}

static void gf_destroy(void *data)
{
    (void)data;
    if (gf_ctx)
        netvm_finalize(gf_ctx);
}

static int gf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    (void)fi;
    char p[PATH_MAX];
    int e = full_path(path, p);
    if (e)
        return e;
    if (lstat(p, st) != 0)
        return -errno;
    st->st_mode &= ~(mode_t)(S_IWUSR | S_IWGRP | S_IWOTH);
    return 0;
}

static int gf_readlink(const char *path, char *buf, size_t size)
{
    char p[PATH_MAX];
    int e = full_path(path, p);
    if (e)
        return e;
    ssize_t n = readlink(p, buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = 0;
    return 0;
}

static int gf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags)
{
    (void)off, (void)fi, (void)flags;
    char p[PATH_MAX];
    int e = full_path(path, p);
    if (e)
        return e;
    DIR *d = opendir(p);
    if (!d)
        return -errno;
    for (struct dirent *de; (de = readdir(d));)
        if (fill(buf, de->d_name, NULL, 0, 0))
            break;
    closedir(d);
    return 0;
}

static int gf_open(const char *path, struct fuse_file_info *fi)
{
    if ((fi->flags & O_ACCMODE) != O_RDONLY)
        return -EROFS;
    char p[PATH_MAX];
    int e = full_path(path, p);
    if (e)
        return e;
    netvm_gfile_t *f;
    netvm_status_t st = netvm_gfile_open(gf_ctx, p, NULL, &f);
    if (st == NETVM_ERR_SYS)
        return -EACCES;
    if (st != NETVM_OK)
        return st == NETVM_ERR_INVAL ? -EINVAL : -EIO;
    fi->fh = (uint64_t)(uintptr_t)f;
    return 0;
}

static int gf_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path;
    size_t got;
    netvm_status_t st = netvm_gfile_pread((netvm_gfile_t *)(uintptr_t)fi->fh, buf, size, (uint64_t)off, &got);
    return st == NETVM_OK ? (int)got : -EIO;
}

static int gf_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    netvm_gfile_close((netvm_gfile_t *)(uintptr_t)fi->fh);
    return 0;
}

static const struct fuse_operations gf_ops = {
    .init = gf_init,
    .destroy = gf_destroy,
    .getattr = gf_getattr,
    .readlink = gf_readlink,
    .readdir = gf_readdir,
    .open = gf_open,
    .read = gf_read,
    .release = gf_release,
};
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: netvm gfile mount DIR SRC [--foreground]\n"
               "  SRC's files, read-only at DIR, read through network memory's file cache\n"
               "  (NETVM_GMEM_SERVERS and NETVM_GMEM_CREDENTIAL_FILE name the memory servers);\n"
               "  unmount with fusermount3 -u DIR\n");
}

int nv_cmd_gfile(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 4 || strcmp(argv[1], "mount") || (argc == 5 && strcmp(argv[4], "--foreground")) || argc > 5) {
        usage(stderr);
        return 2;
    }
#ifdef NV_HAVE_FUSE3
    if (!realpath(argv[3], src_root)) {
        fprintf(stderr, "netvm gfile mount: %s: %s\n", argv[3], strerror(errno));
        return 1;
    }
    /* single-threaded: one request at a time through one context */
    char *fargv[] = { argv[0], argv[2], "-s", "-o", "ro,default_permissions,fsname=netvm-gfile", NULL, NULL };
    int fargc = 5;
    if (argc == 5)
        fargv[fargc++] = "-f";
    return fuse_main(fargc, fargv, &gf_ops, NULL);
#else
    fprintf(stderr, "netvm gfile mount: this netvm was built without libfuse3 (scripts/install-deps.sh installs "
                    "libfuse3-dev)\n");
    return 1;
#endif
}
