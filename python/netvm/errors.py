"""NetvmError: a netvm_status_t that is not NETVM_OK, with netvm_strerror's text."""
from ._lib import lib
from .constants import Status


def _status(value):
    try:
        return Status(value)
    except ValueError:      # a newer library's status this package does not know
        return int(value)


class NetvmError(Exception):
    """Raised for every failed netvm call.

    status: the netvm_status_t (a Status member); strerror: netvm_strerror's
    text; call: the C function that failed."""

    def __init__(self, status, call=""):
        self.status = _status(status)
        text = lib.netvm_strerror(int(status))
        self.strerror = text.decode() if text else "unknown status %d" % int(status)
        self.call = call
        name = self.status.name if isinstance(self.status, Status) else str(self.status)
        super().__init__("%s%s (NETVM_%s)" % (call + ": " if call else "", self.strerror, name))


def check(status, call):
    """Raise NetvmError unless status is NETVM_OK."""
    if status != 0:
        raise NetvmError(status, call)
