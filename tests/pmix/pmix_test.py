#!/usr/bin/env python3
"""Jobs that a PMIx server starts, without `netvm run` (src/boot/pmix.c).

    pmix_test.py --netvm NETVM --job PMIX_JOB --dead PMIX_DEAD CASE

Cases:
  mpirun_4_shm, mpirun_4_tcp  mpirun -n 4: RMA, atomics and notifications
                              across the 4 ranks (tests/pmix/job.c) on that link
  mpirun_4_tcp_noprogress     the same on tcp without progress threads: a rank
                              waiting in a fence serves its peers meanwhile
  mpirun_1                    a job of one under mpirun
  boot_interface              src/boot's interface under mpirun -n 3 (job id,
                              one secret per job, allgathers, barriers), twice:
                              the two jobs' secrets differ
  mpirun_dead_rank            rank 1 of 3 dies: the others' barrier must end
                              (NETVM_ERR_PEER), mpirun exits non-zero naming it
  mpirun_killed               mpirun is killed (SIGKILL) while ranks wait in a
                              barrier: their barrier fails (NETVM_ERR_BOOT)
  netvm_run_inside            `netvm run -n 2` under mpirun -n 1: NETVM_BOOT
                              wins over the PMIx variables it inherits
  no_server                   PMIX_RANK set but no PMIx server: a clear error,
                              never a silent job of one (also in a build
                              without PMIx, whose error says so)
  netns_mpirun_4              mpirun -n 4 across two network namespaces
                              (tests/netns/netns.py): mpirun in one, its daemon
                              started in the other by an rsh agent that is
                              `ip netns exec`; 2 ranks on each, shm within a
                              host and tcp between them
  slurm_2                     a single-node Slurm (slurmctld and slurmd from
                              Debian's slurm-wlm, root, auth/none, in a
                              temporary directory): srun --mpi=pmix -n 2, shm
                              and tcp

Exit 77 (skip) with the reason when mpirun (or Slurm) is missing or the
build has no PMIx bootstrap (`netvm info` says which; no_server runs in
either build)."""
import argparse
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

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
    # under AddressSanitizer: libpmix's own never-freed allocations are
    # not netvm's leaks (mpirun and srun pass the environment on)
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan.supp")
    env["LSAN_OPTIONS"] = ":".join(filter(None, [env.get("LSAN_OPTIONS"), "suppressions=" + supp]))
    env.update(extra)
    return env


def expect_ok(cmd, env, n):
    rc, out = run(cmd, env, timeout=120)
    if rc != 0:
        fail("exit status %d" % rc, out)
    for r in range(n):
        if "rank %d of %d ok" % (r, n) not in out:
            fail("rank %d of %d did not finish" % (r, n), out)
    print(out, end="")


def killed_case(a):
    d = tempfile.mkdtemp(prefix="netvm-pmix-killed-")
    try:
        cmd = mpirun(3, a.dead, "launcher", d)
        print("$ " + " ".join(cmd), flush=True)
        p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        waiting = [os.path.join(d, "wait%d" % r) for r in (0, 2)]
        for _ in range(1200):       # ranks 0 and 2 in their barrier (bounded: 120 s)
            if all(os.path.exists(w) for w in waiting) or p.poll() is not None:
                break
            time.sleep(0.1)
        if p.poll() is not None:
            fail("mpirun ended (%d) before the ranks waited" % p.returncode)
        if not all(os.path.exists(w) for w in waiting):
            p.kill()
            fail("ranks 0 and 2 never entered their barrier")
        p.kill()
        p.wait()
        results = [os.path.join(d, "result%d" % r) for r in (0, 2)]
        for _ in range(600):        # their barrier must end (bounded: 60 s)
            if all(os.path.exists(f) for f in results):
                break
            time.sleep(0.1)
        open(os.path.join(d, "release"), "w").close()    # rank 1 leaves too
        got = {}
        for r, f in zip((0, 2), results):
            try:
                got[r] = open(f).read().strip()
            except OSError:
                got[r] = None
        print("barrier after mpirun was killed: %s" % got)
        for r, text in got.items():
            if text is None:
                fail("rank %d's barrier did not end within 60 s of mpirun's death" % r)
            if "bootstrap failed" not in text:
                fail("rank %d's barrier: %s, expected NETVM_ERR_BOOT" % (r, text))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SLURM_CONF = """ClusterName=netvmtest
SlurmctldHost={host}
SlurmctldPort={cport}
SlurmdPort={dport}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
TmpFS={d}/tmp
NodeName={host} CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
"""


