#!/bin/bash
# stats_file.sh NETVM PROGRAM N: run PROGRAM as a job of N with
# NETVM_STATS_DIR set, then read every rank's finished file through
# `netvm stat pid:PID` (text and JSON) and check what it says.
set -euo pipefail
netvm=$1 prog=$2 n=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
NETVM_STATS_DIR=$dir "$netvm" run -n "$n" -- "$prog"
files=("$dir"/*.netvm)
[ "${#files[@]}" -eq "$n" ] || { echo "FAIL: ${#files[@]} files for $n ranks"; exit 1; }
for f in "${files[@]}"; do
    pid=$(basename "$f" | cut -d. -f1)
    "$netvm" stat "pid:$pid" --dir "$dir" | grep -q "NETVM_REG=firehose" || { echo "FAIL: text of $pid"; exit 1; }
    "$netvm" stat "pid:$pid" --dir "$dir" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
r = s["reg"]
assert s["finalized"] is True, s
assert r["strategy"] == "firehose", s
assert r["hits"] + r["misses"] >= 200 and r["moves"] > 0 and r["pins"] > 0, s
' || { echo "FAIL: json of $pid"; exit 1; }
done
# a pid with no file, and no directory: clear errors, not a crash
if "$netvm" stat pid:1 --dir "$dir" 2>/dev/null; then echo "FAIL: pid 1 found"; exit 1; fi
if NETVM_STATS_DIR= "$netvm" stat pid:1 2>/dev/null; then echo "FAIL: no directory accepted"; exit 1; fi
# a file still being made (empty: not yet its size) is refused, not read past its end
: > "$dir/1.0.netvm"
rc=0; "$netvm" stat pid:1 --dir "$dir" >/dev/null 2>&1 || rc=$?
[ $rc -eq 1 ] || { echo "FAIL: a short file gave exit status $rc"; exit 1; }
echo "stats files ok"
