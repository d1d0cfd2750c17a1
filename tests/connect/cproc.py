"""Processes of the connect tests: the service (connect_cserver), its clients
(connect_cclient, alone or as the ranks of a `netvm run` job), each started
with its stdout read line by line in a thread, so a test waits for the line
it expects (a hang is a failure after LIMIT seconds, far above any normal
duration, sanitizers included) and can write commands to its stdin."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

LIMIT = float(os.environ.get("CONNECT_LIMIT", "120"))


class Fail(Exception):
    pass


class Proc:
    """A process whose output lines are kept; wait() looks for a pattern."""

    def __init__(self, name, argv, env=None, stdin=True, popen=None):
        self.name = name
        self.argv = argv
        self.lines = []
        self.q = queue.Queue()
        self.pos = {}   # per pattern: lines already looked at
        kw = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                  stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                  env=dict(os.environ if env is None else env), start_new_session=True)
        self.p = popen(argv, **kw) if popen else subprocess.Popen(argv, **kw)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            self.q.put(line)
        self.q.put(None)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def wait(self, pattern, limit=LIMIT):
        """The next line matching pattern (after those an earlier wait for the
        same pattern matched): its match."""
        rx = re.compile(pattern)
        end = time.monotonic() + limit
        while True:
            while self.pos.get(pattern, 0) < len(self.lines):
                line = self.lines[self.pos.get(pattern, 0)]
                self.pos[pattern] = self.pos.get(pattern, 0) + 1
                m = rx.search(line)
                if m:
                    return m
            left = end - time.monotonic()
            if left <= 0:
                raise Fail(f"{self.name}: no line matching /{pattern}/ within {limit:.0f} s")
            try:
                if self.q.get(timeout=min(left, 0.5)) is None and self.pos.get(pattern, 0) >= len(self.lines):
                    raise Fail(f"{self.name}: ended (status {self.p.wait()}) without a line "
                               f"matching /{pattern}/")
            except queue.Empty:
                pass

    def find(self, pattern):
        """Every line so far matching pattern: their matches."""
        rx = re.compile(pattern)
        return [m for m in (rx.search(line) for line in list(self.lines)) if m]

    def exit(self, want=0, limit=LIMIT):
        try:
            code = self.p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            raise Fail(f"{self.name}: did not exit within {limit:.0f} s")
        self.t.join(timeout=10)
        if want is not None and code != want:
            raise Fail(f"{self.name}: exit status {code}, wanted {want}")
        return code

    def kill(self, sig=signal.SIGKILL):
        try:
            self.p.send_signal(sig)
        except ProcessLookupError:
            pass

    def cleanup(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def dump(self):
        return "\n".join(f"[{self.name}] {line}" for line in self.lines)


class World:
    """Everything a test started, cleaned up (and shown) at the end."""

    def __init__(self, server, client, netvm, env=None):
        self.server_bin, self.client_bin, self.netvm = server, client, netvm
        self.env = dict(os.environ if env is None else env)
        self.procs = []
        self.n = 0

    def start(self, name, argv, env=None, popen=None, stdin=True):
        e = dict(self.env)
        e.update(env or {})
        p = Proc(name, argv, e, stdin=stdin, popen=popen)
        self.procs.append(p)
        return p

    def server(self, *args, env=None, name="server", popen=None, where=None):
        p = self.start(name, (where or []) + [self.server_bin, *args], env, popen)
        m = p.wait(r"^ADDR (tcp:\S+)")
        p.addr = m.group(1)
        return p

    def client(self, addr, scenario, *args, env=None, name=None, popen=None, where=None):
        self.n += 1
        return self.start(name or f"client{self.n}", (where or []) + [self.client_bin, addr, scenario, *args],
                          env, popen)

    def job(self, np, addr, scenario, *args, env=None, name=None, popen=None, where=None):
        self.n += 1
        argv = (where or []) + [self.netvm, "run", "-n", str(np), "--", self.client_bin, addr, scenario, *args]
        return self.start(name or f"job{self.n}", argv, env, popen)

    def close(self, ok):
        for p in self.procs:
            p.cleanup()
        if not ok:
            for p in self.procs:
                print(p.dump())
                print()


def run(fn, world):
    """Run a test body; print FAIL and the processes' output if it fails."""
    ok = False
    try:
        fn(world)
        ok = True
    except Fail as e:
        print(f"FAIL: {e}")
    finally:
        world.close(ok)
    print("ok" if ok else "FAILED")
    sys.stdout.flush()
    return 0 if ok else 1


def check(cond, what):
    if not cond:
        raise Fail(what)
