"""Loading libnetvm.so and declaring the C functions the package calls.

Only public netvm_* functions are used, so the package works with a library
that exports nothing else (an installed one, or the build tree's).
"""
import ctypes
import ctypes.util
import glob
import os

c_int, c_uint, c_size_t, c_void_p = ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p
c_uint32, c_uint64, c_char_p = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_char_p
P = ctypes.POINTER
status_t = c_int          # netvm_status_t: an enum, passed as int


class Config(ctypes.Structure):
    _fields_ = [("boot", c_char_p), ("timeout_ms", c_int),
                ("no_progress_thread", c_int), ("thread_level", c_int)]


class SegHandle(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("slot", c_uint32), ("key", c_uint64)]


class Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint16), ("access", ctypes.c_uint16), ("rank", ctypes.c_int32),
                ("id", c_uint32), ("status", c_uint32), ("value", c_uint64),
                ("addr", c_uint64), ("len", c_uint64)]


AM_MAX_ARGS = 6


class AmToken(ctypes.Structure):
    _fields_ = [("w", c_uint64 * 4)]


class AmMsg(ctypes.Structure):
    _fields_ = [("peer", c_int), ("id", c_uint), ("nargs", c_uint),
                ("args", c_uint64 * AM_MAX_ARGS), ("payload", c_void_p), ("len", c_size_t),
                ("has_token", c_int), ("token", AmToken), ("deferred", c_uint), ("nv", c_void_p)]


class AmResult(ctypes.Structure):
    _fields_ = [("status", c_int), ("nargs", c_uint), ("args", c_uint64 * AM_MAX_ARGS),
                ("len", c_size_t), ("peer", c_int)]


class GmemOpts(ctypes.Structure):
    _fields_ = [("budget", c_size_t), ("readahead", c_int), ("replicas", c_int), ("write_policy", c_int),
                ("fault_threads", c_int), ("servers", c_char_p), ("credential", c_void_p),
                ("credential_len", c_size_t), ("timeout_ms", c_int)]


class GmemStats(ctypes.Structure):
    _fields_ = [(n, c_uint64) for n in (
        "faults", "zero_fills", "remote_fetches", "readahead_issued", "readahead_hits", "readahead_waste",
        "evictions", "evictions_dirty", "writebacks", "bytes_in", "bytes_out", "resident_pages",
        "budget_pages", "fault_ns_p50", "fault_ns_p99", "fault_ns_p999", "fault_ns_max", "resident_peak",
        "wp_faults", "placed_dirty", "direct_fetches")]


class GmemHealth(ctypes.Structure):
    _fields_ = [("servers", c_int), ("servers_alive", c_int), ("replicas", c_int),
                ("pages_stored", c_uint64), ("pages_degraded", c_uint64), ("pages_lost", c_uint64)]


AM_HANDLER_FN = ctypes.CFUNCTYPE(c_int, c_void_p, P(AmMsg), c_void_p)

