"""Shared fixtures: the package from the source tree, and jobs of several
processes started through the launcher (`netvm run`), as a user starts them."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))


def _launcher():
    return os.environ.get("NETVM_LAUNCHER", os.path.join(REPO, "build", "tools", "netvm"))


@pytest.fixture
def run_job():
    """run_job(script, n=2, env=None, args=()): run tests/python/SCRIPT under
    `netvm run -n N python3`, fail with its output unless it exits 0, return
    the output (status: the exit status expected instead of 0)."""
    def run(script, n=2, env=None, args=(), status=0):
        launcher = _launcher()
        if not os.access(launcher, os.X_OK):
            pytest.fail("no launcher at %s (set NETVM_LAUNCHER)" % launcher)
        # hangs only: the launcher ends the job, pytest's timeout is above it
        job_timeout = int(os.environ.get("NETVM_TEST_JOB_TIMEOUT", "180"))
        e = dict(os.environ)
        e["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + e.get("PYTHONPATH", "")
        e.update(env or {})
        cmd = [launcher, "run", "-n", str(n), "--timeout", str(job_timeout), "--",
               sys.executable, os.path.join(HERE, script), *args]
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=job_timeout + 30, text=True)
        assert p.returncode == status, "%s exited %d, not %d:\n%s" % (" ".join(cmd), p.returncode, status,
                                                                    p.stdout)
        return p.stdout
    return run
