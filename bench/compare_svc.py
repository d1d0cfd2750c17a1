"""bench/compare --services: netvm's services (issue 9: mailbox messages,
RPC, locks, channels) against the raw round trip of their link, UCX's
active messages and OpenSHMEM's lock, measured in one run.

    bench/compare --services --link shm|tcp --json FILE [--runs 3] [--quick]

Columns (each measured --runs times, interleaved, medians kept):
  netvm     the services' benchmark programs (bench/svc/*_bench.c), each
            run through the launcher (`netvm run -n N`), NETVM_LINKS=tcp
            on tcp
  memcpy    (shm) netvm_peer_raw --mode shm: the bare shared-memory
            ping-pong (one-way = put_lat 8 B, round trip = twice that) and
            the stream between the two processes (stream_bw 8 KiB: chunks
            copied into a shared ring by one and out of it by the other,
            as a TCP stream copies on each side; until 2026-11-30 this
            column's stream was put_bw 1 MiB, a copy into a buffer nobody
            reads, which never leaves the writer's cache)
  tcp_poll  (tcp) netvm_peer_tcp --wait poll: the raw request/response
            (get_lat 8 B, a round trip), the raw ping-pong (put_lat 8 B,
            one way) and the raw stream (put_bw 1 MiB)
  ucx       ucx_perftest: ucp_am_lat (0 B, doubled: it reports one way) and
            ucp_am_bw (8 B, 64 outstanding: the message rate)
  oshmem    bench/peers/oshmem_bench.c --metrics lock_lat,lock_handoff
            --target poll: shmem_set_lock + shmem_clear_lock uncontended, and
            both PEs looping over them (time per acquisition)

Rows with a target (DESIGN.md section 5, issue 9):
  rpc_lat 0       <= 1.2x the raw round trip, and faster than UCX's AM round trip
  rpc3_lat 0      <= 1.6x netvm's own rpc_lat 0 (a delegated 3-way call)
  rpc_cont_bw 8K  >= 0.8x the link's raw stream (tcp: put_bw 1 MiB; shm:
                  stream_bw 8 KiB)
  msg_lat 8       <= 1.2x the raw one-way
  msg_rate 8      above UCX's active-message rate (netvm_msg_send)
  msg_rate_nb 8   the same with netvm_msg_isend: ucp_am_bw sends with the
                  nonblocking ucp_am_send_nbx, so this is the like call
  lock_lat        <= 2.5x netvm's fadd_lat of the same program; faster than OpenSHMEM
  lock_handoff    time per turn of two ranks taking the lock in turn (a
                  turn: the release's wake, the successor's link and the
                  next swap); faster than OpenSHMEM's loop of the same
  handoff_lat     the hand-off itself (a release call to the successor's
                  acquire returning): <= 1.0x the raw one-way
Every other row the programs print is listed with netvm's number only.
With --plot DIR the rows with a target are drawn as grouped bars
(services-LINK.png, bench/compare_plot.py); --render of this JSON prints
this table again.
"""

import glob
import json
import math
import os
import statistics
import time

