"""Events: the event queue's entries as Python objects, tripwires and tripsets."""
import ctypes
from dataclasses import dataclass

from ._lib import lib, Event as _CEvent, c_uint64, c_void_p
from .constants import EventType, Status
from .errors import NetvmError, check


@dataclass(frozen=True)
class Event:
    """One netvm_event_t (docs/events.md says what each field means per type)."""
    type: object      # an EventType (an int for a type this package does not know)
    access: int
    rank: int
    id: int
    status: object    # a Status
    value: int
    addr: int
    len: int

    @classmethod
    def _from_c(cls, ev):
        try:
            typ = EventType(ev.type)
        except ValueError:
            typ = ev.type
        try:
            st = Status(ev.status)
        except ValueError:
            st = ev.status
        return cls(typ, ev.access, ev.rank, ev.id, st, ev.value, ev.addr, ev.len)


def events_from(buf, n):
    return [Event._from_c(buf[i]) for i in range(n)]


def event_buffer(n):
    return (_CEvent * n)()


class Tripwire:
    """An armed tripwire (Context.tripwire / tripwire_remote). Its events carry
    .id; disarm() (or leaving a with block) frees it."""

    def __init__(self, ctx, handle, watched):
        self._ctx = ctx
        self._tw = handle
        self._watched = watched        # the local buffer it watches: kept alive
        self.id = lib.netvm_tripwire_id(handle)

    def test(self):
        """How often it fired since armed or last tested (no blocking)."""
        if self._tw is None:
            raise NetvmError(Status.ERR_STATE, "disarmed tripwire")
        fired = c_uint64()
        check(lib.netvm_tripwire_test(self._tw, ctypes.byref(fired)), "netvm_tripwire_test")
        return fired.value

    def disarm(self):
        if self._tw is None:
            return
        tw, self._tw = self._tw, None
        self._ctx._tripwires.discard(self)
        check(lib.netvm_tripwire_disarm(tw), "netvm_tripwire_disarm")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.disarm()


class Tripset:
    """A group of tripwires a thread waits on together (Context.tripset)."""

    def __init__(self, ctx):
        self._ctx = ctx
        h = c_void_p()
        check(lib.netvm_tripset_create(ctx._h(), ctypes.byref(h)), "netvm_tripset_create")
        self._set = h
        self._members = []

    def wait(self, timeout_ms=-1):
        """The next event of any of its tripwires; None after timeout_ms (-1: no limit)."""
        ev = _CEvent()
        st = lib.netvm_tripset_wait(self._set, ctypes.byref(ev), timeout_ms)
        if st == Status.ERR_TIMEOUT:
            return None
        check(st, "netvm_tripset_wait")
        return Event._from_c(ev)

    def destroy(self):
        if self._set is None:
            return
        s, self._set = self._set, None
        for tw in self._members:      # destroying the set disarms them in C
            tw._tw = None
            self._ctx._tripwires.discard(tw)
        self._ctx._tripsets.discard(self)
        check(lib.netvm_tripset_destroy(s), "netvm_tripset_destroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