def slurm_logs(d):
    logs = ""
    for name in ("slurmctld.log", "slurmd.log"):
        try:
            logs += "--- %s (its end) ---\n" % name + open(os.path.join(d, name)).read()[-3000:]
        except OSError:
            pass
    return logs


def slurm_case(a):
    for prog in ("slurmctld", "slurmd", "srun", "sinfo"):
        if not shutil.which(prog):
            skip("%s not found (Debian: slurmctld slurmd slurm-client)" % prog)
    if os.geteuid() != 0:
        skip("a private slurmd must run as root")
    if not glob.glob("/usr/lib/*/slurm*/mpi_pmix*.so") + glob.glob("/usr/lib*/slurm*/mpi_pmix*.so"):
        skip("this Slurm has no mpi/pmix plugin (mpi_pmix.so)")
    d = tempfile.mkdtemp(prefix="netvm-slurm-")
    os.makedirs(d + "/state")
    os.makedirs(d + "/spool")
    os.makedirs(d + "/tmp")     # the pmix plugin's per-step directories, never shared with another run's
    conf = d + "/slurm.conf"
    with open(conf, "w") as f:
        f.write(SLURM_CONF.format(host=socket.gethostname(), cport=free_port(), dport=free_port(), d=d))
    env = clean_env(SLURM_CONF=conf)
    daemons = []
    try:
        # -D: in the foreground, children of this test, ended by their pids
        for cmd in (["slurmctld", "-D", "-i", "-f", conf], ["slurmd", "-D", "-f", conf]):
            daemons.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        for _ in range(300):        # until the node is up (bounded: 30 s)
            p = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
            if p.stdout.strip() in ("idle", "mix", "alloc"):
                break
            if any(x.poll() is not None for x in daemons):
                break
            time.sleep(0.1)
        else:
            p = None
        if p is None or p.stdout.strip() not in ("idle", "mix", "alloc"):
            fail("the private Slurm did not come up", slurm_logs(d))
        for link in ("shm", "tcp"):
            e = dict(env, NETVM_LINKS=link)
            cmd = ["srun", "--mpi=pmix", "-n", "2", "-t", "2", a.job, "2", link]
            for attempt in range(3):
                rc, out = run(cmd, e, timeout=120)
                # Slurm's own step launch failing (slurmstepd or its pmix
                # plugin, before any task ran netvm's code) is retried, and
                # said: seen once in CI among many runs, with no task started
                if "launch failed" in out and " of 2 " not in out and attempt < 2:
                    print("Slurm failed to launch the step before any task ran; again\n"
                          + out + slurm_logs(d), flush=True)
                    continue
                break
            if rc != 0:
                fail("exit status %d" % rc, out + slurm_logs(d))
            for r in range(2):
                if "rank %d of 2 ok" % r not in out:
                    fail("rank %d of 2 did not finish" % r, out + slurm_logs(d))
            print(out, end="")
    finally:
        for x in daemons:
            if x.poll() is None:
                x.terminate()
        for x in daemons:
            try:
                x.wait(timeout=30)
            except subprocess.TimeoutExpired:
                x.kill()
                x.wait()
        shutil.rmtree(d, ignore_errors=True)