# (metric, size, unit, {column: (peer metric, peer size, scale)}, netvm reference (metric, size), target)
# target: (kind, factor): "lat" netvm <= factor * raw (and < every library
# column); "ref" netvm <= factor * the netvm reference; "bw" netvm >= factor *
# raw; "rate" netvm > factor * ucx; "lock" netvm <= factor * reference and <
# oshmem; "handoff" netvm <= factor * raw and < oshmem; "libs" netvm <
# every library column.
def svc_rows(link):
    rt = ("get_lat", 8, 1.0) if link == "tcp" else ("put_lat", 8, 2.0)
    one_way = ("put_lat", 8, 1.0)
    stream = ("put_bw", 1048576, 1.0) if link == "tcp" else ("stream_bw", STREAM_SIZE, 1.0)
    raw = "tcp_poll" if link == "tcp" else "memcpy"
    return [
        ("rpc_lat", 0, "us", {raw: rt, "ucx": ("am_lat", 0, 1.0)}, None, ("lat", 1.2)),
        ("rpc3_lat", 0, "us", {}, ("rpc_lat", 0), ("ref", 1.6)),
        ("rpc_cont_bw", 8192, "MB/s", {raw: stream}, None, ("bw", 0.8)),
        ("msg_lat", 8, "us", {raw: one_way}, None, ("lat", 1.2)),
        ("msg_rate", 8, "Mops", {"ucx": ("notify_rate", 8, 1.0)}, None, ("rate", 1.0)),
        ("msg_rate_nb", 8, "Mops", {"ucx": ("notify_rate", 8, 1.0)}, None, ("rate", 1.0)),
        ("lock_lat", 1, "us", {"oshmem": ("lock_lat", 8, 1.0)}, ("fadd_lat", 8), ("lock", 2.5)),
        ("lock_handoff", 2, "us", {"oshmem": ("lock_handoff", 8, 1.0)}, None, ("libs", 1.0)),
        ("handoff_lat", 2, "us", {raw: one_way}, None, ("handoff", 1.0)),
    ]


# the benchmark programs: (part, ranks). rpc_bench measures 2-way calls
# with 2 ranks and delegated 3-way ones with 3; sync_bench its one- and
# two-rank rows with 2 and its 3-rank hand-off with 3. A row a part gives
# in both runs is the 2-rank run's: with a third rank polling on two
# cores, it measures that rank's share of the CPUs (over tcp a FADD took
# 22-27 us with -n 3 against 11 with -n 2), and the peers (UCX's
# perftest, OpenSHMEM's -np 2) run two processes
# the shm stream's chunk: the size of the row it is the reference of
STREAM_SIZE = 8192

SVC_PROGRAMS = [("msg", 2), ("rpc", 2), ("rpc", 3), ("sync", 2), ("sync", 3), ("chan", 4)]
OSHMEM_LOCK_METRICS = [("lock_lat", "us", "one"), ("lock_handoff", "us", "one")]


def find_program(c, args, part):
    """The benchmark program of part: next to the netvm binary's build, or in build/."""
    builds = []
    if args.netvm:
        builds.append(os.path.dirname(os.path.dirname(os.path.abspath(args.netvm))))
    builds.append(os.path.join(c.ROOT, "build"))
    for b in builds:
        for pat in ("netvm_%s_bench" % part, "%s_bench" % part, "netvm_bench_%s" % part):
            for p in glob.glob(os.path.join(b, "bench", "**", pat), recursive=True):
                if os.path.isfile(p) and os.access(p, os.X_OK):
                    return p
    return None


