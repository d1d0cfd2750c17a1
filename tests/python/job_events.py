"""Events between two ranks: a tripwire that a peer's put fires, a remote
tripwire, a notification put, counting notifications, put-with-signal and
an active-message request."""
import numpy as np

import netvm
from netvm import EventType

stash = []


def wait_for(ctx, typ):
    """The next event of type typ (others are kept for later calls)."""
    for i, e in enumerate(stash):
        if e.type == typ:
            return stash.pop(i)
    for _ in range(1000):
        evs = ctx.wait_events(timeout_ms=30000)
        assert evs, "no event within 30 s, waiting for %s" % typ
        for e in evs:
            stash.append(e)
        for i, e in enumerate(stash):
            if e.type == typ:
                return stash.pop(i)
    raise AssertionError("no %s event" % typ)


with netvm.init() as ctx:
    assert ctx.size == 2
    me, peer = ctx.rank, 1 - ctx.rank
    seg = ctx.alloc_shared(4096, netvm.RWA, "ev")
    a = seg.array(np.uint64)
    tw = ctx.tripwire(seg, 0, 8 * 16, netvm.TRIP_WRITE, user=100 + me)
    ctx.counter_arm(3)
    ctx.am_register(5, lambda m: m.reply(args=[a + 1 for a in m.args], payload=m.payload * 2))
    ctx.barrier()
    r = ctx.import_segment(peer, "ev")

    if me == 1:
        rtw = ctx.tripwire_remote(r, 0, 128, netvm.TRIP_WRITE, user=7)
        r.put(np.arange(16, dtype=np.uint64) + 1000)
        e = wait_for(ctx, EventType.REMOTE_TRIPWIRE)
        assert e.id == rtw.id and e.value == 7 and e.rank == 0, e
        rtw.disarm()
        ctx.notify(0, 42)
        for _ in range(3):
            ctx.counter_add(0, 3, 5)
        r.put_signal(b"signalled", 1024, r, 2048, 9, netvm.SignalOp.SET)
        rep = ctx.am_request(0, 5, args=[1, 2], payload=b"ab", reply_capacity=8)
        assert rep.args == [2, 3] and rep.payload == b"abab" and rep.status is netvm.Status.OK, rep
        print("rank 1: remote tripwire, notification, counter, signal, request: ok")
    else:
        e = wait_for(ctx, EventType.TRIPWIRE)
        assert e.id == tw.id and e.value == 100 and e.rank == 1 and e.access & netvm.TRIP_WRITE, e
        assert np.array_equal(a[:16], np.arange(16) + 1000)      # the data came before its event
        e = wait_for(ctx, EventType.NOTIFY)
        assert (e.rank, e.value) == (1, 42), e
        total = 0
        while total < 15:
            e = wait_for(ctx, EventType.COUNTER)
            assert e.id == 3, e
            total += e.value
            ctx.counter_ack(3)
        assert total == 15
        assert ctx.wait_until(seg, 2048, netvm.Cmp.EQ, 9, timeout_ms=30000) == 9
        assert a[2048 // 8] == 9 and bytes(seg.array()[1024:1033]) == b"signalled"
        print("rank 0: tripwire fired by rank 1's put, notification 42, counter 15, signal: ok")
    ctx.barrier()
    tw.disarm()
