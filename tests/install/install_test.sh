#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_DIR LIBDIR CC [SANITIZER_FLAGS]
# Installs the build into a fresh prefix with cmake --install, then uses only
# what was installed, as a user would:
#  - programs built with pkg-config alone (shared, and fully static with
#    --static) and with CMake's find_package (netvm::netvm and
#    netvm::netvm_static) run as a job of one and, through the installed
#    `netvm run -n 2`, do a put/get between two ranks;
#  - the README's minimal program builds with the README's two compile lines;
#  - the shared library has its SONAME, exports every function the installed
#    headers declare, and nothing that is not netvm_*;
#  - the installed tool runs (netvm info), headers and docs are in place.
# Exits 77 (ctest: skipped) when pkg-config is missing.
set -euo pipefail
build=$1 src=$2 libdir=$3 cc=$4 san=${5:-}
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config not found (scripts/install-deps.sh installs pkgconf)"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: nm not found (binutils)"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/netvm-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $*"; }
# expect OUTPUT_FILE REGEX: the output must contain a line matching REGEX
expect() { grep -Eq "$2" "$1" || { cat "$1"; fail "output does not match: $2"; }; }

step "cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
lib=$prefix/$libdir
export PKG_CONFIG_PATH=$lib/pkgconfig
unset PKG_CONFIG_LIBDIR || true
tool=$prefix/bin/netvm

step "headers, docs, tool"
for h in "$src"/include/netvm/*.h; do
  [ -f "$prefix/include/netvm/$(basename "$h")" ] || fail "header $(basename "$h") not installed"
done
for d in "$src"/README.md "$src"/docs/*.md; do
  [ -f "$prefix/share/doc/netvm/$(basename "$d")" ] || fail "doc $(basename "$d") not installed"
done
"$tool" info >"$work/info.out" 2>&1 || { cat "$work/info.out"; fail "installed netvm info"; }
expect "$work/info.out" "NETVM_TIMEOUT"

step "pkg-config: version, and what --static adds"
version=$(pkg-config --modversion netvm)
expect "$work/info.out" "^netvm ${version//./\\.} "
static_libs=" $(pkg-config --static --libs netvm) "
for l in -lnetvm -lcrypto -lpthread; do
  [[ "$static_libs" == *" $l "* ]] || fail "pkg-config --static --libs netvm lacks $l: $static_libs"
done

step "shared library: SONAME, version links, exports"
soname=$(objdump -p "$lib/libnetvm.so" | awk '$1 == "SONAME" { print $2 }')
case "$version" in 0.*) want_soname=libnetvm.so.${version%.*} ;; *) want_soname=libnetvm.so.${version%%.*} ;; esac
[ "$soname" = "$want_soname" ] || fail "SONAME is '$soname', wanted $want_soname"
[ -f "$lib/libnetvm.so.$version" ] && [ "$(readlink "$lib/libnetvm.so")" = "$soname" ] \
  && [ "$(readlink "$lib/$soname")" = "libnetvm.so.$version" ] || fail "libnetvm.so -> $soname -> libnetvm.so.$version links"
[ -f "$lib/libnetvm.a" ] || fail "libnetvm.a not installed"
nm -D --defined-only "$lib/libnetvm.so" | awk '{ print $NF }' | sed 's/@.*//' | sort -u >"$work/exported"
if grep -v '^netvm_' "$work/exported" >"$work/internal"; then
  echo "exported symbols that are not the public API:"; head -20 "$work/internal"
  fail "$(wc -l <"$work/internal") symbols not named netvm_* exported"
fi
# every function the installed headers declare (comments and macros gone);
# netvm.h first, as the others want
printf '#include <netvm/%s>\n' netvm.h $(cd "$prefix/include/netvm" && ls *.h) >"$work/all.h"
$cc -E -P -I"$prefix/include" "$work/all.h" | grep -oE '\bnetvm_[a-z0-9_]+[[:space:]]*\(' \
  | sed 's/[[:space:]]*($//' | sort -u >"$work/declared"
[ -s "$work/declared" ] || fail "found no declared function in the headers"
missing=$(comm -23 "$work/declared" "$work/exported")
[ -z "$missing" ] || fail "declared but not exported: $missing"
echo "$(wc -l <"$work/exported") symbols exported, all netvm_*; $(wc -l <"$work/declared") functions declared, all exported"

# run_both NAME: the program alone, then two ranks under the installed launcher
run_both() {
  "$1" >"$work/one.out" 2>&1 || { cat "$work/one.out"; fail "$1 alone"; }
  expect "$work/one.out" "singleton init and finalize ok"
  "$tool" run -n 2 -- "$1" >"$work/two.out" 2>&1 || { cat "$work/two.out"; fail "netvm run -n 2 $1"; }
  expect "$work/two.out" "rank 0 of 2: put/get ok"
  expect "$work/two.out" "rank 1 of 2: put/get ok"
}

