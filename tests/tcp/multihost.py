#!/usr/bin/env python3
"""netvm jobs across hosts made of network namespaces (tests/netns/netns.py),
one `netvm run` per host as users run them, every peer reached by the tcp
link:

    multihost.py --netvm PATH --hosts N CASE [PROGRAM ...]

CASE suite: run PROGRAM (an operation-suite test) across the hosts, every
launcher must exit 0. kill / linkdown: tests/tcp/tcp_fault.c. Exit 77 where
namespaces cannot be made."""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "netns"))
import netns  # noqa: E402

PORT = 7000
LIMIT = 120


def launch(net, args, k, np, secret, program, keep_going, env):
    argv = [args.netvm, "run", "-n", str(np), "--nnodes", str(args.hosts), "--node-rank", str(k),
            "--rendezvous", "%s:%d" % (net.addr(0), PORT), "--secret-file", secret]
    if keep_going:
        argv.append("--keep-going")
    argv += ["--", *program]
    return net.popen(k, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                     env=dict(os.environ, **env))


def finish(ps):
    outs = []
    for p in ps:
        try:
            out, _ = p.communicate(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(launcher did not exit: killed)"
        outs.append((p.returncode, out))
    for k, (code, out) in enumerate(outs):
        print(f"--- host {k}: exit {code}\n{out}")
    return outs


def wait_files(d, prefix, n, limit=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if len([f for f in os.listdir(d) if f.startswith(prefix + ".")]) >= n:
            return True
        time.sleep(0.05)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netvm", required=True)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("case", choices=["suite", "kill", "linkdown"])
    ap.add_argument("program", nargs="*")
    args = ap.parse_args()
    try:
        net = netns.Netns(hosts=args.hosts)
        net.__enter__()
    except netns.Unavailable as e:
        print(f"SKIP: {e}")
        return 77
    tmp = tempfile.mkdtemp(prefix="netvm-mh-")
    try:
        secret = os.path.join(tmp, "secret")
        with open(secret, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        os.chmod(secret, 0o600)
        env = {"NETVM_TIMEOUT": os.environ.get("MH_TIMEOUT", "3000")}
        if args.case == "suite":
            ps = [launch(net, args, k, args.np, secret, args.program, False, env) for k in range(args.hosts)]
            outs = finish(ps)
            return 0 if all(code == 0 for code, _ in outs) else 1
        prog = args.program + [args.case, tmp]
        ps = [launch(net, args, k, args.np, secret, prog, True, env) for k in range(args.hosts)]
        size = args.np * args.hosts
        if not wait_files(tmp, "ready", size):
            print("FAIL: the job did not come up")
            finish(ps)
            return 1
        if args.case == "kill":
            outs = finish(ps)
            survivors = (args.hosts - 1) * args.np
            text = "".join(o for _, o in outs)
            ok = all(f"survivor {r} ok" in text for r in range(survivors))
            print("survivors ok" if ok else "FAIL: not every survivor finished")
            return 0 if ok else 1
        t0 = time.monotonic()
        net.link(args.hosts - 1, up=False)
        ok = wait_files(tmp, "detected", 1, limit=30)
        took = time.monotonic() - t0
        for p in ps:
            p.terminate()   # the job is broken either way: end it now
        outs = finish(ps)
        print(f"detected after {took:.1f} s" if ok else "FAIL: rank 0 did not notice the link going down")
        return 0 if ok else 1
    finally:
        net.__exit__(None, None, None)
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
