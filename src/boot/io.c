/* Deadline-bounded blocking frame I/O (io.h). */
#include "boot/io.h"
#include "util/time.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

uint64_t nv_boot_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : nv_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

netvm_status_t nv_boot_wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline) {
            uint64_t now = nv_now_ns();
            if (now >= deadline)
                return NETVM_ERR_TIMEOUT;
            ms = (int)((deadline - now + 999999) / 1000000);
        }
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, ms);
        if (n > 0)
            return NETVM_OK;    /* ready, or hung up: the I/O call says which */
        if (n < 0 && errno != EINTR)
            return NETVM_ERR_SYS;
    }
}

/* Move all len bytes one way or the other, waiting for the socket as
 * needed, within the deadline. */
static netvm_status_t xfer_all(int fd, uint8_t *p, size_t len, int sending, uint64_t deadline,
                               const char **why)
{
    while (len) {
        /* MSG_NOSIGNAL: a peer that went away is an error to report, not a
         * SIGPIPE that kills the process */
        ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            netvm_status_t st = nv_boot_wait_fd(fd, sending ? POLLOUT : POLLIN, deadline);
            if (st != NETVM_OK) {
                *why = st == NETVM_ERR_TIMEOUT ? "timed out" : strerror(errno);
                return st;
            }
            continue;
        }
        *why = n < 0 ? strerror(errno) : "connection closed";
        return NETVM_ERR_BOOT;
    }
    return NETVM_OK;
}

netvm_status_t nv_boot_send_all(int fd, const uint8_t *p, size_t len, uint64_t deadline,
                                const char **why)
{
    return xfer_all(fd, (uint8_t *)p, len, 1, deadline, why);
}

netvm_status_t nv_boot_recv_all(int fd, uint8_t *p, size_t len, uint64_t deadline,
                                const char **why)
{
    return xfer_all(fd, p, len, 0, deadline, why);
}

netvm_status_t nv_boot_send_msg(int fd, const struct nv_boot_msg *m, uint64_t deadline,
                                const char **why)
{
    size_t size = nv_boot_msg_size(m);
    if (size == 0) {
        *why = "message cannot be encoded";
        return NETVM_ERR_INVAL;
    }
    uint8_t small[512];
    uint8_t *buf = size <= sizeof small ? small : malloc(size);
    if (!buf) {
        *why = "out of memory";
        return NETVM_ERR_NOMEM;
    }
    nv_boot_msg_encode(m, buf, size);
    netvm_status_t st = nv_boot_send_all(fd, buf, size, deadline, why);
    if (buf != small)
        free(buf);
    return st;
}

netvm_status_t nv_boot_recv_msg(int fd, uint32_t max_payload, uint64_t deadline, uint8_t **frame,
                                struct nv_boot_msg *m, const char **why)
{
    uint8_t hbuf[NV_BOOT_HDR_LEN];
    struct nv_boot_hdr hdr;
    *frame = NULL;
    netvm_status_t st = nv_boot_recv_all(fd, hbuf, sizeof hbuf, deadline, why);
    if (st != NETVM_OK)
        return st;
    if (nv_boot_hdr_decode(hbuf, sizeof hbuf, max_payload, &hdr, why) != NV_BOOT_RC_OK)
        return NETVM_ERR_BOOT;
    uint8_t *payload = malloc(hdr.len ? hdr.len : 1);
    if (!payload) {
        *why = "out of memory";
        return NETVM_ERR_NOMEM;
    }
    st = nv_boot_recv_all(fd, payload, hdr.len, deadline, why);
    if (st == NETVM_OK && nv_boot_payload_decode(hdr.type, payload, hdr.len, m, why) != NV_BOOT_RC_OK)
        st = NETVM_ERR_BOOT;
    if (st != NETVM_OK) {
        free(payload);
        return st;
    }
    *frame = payload;
    return NETVM_OK;
}
