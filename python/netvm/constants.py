"""The C API's enumerations and flags, as Python enums (values from <netvm/netvm.h>
and <netvm/events.h>)."""
import enum


class Status(enum.IntEnum):
    OK = 0
    ERR_INVAL = 1
    ERR_KEY = 2
    ERR_BOUNDS = 3
    ERR_RIGHTS = 4
    ERR_REVOKED = 5
    ERR_PEER = 6
    ERR_TIMEOUT = 7
    ERR_NOMEM = 8
    ERR_RANK = 9
    ERR_NOTFOUND = 10
    ERR_EXISTS = 11
    ERR_FAULT = 12
    ERR_BOOT = 13
    ERR_SYS = 14
    ERR_UNSUPPORTED = 15
    ERR_STATE = 16
    ERR_AGAIN = 17
    ERR_AUTH = 18
    ERR_BUSY = 19


# Rights of an exported segment.
READ, WRITE, ATOMIC = 1, 2, 4
RW, RWA = READ | WRITE, READ | WRITE | ATOMIC


class AOP(enum.IntEnum):
    """64-bit atomic operations (NETVM_AOP_*)."""
    ADD = 0     # *w += operand                               no result
    FADD = 1    # old = *w; *w += operand                      result old
    SWAP = 2    # old = *w; *w = operand                       result old
    CSWAP = 3   # old = *w; if old == compare: *w = operand    result old
    FCAA = 4    # old = *w; if old <= compare: *w += operand   result old


# Operation flags.
F_UNORDERED = 1 << 0
F_NOTIFY_REQUESTER = 1 << 4
F_NOTIFY_COMPLETER = 1 << 5
F_NOTIFY_RESPONDER = 1 << 6

# Thread levels.
THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1


class EventType(enum.IntEnum):
    TRIPWIRE = 1
    REMOTE_TRIPWIRE = 2
    NOTIFY = 3
    REQUESTER = 4
    COMPLETER = 5
    RESPONDER = 6
    COUNTER = 7
    OVERFLOW = 8
    PEER_UP = 9
    PEER_DOWN = 10


# Tripwire flags.
TRIP_READ, TRIP_WRITE, TRIP_ONCE = 1, 2, 4
TRIP_RW = TRIP_READ | TRIP_WRITE


class SignalOp(enum.IntEnum):
    SET = 0
    ADD = 1


class Cmp(enum.IntEnum):
    EQ = 0
    NE = 1
    GT = 2
    GE = 3
    LT = 4
    LE = 5


# netvm_wait_until flags.
WAIT_SPIN, WAIT_SLEEP = 1, 2

# Active-message handler return values.
AM_DONE, AM_DEFER = 0, 1
AM_MAX_ARGS = 6
AM_MAX_ID = 1024
