"""Tests of `netvm gmem run`: unmodified programs with their large
allocations in network memory, run through the tool the way a user runs
them, with a budget far below their working set so that pages really go to
the servers and come back. Each compares the program's output with a plain
run's.

    gmem_run_test.py --netvm NETVM --prog PROG [--prog-je P] [--prog-tc P]
                     [--preload LIB] CASE

Waits are bounded by counts of tries; LIMIT only catches hangs."""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

LIMIT = 300
SKIP = 77          # ctest's SKIP_RETURN_CODE


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def field(err, name):
    """Sum of a summary field ("evictions 123") over the processes."""
    total, words = 0, err.replace(",", " ").replace("(", " ").split()
    for i, w in enumerate(words[:-1]):
        if w == name and words[i + 1].isdigit():
            total += int(words[i + 1])
    return total


def counted(err, name):
    """Sum of an "intercepted:" count ("3 mmap") over the processes."""
    total, words = 0, err.replace(",", " ").split()
    for i, w in enumerate(words[1:], 1):
        if w == name and words[i - 1].isdigit():
            total += int(words[i - 1])
    return total


def gmem_run(a, args, budget="8M", env=None):
    """Run through the tool; on a hang, the program (in the tool's session)
    is killed too, never left behind."""
    argv = [a.netvm, "gmem", "run", "--budget", budget, *args]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise Fail(f"hung for {LIMIT} s: {err}")
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def compare(a, prog, mode, mib, budget="8M"):
    plain = subprocess.run([prog, mode, str(mib)], capture_output=True, text=True, timeout=LIMIT)
    check(plain.returncode == 0, f"plain run failed: {plain.stderr}")
    r = gmem_run(a, ["--", prog, mode, str(mib)], budget=budget)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0, f"under gmem run: status {r.returncode}")
    check(r.stdout == plain.stdout, f"output differs:\n{r.stdout}\nplain:\n{plain.stdout}")
    # the budget was far below the working set: pages went out and came back
    check(field(r.stderr, "evictions") > 0, "no page was evicted")
    check(field(r.stderr, "fetched") > 0, "no page was fetched back")
    return r


def case_glibc(a):
    r = compare(a, a.prog, "all", 32)
    check("malloc glibc's (intercepted)" in r.stderr, "glibc's malloc was not intercepted")
    check(counted(r.stderr, "malloc") >= 3 and counted(r.stderr, "realloc") >= 3, "malloc/realloc not intercepted")
    # the exec'd child ran in network memory too: two processes reported
    check(r.stderr.count("pid ") == 2, "the exec'd program did not use network memory")


def allocator_case(a, prog, name):
    if not prog or not os.path.exists(prog):
        print(f"SKIP: the test program was not built with {name} (its library was not found)")
        return SKIP
    r = compare(a, prog, "all", 32)
    check("malloc the program's own" in r.stderr, f"{name}: the malloc family was intercepted")
    check(counted(r.stderr, "mmap") > 0, f"{name}: no mmap was intercepted")


def case_mmap(a):
    r = compare(a, a.prog, "mmap", 24)
    check(counted(r.stderr, "mmap") >= 2 and counted(r.stderr, "munmap") >= 2 and counted(r.stderr, "mremap") >= 2,
          "mmap/munmap/mremap not intercepted")


