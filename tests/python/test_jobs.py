"""Jobs of two processes started by `netvm run -n 2 python3 SCRIPT`, on the
shm link (mapped, and process_vm with NETVM_SHM_MAPPED=0) and on tcp."""
import pytest

LINKS = {
    "shm": {},
    "cma": {"NETVM_SHM_MAPPED": "0"},
    "tcp": {"NETVM_LINKS": "tcp"},
}


@pytest.mark.parametrize("link", LINKS)
def test_rma_two_ranks(run_job, link):
    out = run_job("job_rma.py", env=LINKS[link])
    for rank, right in ((0, 1), (1, 0)):
        assert "rank %d: read back 4096 float64 from rank %d: ok" % (rank, right) in out, out
    if link == "shm":
        assert "(mapped)" in out, out
    else:
        assert "(not mapped)" in out, out


@pytest.mark.parametrize("link", ["shm", "tcp"])
def test_atomics_counter_two_ranks(run_job, link):
    out = run_job("job_atomics.py", env=LINKS[link], args=["300"])
    assert "counter: 600 (expected 600), 600 unique tickets: ok" in out, out
    assert "rank 0: lock taken and released: ok" in out and "rank 1: lock taken and released: ok" in out


@pytest.mark.parametrize("link", ["shm", "tcp"])
def test_events_two_ranks(run_job, link):
    out = run_job("job_events.py", env=LINKS[link])
    assert "rank 0: tripwire fired by rank 1's put, notification 42, counter 15, signal: ok" in out, out
    assert "rank 1: remote tripwire, notification, counter, signal, request: ok" in out, out


def test_exception_in_with_block_ends_the_job(run_job):
    # a hang would end with the launcher's --timeout status, 124
    out = run_job("job_raise.py", status=1)
    assert "rank 1 fails on purpose" in out and "rank 1 (pid" in out and "exited with status 1" in out, out