def parse_svc_json(c, path, program):
    """A program's --json FILE: [{"metric","size","unit","netvm"}, ...]."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise c.PeerError("%s: no JSON output (%s)" % (program, e))
    out = {}
    for r in data if isinstance(data, list) else []:
        try:
            key, v = (str(r["metric"]), int(r["size"])), float(r["netvm"])
        except (KeyError, TypeError, ValueError):
            raise c.PeerError("%s: malformed row %r" % (program, r))
        if v == 0 and key[1] == 0 and str(r.get("unit", "")) == "MB/s":
            continue   # the bandwidth of 0-byte calls: no number to compare
        if not (math.isfinite(v) and v > 0):
            raise c.PeerError("%s: bad value %r for %s %d" % (program, v, key[0], key[1]))
        out[key] = (v, str(r.get("unit", "")))
    if not out:
        raise c.PeerError("%s: no rows" % program)
    return out


class NetvmServices:
    def __init__(self, c, ctx, args):
        self.c, self.ctx, self.args = c, ctx, args
        self.units = {}
        self.programs = []
        for part, n in SVC_PROGRAMS:
            p = find_program(c, args, part)
            if p:
                self.programs.append((part, p, n))
            else:
                c.log("compare: no benchmark program for %s (bench/svc/%s_bench.c not built)" % (part, part))
        if not self.programs:
            raise c.PeerError("no services benchmark program found (build bench/svc first)")

    def measure(self):
        c, values, two_rank = self.c, {}, set()
        env = dict(os.environ)
        if self.args.link == "tcp":
            env["NETVM_LINKS"] = "tcp"
        for part, prog, n in self.programs:
            out = os.path.join(self.ctx.workdir, "svc-%s-%d.json" % (part, n))
            if os.path.exists(out):
                os.unlink(out)
            cmd = [self.args.netvm, "run", "-n", str(n), "--timeout", str(self.ctx.timeout), "--",
                   prog, "--min-ms", "%g" % self.ctx.min_ms, "--json", out]
            if self.args.quick:
                cmd.append("--quick")
            rc, so, se = c.run(cmd, self.ctx.timeout + 30, env=env)
            if rc != 0:
                raise c.PeerError("%s exited with status %d: %s" % (os.path.basename(prog), rc, c.tail(se or so)))
            for k, (v, unit) in parse_svc_json(c, out, os.path.basename(prog)).items():
                if n > 2 and (part, k) in two_rank:
                    continue   # the -n 2 run's count (SVC_PROGRAMS)
                if n == 2:
                    two_rank.add((part, k))
                values[k] = v
                self.units[k] = unit
        return values


def ucx_services(c, ctx):
    """UCX's active-message round trip (0 B) and message rate (8 B)."""
    c.configure_link(ctx.args.link)
    est = {"am_lat": 1e-6 if c.LINK == "shm" else 30e-6, "notify_rate": 0.2e-6 if c.LINK == "shm" else 2e-6}
    tests = []
    keys = [("am_lat", 0), ("notify_rate", 8)]
    for m, s in keys:
        a, _ = c.ucx_test_args(m, s, max(64, int(ctx.min_ms / 1e3 / est[m])))
        tests.append(("%s_%d" % (m, s), a))
    res = c.ucx_batch(ctx, tests)
    return {(m, s): c.ucx_value(m, s, res["%s_%d" % (m, s)]) for m, s in keys}


def oshmem_locks(c, osh):
    for m, unit, _ in OSHMEM_LOCK_METRICS:
        c.UNITS.setdefault(m, unit)   # rows its parser accepts
    if osh.binary is None:
        osh.build()
    # OpenSHMEM's lock needs the other PE's progress (it hung with PE 1
    # asleep in shmem_int_test): PE 1 polls on both links
    cmd = [a for a in c.oshrun_cmd(osh.binary) if a not in ("--target", "poll")]
    cmd = cmd + ["--target", "poll", "--min-ms", "%g" % osh.ctx.min_ms,
                                      "--metrics", ",".join(m for m, _, _ in OSHMEM_LOCK_METRICS)]
    # Open MPI 4.1.4's contended lock sometimes never returns here (both
    # PEs spinning): bounded, so a stuck run costs a minute, not the
    # whole --timeout
    rc, so, se = c.run(cmd, min(osh.ctx.timeout, 60), env=c.oshmem_env())
    try:
        values = c.parse_jsonl_rows(so, "oshmem_bench")
    except c.PeerError as e:
        raise c.PeerError("%s (oshrun status %d: %s)" % (e, rc, c.tail(se, 4)))
    want = {(m, 8) for m, _, _ in OSHMEM_LOCK_METRICS}
    return c.check_complete(values, want, "oshmem_bench")


def raw_shm(c, ctx, raw):
    """The shm raw column: netvm_peer_raw's base rows and its stream."""
    values = dict(c.run_raw(ctx, raw, "shm"))
    c.UNITS.setdefault("stream_bw", "MB/s")   # a row its parser accepts
    cmd = [raw, "--mode", "shm", "--metrics", "stream_bw", "--bw-sizes", str(STREAM_SIZE),
           "--min-ms", "%g" % ctx.min_ms]
    rc, so, se = c.run(cmd, ctx.timeout)
    name = "netvm_peer_raw --metrics stream_bw"
    if rc != 0:
        raise c.PeerError("%s exited with status %d: %s" % (name, rc, c.tail(se or so)))
    values.update(c.check_complete(c.parse_jsonl_rows(so, name), {("stream_bw", STREAM_SIZE)}, name))
    return values


