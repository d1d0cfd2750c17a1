"""Active messages with Python handlers.

A handler runs in netvm's progress engine (its progress thread, or a thread
waiting inside netvm): ctypes takes the GIL for it. It must not block (see
docs/am.md); it sees the message as a Message whose payload is a copy.
"""
import ctypes
import sys
import traceback
from dataclasses import dataclass, field

from . import _buffers
from ._lib import lib, AmToken, AM_HANDLER_FN
from .constants import AM_DONE, AM_DEFER, AM_MAX_ARGS, Status
from .errors import check


def args_array(args):
    args = list(args or ())
    if len(args) > AM_MAX_ARGS:
        raise ValueError("netvm: at most %d arguments" % AM_MAX_ARGS)
    return (ctypes.c_uint64 * AM_MAX_ARGS)(*args), len(args)


@dataclass
class Message:
    """A message as its handler sees it."""
    peer: int
    id: int
    args: list
    payload: object          # bytes (a copy), or None for a large payload, which is discarded
    length: int
    deferred: int
    _token: object = field(default=None, repr=False)
    _ctx: object = field(default=None, repr=False)

    @property
    def is_request(self):
        return self._token is not None

    def reply(self, args=(), payload=b"", status=Status.OK):
        """Answer a request (once); never blocks."""
        a, n = args_array(args)
        addr, length, _keep = _buffers.source(payload)
        check(lib.netvm_am_reply(self._ctx._h(), ctypes.byref(self._token), int(status), a, n,
                                 addr, length), "netvm_am_reply")


@dataclass
class Reply:
    """The answer to Context.am_request."""
    status: object
    args: list
    payload: bytes
    peer: int


def make_handler(ctx, fn):
    """A C handler calling fn(Message); returning True (or AM_DEFER) defers."""
    def handler(_cctx, msg_p, _arg):
        try:
            m = msg_p.contents
            payload = ctypes.string_at(m.payload, m.len) if m.payload else (b"" if m.len == 0 else None)
            token = None
            if m.has_token:
                token = AmToken.from_buffer_copy(m.token)   # good after the call returns
            msg = Message(m.peer, m.id, list(m.args[:m.nargs]), payload, m.len, m.deferred, token, ctx)
            r = fn(msg)
            return AM_DEFER if (r is True or r == AM_DEFER) else AM_DONE
        except BaseException:
            # an exception cannot cross into C: report it, the message is done
            print("netvm: exception in active-message handler", file=sys.stderr)
            traceback.print_exc()
            return AM_DONE
    return AM_HANDLER_FN(handler)
