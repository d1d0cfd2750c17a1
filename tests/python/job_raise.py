"""Rank 1 raises inside `with netvm.init()` while rank 0 waits for an event
from it: the exception must end the job (rank 1 exits 1, the launcher ends
rank 0), not hang in a collective finalize that rank 0 never reaches."""
import netvm

with netvm.init() as ctx:
    if ctx.rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    ctx.wait_events(timeout_ms=-1)      # a notification that never comes
