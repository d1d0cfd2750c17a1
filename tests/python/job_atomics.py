"""Atomics between ranks: a counter on rank 0 incremented by every rank,
fetch-and-add results unique across ranks, compare-and-swap as a lock."""
import sys

import numpy as np

import netvm

K = int(sys.argv[1]) if len(sys.argv) > 1 else 500
with netvm.init() as ctx:
    me, n = ctx.rank, ctx.size
    seg = ctx.alloc_shared(8 * (3 + n * K), netvm.RWA, "counters")
    words = seg.array(np.uint64)
    ctx.barrier()
    r = ctx.import_segment(0, "counters")
    got = np.empty(K, dtype=np.uint64)
    for i in range(K):
        r.atomic(netvm.AOP.ADD, 0, 1)
        got[i] = r.atomic(netvm.AOP.FADD, 8, 1)
    assert (np.diff(got.astype(np.int64)) > 0).all()
    r.put(got, offset=8 * (3 + me * K))               # every rank's tickets, to rank 0
    ctx.barrier()
    if me == 0:
        tickets = np.sort(words[3:])
        assert words[0] == n * K and words[1] == n * K, words[:2]
        assert np.array_equal(tickets, np.arange(n * K, dtype=np.uint64)), "tickets not unique"
        print("counter: %d (expected %d), %d unique tickets: ok" % (words[0], n * K, n * K))
    ctx.barrier()
    # a lock by compare-and-swap (word 2): each rank takes it once
    while r.compare_swap(16, 0, me + 1) != 0:
        ctx.progress()
    assert r.atomic(netvm.AOP.SWAP, 16, 0) == me + 1    # nobody else held it meanwhile
    ctx.barrier()
    print("rank %d: lock taken and released: ok" % me)
