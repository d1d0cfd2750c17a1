/* A memory server's credential, read the ways docs/memd.md allows: from
 * a file only its owner may read, or from a file descriptor until EOF;
 * never from argv or the environment (other users see those). The bytes
 * are taken as they are (a trailing newline is part of the secret). */
#ifndef NV_GMEM_SERVER_CRED_H
#define NV_GMEM_SERVER_CRED_H

#include <stddef.h>
#include <stdint.h>

#define NV_GM_CRED_MIN 16
#define NV_GM_CRED_MAX 64

/* 0 and *len set, or -1 with why (a sentence) in err. */
int nv_gm_cred_read_file(const char *path, void *buf, size_t *len, char *err, size_t errlen);
int nv_gm_cred_read_fd(int fd, void *buf, size_t *len, char *err, size_t errlen);

#endif
