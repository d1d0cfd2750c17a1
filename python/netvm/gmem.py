"""Network memory: a region whose pages live on memory servers (netvm_gmem_*),
seen from Python as numpy arrays over the region, without a copy.

    with netvm.init() as ctx:
        with ctx.gmem_map(1 << 30, budget=256 << 20) as region:   # 1 GiB, 256 MiB resident
            a = region.array(np.float64)
            a[:] = np.random.random(a.size)       # pages beyond the budget go to the servers
            print(region.stats()["evictions"])
"""
import ctypes

import numpy as np

from ._lib import lib, GmemOpts, GmemStats, GmemHealth, c_void_p
from .constants import Status
from .errors import NetvmError, check
from .segment import _view


def make_opts(budget=0, readahead=0, replicas=0, write_early=False, fault_threads=0, servers=None,
              credential=None, timeout_ms=0):
    """netvm_gmem_opts_t from keyword arguments; 0 / None: the NETVM_GMEM_* default."""
    o = GmemOpts()
    o.budget = int(budget)
    o.readahead = int(readahead)
    o.replicas = int(replicas)
    o.write_policy = 1 if write_early else 0
    o.fault_threads = int(fault_threads)
    if servers is not None:
        o.servers = ",".join(servers).encode() if not isinstance(servers, str) else servers.encode()
    if credential is not None:
        cred = bytes(credential)
        o._cred = ctypes.create_string_buffer(cred, len(cred))   # kept alive with the struct
        o.credential = ctypes.cast(o._cred, c_void_p)
        o.credential_len = len(cred)
    o.timeout_ms = int(timeout_ms)
    return o


class Region:
    """A mapped network-memory region. Arrays from array() must not be used
    after unmap() (the memory is gone: accessing it faults)."""

    def __init__(self, ctx, handle, address, nbytes):
        self._ctx = ctx
        self._g = handle
        self.address = address
        self.nbytes = nbytes

    def _h(self):
        if self._g is None:
            raise NetvmError(Status.ERR_STATE, "unmapped region")
        return self._g

    def array(self, dtype=np.uint8, shape=None, offset=0):
        """The region as a numpy array (no copy): its pages fault in from the
        servers as numpy touches them and leave under the budget."""
        self._h()
        return _view(self.address, self.nbytes, dtype, shape, offset)

    def sync(self):
        """Write every dirty page back to its servers and wait for them."""
        check(lib.netvm_gmem_sync(self._h()), "netvm_gmem_sync")

    def stats(self):
        """netvm_gmem_stats as a dict."""
        s = GmemStats()
        check(lib.netvm_gmem_stats(self._h(), ctypes.byref(s)), "netvm_gmem_stats")
        return {name: getattr(s, name) for name, _ in GmemStats._fields_}

    def health(self):
        """netvm_gmem_health as a dict."""
        h = GmemHealth()
        check(lib.netvm_gmem_health(self._h(), ctypes.byref(h)), "netvm_gmem_health")
        return {name: getattr(h, name) for name, _ in GmemHealth._fields_}

    def unmap(self):
        if self._g is None:
            return
        g, self._g = self._g, None
        self._ctx._regions.discard(self)
        check(lib.netvm_gmem_unmap(g), "netvm_gmem_unmap")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unmap()


def gmem_map(ctx, nbytes, **options):
    """netvm_gmem_map: a Region of nbytes (rounded up to pages)."""
    o = make_opts(**options)
    g, addr = c_void_p(), c_void_p()
    check(lib.netvm_gmem_map(ctx._h(), int(nbytes), ctypes.byref(o), ctypes.byref(g), ctypes.byref(addr)),
          "netvm_gmem_map")
    r = Region(ctx, g, addr.value, lib.netvm_gmem_len(g))
    ctx._regions.add(r)
    return r
