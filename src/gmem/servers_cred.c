/* The memory servers' credential from a file, under the rules memd
 * applies to its own: 16 to 64 bytes (a trailing newline is not part of
 * it), and no access for group or others, since whoever reads it may
 * store and read pages as this client. */
#include "gmem/servers.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

netvm_status_t nv_gm_cred_file(const char *path, uint8_t *buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        nv_error("gmem: cannot open the credential file %s: %s", path, strerror(errno));
        return NETVM_ERR_AUTH;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 077)) {
        nv_error("gmem: the credential file %s must be a regular file without group or world access (chmod 600)",
                 path);
        close(fd);
        return NETVM_ERR_AUTH;
    }
    uint8_t tmp[NV_GM_CRED_MAX + 2];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, tmp + n, sizeof tmp - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == sizeof tmp)
            break;
    }
    close(fd);
    if (n && tmp[n - 1] == '\n')
        n--;
    if (n < NV_GM_CRED_MIN || n > NV_GM_CRED_MAX) {
        nv_error("gmem: the credential in %s has %zu bytes; it must have 16 to 64", path, n);
        return NETVM_ERR_AUTH;
    }
    memcpy(buf, tmp, n);
    *len = n;
    return NETVM_OK;
}
