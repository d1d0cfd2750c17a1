/* The per-job secret as text: 64 hex digits (NETVM_SECRET, a --secret-file).
 * Shared by a process reading its environment (client.c) and the launcher
 * reading the secret a multi-host job was given. */
#ifndef NV_BOOT_SECRET_H
#define NV_BOOT_SECRET_H

#include "boot/boot.h"

#include <stddef.h>
#include <stdint.h>

#define NV_BOOT_SECRET_HEX_LEN (2 * NV_BOOT_SECRET_LEN)

/* 0 if hex (len characters) is exactly NV_BOOT_SECRET_HEX_LEN hex digits,
 * decoded into out; else -1. */
int  nv_secret_from_hex(const char *hex, size_t len, uint8_t out[NV_BOOT_SECRET_LEN]);
/* hex gets NV_BOOT_SECRET_HEX_LEN lowercase digits and a NUL. */
void nv_secret_to_hex(const uint8_t secret[NV_BOOT_SECRET_LEN], char *hex);

/* Read a secret file: 64 hex digits, optionally followed by whitespace (a
 * newline). The file must be a regular file that only its owner may read
 * or write, as ssh demands of a private key: a secret others can read is
 * no secret. On failure returns -1 with a message in err. */
int  nv_secret_read_file(const char *path, uint8_t out[NV_BOOT_SECRET_LEN], char *err, size_t errcap);

#endif
