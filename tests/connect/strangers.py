#!/usr/bin/env python3
"""Strangers on the ports: processes that open a raw TCP connection and stay
silent, or send garbage, to a service's listener and to a job's own tcp
listeners while the job starts. A job (netvm run -n 3, NETVM_LINKS=tcp)
starts, uses the service and finishes normally and real clients get in
while the silent strangers are still connected; each garbage connection is
closed at once; a silent one is closed after NETVM_HANDSHAKE_MS.

    strangers.py --server S --client C --netvm N

The service and the job run with NETVM_HANDSHAKE_MS=60000, far longer than
the test, so "still connected" never depends on timing; the expiry is
checked on a second service with NETVM_HANDSHAKE_MS=1000 (it must come,
nothing depends on when)."""

import argparse
import os
import random
import re
import shutil
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cproc import LIMIT, Fail, World, check, run  # noqa: E402

V = 3  # NV_TCP_VERSION


def hdr(kind, ln, status=0, flags=0):
    return struct.pack('<BBHHHIIQQQQQ', V, kind, status, flags, 0, 0, 0, 0, 0, ln, 0, 0)


def hello(purpose, rank):
    rnd = random.Random(purpose * 10 + rank)
    body = struct.pack('<IIQQiIQ', 2, purpose, 0x1234, 0, rank, 0, 0) + bytes(rnd.getrandbits(8) for _ in range(32))
    return hdr(1, len(body)) + body


def garbage(purpose_wrong):
    """Inputs a listener closes at once (purpose_wrong: the other purpose's HELLO)."""
    rnd = random.Random(11)
    auth = hdr(2, 40) + bytes(rnd.getrandbits(8) for _ in range(40))
    return [
        ("noise", bytes(rnd.getrandbits(8) for _ in range(4096))),
        # (at least a header's 56 bytes: anything shorter waits for the rest
        # of its header like a silent stranger)
        ("http", b"GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: a stranger\r\nAccept: */*\r\n\r\n"),
        ("put first", hdr(6, 16) + b"x" * 16),
        ("unknown kind", hdr(99, 0)),
        ("other version", b"\x01" + bytes(55)),
        ("wrong purpose", hello(purpose_wrong, 0 if purpose_wrong == 1 else -1)),
        ("auth first", auth),
        ("hello, forged auth", hello(3 - purpose_wrong, -1 if purpose_wrong == 1 else 1) + auth),
    ]


def closed_soon(sock, what, limit=LIMIT):
    """Wait (a hang is a failure) until the other side closes sock."""
    sock.settimeout(limit)
    end = time.monotonic() + limit
    try:
        while time.monotonic() < end:
            data = sock.recv(4096)
            if not data:
                return
            # the acceptor may answer a HELLO (its own HELLO and AUTH) before
            # it reads the garbage that follows: read on
    except (ConnectionResetError, BrokenPipeError):
        return
    except socket.timeout:
        pass
    raise Fail(f"{what}: not closed within {limit:.0f} s")


def still_open(sock, what):
    """Not closed by the other side (what it answered, if anything, is read)."""
    sock.setblocking(False)
    while True:
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError as e:
            raise Fail(f"{what}: closed ({e}) while it should still be waiting")
        check(data, f"{what}: closed while it should still be waiting")


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def strangers_on(port, purpose, label):
    """Silent strangers (one that only said HELLO) and garbage senders on
    port: (silent, garbage) connections."""
    silent, junk = [], []
    for k in range(3):
        s = socket.create_connection(("127.0.0.1", port), timeout=LIMIT)
        silent.append((f"{label} silent {k}", s))
    s = socket.create_connection(("127.0.0.1", port), timeout=LIMIT)
    s.sendall(hello(purpose, -1 if purpose == 2 else 1))
    silent.append((f"{label} HELLO only", s))
    for what, data in garbage(3 - purpose):
        g = socket.create_connection(("127.0.0.1", port), timeout=LIMIT)
        try:
            g.sendall(data)
        except (ConnectionResetError, BrokenPipeError):
            pass
        junk.append((f"{label} {what}", g))
    return silent, junk


def all_closed(junk):
    for what, g in junk:
        closed_soon(g, what)
        g.close()


def t_strangers(w):
    tmp = tempfile.mkdtemp(prefix="netvm-strangers-")
    try:
        long_hs = {"NETVM_HANDSHAKE_MS": "60000"}
        s = w.server(env=long_hs)
        silent, junk = strangers_on(port_of(s.addr), 2, "service")
        all_closed(junk)
        # a client gets in past them
        c = w.client(s.addr, "suite", "--idx", "1", env=long_hs)
        c.wait(r"^SUITE OK")
        c.exit(0)

        # a job whose last rank starts only once strangers sit on the
        # listeners of the others
        go, end = os.path.join(tmp, "go"), os.path.join(tmp, "end")
        env = dict(long_hs, NETVM_LINKS="tcp", NETVM_LOG="info")
        j = w.job(3, s.addr, "suite", "--link", "tcp", "--idx", "20", "--hold-init", go, "--hold-end", end,
                  env=env)
        ports = set()
        while len(ports) < 2:
            m = j.wait(r"tcp link: the job's ranks connect to tcp:127\.0\.0\.1:(\d+)")
            ports.add(int(m.group(1)))
        junk = []
        for k, port in enumerate(sorted(ports)):
            sil, jk = strangers_on(port, 1, f"rank listener {k}")
            silent += sil
            junk += jk
        # (the ranks waiting in netvm_init's exchange serve nobody yet: the
        # strangers wait in the listeners' backlogs, and are met when the
        # ranks start connecting to each other)
        open(go, "w").close()
        all_closed(junk)
        for _ in range(3):
            j.wait(r"^SUITE OK")
        for _ in range(3):
            j.wait(r"^HOLDING")
        # everyone got in and did everything with the strangers still there
        for what, sock in silent:
            still_open(sock, what)
        open(end, "w").close()
        j.exit(0)
        check(len(j.find(r"^BYE OK")) == 3, "a rank did not finish")
        for what, sock in silent:
            if what.startswith("service"):
                still_open(sock, what)
            sock.close()
        s.send("peers")
        m = s.wait(r"^PEERS (\d+)")
        check(m.group(1) == "0", f"{m.group(1)} peers left behind")
        check(len(s.find(r"^UP ")) == 4, "not 4 peers came up (a client and 3 ranks)")
        s.send("quit")
        s.wait(r"^BYE OK")
        s.exit(0)

        # a silent stranger is closed after NETVM_HANDSHAKE_MS; a client gets
        # in meanwhile
        s2 = w.server(env={"NETVM_HANDSHAKE_MS": "1000"}, name="server2")
        lone = socket.create_connection(("127.0.0.1", port_of(s2.addr)), timeout=LIMIT)
        c2 = w.client(s2.addr, "suite", "--idx", "2")
        c2.wait(r"^SUITE OK")
        c2.exit(0)
        closed_soon(lone, "a silent stranger past NETVM_HANDSHAKE_MS")
        lone.close()
        s2.send("quit")
        s2.wait(r"^BYE OK")
        s2.exit(0)
        bad = [m.string for m in s.find(r"^(ECHOFAIL|PONGFAIL|SUNKFAIL|BIGFAIL|WELCOMEFAIL|EVENT)")]
        check(not bad, f"the service complained: {bad}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--netvm", required=True)
    args = ap.parse_args()
    return run(t_strangers, World(args.server, args.client, args.netvm))


if __name__ == "__main__":
    sys.exit(main())
