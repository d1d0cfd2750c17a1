#!/usr/bin/env bash
# Installs what building and testing netvm needs, only where it is missing.
# --peers also installs the comparison peers (UCX, Open MPI with OpenSHMEM,
# and UCX's headers for the put-with-signal peer bench/peers/ucx_signal.c)
# and the swap comparison's tools; --swap only the latter.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have cc    || need+=(gcc)
have cmake || need+=(cmake)
have ninja || need+=(ninja-build)
have python3 || need+=(python3)
# libcrypto (HMAC-SHA-256 for authentication over tcp) and its headers
[ -f /usr/include/openssl/evp.h ] || need+=(libssl-dev)
# pkg-config: how programs find an installed netvm (tests/install)
have pkg-config || need+=(pkgconf)
# ip(8): the multi-host tests build network namespaces joined by veth pairs
have ip || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need+=(iproute2)
# libpmix: the PMIx bootstrap (netvm programs started by mpirun or srun --mpi=pmix);
# mpirun for its tests (tests/pmix; the Slurm one also wants slurmctld, slurmd)
pkg-config --exists pmix 2>/dev/null || need+=(libpmix-dev pkg-config)
have mpirun || need+=(openmpi-bin)
# a private single-node Slurm for pmix_slurm_2 (srun --mpi=pmix), so that test
# runs on every machine rather than only where Slurm happened to be
have slurmd || [ -x /usr/sbin/slurmd ] || need+=(slurmd)
have slurmctld || [ -x /usr/sbin/slurmctld ] || need+=(slurmctld)
have srun || need+=(slurm-client)
# netvm gmem run's tests: programs on jemalloc and tcmalloc, and redis (which links jemalloc)
[ -f /usr/include/jemalloc/jemalloc.h ] || need+=(libjemalloc-dev libjemalloc2)
[ -f /usr/include/gperftools/tcmalloc.h ] || need+=(libgoogle-perftools-dev)
have redis-server || need+=(redis-server)
have setpriv || [ -x /usr/bin/setpriv ] || need+=(util-linux)
# libfuse3: `netvm gfile mount` (the file cache for unmodified programs); fusermount3 unmounts
pkg-config --exists fuse3 2>/dev/null || need+=(libfuse3-dev)
have fusermount3 || need+=(fuse3)
# libfabric: the ofi link (NETVM_LINKS=ofi); fi_info and fi_pingpong for its tests and benchmark
pkg-config --exists libfabric 2>/dev/null || need+=(libfabric-dev)
have fi_pingpong || need+=(libfabric-bin)
# gdb: netvm run --stack-traces, which make test turns on (a job that outlives
# its --timeout shows its ranks' backtraces before it is ended)
have gdb || need+=(gdb)
# clang with libFuzzer: the fuzz targets of every wire decoder
have clang || need+=(clang)
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
# redis-server: the key-value workload of bench/workloads/run (its smoke test
# bench_workloads_smoke runs it)
have redis-server || [ -x /usr/bin/redis-server ] || need+=(redis-server)
# --peers and --swap: bench/gmem/swap_compare's and bench/workloads/run's tools
# (swap to a file and to zram under a memory cgroup): swapon/swapoff (mount), mkswap and fallocate
# (util-linux), modprobe for zram (kmod)
if [ "${1:-}" = "--peers" ] || [ "${1:-}" = "--swap" ]; then
  have swapon || [ -x /usr/sbin/swapon ] || [ -x /sbin/swapon ] || need+=(mount)
  have mkswap || [ -x /usr/sbin/mkswap ] || [ -x /sbin/mkswap ] || need+=(util-linux)
  have fallocate || need+=(util-linux)
  have modprobe || [ -x /usr/sbin/modprobe ] || [ -x /sbin/modprobe ] || need+=(kmod)
fi
if [ "${1:-}" = "--peers" ]; then
  have ucx_perftest || need+=(ucx-utils)
  [ -f /usr/include/ucp/api/ucp.h ] || need+=(libucx-dev)
  # oshcc comes with openmpi-bin (installed above for mpirun), its
  # shmem.h only with libopenmpi-dev: look for the header itself
  { have oshcc && echo '#include <shmem.h>' | oshcc -E -x c - >/dev/null 2>&1; } || need+=(openmpi-bin libopenmpi-dev)
fi
# numpy and pytest for the Python package's tests (tests/python), in the
# python3 that ctest runs (the first on PATH): Debian's own takes Debian's
# packages (pip refuses to touch it, PEP 668); any other (pyenv, a venv)
# takes them from pip, into itself or else into the user's site.
py=$(command -v python3 || true)
if [ -z "$py" ] || [ "$("$py" -c 'import sys; print(sys.prefix == sys.base_prefix == "/usr")')" = True ]; then
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
  /usr/bin/python3 -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
else
  for m in numpy pytest; do
    "$py" -c "import $m" 2>/dev/null && continue
    echo "installing $m for $py (pip)"
    "$py" -m pip install -q "$m" 2>/dev/null || "$py" -m pip install -q --user "$m" ||
      echo "warning: could not install $m for $py: the Python tests will be skipped"
  done
fi
# matplotlib for bench/compare --plot and bench/workloads/run --plot (PNG figures), in the same python3
# and the same way as numpy above; without it only --plot is unavailable, so
# a failure to install it only warns (it has a list of its own, "optional")
optional=()
if [ -z "$py" ] || [ "$("$py" -c 'import sys; print(sys.prefix == sys.base_prefix == "/usr")')" = True ]; then
  /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || optional+=(python3-matplotlib)
elif ! "$py" -c 'import matplotlib' 2>/dev/null; then
  echo "installing matplotlib for $py (pip)"
  "$py" -m pip install -q matplotlib 2>/dev/null || "$py" -m pip install -q --user matplotlib ||
    echo "warning: could not install matplotlib for $py: bench/compare --plot will not work"
fi
[ ${#need[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# (a failed update stops the script only where something required is missing)
$SUDO apt-get update -q >/dev/null || [ ${#need[@]} -eq 0 ]
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ${#optional[@]} -gt 0 ]; then
  echo "installing: ${optional[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${optional[@]}" >/dev/null ||
    echo "warning: could not install ${optional[*]}: bench/compare --plot will not work"
fi
