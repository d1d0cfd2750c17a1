#!/bin/bash
# Every NETVM_* variable the library reads (the table of src/util/config.c,
# which `netvm info` prints) has a row in docs/config.md, the table users
# are pointed to. Prints each one missing and fails if there is one.
set -u
src=${1:?usage: config_doc.sh SOURCE_DIR}
bad=0
for v in $(grep -o '{ *"NETVM_[A-Z0-9_]*"' "$src/src/util/config.c" | grep -o 'NETVM_[A-Z0-9_]*'); do
  # a row of its own, or a row naming several ("| `A`, `B` | ...")
  if ! grep -Eq "^\| (\`NETVM_[A-Z0-9_]*\`, )*\`$v\`( |,)" "$src/docs/config.md"; then
    echo "config_doc: $v is read by the library (src/util/config.c) but has no row in docs/config.md"
    bad=1
  fi
done
n=$(grep -c '{ *"NETVM_' "$src/src/util/config.c")
[ "$n" -gt 10 ] || { echo "config_doc: found only $n variables in src/util/config.c: has its table moved?"; bad=1; }
[ $bad = 0 ] && echo "config_doc: all $n variables documented"
exit $bad
