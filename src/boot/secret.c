/* The per-job secret as text (secret.h). */
#include "boot/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int nv_secret_from_hex(const char *hex, size_t len, uint8_t out[NV_BOOT_SECRET_LEN])
{
    if (!hex || len != NV_BOOT_SECRET_HEX_LEN)
        return -1;
    for (int i = 0; i < NV_BOOT_SECRET_LEN; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

void nv_secret_to_hex(const uint8_t secret[NV_BOOT_SECRET_LEN], char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < NV_BOOT_SECRET_LEN; i++) {
        hex[2 * i] = digits[secret[i] >> 4];
        hex[2 * i + 1] = digits[secret[i] & 15];
    }
    hex[NV_BOOT_SECRET_HEX_LEN] = 0;
}

int nv_secret_read_file(const char *path, uint8_t out[NV_BOOT_SECRET_LEN], char *err, size_t errcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    char buf[NV_BOOT_SECRET_HEX_LEN + 64];
    ssize_t n = -1;
    int rc = -1;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "%s: not a regular file", path);
    } else if (st.st_mode & 077) {
        snprintf(err, errcap, "%s: others may access it (mode %03o); make it private: chmod 600 %s",
                 path, (unsigned)(st.st_mode & 0777), path);
    } else if ((n = read(fd, buf, sizeof buf)) < 0) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
    } else {
        size_t len = (size_t)n;
        while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
                       buf[len - 1] == '\t'))
            len--;
        if (nv_secret_from_hex(buf, len, out) == 0)
            rc = 0;
        else
            snprintf(err, errcap, "%s: expected %d hex digits (e.g. from `openssl rand -hex %d`)", path,
                     NV_BOOT_SECRET_HEX_LEN, NV_BOOT_SECRET_LEN);
    }
    explicit_bzero(buf, sizeof buf);
    close(fd);
    return rc;
}
