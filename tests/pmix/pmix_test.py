#!/usr/bin/env python3
"""Jobs that a PMIx server starts, without `netvm run` (src/boot/pmix.c).

    pmix_test.py --netvm NETVM --job PMIX_JOB --dead PMIX_DEAD CASE

Cases:
  mpirun_4_shm, mpirun_4_tcp  mpirun -n 4: RMA, atomics and notifications
                              across the 4 ranks (tests/pmix/job.c) on that link
  mpirun_1                    a job of one under mpirun
  mpirun_dead_rank            rank 1 of 3 dies: the others' barrier must end
                              (NETVM_ERR_PEER), mpirun exits non-zero naming it
  netvm_run_inside            `netvm run -n 2` under mpirun -n 1: NETVM_BOOT
                              wins over the PMIx variables it inherits
  no_server                   PMIX_RANK set but no PMIx server: a clear error,
                              never a silent job of one

Exit 77 (skip) with the reason when mpirun is missing or the build has no
PMIx bootstrap (`netvm info` says which)."""
import argparse
import os
import shutil
import subprocess
import sys

SKIP = 77


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def fail(why, out=""):
    print("FAIL: " + why)
    if out:
        print("--- output ---\n" + out)
    sys.exit(1)


def run(cmd, env=None, timeout=180):
    print("$ " + " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        fail("hung: no end after %d s" % timeout, out)
    return p.returncode, p.stdout


def mpirun(n, *args, env_vars=()):
    cmd = ["mpirun", "-n", str(n), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for v in env_vars:
        cmd += ["-x", v]
    return cmd + list(args)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NETVM_") and not k.startswith("PMIX_")}
    env.update(extra)
    return env


def expect_ok(cmd, env, n):
    rc, out = run(cmd, env)
    if rc != 0:
        fail("exit status %d" % rc, out)
    for r in range(n):
        if "rank %d of %d ok" % (r, n) not in out:
            fail("rank %d of %d did not finish" % (r, n), out)
    print(out, end="")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netvm", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--dead", required=True)
    ap.add_argument("case")
    a = ap.parse_args()

    info = subprocess.run([a.netvm, "info"], stdout=subprocess.PIPE, text=True).stdout
    if "PMIx: absent" in info:
        skip("this netvm was built without PMIx (libpmix-dev missing: scripts/install-deps.sh)")
    if "PMIx (libpmix" not in info:
        fail("`netvm info` does not say whether PMIx is there", info)

    if a.case == "no_server":
        # PMIx variables without a server: the library must not fall back to a
        # job of one each (which under a launcher would be n wrong jobs)
        rc, out = run([a.job, "1", "any"], clean_env(PMIX_RANK="0", PMIX_NAMESPACE="netvm-test-none"))
        if rc == 0 or "rank 0 of 1 ok" in out:
            fail("ran with PMIX_RANK set and no PMIx server", out)
        if "PMIx" not in out:
            fail("the error does not name PMIx", out)
        print(out, end="")
        print("refused, as it should")
        return

    if not shutil.which("mpirun"):
        skip("mpirun not found (Debian: openmpi-bin)")

    if a.case == "mpirun_4_shm":
        expect_ok(mpirun(4, a.job, "4", "shm", env_vars=["NETVM_LINKS=shm"]), clean_env(), 4)
    elif a.case == "mpirun_4_tcp":
        expect_ok(mpirun(4, a.job, "4", "tcp", env_vars=["NETVM_LINKS=tcp"]), clean_env(), 4)
    elif a.case == "mpirun_1":
        expect_ok(mpirun(1, a.job, "1", "any"), clean_env(), 1)
    elif a.case == "netvm_run_inside":
        expect_ok(mpirun(1, a.netvm, "run", "-n", "2", "--", a.job, "2", "any", "launcher"), clean_env(), 2)
    elif a.case == "mpirun_dead_rank":
        rc, out = run(mpirun(3, a.dead), clean_env())
        print(out, end="")
        if rc == 0:
            fail("mpirun exited 0 although rank 1 died", out)
        if "FAIL" in out:
            fail("a survivor's barrier did not fail with NETVM_ERR_PEER", out)
        # the survivors either got the error or were ended by mpirun first;
        # mpirun names the dead rank either way
        if "rank 1" not in out:
            fail("nothing names rank 1 as the dead one", out)
        survivors = [r for r in (0, 2) if "survivor %d: barrier: peer process died" % r in out]
        print("mpirun exit %d; survivors that saw NETVM_ERR_PEER: %s" % (rc, survivors or "none (ended by mpirun)"))
    else:
        fail("unknown case " + a.case)


if __name__ == "__main__":
    main()