def judge(row, target):
    """(ratio text, met) of a row with a target."""
    kind, f = target
    nv, peers, ref = row["netvm"], row["peers"], row.get("netvm_ref")
    if nv is None:
        return "-", "n/a"
    libs = [v for p, v in peers.items() if p in ("ucx", "oshmem") and v]
    raw = [v for p, v in peers.items() if p not in ("ucx", "oshmem") and v]
    if kind in ("lat", "handoff"):
        if not raw:
            return "-", "n/a"
        ok = nv <= f * raw[0] and all(nv < v for v in libs)
        return "%.2fx raw" % (nv / raw[0]), "yes" if ok else "NO"
    if kind in ("ref", "lock"):
        if not ref:
            return "-", "n/a"
        ok = nv <= f * ref and (kind == "ref" or all(nv < v for v in libs))
        return "%.2fx ref" % (nv / ref), "yes" if ok else "NO"
    if kind == "bw":
        if not raw:
            return "-", "n/a"
        return "%.2fx raw" % (nv / raw[0]), "yes" if nv >= f * raw[0] else "NO"
    if kind == "libs":
        if not libs:
            return "-", "n/a"
        return "%.2fx libs" % (nv / min(libs)), "yes" if all(nv < v for v in libs) else "NO"
    if kind == "rate":
        if not libs:
            return "-", "n/a"
        return "%.2fx ucx" % (nv / libs[0]), "yes" if nv > f * libs[0] else "NO"
    return "-", "n/a"


def target_text(target):
    kind, f = target
    return {"lat": "<=%.1fx raw, < libs", "handoff": "<=%.1fx raw one-way, < libs",
            "ref": "<=%.1fx 2-way", "lock": "<=%.1fx fadd, < libs", "bw": ">=%.1fx raw stream",
            "rate": ">%.1fx ucx", "libs": "< libs (%.0fx)"}[kind] % f


def table(rows, columns, markdown=False):
    head = ["metric", "size", "unit", "netvm"] + columns + ["netvm ref", "ratio", "target", "met"]
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
    else:
        lines.append("%-14s %7s %-5s %10s " % tuple(head[:4]) + " ".join("%10s" % h for h in head[4:]))

    def f(v):
        return "-" if v is None else ("%.4g" % v)
    for r in rows:
        cells = [r["metric"], str(r["size"]), r["unit"], f(r["netvm"])] + \
                [f(r["peers"].get(p)) for p in columns] + \
                [f(r.get("netvm_ref")), r.get("ratio", ""), r.get("target", ""), r.get("met", "")]
        if markdown:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append("%-14s %7s %-5s %10s " % tuple(cells[:4]) + " ".join("%10s" % x for x in cells[4:]))
    return "\n".join(lines) + "\n"


