#!/bin/sh
# expect_exit.sh STATUS PATTERN... -- COMMAND...: run COMMAND; pass if it
# exits with STATUS and its combined output matches every extended regex.
want=$1; shift
patterns=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns="$patterns
$1"; shift; done
shift
out=$("$@" 2>&1); got=$?
printf '%s\n' "$out"
[ "$got" -eq "$want" ] || { echo "FAIL: exit status $got, wanted $want"; exit 1; }
echo "$patterns" | while IFS= read -r p; do
  [ -z "$p" ] && continue
  printf '%s\n' "$out" | grep -Eq "$p" || { echo "FAIL: output does not match: $p"; exit 1; }
done
