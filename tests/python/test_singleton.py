"""A process started without the launcher is a job of one: everything that
needs no second process, against its own segments."""
import numpy as np
import pytest

import netvm
from netvm import Status


@pytest.fixture(scope="module")
def ctx():
    c = netvm.init()
    yield c
    c.finalize()


def test_singleton_rank_and_size(ctx):
    assert (ctx.rank, ctx.size) == (0, 1)
    ctx.barrier()
    assert ctx.progress() >= 0


def test_alloc_shared_array_is_the_segment(ctx):
    seg = ctx.alloc_shared(4096, netvm.RWA, "s_shared")
    try:
        a = seg.array(np.uint32)
        assert a.shape == (1024,) and not a.any()          # zeroed
        assert a.ctypes.data == seg.address                 # a view, not a copy
        r = ctx.import_segment(0, "s_shared")
        r.put(np.arange(1024, dtype=np.uint32))
        assert (a == np.arange(1024)).all()                 # the put shows in the view
        a[5] = 77
        assert np.frombuffer(r.get(4, offset=20), np.uint32)[0] == 77
        m = seg.array(np.float64, shape=(16, 2), offset=256)
        assert m.shape == (16, 2) and m.ctypes.data == seg.address + 256
        r.release()
    finally:
        seg.unexport()


def test_export_numpy_array_without_copy(ctx):
    arr = np.zeros(100, dtype=np.int64)
    with ctx.export(arr, netvm.RWA, "s_export") as seg:
        assert seg.address == arr.ctypes.data and seg.nbytes == arr.nbytes
        with ctx.import_segment(0, "s_export") as r:
            r.put(np.array([-1, 2, -3], dtype=np.int64), offset=8 * 10)
            assert list(arr[10:13]) == [-1, 2, -3]
            out = np.empty(3, dtype=np.int64)
            assert r.get(out, offset=80) is out and list(out) == [-1, 2, -3]
            r.put(b"\x01" * 8, offset=0)
            assert arr[0] == 0x0101010101010101


def test_atomics_all_ops(ctx):
    arr = np.zeros(4, dtype=np.uint64)
    with ctx.export(arr, netvm.RWA, "s_atomics"), ctx.import_segment(0, "s_atomics") as r:
        assert r.atomic(netvm.AOP.ADD, 0, 5) is None and arr[0] == 5
        assert r.atomic(netvm.AOP.FADD, 0, 3) == 5 and arr[0] == 8
        assert r.atomic(netvm.AOP.SWAP, 0, 100) == 8 and arr[0] == 100
        assert r.atomic(netvm.AOP.CSWAP, 0, 7, compare=1) == 100 and arr[0] == 100
        assert r.compare_swap(0, 100, 7) == 100 and arr[0] == 7
        assert r.atomic(netvm.AOP.FCAA, 0, 10, compare=7) == 7 and arr[0] == 17
        assert r.atomic(netvm.AOP.FCAA, 0, 10, compare=7) == 17 and arr[0] == 17
        r.put_imm(0xDEADBEEF, offset=8)
        assert arr[1] == 0xDEADBEEF


def test_nonblocking(ctx):
    arr = np.zeros(512, dtype=np.uint8)
    with ctx.export(arr, netvm.RWA, "s_nb"), ctx.import_segment(0, "s_nb") as r:
        reqs = [r.put_nb(np.full(64, i, dtype=np.uint8), offset=64 * i) for i in range(8)]
        for q in reqs:
            assert q.wait() is None and q.done
        ctx.flush()
        assert all((arr[64 * i:64 * (i + 1)] == i).all() for i in range(8))
        out = bytearray(64)
        g = r.get_nb(out, offset=64 * 3)
        while not g.test():
            pass
        assert out == bytes([3]) * 64
        assert r.atomic_nb(netvm.AOP.FADD, 64 * 2, 2).wait() == 0x0202020202020202
        assert arr[128] == 4
        ctx.fence()


def test_errors_raise_with_status(ctx):
    with pytest.raises(netvm.NetvmError) as e:
        ctx.import_segment(0, "no such segment")
    assert e.value.status is Status.ERR_NOTFOUND
    assert e.value.strerror == netvm.strerror(Status.ERR_NOTFOUND)
    with pytest.raises(netvm.NetvmError) as e:
        ctx.import_segment(3, "anything")
    assert e.value.status is Status.ERR_RANK

    arr = np.zeros(8, dtype=np.uint64)
    with ctx.export(arr, netvm.READ, "s_err") as seg:
        with pytest.raises(netvm.NetvmError) as e:
            ctx.export(np.zeros(8), netvm.RW, "s_err")
        assert e.value.status is Status.ERR_EXISTS
        rank, slot, key = seg.handle()
        with pytest.raises(netvm.NetvmError) as e:
            ctx.import_handle((rank, slot, key ^ 1))       # a forged key
        assert e.value.status is Status.ERR_KEY
        with ctx.import_handle((rank, slot, key)) as r:
            with pytest.raises(netvm.NetvmError) as e:
                r.put(b"x")                                  # exported read-only
            assert e.value.status is Status.ERR_RIGHTS
            with pytest.raises(netvm.NetvmError) as e:
                r.get(16, offset=60)                          # past the end
            assert e.value.status is Status.ERR_BOUNDS
            with pytest.raises(netvm.NetvmError) as e:
                r.atomic(netvm.AOP.FADD, 0, 1)
            assert e.value.status is Status.ERR_RIGHTS
            with pytest.raises(netvm.NetvmError) as e:
                r.array()                                     # exported memory is not mapped
            assert e.value.status is Status.ERR_UNSUPPORTED
    assert (arr == 0).all()
    with pytest.raises(ValueError):
        ctx.export(b"read-only bytes")


