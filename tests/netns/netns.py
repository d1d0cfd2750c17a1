#!/usr/bin/env python3
"""Hosts for multi-host tests, made of Linux network namespaces.

Each run makes N "hosts" (network namespaces) and one "switch" namespace
holding a bridge; each host has an interface eth0 joined to the bridge by a
veth pair, an address 10.77.S.(k+1)/24 (S chosen per run) and its loopback
up. Nothing is added to the namespace the tests run in, so traffic between
the hosts reaches only these namespaces; everything is deleted afterwards,
also after an exception, SIGINT or SIGTERM. Processes started on a host run
in its own session and are killed at teardown.

Making namespaces takes root and ip(8) (iproute2). Where that is missing,
Netns() raises Unavailable and the command line exits with SKIP (77), the
code the tests declare as ctest's SKIP_RETURN_CODE.

As a module:

    from netns import Netns, Unavailable
    with Netns(hosts=2) as net:          # raises Unavailable where it cannot
        p0 = net.popen(0, ["netvm", "run", ...])   # in host 0, env has HOST_ADDR_*
        net.addr(1)                      # "10.77.S.2"
        net.link(1, up=False)            # take host 1's eth0 down (fault tests)

From the command line (each host's command runs with HOST_INDEX, NHOSTS,
HOST_ADDR_0.. in its environment, and {HOST_ADDR_k}, {HOST_INDEX},
{NHOSTS} in its arguments replaced; one command alone runs on every host):

    netns.py run --hosts 2 [--timeout S] -- CMD_FOR_HOST0 ... ::: CMD_FOR_HOST1 ...
    netns.py check          # exit 0 if namespaces can be made here, else 77
    netns.py cleanup PREFIX # delete leftover namespaces named PREFIX*

`run` exits 0 when every host's command exited 0, 1 when one did not (each
host's status is printed), 124 on --timeout, 77 if namespaces cannot be
made. Output lines are prefixed with "[hostK] ".
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

SKIP = 77
SUBNET = "10.77.{}.0/24"


class Unavailable(Exception):
    """Network namespaces cannot be made here (the reason says why)."""


def _ip_binary():
    for cand in (shutil.which("ip"), "/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def availability():
    """(True, "") if namespaces can be made here, else (False, why)."""
    if os.geteuid() != 0:
        return False, "network namespaces need root (run the test as root)"
    ip = _ip_binary()
    if not ip:
        return False, "ip(8) not found (install iproute2: scripts/install-deps.sh)"
    probe = "nvt-probe-%d-%04x" % (os.getpid(), random.getrandbits(16))
    r = subprocess.run([ip, "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return False, "cannot create a network namespace: " + (r.stderr.strip() or "ip netns add failed")
    subprocess.run([ip, "netns", "del", probe], capture_output=True)
    return True, ""


class Netns:
    """N hosts joined by a bridge; a context manager that always cleans up."""

    def __init__(self, hosts=2, prefix=None):
        if not 1 <= hosts <= 200:
            raise ValueError("hosts must be in 1..200")
        ok, why = availability()
        if not ok:
            raise Unavailable(why)
        self.ip = _ip_binary()
        self.n = hosts
        # unique per run: concurrent runs (ctest -j) never share a name
        self.prefix = prefix or "nvt%d-%04x-" % (os.getpid() % 100000, random.getrandbits(16))
        self.subnet = random.randint(1, 254)
        self.switch = self.prefix + "sw"
        self.names = [self.prefix + "h%d" % k for k in range(hosts)]
        self.procs = []
        self._made = []
        self._old_handlers = {}

    # --- addresses and environment ------------------------------------------

    def addr(self, k):
        return "10.77.%d.%d" % (self.subnet, k + 1)

    def env(self, k, base=None):
        env = dict(os.environ if base is None else base)
        env.update({"HOST_INDEX": str(k), "NHOSTS": str(self.n), "NETNS_NAME": self.names[k]})
        for i in range(self.n):
            env["HOST_ADDR_%d" % i] = self.addr(i)
        return env

    def substitute(self, k, argv):
        """{HOST_ADDR_i}, {HOST_INDEX} and {NHOSTS} in argv, and nothing else."""
        values = {"HOST_INDEX": str(k), "NHOSTS": str(self.n)}
        values.update({"HOST_ADDR_%d" % i: self.addr(i) for i in range(self.n)})
        pat = re.compile(r"\{(HOST_ADDR_\d+|HOST_INDEX|NHOSTS)\}")
        return [pat.sub(lambda m: values.get(m.group(1), m.group(0)), a) for a in argv]

    # --- running things on a host ------------------------------------------

    def command(self, k, argv):
        return [self.ip, "netns", "exec", self.names[k]] + self.substitute(k, list(argv))

    def popen(self, k, argv, env=None, **kw):
        """Start argv on host k in a session of its own (killed at teardown)."""
        kw.setdefault("start_new_session", True)
        p = subprocess.Popen(self.command(k, argv), env=self.env(k, env), **kw)
        self.procs.append(p)
        return p

    def run(self, k, argv, env=None, timeout=60, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.command(k, argv), env=self.env(k, env), timeout=timeout, **kw)

    def link(self, k, up):
        """Take host k's interface down (or up again): a cable pulled."""
        self._ip("-n", self.names[k], "link", "set", "eth0", "up" if up else "down")

    # --- making and unmaking ----------------------------------------------

    def _ip(self, *args, check=True):
        r = subprocess.run([self.ip, *args], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))
        return r

    def _quiet(self, ns):
        # no IPv6 autoconfiguration chatter: the hosts speak IPv4 only
        for key in ("all", "default", "lo"):
            path = "net.ipv6.conf.%s.disable_ipv6=1" % key
            subprocess.run([self.ip, "netns", "exec", ns, "sysctl", "-q", "-w", path],
                           capture_output=True)

    def _make(self):
        self._ip("netns", "add", self.switch)
        self._made.append(self.switch)
        self._quiet(self.switch)
        self._ip("-n", self.switch, "link", "add", "br0", "type", "bridge", "forward_delay", "0")
        self._ip("-n", self.switch, "link", "set", "br0", "up")
        for k, ns in enumerate(self.names):
            self._ip("netns", "add", ns)
            self._made.append(ns)
            self._quiet(ns)
            # both ends are born in their namespaces: no name is ever taken
            # in the namespace the tests run in
            self._ip("link", "add", "eth0", "netns", ns, "type", "veth",
                     "peer", "name", "p%d" % k, "netns", self.switch)
            self._ip("-n", self.switch, "link", "set", "p%d" % k, "master", "br0")
            self._ip("-n", self.switch, "link", "set", "p%d" % k, "up")
            self._ip("-n", ns, "addr", "add", self.addr(k) + "/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("-n", ns, "link", "set", "lo", "up")
        self._wait_ready()

    def _wait_ready(self):
        """A new address is usable at once on IPv4, but wait for the ports
        of the bridge to forward before anyone relies on them."""
        end = time.monotonic() + 10
        for k in range(self.n):
            while True:
                r = self._ip("-n", self.switch, "-o", "link", "show", "p%d" % k, check=False)
                if "state UP" in r.stdout or "LOWER_UP" in r.stdout or time.monotonic() > end:
                    break
                time.sleep(0.05)

    def _kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def teardown(self):
        self._kill_all()
        for ns in reversed(self._made):
            # processes started by other means may still hold a namespace:
            # kill whatever is inside before deleting it
            r = self._ip("netns", "pids", ns, check=False)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            self._ip("netns", "del", ns, check=False)
        self._made = []

    def _on_signal(self, sig, frame):
        # unwind through __exit__, which deletes everything
        raise KeyboardInterrupt("signal %d" % sig)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            self._make()
        except BaseException:
            self.teardown()
            self._restore()
            raise
        return self

    def _restore(self):
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers = {}

    def __exit__(self, *exc):
        try:
            self.teardown()
        finally:
            self._restore()
        return False


def cleanup(prefix):
    """Delete namespaces left by a run that could not clean up (SIGKILL)."""
    ip = _ip_binary()
    if not ip or not prefix.startswith("nvt"):
        print("cleanup: give a prefix starting with 'nvt'", file=sys.stderr)
        return 2
    out = subprocess.run([ip, "netns", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(prefix):
            subprocess.run([ip, "netns", "del", name])
            print("deleted", name)
    return 0


def _pump(prefix, stream, dst):
    for line in iter(stream.readline, b""):
        dst.buffer.write(prefix + line)
        dst.flush()


def cmd_run(args):
    cmds, cur = [], []
    for a in args.command:
        if a == ":::":
            cmds.append(cur)
            cur = []
        else:
            cur.append(a)
    cmds.append(cur)
    if any(not c for c in cmds):
        print("netns.py run: an empty command", file=sys.stderr)
        return 2
    if len(cmds) == 1:
        cmds = cmds * args.hosts
    if len(cmds) != args.hosts:
        print("netns.py run: %d commands for %d hosts" % (len(cmds), args.hosts), file=sys.stderr)
        return 2
    try:
        net = Netns(args.hosts)
    except Unavailable as e:
        print("SKIP: %s" % e, file=sys.stderr)
        return SKIP
    with net:
        procs, pumps = [], []
        for k, c in enumerate(cmds):
            p = net.popen(k, c, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            procs.append(p)
            for stream, dst in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
                t = threading.Thread(target=_pump, args=(b"[host%d] " % k, stream, dst), daemon=True)
                t.start()
                pumps.append(t)
        end = time.monotonic() + args.timeout
        timed_out = False
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
        if timed_out:
            print("netns.py run: the commands ran longer than %g s" % args.timeout, file=sys.stderr)
            net.teardown()
        for t in pumps:
            t.join(timeout=5)
        codes = [p.poll() for p in procs]
    for k, c in enumerate(codes):
        print("netns.py: host %d (%s) exited %s" % (k, net.addr(k), c), file=sys.stderr)
    if timed_out:
        return 124
    return 0 if all(c == 0 for c in codes) else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description="hosts made of network namespaces, for tests")
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run one command per host")
    r.add_argument("--hosts", type=int, default=2)
    r.add_argument("--timeout", type=float, default=300)
    r.add_argument("command", nargs=argparse.REMAINDER)
    sub.add_parser("check", help="exit 0 if namespaces can be made here, else 77")
    c = sub.add_parser("cleanup", help="delete leftover namespaces with this prefix")
    c.add_argument("prefix")
    a = ap.parse_args(argv)
    if a.what == "check":
        ok, why = availability()
        print("ok" if ok else "SKIP: " + why)
        return 0 if ok else SKIP
    if a.what == "cleanup":
        return cleanup(a.prefix)
    if a.command and a.command[0] == "--":
        a.command = a.command[1:]
    if not a.command:
        ap.error("run: no command")
    return cmd_run(a)


if __name__ == "__main__":
    sys.exit(main())
