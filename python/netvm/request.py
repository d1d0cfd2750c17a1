"""Nonblocking operations: a Request is completed by wait() or test()."""
import ctypes

from ._lib import lib, c_int
from .errors import check


class Request:
    """A started operation. It keeps the buffers it uses alive until it
    completes; one that is dropped unfinished is waited for first."""

    def __init__(self, ctx, req, status, call, keep=None, value=None):
        self._ctx = ctx
        self._req = req            # ctypes c_void_p; NULL once complete
        self._call = call
        self._keep = keep
        self._value = value
        self._status = status
        if status != 0 or not req:   # failed at once, or already complete
            self._req = None
            self._keep = None
            check(status, call)

    @property
    def done(self):
        return self._req is None

    def test(self):
        """True once complete (raises NetvmError if it failed)."""
        if self._req is None:
            return True
        flag = c_int()
        st = lib.netvm_test(ctypes.byref(self._req), ctypes.byref(flag))
        if not flag.value:
            return False
        self._finish(st)
        return True

    def wait(self):
        """Wait for completion; returns the operation's value (the buffer of
        a get, the old value of a fetching atomic, else None)."""
        if self._req is not None:
            self._finish(lib.netvm_wait(ctypes.byref(self._req)))
        return self._value() if callable(self._value) else self._value

    def _finish(self, st):
        self._req = None
        self._keep = None
        check(st, self._call)

    def __del__(self):
        if getattr(self, "_req", None) is not None and self._ctx._open:
            try:
                lib.netvm_wait(ctypes.byref(self._req))
            except Exception:
                pass
