/* Blocking, deadline-bounded frame I/O on a bootstrap socket: what a
 * process's client (client.c) and a node launcher meeting the rendezvous
 * (rendezvous.c) share. The boot server never blocks and does not use it,
 * except to drain its last words on the way out.
 *
 * Nothing here logs: each call returns a status and, through *why, a short
 * reason for the caller to put in its own message. */
#ifndef NV_BOOT_IO_H
#define NV_BOOT_IO_H

#include "wire/boot_msg.h"

#include <netvm/netvm.h>
#include <stddef.h>
#include <stdint.h>

/* A deadline for nv_now_ns(): timeout_ms from now; 0 (none) if negative. */
uint64_t nv_boot_deadline(int timeout_ms);

/* Wait until fd has one of events (or hangs up) or the deadline (0: none)
 * passes: NETVM_OK, NETVM_ERR_TIMEOUT, or NETVM_ERR_SYS. */
netvm_status_t nv_boot_wait_fd(int fd, short events, uint64_t deadline);

/* All len bytes, or: NETVM_ERR_TIMEOUT, NETVM_ERR_BOOT (the peer went
 * away; *why says how), NETVM_ERR_SYS. The socket may be non-blocking. */
netvm_status_t nv_boot_send_all(int fd, const uint8_t *p, size_t len, uint64_t deadline,
                                const char **why);
netvm_status_t nv_boot_recv_all(int fd, uint8_t *p, size_t len, uint64_t deadline,
                                const char **why);

/* Encode m and send it. */
netvm_status_t nv_boot_send_msg(int fd, const struct nv_boot_msg *m, uint64_t deadline,
                                const char **why);
/* Receive one frame of at most max_payload bytes. On NETVM_OK *frame is the
 * payload (m points into it; the caller frees it). A malformed frame is
 * NETVM_ERR_BOOT with *why saying what was wrong. */
netvm_status_t nv_boot_recv_msg(int fd, uint32_t max_payload, uint64_t deadline, uint8_t **frame,
                                struct nv_boot_msg *m, const char **why);

#endif
