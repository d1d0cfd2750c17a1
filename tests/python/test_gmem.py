"""Network memory from Python: a region larger than its budget as a numpy
array, on the embedded local servers (nothing configured)."""
import numpy as np
import pytest

import netvm
from netvm import Status


@pytest.fixture(scope="module")
def ctx():
    c = netvm.init()
    yield c
    c.finalize()


def test_region_larger_than_budget_as_numpy_array(ctx):
    try:
        region = ctx.gmem_map(16 << 20, budget=4 << 20)
    except netvm.NetvmError as e:
        if e.status == Status.ERR_UNSUPPORTED:
            pytest.skip("no userfaultfd for this process: " + str(e))
        raise
    with region:
        a = region.array(np.uint64)
        assert a.ctypes.data == region.address and a.nbytes == region.nbytes
        assert not a[:: 512].any()                       # reads as zeros before written
        a[:] = np.arange(a.size, dtype=np.uint64) * 3    # 4x the budget: pages leave
        region.sync()
        assert (a == np.arange(a.size, dtype=np.uint64) * 3).all()   # and come back
        st = region.stats()
        assert st["evictions"] > 0 and st["remote_fetches"] > 0
        assert st["resident_pages"] <= st["budget_pages"]
        m = region.array(np.float32, shape=(16, 4), offset=4096)
        assert m.ctypes.data == region.address + 4096
        h = region.health()
        assert h["servers_alive"] >= 1 and h["pages_lost"] == 0
    with pytest.raises(netvm.NetvmError):
        region.sync()                                     # unmapped
