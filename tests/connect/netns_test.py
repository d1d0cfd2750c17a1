#!/usr/bin/env python3
"""Peers beyond the job across hosts made of network namespaces
(tests/netns/netns.py): the service on host 0 listens on its own address;
clients on hosts 1 and 2 (singletons and a job's ranks) reach it over
tcp, one on host 0 itself moves to the shm link.

    netns_test.py --server S --client C --netvm N CASE

CASE suite: every client runs cclient.c's suite; the service sees each
            come up on the link its host implies and leave with NETVM_OK
     die:   a client on host 1 killed mid-traffic (the service sees
            NETVM_EV_PEER_DOWN with an error, its operations toward it
            fail; a client on host 2 goes on and does its suite again);
            then the service killed under the traffic of clients on hosts
            1 and 2 (a job's ranks too): each sees NETVM_ERR_PEER
Exit 77 where namespaces cannot be made."""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "netns"))
import netns  # noqa: E402
from cproc import World, check, run  # noqa: E402


def on(net, k):
    return lambda argv, **kw: net.popen(k, argv, **kw)


def t_suite(w, net):
    s = w.server("--addr", f"tcp:{net.addr(0)}:0", popen=on(net, 0))
    check(s.addr.startswith(f"tcp:{net.addr(0)}:"), f"listening on {s.addr}")
    cl = [w.client(s.addr, "suite", "--link", "shm", "--idx", "0", popen=on(net, 0), name="host0"),
          w.client(s.addr, "suite", "--link", "tcp", "--idx", "1", popen=on(net, 1), name="host1"),
          w.client(s.addr, "suite", "--link", "tcp", "--idx", "2", popen=on(net, 2), name="host2"),
          w.job(2, s.addr, "suite", "--link", "tcp", "--idx", "10", popen=on(net, 1), name="host1-job")]
    for c in cl:
        c.exit(0)
    check(len(cl[3].find(r"^SUITE OK")) == 2, "a rank on host 1 did not finish")
    links = sorted(m.group(1) for m in s.find(r"^UP \d+ \d+ (\S+) ok"))
    check(links == ["shm", "tcp", "tcp", "tcp", "tcp"], f"links seen by the service: {links}")
    for _ in range(5):
        m = s.wait(r"^DOWN (\d+) (\S+)")
        check(m.group(2) == "OK", f"a client that left was reported as {m.group(2)}: {m.string}")
    s.send("peers")
    s.wait(r"^PEERS 0")
    s.send("quit")
    s.wait(r"^BYE OK")
    s.exit(0)


def t_die(w, net):
    s = w.server("--addr", f"tcp:{net.addr(0)}:0", popen=on(net, 0))
    victim = w.client(s.addr, "traffic", "--link", "tcp", "--idx", "1", popen=on(net, 1), name="host1")
    other = w.client(s.addr, "traffic", "--link", "tcp", "--idx", "2", popen=on(net, 2), name="host2")
    vid = int(victim.wait(r"^TRAFFIC \d+ (\d+)").group(1))
    oid = int(other.wait(r"^TRAFFIC \d+ (\d+)").group(1))
    victim.kill()
    victim.exit(None)
    m = s.wait(rf"^DOWN {vid} (\S+) \S+ \S+ \S+ (\S+)")
    check(m.group(1) == "PEER", f"a killed client was reported as {m.group(1)}")
    check(m.group(2) == "PEER", f"the service's put to a killed client: {m.group(2)}")
    s.send(f"check {vid}")
    m = s.wait(rf"^CHECK {vid} .*import=(\S+) am=(\S+) notify=(\S+)")
    check(m.groups() == ("PEER", "PEER", "PEER"), f"the service toward a killed client: {m.string}")
    other.send("stop")
    other.wait(r"^TRAFFIC OK")
    other.exit(0)
    m = s.wait(rf"^DOWN {oid} (\S+)")
    check(m.group(1) == "OK", f"a client that left was reported as {m.group(1)}")
    s.send("quit")
    s.wait(r"^BYE OK")
    s.exit(0)

    s2 = w.server("--addr", f"tcp:{net.addr(0)}:0", popen=on(net, 0), name="server2")
    t = [w.client(s2.addr, "traffic", "--link", "tcp", "--idx", "3", "--expect", "PEER", popen=on(net, 1),
                  name="host1-b"),
         w.client(s2.addr, "traffic", "--link", "tcp", "--idx", "4", "--expect", "PEER", popen=on(net, 2),
                  name="host2-b"),
         w.job(2, s2.addr, "traffic", "--link", "tcp", "--idx", "10", "--expect", "PEER", popen=on(net, 2),
               name="host2-job")]
    for c in t[:2]:
        c.wait(r"^TRAFFIC \d+")
    t[2].wait(r"^TRAFFIC \d+")
    t[2].wait(r"^TRAFFIC \d+")
    s2.kill()
    s2.exit(None)
    for c in t:
        c.exit(0)
    for c in t[:2]:
        check(c.find(r"^TRAFFIC ENDED PEER"), f"{c.name} did not see the service die")
    check(len(t[2].find(r"^TRAFFIC ENDED PEER")) == 2, "a rank did not see the service die")


CASES = {"suite": t_suite, "die": t_die}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--netvm", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    try:
        net = netns.Netns(hosts=3)
        net.__enter__()
    except netns.Unavailable as e:
        print(f"SKIP: {e}")
        return 77
    try:
        return run(lambda w: CASES[args.case](w, net), World(args.server, args.client, args.netvm))
    finally:
        net.__exit__(None, None, None)


if __name__ == "__main__":
    sys.exit(main())
