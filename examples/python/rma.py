#!/usr/bin/env python3
"""netvm from Python: run with `build/tools/netvm run -n 2 python3 examples/python/rma.py`
(the package from python/ on PYTHONPATH or installed with `pip install ./python`).

Every rank allocates a shared segment and views it as a numpy array, puts a
block of float64 into the next rank's segment, is told by a tripwire when
its left neighbour's block has landed in its own array (no copy: the array
is the segment), reads its block back from the neighbour, and increments a
counter on rank 0 with atomics."""
import numpy as np

import netvm

N = 4096          # float64 per block
INCREMENTS = 1000  # per rank

with netvm.init() as ctx:
    me, n = ctx.rank, ctx.size
    right, left = (me + 1) % n, (me - 1) % n

    seg = ctx.alloc_shared(N * 8 + 8, netvm.RWA, "block")
    block = seg.array(np.float64, shape=(N,))                   # the segment itself
    counter = seg.array(np.uint64, shape=(1,), offset=N * 8)
    tw = ctx.tripwire(seg, 0, N * 8, netvm.TRIP_WRITE)         # armed before anyone can write
    ctx.barrier()

    peer = ctx.import_segment(right, "block")
    mine = np.sin(np.arange(N) + me)
    peer.put(mine)                                             # returns at remote completion

    while not any(e.type == netvm.EventType.TRIPWIRE and e.id == tw.id
                  for e in ctx.wait_events(timeout_ms=60000)):
        pass
    ok = np.array_equal(block, np.sin(np.arange(N) + left))
    print("rank %d: tripwire fired, the peer's block is in my array: %s" % (me, "ok" if ok else "WRONG"))

    back = peer.get(np.empty(N))                               # a get into a numpy array
    ok = ok and np.array_equal(back, mine)
    print("rank %d: read back %d float64 from rank %d: %s" % (me, N, right, "ok" if ok else "WRONG"))

    zero = ctx.import_segment(0, "block")
    for _ in range(INCREMENTS):
        zero.atomic(netvm.AOP.ADD, N * 8, 1)
    ctx.barrier()
    if me == 0:
        print("counter: %d (expected %d)" % (counter[0], n * INCREMENTS))
        ok = ok and counter[0] == n * INCREMENTS
    tw.disarm()
    ctx.barrier()
raise SystemExit(0 if ok else 1)
