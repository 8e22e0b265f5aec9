#!/usr/bin/env bash
# Install what Weft and Loom need on Debian 12 (run as root). Skips apt when
# everything is already there, so repeated runs are quick.
set -euo pipefail
# clang + libclang-rt-14-dev: libFuzzer (scripts/fuzz.sh); procps: pgrep/ps
# for the killed-rank test (tests/mpi/run_kill.sh).
pkgs=(build-essential meson ninja-build pkg-config mpich libmpich-dev check libsubunit-dev
      libucx-dev libopenblas-dev zlib1g-dev dataset-fashion-mnist python3 python3-matplotlib
      clang libclang-rt-14-dev procps)
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
