#!/usr/bin/env bash
# Install what Weft and Loom need on Debian 12 (run as root). Skips apt when
# everything is already there, so repeated runs are quick.
set -euo pipefail
# clang + libclang-rt-14-dev: libFuzzer (scripts/fuzz.sh); procps: pgrep/ps
# for the killed-rank test (tests/mpi/run_kill.sh).
pkgs=(build-essential meson ninja-build pkg-config mpich libmpich-dev check libsubunit-dev
      libucx-dev libopenblas-dev zlib1g-dev libpng-dev dataset-fashion-mnist python3-skimage python3
      python3-matplotlib cmake man-db make python3-venv clang libclang-rt-14-dev procps)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "weft: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# mpi4py for libweft-mpi.so's Python test (tests/interpose), in a venv cached
# under ~/.cache. Its wheel opens MPICH's ABI as libmpi.so.12, which Debian
# names libmpich.so.12: a link in the venv's mpich-abi/ (LD_LIBRARY_PATH).
# Without PyPI the test is skipped, nothing else depends on it.
venv="$HOME/.cache/weft-mpi4py-venv"
if ! "$venv/bin/python" -c "import mpi4py" 2>/dev/null; then
  python3 -m venv "$venv" && "$venv/bin/pip" install -q mpi4py ||
    echo "weft: mpi4py could not be installed; the interposer's mpi4py test will be skipped"
fi
if [ -d "$venv" ]; then
  mkdir -p "$venv/mpich-abi"
  ln -sf "$(ls /usr/lib/*/libmpich.so.12 | head -n 1)" "$venv/mpich-abi/libmpi.so.12"
fi
