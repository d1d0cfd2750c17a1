#!/bin/sh
# need.sh PYTHON MODULE... -- COMMAND...: run COMMAND if PYTHON can import
# every MODULE; else say which is missing and exit 77 (ctest's SKIP).
py=$1; shift
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  "$py" -c "import $1" 2>/dev/null || {
    echo "SKIP: $py has no module '$1' (scripts/install-deps.sh installs it)"; exit 77; }
  shift
done
shift
exec "$@"