class Memd:
    def __init__(self, netvm, tmp, size="256M"):
        self.netvm = netvm
        self.cred = os.path.join(tmp, "cred")
        with open(os.open(self.cred, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(32))
        r, w = os.pipe()
        self.p = subprocess.Popen([netvm, "memd", "--listen", "tcp:127.0.0.1:0", "--size", size,
                                   "--credential-file", self.cred, "--ready-fd", str(w)], pass_fds=(w,),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        os.close(w)
        with os.fdopen(r) as f:
            self.addr = f.readline().strip()
        check(self.addr.startswith("tcp:"), "memd gave no address")

    def stat(self):
        r = subprocess.run([self.netvm, "stat", self.addr, "--credential-file", self.cred, "--json"],
                           capture_output=True, text=True, timeout=LIMIT)
        check(r.returncode == 0, f"netvm stat: {r.stderr}")
        return json.loads(r.stdout)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=LIMIT)


def case_kill(a):
    """A program killed mid-run leaves the servers clean; netvm stat gmem:PID
    shows it while it runs."""
    tmp = tempfile.mkdtemp()
    m = Memd(a.netvm, tmp)
    try:
        run = subprocess.Popen([a.netvm, "gmem", "run", "--budget", "4M", "--servers", m.addr,
                                "--credential-file", m.cred, "--", a.prog, "hold", "24"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = run.stdout.readline().split()
        check(len(line) == 2 and line[0] == "ready", f"the program did not start: {line}")
        pid = int(line[1])
        # the statistics file is rewritten every 100 ms, and the fill may
        # take less than that: look until it shows the fill (a bounded
        # number of times; the fill itself is done)
        for _ in range(600):
            st = subprocess.run([a.netvm, "stat", f"gmem:{pid}", "--json"], capture_output=True, text=True,
                                timeout=LIMIT)
            check(st.returncode == 0, f"netvm stat gmem:{pid}: {st.stderr}")
            s = json.loads(st.stdout)
            if s["evictions"] > 0:
                break
            subprocess.run(["sleep", "0.1"])
        check(s["pid"] == pid and s["evictions"] > 0 and s["resident_peak"] <= s["budget_pages"],
              f"live statistics: {s}")
        for _ in range(600):
            used = m.stat()["used_pages"]
            if used >= 24 * 256 - 1024:
                break
            subprocess.run(["sleep", "0.1"])
        check(used >= 24 * 256 - 1024, f"the server holds {used} pages of the program's 24 MiB")
        os.kill(pid, signal.SIGKILL)
        out, err = run.communicate(timeout=LIMIT)
        check(run.returncode == 128 + signal.SIGKILL, f"gmem run's status {run.returncode}, not 137")
        check("killed by signal 9" in err, "the summary does not say the program was killed")
        for _ in range(600):
            used = m.stat()["used_pages"]
            if used == 0:
                break
            subprocess.run(["sleep", "0.1"])
        check(used == 0, f"the server still holds {used} pages of the killed program")
        stale_run_dir(a, tmp)
    finally:
        m.stop()
        shutil.rmtree(tmp)


def stale_run_dir(a, tmp):
    """gmem run killed itself leaves its run directory, a credential inside:
    the next run removes it."""
    env = dict(os.environ, XDG_RUNTIME_DIR=tmp)
    run = subprocess.Popen([a.netvm, "gmem", "run", "--budget", "4M", "--", a.prog, "hold", "8"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           start_new_session=True)
    line = run.stdout.readline().split()
    check(len(line) == 2 and line[0] == "ready", f"the program did not start: {line}")
    stale = os.path.join(tmp, f"netvm-gmem-run.{run.pid}")
    check(os.path.exists(os.path.join(stale, "credential")), f"no credential in {stale}")
    os.killpg(run.pid, signal.SIGKILL)   # the tool and its program
    run.communicate(timeout=LIMIT)
    check(os.path.isdir(stale), "the killed run's directory is already gone")
    r = gmem_run(a, ["--", "true"], env=env)
    check(r.returncode == 0, f"the next run failed: {r.stderr}")
    check(not os.path.exists(stale), f"the next run left the killed one's {stale}")
    left = [n for n in os.listdir(tmp) if n.startswith("netvm-gmem-run.")]
    check(not left, f"run directories left: {left}")


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for x in args:
        x = x if isinstance(x, bytes) else str(x).encode()
        out += b"$%d\r\n%s\r\n" % (len(x), x)
    return out


class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(1 << 16)
            check(d, "redis closed the connection")
            self.buf += d
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def exact(self, n):
        while len(self.buf) < n + 2:
            d = self.s.recv(1 << 16)
            check(d, "redis closed the connection")
            self.buf += d
        v, self.buf = self.buf[:n], self.buf[n + 2:]
        return v

    def reply(self):
        l = self.line()
        if l[:1] == b"$":
            n = int(l[1:])
            return None if n < 0 else self.exact(n)
        return l


def value(i):
    return (b"%08d" % i) * 128          # 1 KiB, different for every key


def case_redis(a):
    redis = shutil.which("redis-server")
    if not redis:
        print("SKIP: redis-server is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = subprocess.Popen([a.netvm, "gmem", "run", "--budget", "8M", "--", redis, "--port", str(port),
                            "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(1200):
            line = run.stdout.readline()
            check(line, "redis-server ended before it was ready")
            if "Ready to accept connections" in line:
                break
        keys = 24000                    # ~24 MiB of values, three times the budget
        with socket.create_connection(("127.0.0.1", port), timeout=LIMIT) as s:
            rd = Reader(s)
            for start in range(0, keys, 1000):
                s.sendall(b"".join(resp("SET", f"key:{i}", value(i)) for i in range(start, start + 1000)))
                for _ in range(1000):
                    check(rd.reply() == b"+OK", "SET failed")
            for start in range(0, keys, 1000):
                s.sendall(b"".join(resp("GET", f"key:{i}") for i in range(start, start + 1000)))
                for i in range(start, start + 1000):
                    check(rd.reply() == value(i), f"key:{i} came back wrong")
            pid = int(subprocess.run(["pgrep", "-x", "-P", str(run.pid), "redis-server"], capture_output=True, text=True).stdout.split()[0])
            st = subprocess.run([a.netvm, "stat", f"gmem:{pid}", "--json"], capture_output=True, text=True,
                                timeout=LIMIT)
            check(st.returncode == 0, f"netvm stat gmem:{pid}: {st.stderr}")
            info = json.loads(st.stdout)
            check(not info["glibc_malloc"] and info["mmaps"] > 0, "redis's jemalloc mmaps were not intercepted")
            check(info["evictions"] > 0 and info["remote_fetches"] > 0, f"no paging: {info}")
            s.sendall(resp("SHUTDOWN", "NOSAVE"))
        rest, _ = run.communicate(timeout=LIMIT)
        sys.stderr.write(rest)
        check(run.returncode == 0, f"gmem run's status {run.returncode}")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def case_nonroot(a):
    """An unprivileged user without userfaultfd is told why and what to do,
    and nothing runs in local memory instead."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("SKIP: needs root (to switch users and set the sysctl) and setpriv")
        return SKIP
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    # the unprivileged user must reach the build tree (a clone under a
    # mode-700 directory such as mktemp -d's is out of its reach)
    reach = subprocess.run(nobody + ["test", "-r", a.preload, "-a", "-x", a.prog, "-a", "-x", a.netvm])
    if reach.returncode != 0:
        print("SKIP: user 65534 cannot reach the build tree (%s): a directory on its path is closed to it"
              % os.path.dirname(a.preload))
        return SKIP
    sysctl = "/proc/sys/vm/unprivileged_userfaultfd"
    old = open(sysctl).read().strip()
    dev = "/dev/userfaultfd"
    dev_mode = os.stat(dev).st_mode & 0o777 if os.path.exists(dev) else None
    try:
        with open(sysctl, "w") as f:
            f.write("0")
        if dev_mode is not None:
            os.chmod(dev, 0o600)
        env = dict(os.environ, XDG_RUNTIME_DIR="")
        r = subprocess.run(nobody + [a.netvm, "gmem", "run", "--", a.prog, "all", "8"], capture_output=True,
                           text=True, timeout=LIMIT, env=env)
        sys.stderr.write(r.stderr)
        check(r.returncode == 1, f"status {r.returncode}, not 1")
        check("vm.unprivileged_userfaultfd" in r.stderr and "/dev/userfaultfd" in r.stderr,
              "the message does not name the sysctl and the device")
        check("not started" in r.stderr and r.stdout == "", "the program ran")
        # the interposer loaded by hand: stops the program, never runs it locally
        env2 = dict(env, LD_PRELOAD=a.preload)
        r = subprocess.run(nobody + [a.prog, "all", "8"], capture_output=True, text=True, timeout=LIMIT, env=env2)
        sys.stderr.write(r.stderr)
        check(r.returncode == 125, f"interposer: status {r.returncode}, not 125")
        check("vm.unprivileged_userfaultfd" in r.stderr and "no fallback" in r.stderr,
              "the interposer's message does not say why")
    finally:
        with open(sysctl, "w") as f:
            f.write(old)
        if dev_mode is not None:
            os.chmod(dev, dev_mode)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--netvm", required=True)
    p.add_argument("--prog", required=True)
    p.add_argument("--prog-je")
    p.add_argument("--prog-tc")
    p.add_argument("--preload")
    p.add_argument("case")
    a = p.parse_args()
    cases = {
        "glibc": case_glibc,
        "jemalloc": lambda a: allocator_case(a, a.prog_je, "jemalloc"),
        "tcmalloc": lambda a: allocator_case(a, a.prog_tc, "tcmalloc"),
        "mmap": case_mmap,
        "kill": case_kill,
        "redis": case_redis,
        "nonroot": case_nonroot,
    }
    try:
        rc = cases[a.case](a)
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    if rc == SKIP:
        return SKIP
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