def compare_services(c, args, peers, workdir):
    ctx = c.Context(args, workdir)
    link = args.link
    raw_col = "tcp_poll" if link == "tcp" else "memcpy"
    runners, failures = {}, {}

    def fail(col, why):
        failures[col] = why
        c.log("compare: %s: FAILED: %s" % (col, why))

    nvs = None
    if not args.no_netvm:
        try:
            nvs = NetvmServices(c, ctx, args)
            runners["netvm"] = nvs.measure
        except c.PeerError as e:
            fail("netvm", str(e))
    raw_path = None
    if raw_col in peers:
        try:
            if link == "tcp":
                raw_path = c.find_or_build_raw_tcp(ctx)
                runners[raw_col] = lambda: c.run_raw_tcp(ctx, raw_path, "poll")
            else:
                raw_path = c.find_or_build_raw(ctx)
                runners[raw_col] = lambda: raw_shm(c, ctx, raw_path)
        except c.PeerError as e:
            fail(raw_col, str(e))
    if "ucx" in peers:
        if c.shutil.which("ucx_perftest"):
            runners["ucx"] = lambda: ucx_services(c, ctx)
        else:
            fail("ucx", "ucx_perftest not found (Debian package ucx-utils)")
    if "oshmem" in peers:
        osh = c.OshmemPeer(ctx)
        try:
            osh.build()
            runners["oshmem"] = lambda: oshmem_locks(c, osh)
        except c.PeerError as e:
            fail("oshmem", str(e))

    machine = c.Machine(args, raw_path, link)
    machine.start()
    samples = {col: [] for col in runners}
    order = list(runners)
    t0 = time.time()
    rots = [order[i % len(order):] + order[:i % len(order)] if order else [] for i in range(args.runs)]
    with c.Progress([col for rot in rots for col in rot]) as progress:
        for i, rot in enumerate(rots):
            for col in rot:
                progress.begin("run %d/%d" % (i + 1, args.runs), col)
                machine.wait_ready()
                try:
                    samples[col].append(runners[col]())
                    c.log("compare: run %d/%d %s done" % (i + 1, args.runs, col))
                except c.PeerError as e:
                    fail(col, "run %d: %s" % (i + 1, e))
                c.reap_orphans()
                progress.end(col)

    def med(col, key):
        vs = [s[key] for s in samples.get(col, []) if key in s]
        return statistics.median(vs) if vs else None

    rows, listed, missing = [], set(), []
    cols = [p for p in (raw_col, "ucx", "oshmem") if p in peers]
    for metric, size, unit, pk, ref, target in svc_rows(link):
        row = {"metric": metric, "size": size, "unit": unit, "netvm": med("netvm", (metric, size)), "peers": {}}
        for col, (m, s, scale) in pk.items():
            if col in peers:
                v = med(col, (m, s))
                row["peers"][col] = v * scale if v is not None else None
                if v is None:
                    missing.append("%s %s %d" % (col, metric, size))
        if ref:
            row["netvm_ref"] = med("netvm", ref)
        if row["netvm"] is None and not args.no_netvm:
            missing.append("netvm %s %d" % (metric, size))
        row["ratio"], row["met"] = judge(row, target)
        row["target"] = target_text(target)
        rows.append(row)
        listed.add((metric, size))
    # everything else the programs measured, netvm only
    others = sorted({k for s in samples.get("netvm", []) for k in s} - listed)
    for k in others:
        rows.append({"metric": k[0], "size": k[1], "unit": nvs.units.get(k, "") if nvs else "",
                     "netvm": med("netvm", k), "peers": {}})

    print("netvm compare --services --link %s: %s; medians of %d run(s), %.0f ms per measurement"
          % (link, c.machine_text(), args.runs, ctx.min_ms))
    print("raw: %s (%s); ucx: ucp_am_lat 0 B doubled, ucp_am_bw 8 B x64; oshmem: shmem_set_lock/clear_lock\n"
          % (raw_col, "request/response get_lat, ping-pong put_lat one way, stream put_bw"
             if link == "tcp" else "ping-pong put_lat one way, x2 for a round trip; stream_bw 8 KiB"))
    print(table(rows, cols))
    met = [r.get("met") for r in rows]
    print("targets: %d met, %d not met, %d without data; %.0f s in all"
          % (met.count("yes"), met.count("NO"), met.count("n/a"), time.time() - t0))
    for col, why in failures.items():
        print("FAILED %s: %s" % (col, why))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table(rows, cols, markdown=True))
    text = json.dumps(rows, indent=1)
    with open(args.json + ".tmp", "w") as f:
        f.write(text + "\n")
    os.replace(args.json + ".tmp", args.json)
    c.log("compare: wrote %s" % args.json)
    if args.strict and (missing or failures):
        c.log("compare: --strict: missing %s" % ", ".join(missing))
        return 1
    return 0


