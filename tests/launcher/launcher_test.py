#!/usr/bin/env python3
"""Scenarios of `netvm run` seen from outside, as a user sees them: exit
statuses, messages, teardown, signals, output tagging. Each case is one
ctest test:

    launcher_test.py --netvm PATH --helper PATH CASE

Every run has a hard time limit, so a launcher that hangs fails the test
instead of stalling the suite. Each case runs with TMPDIR set to a fresh
directory, which must be empty afterwards: the launcher removes its socket
directory."""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NETVM = HELPER = None
LIMIT = 60          # seconds any single launcher run may take


def run(*args, timeout=LIMIT, **kw):
    t0 = time.monotonic()
    p = subprocess.run([NETVM, "run", *args], capture_output=True, text=True, timeout=timeout, **kw)
    p.elapsed = time.monotonic() - t0
    return p


def show(p):
    return f"exit {p.returncode}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}"


def expect(cond, what, p=None):
    if not cond:
        raise AssertionError(what + ("\n" + show(p) if p is not None else ""))


def alive(pid):
    """A zombie left to an init that does not reap counts as dead."""
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


def start(*args):
    return subprocess.Popen([NETVM, "run", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_ready(proc, n):
    """Read "ready PID RANK" lines until all n ranks reported."""
    pids = {}
    end = time.monotonic() + LIMIT
    while len(pids) < n:
        expect(time.monotonic() < end, "ranks did not get ready")
        line = proc.stdout.readline()
        expect(line != "", f"launcher output ended early (exit {proc.poll()})")
        m = re.match(r"ready (\d+) (\d+)", line)
        if m:
            pids[int(m.group(2))] = int(m.group(1))
    return pids


def finish(proc, timeout=LIMIT):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the launcher did not exit")
    proc.stdout_rest, proc.stderr_all = out, err
    return proc.returncode


# --- cases -------------------------------------------------------------------

def case_env():
    jobs = []
    for _ in range(2):
        p = run("-n", "4", HELPER, "env")
        expect(p.returncode == 0, "job failed", p)
        lines = sorted(l for l in p.stdout.splitlines() if l.startswith("rank "))
        expect(len(lines) == 4, "not four ranks", p)
        fields = [dict(zip(l.split()[::2], l.split()[1::2])) for l in lines]
        expect([f["rank"] for f in fields] == ["0", "1", "2", "3"], "ranks not 0..3", p)
        expect(all(f["size"] == "4" for f in fields), "size not 4", p)
        for key in ("job", "secret", "boot"):
            expect(len({f[key] for f in fields}) == 1, f"ranks disagree on {key}", p)
        # a single host is node 0 of 1, and reaches itself on loopback
        expect(all(f["node"] == "0" and f["nnodes"] == "1" and f["local"] == f["rank"] and
                   f["lsize"] == "4" and f["tcp"] == "127.0.0.1" for f in fields), "node variables", p)
        jobs.append(fields[0])
        sock_dir = os.path.dirname(fields[0]["boot"][len("unix:"):])
        expect(not os.path.exists(sock_dir), f"{sock_dir} left behind")
    expect(jobs[0]["secret"] != jobs[1]["secret"], "two jobs got the same secret")
    expect(jobs[0]["job"] != jobs[1]["job"], "two jobs got the same id")
    # inherited job variables do not leak into a new job
    env = dict(os.environ, NETVM_RANK="7", NETVM_SIZE="9", NETVM_SECRET="00" * 32)
    p = run("-n", "2", HELPER, "env", env=env)
    expect(p.returncode == 0 and "size 2" in p.stdout and "00" * 32 not in p.stdout,
           "stale NETVM_* variables leaked into the job", p)


def case_exit_status():
    p = run("-n", "3", HELPER, "exit", "1", "5")
    expect(p.returncode == 5, "status of the failing rank not propagated", p)
    expect(re.search(r"netvm run: rank 1 \(pid \d+\) exited with status 5; terminating the job", p.stderr),
           "no message naming the failing rank", p)
    p = run("-n", "3", HELPER, "exit", "9", "7")
    expect(p.returncode == 0 and p.stderr == "", "a job of successful ranks did not exit 0 quietly", p)
    p = run("-n", "1", "--", HELPER, "exit", "0", "42")
    expect(p.returncode == 42, "single rank status", p)
    p = run("-n", "2", "sh", "-c", "exit 0")
    expect(p.returncode == 0, "PATH lookup of a plain program", p)


def case_bad_usage():
    d = tempfile.mkdtemp()
    try:
        plain = os.path.join(d, "not-executable")
        with open(plain, "w") as f:
            f.write("#!/bin/sh\n")
        for prog, msg in (("/nonexistent/prog", "No such file"),
                          ("no-such-command-netvm-test", "command not found"),
                          (plain, "Permission denied"),
                          (d, "Is a directory")):
            p = run("-n", "2", prog)
            expect(p.returncode == 127, f"{prog}: not 127", p)
            expect(msg in p.stderr, f"{prog}: message lacks '{msg}'", p)
    finally:
        shutil.rmtree(d)
    for args in (["-n", "0", HELPER], ["-n", "1025", HELPER], ["-n", "2x", HELPER], ["-n", "2"],
                 [HELPER], ["--timeout", "-1", "-n", "1", HELPER], ["--bogus", "-n", "1", HELPER]):
        p = run(*args)
        expect(p.returncode == 2, f"usage error {args} not 2", p)
    p = run("--help")
    expect(p.returncode == 0 and "usage: netvm run" in p.stdout, "--help", p)
    # options after PROGRAM belong to it
    p = run("-n", "1", "sh", "-c", 'echo "[$0] [$1]"', "-n", "-t")
    expect(p.returncode == 0 and p.stdout.strip() == "[-n] [-t]", "PROGRAM's options were parsed", p)


def case_kill():
    p = run("-n", "4", HELPER, "kill", "2")
    expect(p.returncode == 137, "status of a SIGKILLed rank is not 137", p)
    expect(re.search(r"netvm run: rank 2 \(pid \d+\) killed by signal 9 \(Killed\); terminating the job",
                     p.stderr), "no message naming the killed rank", p)
    expect("survived" not in p.stdout, "other ranks were not torn down", p)
    expect(p.elapsed < 30, f"teardown took {p.elapsed:.1f} s", p)


def case_keep_going():
    p = run("-n", "4", "-k", HELPER, "killkg", "1")
    expect(p.returncode == 137, "a job with a dead rank must still fail", p)
    expect(re.search(r"rank 1 \(pid \d+\) killed by signal 9 \(Killed\); the others go on", p.stderr),
           "no keep-going message", p)
    for r in (0, 2, 3):
        expect(f"rank {r} saw rank 1 gone" in p.stdout, f"survivor {r} did not get NETVM_ERR_PEER", p)
    # a failing exit code keeps going too, and the first failure decides
    p = run("-n", "3", "--keep-going", HELPER, "exit", "2", "9")
    expect(p.returncode == 9 and "the others go on" in p.stderr, "keep-going exit status", p)


def case_tag_output():
    p = run("-n", "2", "-t", HELPER, "lines")
    expect(p.returncode == 0, "job failed", p)
    out, err = p.stdout.splitlines(), p.stderr.splitlines()
    for r in (0, 1):
        for line in ("out 1", "out 2", "tail without newline"):
            expect(f"[{r}] {line}" in out, f"missing '[{r}] {line}'", p)
        expect(f"[{r}] err 1" in err, f"missing stderr line of rank {r}", p)
        # per rank, the order of its lines is kept
        mine = [l for l in out if l.startswith(f"[{r}] ")]
        expect(mine == [f"[{r}] out 1", f"[{r}] out 2", f"[{r}] tail without newline"], "order", p)
    expect(all(re.match(r"\[[01]\] ", l) for l in out + err), "an untagged line", p)
    p = run("-n", "1", HELPER, "lines")
    expect(p.stdout == "out 1\nout 2\ntail without newline", "untagged output altered", p)
    # a long line is passed on whole, and a silent rank costs nothing
    p = run("-n", "3", "-t", "sh", "-c", 'if [ "$NETVM_RANK" = 1 ]; then head -c 100000 /dev/zero | tr "\\0" x; echo; fi')
    lines = p.stdout.splitlines()
    expect(p.returncode == 0 and all(l.startswith("[1] ") for l in lines), "long line", p)
    expect(sum(len(l) - 4 for l in lines) == 100000, "long line lost bytes", p)


def case_sigint():
    proc = start("-n", "3", HELPER, "sleep")
    pids = wait_ready(proc, 3)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rc = finish(proc)
    expect(rc == 130, f"exit {rc}, not 130\n{proc.stderr_all}")
    expect("terminating the job" in proc.stderr_all, "no message\n" + proc.stderr_all)
    expect(time.monotonic() - t0 < 10, "teardown too slow")
    expect(wait_gone(pids.values(), 5), "ranks outlived the launcher")


def case_sigterm_grace():
    proc = start("-n", "2", HELPER, "stubborn")
    pids = wait_ready(proc, 2)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = finish(proc)
    took = time.monotonic() - t0
    expect(rc == 143, f"exit {rc}, not 143\n{proc.stderr_all}")
    expect(1.5 <= took < 15, f"ranks ignoring SIGTERM were killed after {took:.1f} s, not ~2 s")
    expect("killing" in proc.stderr_all, "no message about SIGKILL\n" + proc.stderr_all)
    expect(wait_gone(pids.values(), 5), "ranks outlived the launcher")


def case_timeout():
    p = run("-n", "2", "--timeout", "1", HELPER, "sleep")
    expect(p.returncode == 124, "--timeout exit status", p)
    expect("--timeout" in p.stderr, "no timeout message", p)
    expect(p.elapsed < 20, f"took {p.elapsed:.1f} s", p)
    p = run("-n", "2", "--timeout", "30", HELPER, "exit", "0", "0")
    expect(p.returncode == 0 and p.elapsed < 20, "--timeout delayed a quick job", p)
    # --stack-traces: each rank's threads where they wait, then the same end
    for how in (("--stack-traces",), ()):
        env = dict(os.environ, NETVM_RUN_STACK_TRACES="1" if not how else "0")
        p = run("-n", "2", "--timeout", "1", *how, HELPER, "sleep", env=env)
        expect(p.returncode == 124, "--stack-traces: exit status", p)
        for r in (0, 1):
            expect(re.search(r"rank %d \(pid \d+\) at the timeout:\n"
                             r"netvm run:   thread \d+ \(\S+\): state \w, wchan \S+, syscall \S+" % r,
                             p.stderr), "rank %d's threads not shown" % r, p)
        if shutil.which("gdb"):
            expect("sleep_forever" in p.stderr or "nanosleep" in p.stderr, "no backtrace from gdb", p)
    # and without it, nothing of the sort
    env = dict(os.environ, NETVM_RUN_STACK_TRACES="0")
    p = run("-n", "2", "--timeout", "1", HELPER, "sleep", env=env)
    expect(p.returncode == 124 and "at the timeout" not in p.stderr, "traces shown unasked", p)


def case_launcher_killed():
    proc = start("-n", "3", HELPER, "sleep")
    pids = wait_ready(proc, 3)
    proc.kill()
    proc.wait()
    expect(wait_gone(pids.values(), 10), "ranks outlived a SIGKILLed launcher")
    proc.stdout.close()
    proc.stderr.close()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global NETVM, HELPER
    ap = argparse.ArgumentParser()
    ap.add_argument("--netvm", required=True)
    ap.add_argument("--helper", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    a = ap.parse_args()
    NETVM, HELPER = a.netvm, a.helper
    tmp = tempfile.mkdtemp(prefix="netvm-launcher-test-")
    os.environ["TMPDIR"] = tmp
    try:
        CASES[a.case]()
        if a.case != "launcher_killed":
            left = os.listdir(tmp)
            expect(not left, f"the launcher left {left} in TMPDIR")
    except (AssertionError, subprocess.TimeoutExpired) as e:
        print(f"FAIL {a.case}: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{a.case}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
