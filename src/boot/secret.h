/* The per-job secret as text: 64 hex digits (NETVM_SECRET, a --secret-file).
 * Shared by a process reading its environment (client.c) and the launcher
 * reading the secret a multi-host job was given. Whoever reads NETVM_SECRET
 * takes it out of the environment (nv_secret_take_env): the programs a rank
 * or a launcher starts must not inherit the job's key. */
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

/* Take NETVM_SECRET out of this process's environment: -1 if it is not
 * set or empty, 0 with the secret in out, 1 if it is not 64 hex digits; in
 * every case it is removed (so no child inherits it).
 * Its text is also overwritten where it lies in the environment the process
 * was started with, the bytes /proc/PID/environ shows (a file that processes
 * of the same user may read even where Yama keeps them from reading this
 * process's memory). Like setenv, not safe against other threads' getenv or
 * setenv at the same moment. */
int  nv_secret_take_env(uint8_t out[NV_BOOT_SECRET_LEN]);

#endif