def test_events_local(ctx):
    seg = ctx.alloc_shared(256, netvm.RWA, "s_events")
    try:
        r = ctx.import_segment(0, "s_events")
        with ctx.tripwire(seg, 64, 8, netvm.TRIP_WRITE, user=9) as tw:
            r.put(b"y" * 8, offset=0)                        # outside the range: no event
            r.put(b"z" * 8, offset=64)
            evs = [e for e in ctx.wait_events(timeout_ms=10000) if e.type == netvm.EventType.TRIPWIRE]
            assert len(evs) == 1 and evs[0].id == tw.id and evs[0].value == 9
            assert evs[0].access & netvm.TRIP_WRITE
            assert tw.test() == 1 and tw.test() == 0         # fired once since armed
        ctx.notify(0, 1234)
        evs = ctx.wait_events(timeout_ms=10000)
        assert [(e.type, e.value, e.rank) for e in evs] == [(netvm.EventType.NOTIFY, 1234, 0)]
        assert ctx.poll() == [] and ctx.wait_events(timeout_ms=0) == []
        r.put_signal(b"data", 8, r, 128, 5, netvm.SignalOp.SET)
        assert ctx.wait_until(seg, 128, netvm.Cmp.EQ, 5, timeout_ms=10000) == 5
        assert bytes(seg.array()[8:12]) == b"data"
        r.release()
    finally:
        seg.unexport()


def test_active_message_request_reply(ctx):
    seen = []

    def handler(msg):
        seen.append((msg.peer, msg.args, msg.payload))
        if msg.is_request:
            msg.reply(args=[sum(msg.args)], payload=msg.payload[::-1])

    ctx.am_register(7, handler)
    rep = ctx.am_request(0, 7, args=[1, 2, 3], payload=b"hello", reply_capacity=16)
    assert rep.status is Status.OK and rep.args == [6] and rep.payload == b"olleh" and rep.peer == 0
    ctx.am_send(0, 7, args=[4], payload=b"x")
    for _ in range(1000000):
        if len(seen) == 2:
            break
        ctx.progress()
    assert seen == [(0, [1, 2, 3], b"hello"), (0, [4], b"x")]
    ctx.am_register(7, None)


def test_event_fd_tripset_and_notify_flags(ctx):
    import select
    seg = ctx.alloc_shared(128, netvm.RWA, "s_fd")
    try:
        r = ctx.import_segment(0, "s_fd")
        assert ctx.poll() == []
        # the epoll-style loop of events.h: arm, sleep on the fd, poll
        ctx.notify(0, 5)
        got = []
        for _ in range(100):
            got += ctx.poll()
            if got:
                break
            if ctx.arm_events():
                assert select.select([ctx.event_fd()], [], [], 30)[0], "fd not readable within 30 s"
        assert [(e.type, e.value) for e in got] == [(netvm.EventType.NOTIFY, 5)]
        assert ctx.arm_events() is True              # nothing waits now

        # a tripset takes its tripwires' events; others stay in the queue
        with ctx.tripset() as ts:
            tw = ctx.tripwire(seg, 0, 8, netvm.TRIP_WRITE, user=3, tripset=ts)
            r.put(b"12345678")
            ev = ts.wait(timeout_ms=10000)
            assert ev is not None and ev.type == netvm.EventType.TRIPWIRE and ev.id == tw.id and ev.value == 3
            assert ts.wait(timeout_ms=0) is None
        assert ctx.poll() == []

        r.put_notify(b"abc", offset=16, flags=netvm.F_NOTIFY_REQUESTER | netvm.F_NOTIFY_COMPLETER, tag=77)
        seen = {}
        for _ in range(100):
            for e in ctx.wait_events(timeout_ms=10000):
                seen[e.type] = e
            if len(seen) == 2:
                break
        assert seen[netvm.EventType.REQUESTER].value == 77 and seen[netvm.EventType.REQUESTER].status is Status.OK
        assert seen[netvm.EventType.COMPLETER].value == 77 and seen[netvm.EventType.COMPLETER].len == 3
        assert bytes(seg.array()[16:19]) == b"abc"
        r.release()
    finally:
        seg.unexport()


def test_use_after_finalize_raises_state():
    # in a fresh process: this one's context (the fixture) stays open
    import os
    import subprocess
    import sys
    code = ("import netvm\n"
            "c = netvm.init(); s = c.alloc_shared(64, netvm.RWA, 'x'); c.finalize()\n"
            "for f in (c.barrier, lambda: s.array(), lambda: c.import_segment(0, 'x')):\n"
            "    try:\n        f()\n    except netvm.NetvmError as e:\n        print(e.status.name)\n")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=os.path.dirname(
                           os.path.dirname(netvm.__file__))))
    assert p.returncode == 0 and p.stdout.split() == ["ERR_STATE", "ERR_REVOKED", "ERR_STATE"], p.stdout