def netns_case(a):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "netns"))
    from netns import Netns, Unavailable
    try:
        net = Netns(hosts=2)
    except Unavailable as e:
        skip("network namespaces: %s" % e)
    with net:
        d = tempfile.mkdtemp(prefix="netvm-pmix-ns-")
        try:
            # mpirun's rsh launcher runs `AGENT HOST COMMAND...`: here HOST is
            # an address, the agent runs the command in that host's namespace
            # with NETVM_TCP_ADDR set to it (each host listens on its own)
            agent = os.path.join(d, "agent.sh")
            cases = " ".join("%s) ns=%s ;;" % (net.addr(k), net.names[k]) for k in range(2))
            with open(agent, "w") as f:
                f.write("#!/bin/sh\nhost=$1; shift\n"
                        "case $host in %s *) echo \"agent: unknown host $host\" >&2; exit 1 ;; esac\n"
                        "exec %s netns exec $ns env NETVM_TCP_ADDR=$host sh -c \"$*\"\n" % (cases, net.ip))
            os.chmod(agent, 0o700)
            cmd = mpirun(4, "--host", "%s:2,%s:2" % (net.addr(0), net.addr(1)),
                         "--mca", "plm_rsh_agent", agent,
                         "--mca", "oob_tcp_if_include", "10.77.0.0/16",
                         a.job, "4", "any")
            env = clean_env(NETVM_TCP_ADDR=net.addr(0))
            print("$ " + " ".join(net.command(0, cmd)), flush=True)
            try:
                p = net.run(0, cmd, env=env, timeout=120, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, capture_output=False)
            except subprocess.TimeoutExpired as e:
                fail("hung: no end after 120 s", e.stdout or "")
            out = p.stdout
            if p.returncode != 0:
                fail("exit status %d" % p.returncode, out)
            ranks = {}
            for line in out.splitlines():
                m = re.match(r"rank (\d+) of 4 ok, right (\d+) over (\w+), tcp addr (\S+)", line)
                if m:
                    ranks[int(m.group(1))] = (int(m.group(2)), m.group(3), m.group(4))
            if sorted(ranks) != [0, 1, 2, 3]:
                fail("not every rank finished", out)
            hosts = {r: v[2] for r, v in ranks.items()}
            if set(hosts.values()) != {net.addr(0), net.addr(1)}:
                fail("the job did not span both namespaces: %s" % hosts, out)
            for r, (right, link, _) in ranks.items():
                want = "shm" if hosts[r] == hosts[right] else "tcp"
                if link != want:
                    fail("rank %d reaches rank %d over %s, expected %s" % (r, right, link, want), out)
            print(out, end="")
            print("ranks per host: %s" % hosts)
        finally:
            shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netvm", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--dead", required=True)
    ap.add_argument("--boot", required=True)
    ap.add_argument("case")
    a = ap.parse_args()

    info = subprocess.run([a.netvm, "info"], stdout=subprocess.PIPE, text=True).stdout
    absent = "PMIx: absent" in info
    if not absent and "PMIx (libpmix" not in info:
        fail("`netvm info` does not say whether PMIx is there", info)

    if a.case == "no_server":
        # PMIx variables without a server: the library must not fall back to a
        # job of one each (which under a launcher would be n wrong jobs)
        rc, out = run([a.job, "1", "any"], clean_env(PMIX_RANK="0", PMIX_NAMESPACE="netvm-test-none"))
        if rc == 0 or "rank 0 of 1 ok" in out:
            fail("ran with PMIX_RANK set and no PMIx server", out)
        if "PMIx" not in out:
            fail("the error does not name PMIx", out)
        if absent and "built without PMIx" not in out:
            fail("a build without PMIx does not say so", out)
        print(out, end="")
        print("refused, as it should")
        return

    if absent:
        skip("this netvm was built without PMIx (libpmix-dev missing: scripts/install-deps.sh)")

    if a.case == "slurm_2":
        slurm_case(a)
        return
    if a.case == "netns_mpirun_4":
        if not shutil.which("mpirun"):
            skip("mpirun not found (Debian: openmpi-bin)")
        netns_case(a)
        return

    if not shutil.which("mpirun"):
        skip("mpirun not found (Debian: openmpi-bin)")

    if a.case == "mpirun_4_shm":
        expect_ok(mpirun(4, a.job, "4", "shm", env_vars=["NETVM_LINKS=shm"]), clean_env(), 4)
    elif a.case == "mpirun_4_tcp":
        expect_ok(mpirun(4, a.job, "4", "tcp", env_vars=["NETVM_LINKS=tcp"]), clean_env(), 4)
    elif a.case == "mpirun_4_tcp_noprogress":
        expect_ok(mpirun(4, a.job, "4", "tcp", env_vars=["NETVM_LINKS=tcp", "NETVM_PROGRESS_THREAD=0"]),
                  clean_env(), 4)
    elif a.case == "mpirun_1":
        expect_ok(mpirun(1, a.job, "1", "any"), clean_env(), 1)
    elif a.case == "netvm_run_inside":
        expect_ok(mpirun(1, a.netvm, "run", "-n", "2", "--", a.job, "2", "any", "launcher"), clean_env(), 2)
    elif a.case == "boot_interface":
        prints = []
        for _ in range(2):
            rc, out = run(mpirun(3, a.boot), clean_env(), timeout=120)
            if rc != 0 or any("rank %d of 3 ok" % r not in out for r in range(3)):
                fail("exit status %d" % rc, out)
            m = re.search(r"^secret ([0-9a-f]{16})$", out, re.M)
            if not m:
                fail("no secret fingerprint", out)
            prints.append(m.group(1))
            print(out, end="")
        if prints[0] == prints[1]:
            fail("two jobs got the same secret (%s)" % prints[0])
        print("two jobs, two secrets: %s %s" % tuple(prints))
    elif a.case == "mpirun_killed":
        killed_case(a)
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
