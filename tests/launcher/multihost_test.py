#!/usr/bin/env python3
"""Jobs across hosts, seen from outside: one `netvm run` per host, as users
run them. The hosts are either this machine's loopback (every launcher on
127.0.0.1, a free port for the rendezvous) or network namespaces made by
tests/netns/netns.py (each launcher on its own host, node 0 listening on
its address):

    multihost_test.py --netvm PATH --helper PATH --coll PATH
                      [--where loopback|netns] [--hosts N] CASE

Every launcher has a hard time limit, so a hang fails the test. Each case
runs with TMPDIR set to a fresh directory that must be empty afterwards.
Exit 77 (ctest's SKIP_RETURN_CODE) where namespaces cannot be made."""

import argparse
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "netns"))
import netns  # noqa: E402

NETVM = HELPER = COLL = None
LIMIT = 60          # seconds any launcher may take
NP = 2              # processes per host
NETNS_PORT = 7000   # inside namespaces nothing else listens


class Hosts:
    """Where the launchers run: loopback, or network namespaces."""

    def __init__(self, where, n, tmp):
        self.n, self.tmp, self.net = n, tmp, None
        if where == "netns":
            self.net = netns.Netns(hosts=n)     # raises netns.Unavailable
            self.net.__enter__()
        self.port = NETNS_PORT if self.net else free_port()

    def close(self):
        if self.net:
            self.net.__exit__(None, None, None)

    def addr(self, k):
        return self.net.addr(k) if self.net else "127.0.0.1"

    def rendezvous(self):
        return "%s:%d" % (self.addr(0), self.port)

    def popen(self, k, argv, **kw):
        kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if self.net:
            return self.net.popen(k, argv, **kw)
        return subprocess.Popen(argv, **kw)

    def new_port(self):
        if not self.net:
            self.port = free_port()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_secret(tmp, name="secret", mode=0o600, text=None):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text if text is not None else os.urandom(32).hex() + "\n")
    os.chmod(path, mode)
    return path


LAUNCHERS = []      # every launcher started, so none outlives a failed test


class Launcher:
    def __init__(self, hosts, node, args, program, env=None):
        self.node = node
        argv = [NETVM, "run", *args, "--", *program]
        self.p = hosts.popen(node, argv, env=env)
        self.out = self.err = None
        LAUNCHERS.append(self.p)

    def finish(self, timeout=LIMIT):
        try:
            self.out, self.err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.out, self.err = self.p.communicate()
            raise AssertionError(f"node {self.node}'s launcher did not exit\n{self.err}")
        return self.p.returncode

    def show(self):
        return f"node {self.node}: exit {self.p.returncode}\n--- stdout\n{self.out}--- stderr\n{self.err}"


def job_args(hosts, node, secret, extra=(), nnodes=None, np=NP):
    return ["-n", str(np), "--nnodes", str(nnodes or hosts.n), "--node-rank", str(node),
            "--rendezvous", hosts.rendezvous(), "--secret-file", secret, *extra]


def start_job(hosts, secret, program, extra=(), nodes=None, env=None, first=0):
    """One launcher per node, node `first` first (node 0 by default); picks
    another port if this one turned out to be taken."""
    nodes = list(range(hosts.n)) if nodes is None else nodes
    order = [first] + [k for k in nodes if k != first]
    for attempt in range(5):
        ls = {}
        for k in order:
            ls[k] = Launcher(hosts, k, job_args(hosts, k, secret, extra), program, env=env)
            if k == 0:
                time.sleep(0.1)
                if ls[0].p.poll() is not None:
                    break
        hub = ls.get(0)
        if hub and hub.p.poll() is not None and hub.p.returncode == 1:
            hub.finish()
            if "Address already in use" in hub.err:
                for l in ls.values():
                    l.p.kill()
                    l.finish()
                hosts.new_port()
                continue
        return [ls[k] for k in sorted(ls)]
    raise AssertionError("no free port for the rendezvous")


def finish_all(ls, timeout=LIMIT):
    end = time.monotonic() + timeout
    for l in ls:
        l.finish(max(1, end - time.monotonic()))
    return [l.p.returncode for l in ls]


