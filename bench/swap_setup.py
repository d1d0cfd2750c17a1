"""What the swap comparisons share (bench/gmem/swap_compare, bench/workloads/run):
a swap file on disk, a zram device, a v1 memory cgroup with a limit, and a
Machine that records each of them so restore() undoes them whatever happens
(an exception, SIGINT, SIGTERM, SIGHUP: see guard_signals).

Everything here needs root; callers check os.geteuid() first and explain.
"""

import os
import signal
import subprocess
import sys
import time

PRIO = "32767"          # our swap area is used before any the machine already has


def log(msg):
    print("swap_setup: " + msg, file=sys.stderr, flush=True)


def sh(cmd, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if check and r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stdout.strip() or "exit %d" % r.returncode))
    return r


def proc_swaps():
    with open("/proc/swaps") as f:
        return f.read()


class Machine:
    """What a comparison changed on the machine, undone by restore()."""

    def __init__(self):
        self.swaps = []          # swap areas we turned on
        self.files = []          # files we made
        self.zram = None         # (device name, hot-added?)
        self.cgroups = []
        self.mounts = []

    def restore(self):
        for dev in reversed(self.swaps):
            r = sh(["swapoff", dev], check=False)
            if r.returncode:
                log("swapoff %s failed: %s" % (dev, r.stdout.strip()))
        self.swaps = []
        if self.zram:
            name, added = self.zram
            try:
                with open("/sys/block/%s/reset" % name, "w") as f:
                    f.write("1")
                if added:
                    with open("/sys/class/zram-control/hot_remove", "w") as f:
                        f.write(name[len("zram"):])
            except OSError as e:
                log("resetting %s: %s" % (name, e))
            self.zram = None
        for p in self.files:
            try:
                os.unlink(p)
            except OSError:
                pass
        self.files = []
        for cg in reversed(self.cgroups):
            kill_cgroup(cg)
            for _ in range(50):     # a process just killed leaves its cgroup a moment later
                try:
                    os.rmdir(cg)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                log("could not remove cgroup %s" % cg)
        self.cgroups = []
        for m in reversed(self.mounts):
            sh(["umount", m], check=False)
            try:
                os.rmdir(m)
            except OSError:
                pass
        self.mounts = []


def guard_signals(what):
    """SIGINT, SIGTERM and SIGHUP raise SystemExit, so the callers' finally
    blocks (Machine.restore) run before the process ends."""
    def on_signal(signum, frame):
        raise SystemExit("%s: signal %d: restoring the machine's swap state" % (what, signum))
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)


def memory_cgroup_root(machine):
    """The v1 memory controller's directory for a child of our own cgroup."""
    mount = None
    with open("/proc/mounts") as f:
        for line in f:
            dev, path, fstype, opts = line.split()[:4]
            if fstype == "cgroup" and "memory" in opts.split(","):
                mount = path
                break
    if mount is None:
        path = "/tmp/netvm-memcg"
        os.makedirs(path, exist_ok=True)
        r = sh(["mount", "-t", "cgroup", "-o", "memory", "none", path], check=False)
        if r.returncode:
            raise RuntimeError("no v1 memory controller mounted, and mounting one failed: %s"
                               % r.stdout.strip())
        machine.mounts.append(path)
        mount = path
    own = "/"
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "memory" in ctrls.split(","):
                own = path
    base = os.path.join(mount, own.lstrip("/"))
    if not os.path.isfile(os.path.join(base, "memory.limit_in_bytes")):
        base = mount
    return base


def make_cgroup(machine, limit, tag="netvm-swapcmp"):
    """A v1 memory cgroup limited to `limit` bytes of memory (swap beyond it
    is not limited: memory.memsw is left alone)."""
    base = memory_cgroup_root(machine)
    cg = os.path.join(base, "%s-%d" % (tag, os.getpid()))
    os.mkdir(cg)
    machine.cgroups.append(cg)
    set_limit(cg, limit)
    return cg


def set_limit(cg, limit):
    with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit))


def cgroup_enter(cg):
    """A preexec_fn for subprocess: the child joins cgroup cg (None: none)."""
    def enter():
        if cg:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    return enter


def cgroup_stat(cg, key):
    """A counter of the cgroup's memory.* files (max_usage_in_bytes, ...) or
    of memory.stat (a key of it); None if unreadable."""
    try:
        if key.startswith("memory."):
            with open(os.path.join(cg, key)) as f:
                return int(f.read())
        with open(os.path.join(cg, "memory.stat")) as f:
            for line in f:
                k, v = line.split()
                if k == key:
                    return int(v)
    except (OSError, ValueError):
        pass
    return None


def kill_cgroup(cg):
    """SIGKILL whatever is left in cgroup cg (a run interrupted mid-way)."""
    try:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            pids = [int(p) for p in f.read().split()]
    except OSError:
        return
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def swap_file_on(machine, path, size):
    if os.path.exists(path):
        raise RuntimeError("%s exists; not overwriting it" % path)
    machine.files.append(path)
    if sh(["fallocate", "-l", str(size), path], check=False).returncode:
        sh(["dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=%d" % (size >> 20)])
    os.chmod(path, 0o600)
    sh(["mkswap", path])
    sh(["swapon", "-p", PRIO, path])
    machine.swaps.append(path)
    return "swap file %s on %s" % (path, fs_of(path))


def zram_on(machine, size):
    """A zram swap device of `size` bytes; returns (device, compressor)."""
    if not os.path.isdir("/sys/class/zram-control") and not os.path.isdir("/sys/block/zram0"):
        r = sh(["modprobe", "zram"], check=False)
        if r.returncode:
            raise RuntimeError("no zram: modprobe zram: %s" % r.stdout.strip())
    used = proc_swaps()
    name, added = None, False
    for d in sorted(os.listdir("/sys/block")):
        if d.startswith("zram") and "/dev/%s " % d not in used:
            with open("/sys/block/%s/disksize" % d) as f:
                if f.read().strip() == "0":
                    name = d
                    break
    if name is None and os.path.exists("/sys/class/zram-control/hot_add"):
        with open("/sys/class/zram-control/hot_add") as f:
            name, added = "zram" + f.read().strip(), True
    if name is None:
        raise RuntimeError("every zram device is in use and none can be added")
    machine.zram = (name, added)
    with open("/sys/block/%s/disksize" % name, "w") as f:
        f.write(str(size))
    dev = "/dev/" + name
    if not os.path.exists(dev):
        raise RuntimeError("%s has no device node" % dev)
    sh(["mkswap", dev])
    sh(["swapon", "-p", PRIO, dev])
    machine.swaps.append(dev)
    with open("/sys/block/%s/comp_algorithm" % name) as f:
        algo = [a for a in f.read().split() if a.startswith("[")]
    return dev, (algo[0].strip("[]") if algo else "?")


def fs_of(path):
    best, fs = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if path.startswith(mnt) and len(mnt) > len(best):
                best, fs = mnt, "%s (%s)" % (dev, fstype)
    return fs