def self_test(c):
    """The judging of the services rows."""
    rows = {r[0]: r for r in svc_rows("shm")}
    t = rows["rpc_lat"][5]
    assert judge({"netvm": 1.0, "peers": {"memcpy": 1.0, "ucx": 1.1}}, t)[1] == "yes"
    assert judge({"netvm": 1.3, "peers": {"memcpy": 1.0, "ucx": 2.0}}, t)[1] == "NO"
    assert judge({"netvm": 1.0, "peers": {"memcpy": 1.0, "ucx": 0.9}}, t)[1] == "NO"
    assert judge({"netvm": 1.5, "peers": {}, "netvm_ref": 1.0}, rows["rpc3_lat"][5])[1] == "yes"
    assert judge({"netvm": 1.7, "peers": {}, "netvm_ref": 1.0}, rows["rpc3_lat"][5])[1] == "NO"
    assert judge({"netvm": 80.0, "peers": {"memcpy": 100.0}}, rows["rpc_cont_bw"][5])[1] == "yes"
    assert judge({"netvm": 70.0, "peers": {"memcpy": 100.0}}, rows["rpc_cont_bw"][5])[1] == "NO"
    assert judge({"netvm": 2.0, "peers": {"ucx": 1.0}}, rows["msg_rate"][5])[1] == "yes"
    assert judge({"netvm": 2.0, "peers": {"oshmem": 3.0}, "netvm_ref": 1.0}, rows["lock_lat"][5])[1] == "yes"
    assert judge({"netvm": 2.0, "peers": {"oshmem": 1.5}, "netvm_ref": 1.0}, rows["lock_lat"][5])[1] == "NO"
    assert judge({"netvm": 0.5, "peers": {"oshmem": 0.7}}, rows["lock_handoff"][5])[1] == "yes"
    assert judge({"netvm": 0.9, "peers": {"oshmem": 0.7}}, rows["lock_handoff"][5])[1] == "NO"
    assert judge({"netvm": 0.06, "peers": {"memcpy": 0.07}}, rows["handoff_lat"][5])[1] == "yes"
    assert judge({"netvm": 0.2, "peers": {"memcpy": 0.07}}, rows["handoff_lat"][5])[1] == "NO"
    assert judge({"netvm": None, "peers": {}}, t)[1] == "n/a"
    assert svc_rows("tcp")[0][3]["tcp_poll"] == ("get_lat", 8, 1.0)
    assert svc_rows("shm")[0][3]["memcpy"] == ("put_lat", 8, 2.0)
    # the stream each link's 8 KiB replies are held against
    assert rows["rpc_cont_bw"][3]["memcpy"] == ("stream_bw", 8192, 1.0)
    assert {r[0]: r for r in svc_rows("tcp")}["rpc_cont_bw"][3]["tcp_poll"] == ("put_bw", 1048576, 1.0)
    path = os.path.join(c.tempfile.mkdtemp(prefix="netvm-svc-selftest-"), "x.json")
    with open(path, "w") as f:
        json.dump([{"metric": "rpc_lat", "size": 0, "unit": "us", "netvm": 1.5}], f)
    assert parse_svc_json(c, path, "t") == {("rpc_lat", 0): (1.5, "us")}
    with open(path, "w") as f:
        json.dump([{"metric": "rpc_lat", "size": 0, "unit": "us", "netvm": -1}], f)
    try:
        parse_svc_json(c, path, "t")
        raise AssertionError("a negative value passed")
    except c.PeerError:
        pass
    print(table([{"metric": "rpc_lat", "size": 0, "unit": "us", "netvm": 1.0, "peers": {"memcpy": 1.0},
                  "ratio": "1.00x raw", "target": "x", "met": "yes"}], ["memcpy"]), end="")
    return 0
