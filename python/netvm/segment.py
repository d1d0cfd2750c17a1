"""Segments: local ones (exported or allocated by netvm) and imported ones."""
import ctypes

import numpy as np

from . import _buffers
from ._lib import lib, SegHandle, c_void_p, c_uint64
from .constants import Status
from .errors import NetvmError, check
from .request import Request


def _view(addr, nbytes, dtype, shape, offset):
    """A numpy array over [addr+offset, addr+nbytes), sharing the memory."""
    dtype = np.dtype(dtype)
    if offset < 0 or offset > nbytes:
        raise ValueError("netvm: offset outside the segment")
    raw = (ctypes.c_char * (nbytes - offset)).from_address(addr + offset)
    count = -1 if shape is None else int(np.prod(shape))
    arr = np.frombuffer(raw, dtype=dtype, count=count)
    return arr if shape is None else arr.reshape(shape)


class Segment:
    """A segment this process exports (netvm_export or netvm_alloc_shared).

    Valid until unexport() or the context's finalize; arrays from array()
    must not be used after that (the memory of an allocated segment is
    freed)."""

    def __init__(self, ctx, handle, buffer=None):
        self._ctx = ctx
        self._seg = handle
        self._buffer = buffer     # an exported Python buffer: kept alive while exported
        self.address = lib.netvm_seg_addr(handle)
        self.nbytes = lib.netvm_seg_len(handle)

    def array(self, dtype=np.uint8, shape=None, offset=0):
        """The segment's memory as a numpy array, without a copy: peers' puts
        and atomics show in it, and writes to it are what their gets read."""
        self._check_open()
        return _view(self.address, self.nbytes, dtype, shape, offset)

    def handle(self):
        """(rank, slot, key): enough for any rank to import it (Context.import_handle)."""
        self._check_open()
        h = SegHandle()
        check(lib.netvm_seg_handle(self._seg, ctypes.byref(h)), "netvm_seg_handle")
        return (h.rank, h.slot, h.key)

    def unexport(self):
        if self._seg is None:
            return
        seg, self._seg = self._seg, None
        self._ctx._segments.discard(self)
        try:
            check(lib.netvm_unexport(seg), "netvm_unexport")
        finally:
            self._buffer = None

    def _check_open(self):
        if self._seg is None:
            raise NetvmError(Status.ERR_REVOKED, "segment")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unexport()


class RemoteSegment:
    """An imported segment of a peer (netvm_import); RMA and atomics on it."""

    def __init__(self, ctx, handle):
        self._ctx = ctx
        self._rseg = handle
        self.nbytes = lib.netvm_rseg_len(handle)
        self.rights = lib.netvm_rseg_rights(handle)
        self.peer = lib.netvm_rseg_peer(handle)

    @property
    def is_mapped(self):
        """True if put/get/atomics on it are direct loads and stores."""
        return bool(lib.netvm_rseg_is_mapped(self._h()))

    def _h(self):
        if self._rseg is None:
            raise NetvmError(Status.ERR_STATE, "released segment")
        return self._rseg

    def _c(self):
        return self._ctx._h()

    # --- blocking RMA: returns at remote completion ---------------------

    def put(self, data, offset=0, flags=0):
        """Write a buffer (bytes, bytearray, numpy array...) at offset."""
        addr, n, _keep = _buffers.source(data)
        check(lib.netvm_put(self._c(), self._h(), offset, addr, n, flags), "netvm_put")

    def get(self, out, offset=0, flags=0):
        """Read into out (a writable buffer, e.g. a numpy array) from offset;
        an int instead of a buffer reads that many bytes and returns bytes."""
        if isinstance(out, int):
            buf = bytearray(out)
            self.get(buf, offset, flags)
            return bytes(buf)
        addr, n, _keep = _buffers.dest(out)
        check(lib.netvm_get(self._c(), addr, self._h(), offset, n, flags), "netvm_get")
        return out

    def put_imm(self, value, offset=0, flags=0):
        """Write a 64-bit value carried in the request (offset 8-aligned)."""
        check(lib.netvm_put_imm(self._c(), self._h(), offset, value, flags), "netvm_put_imm")

    def atomic(self, op, offset=0, operand=0, compare=0):
        """A 64-bit atomic (netvm.AOP); returns the old value (None for AOP.ADD)."""
        old = c_uint64()
        check(lib.netvm_atomic(self._c(), self._h(), offset, int(op), operand, compare,
                               ctypes.byref(old)), "netvm_atomic")
        return None if int(op) == 0 else old.value

    def fetch_add(self, offset, value):
        return self.atomic(1, offset, value)

    def compare_swap(self, offset, compare, value):
        return self.atomic(3, offset, value, compare)

    # --- nonblocking: a Request completes them --------------------------

    def put_nb(self, data, offset=0, flags=0):
        addr, n, keep = _buffers.source(data)
        req = c_void_p()
        st = lib.netvm_put_nb(self._c(), self._h(), offset, addr, n, flags, ctypes.byref(req))
        return Request(self._ctx, req, st, "netvm_put_nb", keep=(keep, data))

    def get_nb(self, out, offset=0, flags=0):
        addr, n, keep = _buffers.dest(out)
        req = c_void_p()
        st = lib.netvm_get_nb(self._c(), addr, self._h(), offset, n, flags, ctypes.byref(req))
        return Request(self._ctx, req, st, "netvm_get_nb", keep=(keep, out), value=out)

    def atomic_nb(self, op, offset=0, operand=0, compare=0):
        old = c_uint64()
        req = c_void_p()
        st = lib.netvm_atomic_nb(self._c(), self._h(), offset, int(op), operand, compare,
                                 ctypes.byref(old), ctypes.byref(req))
        return Request(self._ctx, req, st, "netvm_atomic_nb", keep=old,
                       value=(lambda: None if int(op) == 0 else old.value))

    # --- with notifications and signals -------------------------------------

    def put_notify(self, data, offset=0, flags=0, tag=0):
        """Put returning once issued; flags NETVM_F_NOTIFY_* ask for events carrying tag."""
        addr, n, _keep = _buffers.source(data)
        check(lib.netvm_put_notify(self._c(), self._h(), offset, addr, n, flags, tag), "netvm_put_notify")

    def put_signal(self, data, offset, signal, signal_offset, value, op=0, flags=0):
        """Put data, then set or add (netvm.SignalOp) the word at signal_offset of
        the RemoteSegment signal (may be self); returns at remote completion."""
        addr, n, _keep = _buffers.source(data)
        check(lib.netvm_put_signal(self._c(), self._h(), offset, addr, n, signal._h(), signal_offset,
                                   value, int(op), flags), "netvm_put_signal")

    # --- direct access --------------------------------------------------------

    def array(self, dtype=np.uint8, shape=None, offset=0):
        """A numpy array over the peer's memory itself (netvm_ptr: loads and
        stores, no netvm call), where the segment is mapped (same machine,
        memory from alloc_shared); NetvmError ERR_UNSUPPORTED elsewhere.
        Bypasses netvm: no tripwires or notifications fire. Valid until release()."""
        base = lib.netvm_ptr(self._h(), 0)
        if not base:
            raise NetvmError(Status.ERR_UNSUPPORTED, "netvm_ptr (segment not mapped here)")
        return _view(base, self.nbytes, dtype, shape, offset)

    def release(self):
        if self._rseg is None:
            return
        h, self._rseg = self._rseg, None
        self._ctx._imports.discard(self)
        check(lib.netvm_release(h), "netvm_release")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
