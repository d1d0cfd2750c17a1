"""RMA between the ranks of a job (run by test_jobs.py under `netvm run`):
puts from numpy arrays and bytes into the next rank's shared segment and
into an exported numpy array, seen by the target's own arrays without a
copy; gets back into numpy arrays; direct views where the link maps."""
import numpy as np

import netvm

N = 4096
with netvm.init() as ctx:
    me, n = ctx.rank, ctx.size
    right, left = (me + 1) % n, (me - 1) % n
    seg = ctx.alloc_shared(N * 8, netvm.RWA, "shared")
    view = seg.array(np.float64)                  # made before any peer writes
    heap = np.zeros(N, dtype=np.int32)
    ctx.export(heap, netvm.RW, "heap")
    ctx.barrier()

    r = ctx.import_segment(right, "shared")
    h = ctx.import_segment(right, "heap")
    assert r.nbytes == N * 8 and h.nbytes == N * 4 and r.peer == right
    mine = np.linspace(me, me + 1, N)
    r.put(mine)
    h.put(np.arange(N - 1, dtype=np.int32) * (me + 1))
    h.put(np.array([-(me + 1)], dtype=np.int32).tobytes(), offset=4 * (N - 1))   # bytes, at an offset
    ctx.barrier()

    # the arrays made before the puts see them: they are the memory itself
    assert view.ctypes.data == seg.address
    assert np.array_equal(view, np.linspace(left, left + 1, N)), "shared view"
    assert np.array_equal(heap[:-1], np.arange(N - 1) * (left + 1)) and heap[-1] == -(left + 1), "heap"

    back = r.get(np.empty(N, dtype=np.float64))
    assert np.array_equal(back, mine)
    part = np.empty((8, 2), dtype=np.float64)
    r.get(part, offset=8 * 100)
    assert np.array_equal(part.ravel(), mine[100:116])
    assert r.get(8, offset=8 * 5) == mine[5:6].tobytes()              # a byte count returns bytes
    assert np.frombuffer(h.get(4, offset=4 * (N - 1)), np.int32)[0] == -(me + 1)
    if r.is_mapped:
        direct = r.array(np.float64)               # the peer's memory, loads and stores
        assert np.array_equal(direct, mine)
    print("rank %d: read back %d float64 from rank %d: ok (%s)" %
          (me, N, right, "mapped" if r.is_mapped else "not mapped"))
    ctx.barrier()
