#!/usr/bin/env bash
# pip install . as a user does it: build the weft wheel from this source tree
# (pyproject.toml: meson-python, -Dwheel=true: libweft inside the package),
# install it into a temporary directory, and use it from there: the package
# must load the libweft inside it, and python -m weft --check must pass on
# 2 ranks. Without build isolation, so that it needs no network: PYTHON's
# environment has meson-python, meson and ninja (scripts/python_env.sh).
# Everything it makes is removed, also when it fails.
# Usage: bash scripts/python_wheel_check.sh PYTHON
set -euo pipefail
py=${1:?usage: python_wheel_check.sh PYTHON}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/weft-wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
"$py" -m pip wheel . --no-deps --no-build-isolation --disable-pip-version-check -q -w "$tmp/dist"
whl=$(ls "$tmp"/dist/weft-*.whl)
"$py" -m pip install --no-deps --disable-pip-version-check -q --target "$tmp/site" "$whl"
cd /   # nowhere near the source tree
PYTHONPATH="$tmp/site" "$py" -c '
import os, sys, weft
site = sys.argv[1]
pkg = os.path.join(site, "weft")
assert weft.__file__.startswith(pkg), weft.__file__
assert weft.library_path() == os.path.join(pkg, "libweft.so"), weft.library_path()
' "$tmp/site"
PYTHONPATH="$tmp/site" WEFT_TIMEOUT=60 timeout 120 mpiexec -n 2 "$py" -m weft --check --quiet
echo "python_wheel_check: $(basename "$whl") built and installed in $(( $(date +%s) - start )) s;" \
     "libweft loaded from inside the package"
