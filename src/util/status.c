/* netvm_strerror: one sentence per status, for users reading an error. */
#include <netvm/netvm.h>

static const char *const messages[NETVM_STATUS_COUNT] = {
    [NETVM_OK]              = "success",
    [NETVM_ERR_INVAL]       = "invalid argument",
    [NETVM_ERR_KEY]         = "segment key does not match (forged or stale handle)",
    [NETVM_ERR_BOUNDS]      = "range outside the segment's bounds",
    [NETVM_ERR_RIGHTS]      = "segment lacks the right this operation needs",
    [NETVM_ERR_REVOKED]     = "segment was unexported or its owner finalized",
    [NETVM_ERR_PEER]        = "peer process died, left, or is not connected",
    [NETVM_ERR_TIMEOUT]     = "peer did not answer within NETVM_TIMEOUT",
    [NETVM_ERR_NOMEM]       = "out of memory or a fixed table is full",
    [NETVM_ERR_RANK]        = "no such peer (rank of this job or connected peer)",
    [NETVM_ERR_NOTFOUND]    = "no segment (or handler) of that name at that peer",
    [NETVM_ERR_EXISTS]      = "a segment of that name is already exported",
    [NETVM_ERR_FAULT]       = "exported range is no longer mapped in the target",
    [NETVM_ERR_BOOT]        = "bootstrap failed (launcher or rendezvous unreachable)",
    [NETVM_ERR_SYS]         = "unexpected system call failure (see the log)",
    [NETVM_ERR_UNSUPPORTED] = "no link between these ranks supports this",
    [NETVM_ERR_STATE]       = "wrong state for this call (a blocking call inside a handler?)",
    [NETVM_ERR_AGAIN]       = "not now: events already wait, a queue or listener is full",
    [NETVM_ERR_AUTH]        = "authentication failed (wrong job secret or credential)",
    [NETVM_ERR_BUSY]        = "held by another (a shared region's writer, or a name still mapped)",
    [NETVM_ERR_UNPINNED]    = "target memory not pinned for remote access (NETVM_TCP_PINNED; see NETVM_REG)",
};

const char *netvm_strerror(netvm_status_t status)
{
    if ((unsigned)status >= NETVM_STATUS_COUNT || !messages[status])
        return "unknown netvm status";
    return messages[status];
}
