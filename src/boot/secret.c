/* The per-job secret as text (secret.h). */
#include "boot/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

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

/* The area /proc/self/environ shows: env_start and env_end, fields 50 and
 * 51 of /proc/self/stat (Linux 3.5). 0, or -1 if it cannot be read. */
static int environ_area(uintptr_t *start, uintptr_t *end)
{
    char buf[2048];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    /* the command name (field 2) may hold spaces and parentheses: count
     * fields from the last ')' on, field 3 being the first after it */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long v[2];
    int field = 2;
    for (char *save = NULL, *tok = strtok_r(p + 1, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        field++;
        if (field >= 50)
            v[field - 50] = strtoull(tok, NULL, 10);
        if (field == 51) {
            *start = (uintptr_t)v[0];
            *end = (uintptr_t)v[1];
            return *start < *end ? 0 : -1;
        }
    }
    return -1;
}

int nv_secret_take_env(uint8_t out[NV_BOOT_SECRET_LEN])
{
    static const char prefix[] = "NETVM_SECRET=";
    const char *v = getenv("NETVM_SECRET");
    if (!v)
        return -1;
    int rc = !*v ? -1 : nv_secret_from_hex(v, strlen(v), out) == 0 ? 0 : 1;
    /* Only the strings the kernel put there are overwritten: a value given
     * by setenv lives in libc's heap, where glibc keeps it in a search tree
     * of known values that zeroed bytes would corrupt (and no /proc file
     * shows it). execve allows a name twice; unsetenv removes every copy. */
    char *initial[8];
    size_t n = 0;
    uintptr_t start, end;
    if (environ_area(&start, &end) == 0)
        for (char **e = environ; *e && n < sizeof initial / sizeof initial[0]; e++)
            if (!strncmp(*e, prefix, sizeof prefix - 1) && (uintptr_t)*e >= start &&
                (uintptr_t)*e + strlen(*e) < end)
                initial[n++] = *e;
    unsetenv("NETVM_SECRET");
    for (size_t i = 0; i < n; i++)
        explicit_bzero(initial[i], strlen(initial[i]));
    return rc;
}
