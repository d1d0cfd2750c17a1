"""The context: a process's attachment to its job (netvm_init / netvm_finalize)."""
import ctypes

from . import _buffers
from ._lib import lib, Config, SegHandle, AmResult, AM_HANDLER_FN, c_void_p, c_int, c_uint64
from .am import Reply, args_array, make_handler
from .constants import Status
from .errors import NetvmError, check
from .events import Tripset, Tripwire, event_buffer, events_from
from .segment import RemoteSegment, Segment
from . import gmem as _gmem


def _name(name):
    return None if name is None else name.encode()


class Context:
    """Use as a context manager (`with netvm.init() as ctx:`) or call finalize()."""

    def __init__(self, boot=None, timeout_ms=0, progress_thread=True, thread_level=0):
        cfg = Config(_name(boot), timeout_ms, 0 if progress_thread else 1, thread_level)
        h = c_void_p()
        check(lib.netvm_init(ctypes.byref(h), ctypes.byref(cfg)), "netvm_init")
        self._ctx = h
        self._open = True
        self._segments, self._imports, self._tripwires, self._tripsets = set(), set(), set(), set()
        self._regions = set()
        self._handlers = {}      # id -> the ctypes callback: C holds its pointer, we hold the object
        self.rank = lib.netvm_rank(h)
        self.size = lib.netvm_size(h)

    def _h(self):
        if not self._open:
            raise NetvmError(Status.ERR_STATE, "finalized context")
        return self._ctx

    # --- the job --------------------------------------------------------

    def barrier(self):
        check(lib.netvm_barrier(self._h()), "netvm_barrier")

    def progress(self):
        """Serve requests once without blocking; how many events were handled."""
        return lib.netvm_progress(self._h())

    def gmem_map(self, nbytes, budget=0, readahead=0, replicas=0, write_early=False, fault_threads=0,
                 servers=None, credential=None, timeout_ms=0):
        """A network-memory Region of nbytes (netvm_gmem_map; docs/gmem.md). 0 / None
        options take the NETVM_GMEM_* defaults; with no servers named, local ones
        are started for this process."""
        return _gmem.gmem_map(self, nbytes, budget=budget, readahead=readahead, replicas=replicas,
                              write_early=write_early, fault_threads=fault_threads, servers=servers,
                              credential=credential, timeout_ms=timeout_ms)

    def finalize(self):
        """Collective: revokes every segment and leaves the job. Python objects
        of this context (segments, imports, arrays over segments) are dead after it."""
        if not self._open:
            return
        h = self._h()
        for r in list(self._regions):
            r.unmap()
        self._open = False
        try:
            check(lib.netvm_finalize(h), "netvm_finalize")
        finally:
            for s in list(self._segments):
                s._seg, s._buffer = None, None
            for r in list(self._imports):
                r._rseg = None
            for t in list(self._tripwires):
                t._tw = None
            for t in list(self._tripsets):
                t._set = None
            self._handlers.clear()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.finalize()
        else:
            # finalize is collective: the other ranks may never reach it (they
            # may wait in a barrier for this one), so leaving by an exception
            # only closes the context here; the process exits with the
            # exception and the launcher ends the job
            self._open = False

    # --- segments ---------------------------------------------------------

    def alloc_shared(self, nbytes, rights=7, name=None):
        """nbytes of zeroed memory that peers on this machine map, exported;
        Segment.array() views it as a numpy array without a copy."""
        addr, seg = c_void_p(), c_void_p()
        check(lib.netvm_alloc_shared(self._h(), nbytes, rights, _name(name), ctypes.byref(addr),
                                     ctypes.byref(seg)), "netvm_alloc_shared")
        s = Segment(self, seg)
        self._segments.add(s)
        return s

    def export(self, buffer, rights=7, name=None):
        """Export the memory of a writable, C-contiguous buffer (a numpy array,
        bytearray...) as it is: no copy. The buffer is kept alive while exported."""
        addr, n, keep = _buffers.dest(buffer)
        seg = c_void_p()
        check(lib.netvm_export(self._h(), addr, n, rights, _name(name), ctypes.byref(seg)),
              "netvm_export")
        s = Segment(self, seg, (keep, buffer))
        self._segments.add(s)
        return s

    def import_segment(self, peer, name):
        """Import the segment a peer exported under name."""
        r = c_void_p()
        check(lib.netvm_import(self._h(), peer, _name(name), ctypes.byref(r)), "netvm_import")
        rs = RemoteSegment(self, r)
        self._imports.add(rs)
        return rs

    def import_handle(self, handle):
        """Import by a (rank, slot, key) handle from Segment.handle()."""
        h = SegHandle(*handle)
        r = c_void_p()
        check(lib.netvm_import_handle(self._h(), ctypes.byref(h), ctypes.byref(r)), "netvm_import_handle")
        rs = RemoteSegment(self, r)
        self._imports.add(rs)
        return rs

    # --- ordering and completion ------------------------------------------

    def fence(self, peer=-1):
        check(lib.netvm_fence(self._h(), peer), "netvm_fence")

    def flush(self, peer=-1):
        check(lib.netvm_flush(self._h(), peer), "netvm_flush")

    # --- events -----------------------------------------------------------

    def poll(self, max_events=64):
        """Events waiting now (no blocking, no system call): a list of Event."""
        buf = event_buffer(max_events)
        n = lib.netvm_evq_poll(self._h(), buf, max_events)
        if n < 0:
            raise NetvmError(Status.ERR_INVAL, "netvm_evq_poll")
        return events_from(buf, n)

    def wait_events(self, max_events=64, timeout_ms=-1):
        """At least one event, or [] after timeout_ms (-1: no limit)."""
        buf = event_buffer(max_events)
        n = c_int()
        st = lib.netvm_evq_wait(self._h(), buf, max_events, ctypes.byref(n), timeout_ms)
        if st == Status.ERR_TIMEOUT:
            return []
        check(st, "netvm_evq_wait")
        return events_from(buf, n.value)

    def event_fd(self):
        """The fd for select/poll/epoll (arm_events first)."""
        return lib.netvm_evq_fd(self._h())

    def arm_events(self):
        """True: nothing waits, sleep on event_fd(); False: poll first."""
        st = lib.netvm_evq_arm(self._h())
        if st == Status.ERR_AGAIN:
            return False
        check(st, "netvm_evq_arm")
        return True

    def tripwire(self, target, offset=0, length=None, flags=3, user=0, tripset=None):
        """Arm a tripwire on local memory: target is a Segment or a buffer
        (a numpy array...); [offset, offset+length) of it is watched."""
        if isinstance(target, Segment):
            target._check_open()
            base, size, keep = target.address, target.nbytes, target
        else:
            base, size, keep = _buffers.source(target)
        length = size - offset if length is None else length
        if offset < 0 or length < 0 or offset + length > size:
            raise ValueError("netvm: tripwire range outside the target")
        tw = c_void_p()
        check(lib.netvm_tripwire_arm(self._h(), base + offset, length, flags, user,
                                     tripset._set if tripset else None, ctypes.byref(tw)),
              "netvm_tripwire_arm")
        return self._track_tripwire(Tripwire(self, tw, (keep, target)), tripset)

    def tripwire_remote(self, rseg, offset=0, length=None, flags=2, user=0, tripset=None):
        """Arm on a peer's range: an event (REMOTE_TRIPWIRE) when this process's
        own puts to it are complete there."""
        length = rseg.nbytes - offset if length is None else length
        tw = c_void_p()
        check(lib.netvm_tripwire_arm_remote(self._h(), rseg._h(), offset, length, flags, user,
                                            tripset._set if tripset else None, ctypes.byref(tw)),
              "netvm_tripwire_arm_remote")
        return self._track_tripwire(Tripwire(self, tw, rseg), tripset)

    def _track_tripwire(self, tw, tripset):
        self._tripwires.add(tw)
        if tripset is not None:
            tripset._members.append(tw)
        return tw

    def tripset(self):
        s = Tripset(self)
        self._tripsets.add(s)
        return s

    def notify(self, peer, value):
        """A NOTIFY event carrying value at peer, after this process's earlier puts to it."""
        check(lib.netvm_notify(self._h(), peer, value), "netvm_notify")

    def counter_add(self, peer, counter, n=1):
        check(lib.netvm_counter_add(self._h(), peer, counter, n), "netvm_counter_add")

    def counter_arm(self, counter):
        """Deliver counter's increments as COUNTER events (coalesced until counter_ack)."""
        check(lib.netvm_counter_arm(self._h(), counter, None, None), "netvm_counter_arm")

    def counter_ack(self, counter):
        check(lib.netvm_counter_ack(self._h(), counter), "netvm_counter_ack")

    def wait_until(self, segment, offset, cmp, value, timeout_ms=-1, flags=0):
        """Wait until the 64-bit word at offset of a local Segment compares to
        value (netvm.Cmp); returns the word's value."""
        segment._check_open()
        if offset < 0 or offset + 8 > segment.nbytes or offset % 8:
            raise ValueError("netvm: the word must be 8-aligned and inside the segment")
        seen = c_uint64()
        check(lib.netvm_wait_until(self._h(), segment.address + offset, int(cmp), value, flags,
                                   timeout_ms, ctypes.byref(seen)), "netvm_wait_until")
        return seen.value

    # --- active messages ----------------------------------------------------

    def am_register(self, handler_id, fn):
        """fn(Message) runs for each message to handler_id (fn None removes it)."""
        cb = make_handler(self, fn) if fn is not None else AM_HANDLER_FN()   # NULL: remove
        check(lib.netvm_am_register(self._h(), handler_id, cb, None), "netvm_am_register")
        if fn is None:
            self._handlers.pop(handler_id, None)
        else:
            self._handlers[handler_id] = cb

    def am_send(self, peer, handler_id, args=(), payload=b""):
        """A one-way message; returns once payload may be reused."""
        a, n = args_array(args)
        addr, length, _keep = _buffers.source(payload)
        check(lib.netvm_am_send(self._h(), peer, handler_id, a, n, addr, length, None), "netvm_am_send")

    def am_request(self, peer, handler_id, args=(), payload=b"", reply_capacity=0):
        """Send a request and wait for its Reply (its payload at most reply_capacity bytes)."""
        a, n = args_array(args)
        addr, length, _keep = _buffers.source(payload)
        rbuf = ctypes.create_string_buffer(max(reply_capacity, 1))
        res = AmResult()
        check(lib.netvm_am_request(self._h(), peer, handler_id, a, n, addr, length, rbuf, reply_capacity,
                                   ctypes.byref(res), None), "netvm_am_request")
        try:
            st = Status(res.status)
        except ValueError:
            st = res.status
        return Reply(st, list(res.args[:res.nargs]), rbuf.raw[:res.len], res.peer)


def init(boot=None, timeout_ms=0, progress_thread=True, thread_level=0):
    """Attach to the job (collective; a process started without `netvm run` is
    rank 0 of 1) and return its Context. Zero/None settings come from NETVM_*."""
    return Context(boot, timeout_ms, progress_thread, thread_level)
