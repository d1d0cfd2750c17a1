"""Tests of `netvm memd` and `netvm stat`: memory servers started as
children (a credential file in a temporary directory, the address read from
--ready-fd), driven by the test client mclient (tests/memd/mclient.c).

    memd_test.py --netvm NETVM --client MCLIENT CASE

Waits are bounded by counts of tries; the LIMIT seconds of a wait for a
line only catch hangs."""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

LIMIT = 120


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


class Env:
    def __init__(self, netvm, client, tmp):
        self.netvm, self.client, self.tmp = netvm, client, tmp
        self.cred = os.path.join(tmp, "cred")
        with open(os.open(self.cred, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(32))
        self.procs = []

    def memd(self, *extra, size="64M", cred=None, expect_ready=True):
        """Start a memd; its address (from --ready-fd) and Popen."""
        r, w = os.pipe()
        argv = [self.netvm, "memd", "--listen", "tcp:127.0.0.1:0", "--size", size,
                "--credential-file", cred or self.cred, "--ready-fd", str(w), *extra]
        p = subprocess.Popen(argv, pass_fds=(w,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(w)
        self.procs.append(p)
        with os.fdopen(r) as f:
            addr = f.readline().strip()
        if not expect_ready:
            return addr, p
        if not addr.startswith("tcp:127.0.0.1:"):
            raise Fail(f"memd gave no address ({p.wait()}: {p.stderr.read()})")
        first = p.stdout.readline().strip()
        check(first == f"memd listening {addr}", f"memd's first line: {first!r}")
        return addr, p

    def mclient(self, *args, stdin=subprocess.DEVNULL):
        p = subprocess.Popen([self.client, self.cred, *args], stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def run_client(self, *args, want):
        p = self.mclient(*args)
        out, _ = p.communicate(timeout=LIMIT)
        check(p.returncode == 0 and want in out, f"mclient {args}: status {p.returncode}:\n{out}")
        return out

    def stat(self, addr, *extra):
        r = subprocess.run([self.netvm, "stat", addr, "--credential-file", self.cred, *extra],
                           capture_output=True, text=True, timeout=LIMIT)
        check(r.returncode == 0, f"netvm stat: {r.returncode} {r.stderr}")
        return r.stdout

    def js(self, addr):
        return json.loads(self.stat(addr, "--json"))

    def wait_stat(self, addr, key, want, tries=500):
        """Poll STAT until key == want: bounded by tries."""
        for _ in range(tries):
            s = self.js(addr)
            if s[key] == want:
                return s
            time.sleep(0.01)
        raise Fail(f"{addr}: {key} stayed {s[key]}, wanted {want}")

    def line(self, p, prefix):
        for _ in range(1000):
            line = p.stdout.readline()
            if not line:
                raise Fail(f"process ended ({p.wait()}) before a line starting {prefix!r}")
            if line.startswith(prefix):
                return line.strip()
        raise Fail(f"no line starting {prefix!r}")

    def stop(self, p, want=0, signal_it=True):
        if signal_it and p.poll() is None:
            p.send_signal(signal.SIGTERM)
        code = p.wait(timeout=LIMIT)
        err = p.stderr.read() if p.stderr else ""
        check(code == want, f"memd exited {code}, wanted {want}: {err}")
        return err

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def case_basic(e):
    addr, m = e.memd()
    e.run_client("basic", addr, "600", want="BASIC ok 600")
    # the client finalized: its pages and binding are gone (its FREEs: a range
    # of region 1, all of region 2, all of region 3 of the PUTVs)
    s = e.wait_stat(addr, "used_pages", 0)
    check(s["clients"] == 0 and s["puts"] > 0 and s["gets"] >= 1800 and s["frees"] == 3, f"stat {s}")
    check(s["bytes_out"] >= 1800 * 4096 and s["bytes_in"] >= 1400 * 4096, f"bytes {s}")
    text = e.stat(addr)
    check(f"memd {addr}" in text and "pool      16384 pages (64.0 MiB), used 0" in text, text)
    check("calls     put " in text and "B/s" in text, text)
    e.stop(m)


def case_shared(e):
    addr, m = e.memd()
    e.run_client("shared", addr, want="SHARED ok")
    text = e.stat(addr)
    check("shared    0 named region(s), 0 page(s) of them" in text, text)
    e.stop(m)


def case_garbage(e):
    addr, m = e.memd()
    e.run_client("garbage", addr, "3000", want="GARBAGE ok 3000")
    e.wait_stat(addr, "clients", 0)
    # memd's log keeps to printable text whatever the calls carried (a
    # non-UTF-8 byte fails the text decode of stop())
    err = e.stop(m)
    check(all(c == "\n" or " " <= c <= "~" for c in err), f"memd's log: {err!r}")


def case_bound(e):
    addr, m = e.memd("--client-max", "400K", size="512K")
    e.run_client("bound", addr, want="BOUND ok")
    e.wait_stat(addr, "used_pages", 0)
    e.stop(m)


def case_auth(e):
    addr, m = e.memd()
    e.run_client("auth", addr, want="AUTH refused")
    check(e.js(addr)["clients"] == 0, "a refused client counted")
    e.stop(m)


def hold_and_go(e, how):
    addr, m = e.memd()
    c = e.mclient("hold", addr, "500", stdin=subprocess.PIPE)
    e.line(c, "HELD 500")
    s = e.js(addr)
    check(s["used_pages"] == 500 and s["clients"] == 1, f"stat {s}")
    if how == "kill":
        c.kill()
    else:
        c.stdin.close()
    code = c.wait(timeout=LIMIT)
    check(code == (-signal.SIGKILL if how == "kill" else 0), f"client status {code}")
    s = e.wait_stat(addr, "used_pages", 0)
    check(s["clients"] == 0, f"stat {s}")
    e.stop(m)


def case_exit(e):
    hold_and_go(e, "exit")


def case_kill(e):
    hold_and_go(e, "kill")


def case_move(e):
    a1, m1 = e.memd()
    a2, m2 = e.memd()
    e.run_client("move", a1, a2, "200", want="MOVE ok 200")
    e.wait_stat(a1, "used_pages", 0)
    # the client left the second too: the pages moved there went with it
    e.wait_stat(a2, "used_pages", 0)
    e.stop(m1)
    e.stop(m2)


def case_drain(e):
    addr, m = e.memd("--drain-ms", "60000")
    c = e.mclient("drain", addr, "50", stdin=subprocess.PIPE)
    e.line(c, "READY")
    m.send_signal(signal.SIGTERM)
    line = e.line(c, "NOTICE")
    check(line == "NOTICE 1 60000", line)
    # the client answered: memd exits 0 long before the deadline
    err = e.stop(m, signal_it=False)
    check("drained: 0 client(s) had not answered" in err, err)
    c.stdin.close()
    c.wait(timeout=LIMIT)


def case_credperm(e):
    bad = os.path.join(e.tmp, "open")
    with open(bad, "wb") as f:
        f.write(os.urandom(32))
    os.chmod(bad, 0o644)
    addr, m = e.memd(cred=bad, expect_ready=False)
    check(addr == "", f"memd listened with a world-readable credential: {addr}")
    code = m.wait(timeout=LIMIT)
    err = m.stderr.read()
    check(code == 1 and "may be read or written by others" in err, f"{code}: {err}")
    short = os.path.join(e.tmp, "short")
    with open(os.open(short, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.write(b"too short")
    addr, m = e.memd(cred=short, expect_ready=False)
    code = m.wait(timeout=LIMIT)
    check(code == 1 and "it needs 16 to 64" in m.stderr.read(), f"short credential: {code}")


def case_config(e):
    conf = os.path.join(e.tmp, "memd.conf")
    with open(conf, "w") as f:
        f.write(f"# a test\nlisten = tcp:127.0.0.1:0\nsize = 8M   # pool\ncredential-file = {e.cred}\n"
                "client-max = 1M\ndrain-ms = 500\n")
    r, w = os.pipe()
    p = subprocess.Popen([e.netvm, "memd", "--config", conf, "--ready-fd", str(w), "--size", "4M"],
                         pass_fds=(w,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    e.procs.append(p)
    os.close(w)
    with os.fdopen(r) as f:
        addr = f.readline().strip()
    s = e.js(addr)
    check(s["pool_pages"] == 1024 and s["client_max_pages"] == 256, f"flags over the file: {s}")
    e.stop(p)
    with open(conf, "a") as f:
        f.write("colour = blue\n")
    r = subprocess.run([e.netvm, "memd", "--config", conf], capture_output=True, text=True, timeout=LIMIT)
    check(r.returncode == 2 and "unknown key 'colour'" in r.stderr, r.stderr)


def case_embedded(e):
    # a parent that starts memd --embedded and is then killed: memd follows
    r, w = os.pipe()
    parent = subprocess.Popen([sys.executable, "-c",
                               "import os, sys, time\n"
                               "pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)\n"
                               "print(pid, flush=True)\n"
                               "time.sleep(600)\n",
                               e.netvm, "memd", "--embedded", "--listen", "tcp:127.0.0.1:0", "--size", "4M",
                               "--credential-file", e.cred, "--ready-fd", str(w)],
                              pass_fds=(w,), stdout=subprocess.PIPE, text=True)
    e.procs.append(parent)
    os.close(w)
    pid = int(parent.stdout.readline())
    with os.fdopen(r) as f:
        addr = f.readline().strip()
    check(addr.startswith("tcp:"), "embedded memd gave no address")
    check(e.js(addr)["pool_pages"] == 1024, "embedded memd does not serve")
    parent.kill()
    parent.wait()
    for _ in range(1000):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # not our child: a zombie of init's is gone once it was reaped
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[1].split()[0] == "Z":
                return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    raise Fail("embedded memd outlived its parent")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netvm", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("case")
    a = ap.parse_args()
    fn = globals().get("case_" + a.case)
    if not fn:
        print(f"unknown case {a.case}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="memd-test-") as tmp:
        e = Env(a.netvm, a.client, tmp)
        try:
            fn(e)
        except Fail as x:
            print(f"FAIL {a.case}: {x}", file=sys.stderr)
            return 1
        finally:
            e.cleanup()
    print(f"ok {a.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
