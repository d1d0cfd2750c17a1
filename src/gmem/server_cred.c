/* Reading a memory server's credential (server_cred.h). */
#include "gmem/server_cred.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int nv_gm_cred_read_fd(int fd, void *buf, size_t *len, char *err, size_t errlen)
{
    uint8_t tmp[NV_GM_CRED_MAX + 1];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, tmp + have, sizeof tmp - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read the credential: %s", strerror(errno));
            return -1;
        }
        if (r == 0)
            break;
        have += (size_t)r;
        if (have == sizeof tmp) {
            snprintf(err, errlen, "the credential is longer than %d bytes", NV_GM_CRED_MAX);
            memset(tmp, 0, sizeof tmp);
            return -1;
        }
    }
    if (have < NV_GM_CRED_MIN) {
        snprintf(err, errlen, "the credential has %zu bytes; it needs %d to %d", have, NV_GM_CRED_MIN,
                 NV_GM_CRED_MAX);
        memset(tmp, 0, sizeof tmp);
        return -1;
    }
    memcpy(buf, tmp, have);
    memset(tmp, 0, sizeof tmp);
    *len = have;
    return 0;
}

int nv_gm_cred_read_file(const char *path, void *buf, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the credential file %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "the credential file %s is not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen,
                 "the credential file %s may be read or written by others (mode %03o): "
                 "refused; chmod 600 it",
                 path, (unsigned)(st.st_mode & 0777));
        close(fd);
        return -1;
    }
    int r = nv_gm_cred_read_fd(fd, buf, len, err, errlen);
    close(fd);
    return r;
}
