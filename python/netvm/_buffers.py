"""Addresses of Python buffers, without copying them.

Any object with the buffer protocol works (bytes, bytearray, memoryview,
array.array, numpy arrays) as long as it is C-contiguous; destinations must
be writable. numpy.frombuffer gives the address of read-only buffers too,
which ctypes alone cannot.
"""
import numpy as np


def _flat(obj):
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise ValueError("netvm: the buffer must be C-contiguous")
    return mv


def source(obj):
    """(address, nbytes, keepalive) of a buffer netvm reads from."""
    mv = _flat(obj)
    arr = np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)
    return arr.ctypes.data, arr.nbytes, arr


def dest(obj):
    """(address, nbytes, keepalive) of a buffer netvm writes into."""
    mv = _flat(obj)
    if mv.readonly:
        raise ValueError("netvm: the destination buffer is read-only")
    arr = np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)
    return arr.ctypes.data, arr.nbytes, arr
