#!/usr/bin/env python3
"""bench/workloads/np_job.py: the numpy workload of bench/workloads/run.

    python3 np_job.py --size W [--seed S]

n = W / 24 unsigned 64-bit keys (the keys, the argsort's indices and the
gathered keys: 24 bytes a key, plus numpy's merge buffer, measured by the
run as the peak resident size).  Timed: a stable argsort of the keys, the
gather keys[order], and reductions over the result (sum, min, max, a
histogram of the top byte).  Checked: the gathered keys are nondecreasing
(chunk by chunk), hold the same keys (wrapping sum and xor unchanged), the
order is stable (equal keys keep their index order: spot checks) and the
histogram counts every key.  Prints one JSON row and {"done": 1}, or
"VERIFY FAILED" and exits 1.
"""

import argparse
import json
import resource
import sys
import time

import numpy as np


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


def fail(msg):
    print("VERIFY FAILED: numpy: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="768M")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    n = parse_size(a.size) // 24
    if n < 2:
        fail("--size too small")
    rng = np.random.default_rng(a.seed)
    # 2^40 distinct values at most: equal keys occur at small sizes only, and
    # the stability check covers them when they do
    keys = rng.integers(0, 1 << 40, size=n, dtype=np.uint64)
    want_sum = int(np.sum(keys, dtype=np.uint64))
    want_xor = int(np.bitwise_xor.reduce(keys))

    t0 = time.perf_counter()
    order = np.argsort(keys, kind="stable")
    out = keys[order]
    total = int(np.sum(out, dtype=np.uint64))
    lo, hi = int(out.min()), int(out.max())
    hist = np.bincount((out >> np.uint64(32)).astype(np.int64), minlength=256)
    seconds = time.perf_counter() - t0

    chunk = 1 << 22
    for i in range(0, n - 1, chunk):
        j = min(i + chunk + 1, n)
        if not np.all(out[i + 1:j] >= out[i:j - 1]):
            fail("keys out of order in [%d, %d)" % (i, j))
    if total != want_sum or int(np.bitwise_xor.reduce(out)) != want_xor:
        fail("the sorted keys are not the keys (sum or xor differs)")
    if lo != int(out[0]) or hi != int(out[-1]) or int(hist.sum()) != n:
        fail("reductions disagree with the sorted keys")
    for i in range(0, n - 1, max(1, n // 4096)):
        if out[i] == out[i + 1] and order[i] > order[i + 1]:
            fail("argsort not stable at %d" % i)
        if keys[order[i]] != out[i]:
            fail("gather wrong at %d" % i)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"metric": "numpy", "size": n * 24, "unit": "Mkeys/s", "value": n / seconds / 1e6,
                      "seconds": seconds, "verified": 1, "peak_rss": peak}))
    print(json.dumps({"done": 1}))


if __name__ == "__main__":
    main()
