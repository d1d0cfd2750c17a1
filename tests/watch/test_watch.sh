#!/bin/bash
# scripts/test-watch: a test that reaches its timeout has its stacks shown
# (its process and their children, from /proc and gdb) and the run's
# status kept; a test that ends in time leaves nothing. The ctest it
# watches is fake_ctest.sh, so that the test takes 12 s, not a real
# timeout's minutes; and netvm stacks' errors. Usage: test_watch.sh SOURCE_DIR NETVM_TOOL
set -u
src=$1 netvm=$2
watch="$src/scripts/test-watch" fake="$src/tests/watch/fake_ctest.sh"
dir=$(mktemp -d /tmp/netvm-test-watch.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { echo "FAIL: $*"; echo "--- output"; cat "$dir/out"; exit 1; }

python3 "$watch" --netvm "$netvm" -- "$fake" > out 2>&1
rc=$?
[ "$rc" -eq 8 ] || fail "the hanging run's status is $rc, not ctest's 8"
grep -q "== test-watch: where the tests that reached their timeout were" out || fail "no stacks shown"
grep -q "test hangs (pid [0-9]*) near its timeout" out || fail "the test is not named"
grep -q "netvm stacks: pid [0-9]*: sleep 600" out || fail "the test's child is not shown"
grep -q "netvm stacks:   thread [0-9]* (sleep): state S" out || fail "no thread states"
if command -v gdb > /dev/null; then
    grep -q "nanosleep" out || fail "no backtrace of the sleeping child"
fi
ls Testing/Temporary/stacks/hangs-*.txt > /dev/null 2>&1 || fail "the record is not kept"

FAKE_SLEEP=1 python3 "$watch" --netvm "$netvm" -- "$fake" > out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "the passing run's status is $rc"
grep -q "test-watch" out && fail "a passing run printed stacks"
[ -z "$(ls Testing/Temporary/stacks)" ] || fail "a passing run left records"
# netvm stacks on its own: a process that is gone, and not a process id
true & gone=$!
wait "$gone"
"$netvm" stacks "$gone" > out 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "pid $gone: no such process" out || fail "stacks of a gone process: status $rc"
"$netvm" stacks 12x > out 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "'12x' is not a process id" out || fail "stacks 12x: status $rc"
echo "test-watch ok"
