"""netvm: one-sided put, get, atomics and events on other processes' memory.

    import netvm, numpy as np
    with netvm.init() as ctx:                    # under `netvm run -n 2 python3 app.py`
        seg = ctx.alloc_shared(4096, netvm.RWA, "buf")
        a = seg.array(np.uint64)                 # the segment's memory, no copy
        ctx.barrier()
        peer = ctx.import_segment((ctx.rank + 1) % ctx.size, "buf")
        peer.put(np.arange(8, dtype=np.uint64))
        peer.atomic(netvm.AOP.ADD, 64, 1)
        ctx.barrier()

The guide is docs/python.md of the repository.
"""
from ._lib import lib as _lib
from .constants import *            # noqa: F401,F403  Status, AOP, EventType, flags
from .constants import Status, AOP, EventType, SignalOp, Cmp
from .errors import NetvmError
from .context import Context, init
from .segment import Segment, RemoteSegment
from .request import Request
from .events import Event, Tripwire, Tripset
from .am import Message, Reply
from .gmem import Region

library_path = _lib.netvm_path


def strerror(status):
    """netvm_strerror's text for a status."""
    s = _lib.netvm_strerror(int(status))
    return s.decode() if s else ""


__version__ = "0.1.0"
__all__ = ["init", "Context", "Segment", "RemoteSegment", "Request", "Event", "Tripwire", "Tripset",
           "Message", "Reply", "Region", "NetvmError", "Status", "AOP", "EventType", "SignalOp", "Cmp",
           "strerror", "library_path"]
