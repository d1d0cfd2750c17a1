#!/usr/bin/env python3
"""Random bytes, truncated frames and lying headers sent to every rank's tcp
port in the middle of a job: each connection is closed (with a logged
reason) and the ranks go on serving each other correctly.

    garbage.py NETVM TCP_FAULT NP"""

import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time


def junk_inputs():
    rnd = random.Random(7)
    hdr = lambda kind, ln: struct.pack('<BBHHHIIQQQQQ', 2, kind, 0, 0, 0, 0, 0, 1, 0, ln, 0, 0)
    hello = struct.pack('<IIQQiIQ', 2, 1, 99, 0, 5, 0, 0) + bytes(rnd.getrandbits(8) for _ in range(32))
    yield bytes(rnd.getrandbits(8) for _ in range(4096))         # noise
    yield hdr(6, 1 << 20)[:30]                                     # a header cut short
    yield hdr(6, 1 << 20) + b'x' * 100                             # a PUT before any handshake
    yield hdr(1, len(hello)) + hello                               # a HELLO from a rank that is not there
    yield hdr(2, 40) + bytes(40)                                   # an AUTH out of turn
    yield hdr(99, 0)                                               # an unknown kind
    yield b'\x01' + bytes(55)                                      # another version
    yield b'GET / HTTP/1.1\r\nHost: x\r\n\r\n'                    # the wrong protocol


def main():
    netvm, prog, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tmp = tempfile.mkdtemp(prefix="netvm-junk-")
    env = dict(os.environ, NETVM_LINKS="tcp", NETVM_LOG="info")
    p = subprocess.Popen([netvm, "run", "-n", str(np), "--timeout", "90", "--", prog, "garbage", tmp],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines, ports = [], set()

    def reader():
        for line in p.stdout:
            lines.append(line)
            m = re.search(r"tcp link: the job's ranks connect to tcp:127\.0\.0\.1:(\d+)", line)
            if m:
                ports.add(int(m.group(1)))
    t = threading.Thread(target=reader)
    t.start()
    t0 = time.monotonic()
    while len([f for f in os.listdir(tmp) if f.startswith("ready.")]) < np and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    sent = 0
    for port in sorted(ports):
        for data in junk_inputs():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(data)
                s.close()
                sent += 1
            except OSError:
                sent += 1   # refused or reset: the rank would not have it, which is fine
    open(os.path.join(tmp, "go"), "w").close()
    code = p.wait(timeout=120)
    t.join()
    out = "".join(lines)
    print(out)
    subprocess.run(["rm", "-rf", tmp])
    ok = code == 0 and len(ports) == np and sent >= np and \
        all(f"rank {r} served through the junk" in out for r in range(np))
    print(f"{len(ports)} ports, {sent} junk connections, job exit {code}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
