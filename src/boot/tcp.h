/* TCP plumbing for the rendezvous of a multi-host job: "HOST:PORT" as users
 * write it, a listening socket for the hub, one connection attempt for a
 * node, socket options that make a vanished peer noticed, and addresses as
 * text. No protocol here. */
#ifndef NV_BOOT_TCP_H
#define NV_BOOT_TCP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NV_TCP_ADDR_MAX 64      /* an IPv6 address and a port as text, with room */

/* Split "HOST:PORT" or "[V6ADDR]:PORT" (PORT 1..65535). HOST may be empty
 * or "*": every address (listening only). 0, or -1 with a message in err. */
int nv_boot_tcp_split(const char *hostport, char *host, size_t hcap, char *port, size_t pcap,
                 char *err, size_t errcap);

/* A non-blocking listening socket on hostport; *specific says whether it is
 * bound to one address (else a wildcard), whose text goes to ip when so.
 * -1 with a message in err. */
int nv_boot_tcp_listen(const char *hostport, int *specific, char *ip, size_t ipcap,
                  char *err, size_t errcap);

/* One attempt to connect to hostport within timeout_ms: a connected,
 * non-blocking socket, or -1 with errno (ECONNREFUSED, ETIMEDOUT, ...) and
 * a message in err. *retry says whether trying again later could help
 * (nobody listening yet, name not resolvable yet) or not (a malformed
 * address). */
int nv_boot_tcp_connect(const char *hostport, int timeout_ms, int *retry, char *err, size_t errcap);

/* Keepalive and a user timeout, so that a peer host that vanishes without a
 * word (powered off, cable pulled) is noticed in about ten seconds instead of
 * hours; and no Nagle delay on the small request-reply messages. */
void nv_boot_tcp_tune(int fd);

/* A socket's own numeric address, without port (what the other end sees
 * this host as); its peer's address with port, for messages. "?" if
 * unknown. */
void nv_boot_tcp_local_ip(int fd, char *out, size_t cap);
void nv_boot_tcp_peer_name(int fd, char *out, size_t cap);

#endif