step "pkg-config, shared: cc consumer.c \$(pkg-config --cflags --libs netvm)"
# shellcheck disable=SC2046 # word splitting of pkg-config's output is wanted
$cc $san "$src/tests/install/consumer.c" $(pkg-config --cflags --libs netvm) -o "$work/pc_shared"
objdump -p "$work/pc_shared" | grep -q "NEEDED *$soname" || fail "pc_shared does not need $soname"
LD_LIBRARY_PATH=$lib run_both "$work/pc_shared"

step "pkg-config, static: cc -static consumer.c \$(pkg-config --static --cflags --libs netvm)"
if [ -n "$san" ]; then
  echo "not in this build: sanitizer runtimes cannot be linked with -static (netvm::netvm_static below links libnetvm.a)"
elif pkg-config --print-requires-private netvm | grep -qw pmix; then
  # Debian's libpmix.a needs libevent and hwloc, which its pmix.pc does not
  # name for a static link: a fully static program cannot be made from it
  echo "not with PMIx: Debian's libpmix.a cannot be linked -static from its pkg-config file (netvm::netvm_static below links libnetvm.a)"
else
  # shellcheck disable=SC2046
  $cc -static "$src/tests/install/consumer.c" $(pkg-config --static --cflags --libs netvm) -o "$work/pc_static" \
    2>"$work/static.log" || { cat "$work/static.log"; fail "static link"; }
  objdump -p "$work/pc_static" | grep -q NEEDED && fail "pc_static has dynamic dependencies"
  run_both "$work/pc_static"
fi

step "README: the minimal program with the in-tree and the installed compile line"
awk '/^## A minimal program/ { on = 1 } on && /^```c/ { code = 1; next } code && /^```/ { exit } code' \
  "$src/README.md" >"$work/hello.c"
[ -s "$work/hello.c" ] || fail "no C block under '## A minimal program' in README.md"
# the README's lines, with its build/ and include paths made absolute
$cc $san "$work/hello.c" -I"$src/include" -L"$build" -lnetvm -Wl,-rpath,"$build" -o "$work/hello_tree"
# shellcheck disable=SC2046
$cc $san "$work/hello.c" $(pkg-config --cflags --libs netvm) -o "$work/hello"
for h in hello_tree hello; do
  LD_LIBRARY_PATH=$lib "$tool" run -n 2 -- "$work/$h" >"$work/hello.out" 2>&1 || { cat "$work/hello.out"; fail "$h"; }
  expect "$work/hello.out" "rank 0 got: hello from rank 1"
  expect "$work/hello.out" "rank 1 got: hello from rank 0"
done

step "CMake: find_package(netvm) with netvm::netvm and netvm::netvm_static"
cmake -S "$src/tests/install/consumer" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$san" -DCMAKE_BUILD_TYPE=Debug >"$work/cmake.log" 2>&1 \
  || { cat "$work/cmake.log"; fail "configuring the find_package project"; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "building the find_package project"; }
objdump -p "$work/cmake/consumer_shared" | grep -q "NEEDED *$soname" || fail "consumer_shared does not need $soname"
objdump -p "$work/cmake/consumer_static" | grep -q "NEEDED *libnetvm" && fail "consumer_static needs the shared library"
run_both "$work/cmake/consumer_shared"
run_both "$work/cmake/consumer_static"

step "netvm memd: the systemd unit names the installed tool, the example config starts a server"
unit=$prefix/share/netvm/dist/netvm-memd.service conf=$prefix/share/netvm/dist/memd.conf
[ -f "$unit" ] && [ -f "$conf" ] || fail "the memd unit or its example config is not installed"
grep -q "^ExecStart=$tool memd --config " "$unit" || { grep ExecStart "$unit"; fail "the unit does not start $tool"; }
if command -v systemd-analyze >/dev/null; then
  # offline: the unit's syntax, and that its command exists and is executable
  systemd-analyze verify "$unit" >"$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "systemd-analyze verify"; }
  [ -s "$work/verify.log" ] && { cat "$work/verify.log"; fail "systemd-analyze verify complained"; }
else
  echo "(systemd-analyze not found: the unit's syntax is not checked)"
fi
head -c 32 /dev/urandom >"$work/memd.cred"
chmod 600 "$work/memd.cred"
# the example's settings, with a loopback address and a small pool instead
"$tool" memd --config "$conf" --listen tcp:127.0.0.1:0 --size 8M --credential-file "$work/memd.cred" \
  >"$work/memd.out" 2>&1 &
memd=$!
for _ in $(seq 1 200); do grep -q "listening tcp:" "$work/memd.out" && break; sleep 0.05; done
expect "$work/memd.out" "memd listening tcp:127\.0\.0\.1:[0-9]+"
kill -TERM "$memd"
wait "$memd" || fail "memd did not exit 0 on SIGTERM"

echo "install test: ok"