# name: (restype, argtypes)
_PROTOTYPES = {
    "netvm_init": (status_t, [P(c_void_p), P(Config)]),
    "netvm_finalize": (status_t, [c_void_p]),
    "netvm_rank": (c_int, [c_void_p]),
    "netvm_size": (c_int, [c_void_p]),
    "netvm_barrier": (status_t, [c_void_p]),
    "netvm_strerror": (c_char_p, [status_t]),
    "netvm_progress": (c_int, [c_void_p]),
    "netvm_export": (status_t, [c_void_p, c_void_p, c_size_t, c_uint, c_char_p, P(c_void_p)]),
    "netvm_alloc_shared": (status_t, [c_void_p, c_size_t, c_uint, c_char_p, P(c_void_p), P(c_void_p)]),
    "netvm_unexport": (status_t, [c_void_p]),
    "netvm_seg_handle": (status_t, [c_void_p, P(SegHandle)]),
    "netvm_seg_addr": (c_void_p, [c_void_p]),
    "netvm_seg_len": (c_size_t, [c_void_p]),
    "netvm_import": (status_t, [c_void_p, c_int, c_char_p, P(c_void_p)]),
    "netvm_import_handle": (status_t, [c_void_p, P(SegHandle), P(c_void_p)]),
    "netvm_release": (status_t, [c_void_p]),
    "netvm_rseg_len": (c_size_t, [c_void_p]),
    "netvm_rseg_rights": (c_uint, [c_void_p]),
    "netvm_rseg_is_mapped": (c_int, [c_void_p]),
    "netvm_rseg_peer": (c_int, [c_void_p]),
    "netvm_ptr": (c_void_p, [c_void_p, c_size_t]),
    "netvm_put": (status_t, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_uint]),
    "netvm_get": (status_t, [c_void_p, c_void_p, c_void_p, c_size_t, c_size_t, c_uint]),
    "netvm_put_imm": (status_t, [c_void_p, c_void_p, c_size_t, c_uint64, c_uint]),
    "netvm_atomic": (status_t, [c_void_p, c_void_p, c_size_t, c_int, c_uint64, c_uint64, P(c_uint64)]),
    "netvm_put_nb": (status_t, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_uint, P(c_void_p)]),
    "netvm_get_nb": (status_t, [c_void_p, c_void_p, c_void_p, c_size_t, c_size_t, c_uint, P(c_void_p)]),
    "netvm_atomic_nb": (status_t, [c_void_p, c_void_p, c_size_t, c_int, c_uint64, c_uint64,
                                   P(c_uint64), P(c_void_p)]),
    "netvm_test": (status_t, [P(c_void_p), P(c_int)]),
    "netvm_wait": (status_t, [P(c_void_p)]),
    "netvm_fence": (status_t, [c_void_p, c_int]),
    "netvm_flush": (status_t, [c_void_p, c_int]),
    "netvm_evq_poll": (c_int, [c_void_p, P(Event), c_int]),
    "netvm_evq_wait": (status_t, [c_void_p, P(Event), c_int, P(c_int), c_int]),
    "netvm_evq_fd": (c_int, [c_void_p]),
    "netvm_evq_arm": (status_t, [c_void_p]),
    "netvm_tripwire_arm": (status_t, [c_void_p, c_void_p, c_size_t, c_uint, c_uint64, c_void_p,
                                      P(c_void_p)]),
    "netvm_tripwire_arm_remote": (status_t, [c_void_p, c_void_p, c_size_t, c_size_t, c_uint, c_uint64,
                                             c_void_p, P(c_void_p)]),
    "netvm_tripwire_disarm": (status_t, [c_void_p]),
    "netvm_tripwire_test": (status_t, [c_void_p, P(c_uint64)]),
    "netvm_tripwire_id": (c_uint32, [c_void_p]),
    "netvm_tripset_create": (status_t, [c_void_p, P(c_void_p)]),
    "netvm_tripset_destroy": (status_t, [c_void_p]),
    "netvm_tripset_wait": (status_t, [c_void_p, P(Event), c_int]),
    "netvm_put_notify": (status_t, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_uint, c_uint64]),
    "netvm_notify": (status_t, [c_void_p, c_int, c_uint64]),
    "netvm_counter_add": (status_t, [c_void_p, c_int, c_uint32, c_uint64]),
    "netvm_counter_arm": (status_t, [c_void_p, c_uint32, c_void_p, c_void_p]),
    "netvm_counter_ack": (status_t, [c_void_p, c_uint32]),
    "netvm_put_signal": (status_t, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_void_p, c_size_t,
                                    c_uint64, c_int, c_uint]),
    "netvm_wait_until": (status_t, [c_void_p, c_void_p, c_int, c_uint64, c_uint, c_int, P(c_uint64)]),
    "netvm_am_register": (status_t, [c_void_p, c_uint, AM_HANDLER_FN, c_void_p]),
    "netvm_am_send": (status_t, [c_void_p, c_int, c_uint, P(c_uint64), c_uint, c_void_p, c_size_t,
                                 c_void_p]),
    "netvm_am_request": (status_t, [c_void_p, c_int, c_uint, P(c_uint64), c_uint, c_void_p, c_size_t,
                                    c_void_p, c_size_t, P(AmResult), c_void_p]),
    "netvm_am_reply": (status_t, [c_void_p, P(AmToken), status_t, P(c_uint64), c_uint, c_void_p,
                                  c_size_t]),
    "netvm_gmem_map": (status_t, [c_void_p, c_size_t, P(GmemOpts), P(c_void_p), P(c_void_p)]),
    "netvm_gmem_unmap": (status_t, [c_void_p]),
    "netvm_gmem_sync": (status_t, [c_void_p]),
    "netvm_gmem_len": (c_size_t, [c_void_p]),
    "netvm_gmem_stats": (status_t, [c_void_p, P(GmemStats)]),
    "netvm_gmem_health": (status_t, [c_void_p, P(GmemHealth)]),
}


def _candidates():
    """Where to look for the library, in order (docs/python.md)."""
    env = os.environ.get("NETVM_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    # next to the package (a wheel or a copy that bundles the library),
    # then the repository's build tree when running from python/ in a clone
    for d in (here, os.path.join(here, "..", "..", "build")):
        for path in sorted(glob.glob(os.path.join(d, "libnetvm.so*"))):
            yield os.path.normpath(path)
    found = ctypes.util.find_library("netvm")
    if found:
        yield found
    yield "libnetvm.so.0"
    yield "libnetvm.so"


def load():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        for name, (res, args) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        lib.netvm_path = path
        return lib
    raise ImportError("netvm: cannot load libnetvm.so (set NETVM_LIBRARY to its path, or build the "
                      "library into the repository's build/): " + "; ".join(errors))


lib = load()