def expect(cond, what, ls=()):
    if not cond:
        raise AssertionError(what + "".join("\n" + l.show() for l in ls))


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, within):
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def wait_ready(ls, per_node):
    """Read "ready PID RANK" lines until every launcher's ranks reported.
    (Each host's pid is the one its own pid namespace shows; the test runs
    in the same pid namespace as the hosts.)"""
    pids = {}
    end = time.monotonic() + LIMIT
    for l in ls:
        got = 0
        while got < per_node:
            expect(time.monotonic() < end, "ranks did not get ready", ls)
            line = l.p.stdout.readline()
            expect(line != "", f"node {l.node}'s output ended early (exit {l.p.poll()})", ls)
            m = re.match(r"ready (\d+) (\d+)", line)
            if m:
                pids[int(m.group(2))] = int(m.group(1))
                got += 1
    return pids


# --- cases ------------------------------------------------------------------

def case_coll(h):
    """Collectives across hosts see global ranks and size; allgather and
    barrier work, at several sizes and orders."""
    secret = write_secret(h.tmp)
    ls = start_job(h, secret, [COLL, str(NP * h.n)])
    codes = finish_all(ls)
    expect(codes == [0] * h.n, "the job failed", ls)


def case_env(h):
    """What every rank is told: global rank, size, node, local rank, the job
    secret (the file's), one job id, and its host's address."""
    text = os.urandom(32).hex()
    secret = write_secret(h.tmp, text=text + "\n")
    ls = start_job(h, secret, [HELPER, "env"])
    codes = finish_all(ls)
    expect(codes == [0] * h.n, "the job failed", ls)
    ranks = {}
    for l in ls:
        for line in l.out.splitlines():
            if line.startswith("rank "):
                f = dict(zip(line.split()[::2], line.split()[1::2]))
                f["host"] = l.node
                ranks[int(f["rank"])] = f
    size = NP * h.n
    expect(sorted(ranks) == list(range(size)), f"ranks {sorted(ranks)}, not 0..{size - 1}", ls)
    expect(len({f["job"] for f in ranks.values()}) == 1, "ranks disagree on the job id", ls)
    for r, f in ranks.items():
        expect(f["size"] == str(size) and f["nnodes"] == str(h.n), f"rank {r}: size/nnodes", ls)
        expect(f["node"] == str(f["host"]) and f["node"] == str(r // NP), f"rank {r}: node", ls)
        expect(f["local"] == str(r % NP) and f["lsize"] == str(NP), f"rank {r}: local rank", ls)
        expect(f["secret"] == text, f"rank {r}: not the secret of the file", ls)
        expect(f["tcp"] == h.addr(f["host"]), f"rank {r}: NETVM_TCP_ADDR {f['tcp']}, not {h.addr(f['host'])}", ls)


def case_env_wildcard(h):
    """Node 0 listening on every address (0.0.0.0): its NETVM_TCP_ADDR is the
    address its first node reached it at. Namespaces only: on loopback the
    test would listen on every interface of the machine."""
    if not h.net:
        raise AssertionError("env_wildcard runs in network namespaces only")
    secret = write_secret(h.tmp)
    hub_args = job_args(h, 0, secret)
    hub_args[hub_args.index("--rendezvous") + 1] = "0.0.0.0:%d" % h.port
    ls = [Launcher(h, 0, hub_args, [HELPER, "env"])]
    time.sleep(0.1)
    ls += [Launcher(h, k, job_args(h, k, secret), [HELPER, "env"]) for k in range(1, h.n)]
    codes = finish_all(ls)
    expect(codes == [0] * h.n, "the job failed", ls)
    for l in ls:
        tcp = {f.split()[1] for f in re.findall(r"tcp \S+", l.out)}
        expect(tcp == {h.addr(l.node)}, f"node {l.node}: NETVM_TCP_ADDR {tcp}, not {h.addr(l.node)}", ls)


def case_env_secret(h):
    """NETVM_SECRET in the launchers' environment instead of a file."""
    text = os.urandom(32).hex()
    env = dict(os.environ, NETVM_SECRET=text)
    ls = []
    for k in range(h.n):
        args = ["-n", str(NP), "--nnodes", str(h.n), "--node-rank", str(k), "--rendezvous", h.rendezvous()]
        ls.append(Launcher(h, k, args, [HELPER, "env"], env=env))
    finish_all(ls)
    expect([l.p.returncode for l in ls] == [0] * h.n, "the job failed", ls)
    expect(all(f"secret {text}" in l.out for l in ls), "ranks did not get NETVM_SECRET", ls)


def kill_case(h, victim, keep_going=False):
    secret = write_secret(h.tmp)
    t0 = time.monotonic()
    mode = "killkg" if keep_going else "kill"
    ls = start_job(h, secret, [HELPER, mode, str(victim)], extra=["-k"] if keep_going else ())
    codes = finish_all(ls)
    took = time.monotonic() - t0
    node = victim // NP
    expect(codes == [137] * h.n, f"exit statuses {codes}, not 137 everywhere", ls)
    pat = rf"netvm run: rank {victim} \(pid \d+\) on node {node} killed by signal 9 \(Killed\); " + \
          ("the others go on" if keep_going else "terminating the job")
    for l in ls:
        expect(re.search(pat, l.err), f"node {l.node} did not name rank {victim} on node {node}", ls)
        expect("survived" not in l.out, "ranks were not torn down", ls)
    if keep_going:
        for r in range(NP * h.n):
            if r != victim:
                expect(any(f"rank {r} saw rank {victim} gone" in l.out for l in ls),
                       f"survivor {r} did not get NETVM_ERR_PEER", ls)
    expect(took < 30, f"teardown took {took:.1f} s", ls)


def case_kill(h):
    """A rank on the last node dies mid-job: every launcher ends, naming it."""
    kill_case(h, NP * h.n - 1)


def case_kill_hub_rank(h):
    """A rank on node 0 dies mid-job."""
    kill_case(h, 1)


def case_keep_going(h):
    """--keep-going on every node: the survivors' collectives fail with
    NETVM_ERR_PEER instead of hanging; the job still fails."""
    kill_case(h, NP * h.n - 1, keep_going=True)


def case_launcher_killed(h):
    """A node's launcher is SIGKILLed: its ranks die with it, node 0 counts
    them dead and ends the job everywhere."""
    secret = write_secret(h.tmp)
    ls = start_job(h, secret, [HELPER, "sleep"])
    pids = wait_ready(ls, NP)
    victim = ls[-1]
    victim.p.kill()
    victim.finish()
    others = ls[:-1]
    codes = finish_all(others)
    expect(all(c != 0 for c in codes), f"exit statuses {codes}: the others did not fail", others)
    for l in others:
        expect(re.search(rf"lost node {victim.node} \(ranks \d+\.\.\d+\)", l.err),
               f"node {l.node} did not say node {victim.node} was lost", others)
    expect(wait_gone(pids.values(), 10), "ranks outlived the job")


def case_hub_killed(h):
    """Node 0's launcher is SIGKILLed: every node tears its ranks down."""
    secret = write_secret(h.tmp)
    ls = start_job(h, secret, [HELPER, "sleep"])
    pids = wait_ready(ls, NP)
    ls[0].p.kill()
    ls[0].finish()
    codes = finish_all(ls[1:])
    expect(codes == [1] * (h.n - 1), f"exit statuses {codes}, not 1", ls[1:])
    for l in ls[1:]:
        expect("lost node 0" in l.err, f"node {l.node} did not say it lost node 0", ls[1:])
    expect(wait_gone(pids.values(), 10), "ranks outlived the job")


def case_link_down(h):
    """The last host becomes unreachable mid-job (its link taken down, no
    connection closed): keepalive notices within seconds, node 0 counts its
    ranks dead and ends the job, and the cut-off node tears down too.
    Namespaces only."""
    if not h.net:
        raise AssertionError("link_down runs in network namespaces only")
    secret = write_secret(h.tmp)
    ls = start_job(h, secret, [HELPER, "sleep"])
    pids = wait_ready(ls, NP)
    t0 = time.monotonic()
    h.net.link(h.n - 1, up=False)
    codes = finish_all(ls)
    took = time.monotonic() - t0
    expect(all(c != 0 for c in codes), f"exit statuses {codes}", ls)
    expect(re.search(rf"lost node {h.n - 1} \(ranks", ls[0].err), "node 0 did not say the node was lost", ls)
    expect("lost node 0" in ls[-1].err, "the cut-off node did not say it lost node 0", ls)
    expect(took < 40, f"noticed after {took:.1f} s", ls)
    expect(wait_gone(pids.values(), 10), "ranks outlived the job")


def case_wrong_secret(h):
    """A launcher without the job secret is refused and harms nothing: the
    real nodes still join and the job runs."""
    secret = write_secret(h.tmp)
    wrong = write_secret(h.tmp, "wrong")
    ls = start_job(h, secret, [COLL, str(NP * h.n)], nodes=[0])
    time.sleep(0.2)
    intruder = Launcher(h, 1, job_args(h, 1, wrong), [HELPER, "env"])
    expect(intruder.finish() == 1, "a launcher with the wrong secret was not refused", [intruder])
    expect("refused this launcher's proof" in intruder.err, "no clear refusal", [intruder])
    ls += [Launcher(h, k, job_args(h, k, secret), [COLL, str(NP * h.n)]) for k in range(1, h.n)]
    codes = finish_all(ls)
    expect(codes == [0] * h.n, "the job was harmed", ls)
    expect("authentication failed" in ls[0].err, "node 0 logged no reason for the refusal", ls)
    expect("rank" not in intruder.out, "the intruder's ranks ran", [intruder])


def frame(mtype, payload, length=None):
    """A bootstrap frame: magic "NVBO", version 1, type, payload length."""
    return struct.pack("<IHHI", 0x4f42564e, 1, mtype, len(payload) if length is None else length) + payload


def hostile_connections(addr, port, nhosts):
    """Bytes no launcher would send, to the rendezvous port. Returns the
    connections that stay open (silent or cut short), for the caller to
    keep while the real nodes join."""
    nonce = os.urandom(32)
    hello_fixed = struct.pack("<iiiIHH", 1, nhosts, NP, 0, 2, 32) + nonce
    attacks = [
        (os.urandom(64), False),                                # noise
        (os.urandom(100000), False),                            # a lot of noise
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False),           # the wrong protocol
        (frame(9, b"", length=1 << 30), False),                 # a frame claiming a gigabyte
        (frame(9, hello_fixed + os.urandom(32)), False),        # a NODE_HELLO with a made-up proof
        (frame(9, hello_fixed + os.urandom(31)), False),        # a NODE_HELLO one byte short of its length
        (frame(13, struct.pack("<iIHH", 0, 1, 5, 0)), False),   # ENTER before authenticating
        (frame(3, struct.pack("<I", 1) + b"x" * 8), False),     # a process's ALLGATHER on the tcp port
        (frame(9, b"")[:7], True),                              # a truncated header, then silence
        (frame(9, hello_fixed + os.urandom(32))[:40], True),    # a truncated NODE_HELLO, then silence
        (b"", True),                                            # connect and say nothing
    ]
    lingering = []
    for data, linger in attacks:
        s = socket.create_connection((addr, port), timeout=5)
        try:
            s.sendall(data)
            if not linger:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass            # the hub may close on the first bad bytes
        # the hub sends a challenge and nothing else: no secret, no job id
        s.settimeout(0.5 if linger else 5)
        got = b""
        try:
            while len(got) < 100:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        expect(len(got) <= 12 + 32, f"an unauthenticated peer got {len(got)} bytes")
        expect(got[:4] in (b"", b"NVBO"), "an unauthenticated peer got something other than a challenge")
        if linger:
            lingering.append(s)
        else:
            s.close()
    return lingering


def case_garbage(h):
    """Random bytes, truncated and oversized frames, made-up proofs and silent
    connections on the rendezvous port leave the job unharmed."""
    secret = write_secret(h.tmp)
    ls = start_job(h, secret, [COLL, str(NP * h.n)], nodes=[0])
    time.sleep(0.2)
    attacker, lingering = None, []
    if h.net:
        # the test's own namespace cannot reach the hosts: attack from host 0's
        attacker = h.net.popen(0, [sys.executable, os.path.abspath(__file__), "--netvm", NETVM,
                                   "--helper", HELPER, "--coll", COLL, "--attack", h.rendezvous(),
                                   "--hosts", str(h.n), "garbage"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
    else:
        lingering = hostile_connections(h.addr(0), h.port, h.n)
    # the real nodes join while the cut-short connections are still open
    ls += [Launcher(h, k, job_args(h, k, secret), [COLL, str(NP * h.n)]) for k in range(1, h.n)]
    codes = finish_all(ls)
    for s in lingering:
        s.close()
    if attacker:
        out, err = attacker.communicate(timeout=LIMIT)
        expect(attacker.returncode == 0, f"the attacker failed: {out}{err}", ls)
    expect(codes == [0] * h.n, "the job was harmed", ls)
    expect("malformed" in ls[0].err and "authentication failed" in ls[0].err,
           "node 0 logged no reason for closing the garbage", ls)
    # once every node has joined, the rendezvous is closed
    if not h.net:
        try:
            socket.create_connection((h.addr(0), h.port), timeout=2).close()
            expect(False, "the rendezvous still listens after the job")
        except OSError:
            pass


def case_usage(h):
    """Multi-host options that cannot work are usage errors (2), said clearly."""
    secret = write_secret(h.tmp)
    env = {k: v for k, v in os.environ.items() if k != "NETVM_SECRET"}

    def run(*args, env=env):
        return subprocess.run([NETVM, "run", *args], capture_output=True, text=True, timeout=LIMIT, env=env)

    base = ["-n", "2", "--nnodes", "2", "--node-rank", "1", "--rendezvous", "127.0.0.1:9"]
    p = run(*base, HELPER, "env")
    expect(p.returncode == 2 and "--secret-file" in p.stderr and "NETVM_SECRET" in p.stderr,
           f"a missing secret is not a clear usage error: {p.returncode} {p.stderr}")
    for args, msg in (
            (["-n", "2", "--nnodes", "2", "--rendezvous", "127.0.0.1:9", "--secret-file", secret], "--node-rank"),
            (["-n", "2", "--nnodes", "2", "--node-rank", "0", "--secret-file", secret], "--rendezvous"),
            (["-n", "2", "--nnodes", "2", "--node-rank", "2", "--rendezvous", "127.0.0.1:9",
              "--secret-file", secret], "not in 0..1"),
            (["-n", "2", "--nnodes", "2", "--node-rank", "1", "--rendezvous", "127.0.0.1",
              "--secret-file", secret], "HOST:PORT"),
            (["-n", "2", "--nnodes", "2", "--node-rank", "1", "--rendezvous", "127.0.0.1:99999",
              "--secret-file", secret], "port"),
            (["-n", "2", "--nnodes", "2", "--node-rank", "1", "--rendezvous", ":9",
              "--secret-file", secret], "name node 0's host"),
            (["-n", "2", "--node-rank", "1"], "--nnodes"),
            (["-n", "2", "--nnodes", "0"], "--nnodes"),
            (base + ["--rendezvous-timeout", "0", "--secret-file", secret], "--rendezvous-timeout"),
            (base + ["--secret-file", os.path.join(h.tmp, "none")], "No such file"),
            (base + ["--secret-file", write_secret(h.tmp, "open", mode=0o644)], "chmod 600"),
            (base + ["--secret-file", write_secret(h.tmp, "short", text="abcd\n")], "hex digits")):
        p = run(*args, HELPER, "env")
        expect(p.returncode == 2 and msg in p.stderr, f"{args}: {p.returncode} {p.stderr!r} lacks {msg!r}")
    p = run(*base, HELPER, "env", env=dict(env, NETVM_SECRET="xyz"))
    expect(p.returncode == 2 and "NETVM_SECRET" in p.stderr, f"a bad NETVM_SECRET: {p.stderr}")
    # --nnodes 1 is a job on one host: it runs without a secret or a rendezvous
    p = run("-n", "2", "--nnodes", "1", "--node-rank", "0", HELPER, "env")
    expect(p.returncode == 0 and p.stdout.count("nnodes 1") == 2, f"--nnodes 1: {p.stderr}")


def case_late_hub(h):
    """Nodes may start before node 0: they keep trying to reach it."""
    secret = write_secret(h.tmp)
    ls = [Launcher(h, k, job_args(h, k, secret), [COLL, str(NP * h.n)]) for k in range(1, h.n)]
    time.sleep(1.5)
    ls.insert(0, Launcher(h, 0, job_args(h, 0, secret), [COLL, str(NP * h.n)]))
    codes = finish_all(ls)
    expect(codes == [0] * h.n, "the job failed", ls)


def case_no_hub(h):
    """No node 0: a node gives up after --rendezvous-timeout, saying so."""
    secret = write_secret(h.tmp)
    t0 = time.monotonic()
    l = Launcher(h, 1, job_args(h, 1, secret, ["--rendezvous-timeout", "1"]), [HELPER, "env"])
    expect(l.finish() == 1 and "could not reach node 0 within 1 s" in l.err, "no clear give-up", [l])
    expect(time.monotonic() - t0 < 10, "gave up too late", [l])


def case_missing_node(h):
    """A node that never comes: node 0 gives up after --rendezvous-timeout and
    the nodes that came hear why; nothing was started."""
    secret = write_secret(h.tmp)
    extra = ["--rendezvous-timeout", "2"]
    ls = start_job(h, secret, [HELPER, "env"], extra=extra, nodes=list(range(h.n - 1)))
    codes = finish_all(ls)
    expect(codes == [1] * (h.n - 1), f"exit statuses {codes}, not 1", ls)
    expect(f"node {h.n - 1} did not join the rendezvous" in ls[0].err, "node 0 did not say who is missing", ls)
    for l in ls[1:]:
        expect("ended the job before it started" in l.err, f"node {l.node} did not hear why", ls)
    expect(all("rank" not in l.out for l in ls), "ranks were started", ls)


def case_mismatch(h):
    """A node with a different -n is refused with the reason; the right one
    joins after it."""
    secret = write_secret(h.tmp)
    ls = start_job(h, secret, [COLL, str(NP * h.n)], nodes=[0])
    time.sleep(0.2)
    odd = Launcher(h, 1, job_args(h, 1, secret, np=NP + 1), [HELPER, "env"])
    expect(odd.finish() == 1, "a node with another -n was not refused", [odd])
    expect(f"-n {NP + 1} there, {NP} at node 0" in odd.err, "no clear reason", [odd])
    ls += [Launcher(h, k, job_args(h, k, secret), [COLL, str(NP * h.n)]) for k in range(1, h.n)]
    codes = finish_all(ls)
    expect(codes == [0] * h.n, "the job was harmed", ls)


def case_sigint(h):
    """SIGINT to node 0's launcher ends the job on every node."""
    secret = write_secret(h.tmp)
    ls = start_job(h, secret, [HELPER, "sleep"])
    pids = wait_ready(ls, NP)
    ls[0].p.send_signal(signal.SIGINT)
    codes = finish_all(ls)
    expect(codes == [130] * h.n, f"exit statuses {codes}, not 130", ls)
    for l in ls[1:]:
        expect("the launcher of node 0 received Interrupt" in l.err, f"node {l.node} did not hear why", ls)
    expect(wait_gone(pids.values(), 10), "ranks outlived the job")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global NETVM, HELPER, COLL
    ap = argparse.ArgumentParser()
    ap.add_argument("--netvm", required=True)
    ap.add_argument("--helper", required=True)
    ap.add_argument("--coll", required=True)
    ap.add_argument("--where", choices=("loopback", "netns"), default="loopback")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--attack", help=argparse.SUPPRESS)     # HOST:PORT: only send the garbage
    ap.add_argument("case", choices=sorted(CASES))
    a = ap.parse_args()
    NETVM, HELPER, COLL = a.netvm, a.helper, a.coll
    if a.attack:
        host, port = a.attack.rsplit(":", 1)
        try:
            lingering = hostile_connections(host, int(port), a.hosts)
        except AssertionError as e:
            print(f"FAIL: {e}", file=sys.stderr)
            return 1
        time.sleep(3)       # while the real nodes join
        for s in lingering:
            s.close()
        return 0
    tmp = tempfile.mkdtemp(prefix="netvm-multihost-test-")
    os.environ["TMPDIR"] = tmp
    hosts = None
    try:
        hosts = Hosts(a.where, a.hosts, tmp)
        CASES[a.case](hosts)
        left = [f for f in os.listdir(tmp) if f not in ("secret", "wrong", "open", "short")]
        if a.case not in ("launcher_killed", "hub_killed"):
            expect(not left, f"the launchers left {left} in TMPDIR")
    except netns.Unavailable as e:
        print(f"SKIP {a.case}: {e}", file=sys.stderr)
        return netns.SKIP
    except (AssertionError, subprocess.TimeoutExpired) as e:
        print(f"FAIL {a.case} ({a.where}, {a.hosts} hosts): {e}", file=sys.stderr)
        return 1
    finally:
        for p in LAUNCHERS:
            if p.poll() is None:
                p.kill()        # its ranks die with it (PR_SET_PDEATHSIG)
                p.wait()
        if hosts:
            hosts.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{a.case} ({a.where}, {a.hosts} hosts): ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
