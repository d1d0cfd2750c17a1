#!/bin/bash
# A stand-in for ctest in test_watch.sh: it lists one test with a TIMEOUT
# of 12 s (a program that sleeps FAKE_SLEEP seconds, 600 by default) and
# runs it as ctest does, a direct child ended by SIGKILL at the timeout,
# which fails the run (status 8, ctest's).
self_dir=$(cd "$(dirname "$0")" && pwd)
prog="$self_dir/hang_prog.sh"
secs=${FAKE_SLEEP:-600}
if [ "$1" = "--show-only=json-v1" ]; then
    printf '{"kind":"ctestInfo","version":{"major":1,"minor":0},"tests":[{"name":"hangs","command":["%s","%s"],"properties":[{"name":"TIMEOUT","value":12}]}]}\n' "$prog" "$secs"
    exit 0
fi
"$prog" "$secs" &
pid=$!
for _ in $(seq 1 120); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; echo "1/1 Test #1: hangs ... Passed"; exit 0; }
    sleep 0.1
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
echo "1/1 Test #1: hangs ...***Timeout"
exit 8
