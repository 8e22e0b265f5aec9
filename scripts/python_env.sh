#!/usr/bin/env bash
# The Python environment of the weft package's tests and benchmarks: a
# virtual environment with numpy, pytest and torch (PyPI's torch wheel, with
# its CUDA libraries: about 5 GB, 2 minutes the first time), and meson-python,
# meson and ninja (pip install . without build isolation, checked by
# scripts/python_wheel_check.sh), cached under ~/.cache/weft-venv (WEFT_VENV
# overrides). Reused as it is when it already imports them all; one that
# lacks only the build tools gets them. Prints the interpreter's path on its
# last line.
# Usage: bash scripts/python_env.sh
set -euo pipefail
venv=${WEFT_VENV:-$HOME/.cache/weft-venv}
base=/usr/bin/python3   # Debian's interpreter (scripts/deps.sh installs python3-venv)
[ -x "$base" ] || base=$(command -v python3)
build_tools="meson-python meson ninja"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import numpy, pytest, torch' 2>/dev/null; then
  if ! "$venv/bin/python" -c 'import mesonpy, mesonbuild, ninja' 2>/dev/null; then
    echo "weft: adding $build_tools to $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check $build_tools >&2
  fi
  echo "$venv/bin/python"
  exit 0
fi
echo "weft: creating $venv (numpy, pytest, torch, $build_tools from PyPI)" >&2
start=$(date +%s)
"$base" -m venv "$venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest torch $build_tools >&2
echo "weft: $venv ready in $(( $(date +%s) - start )) s" >&2
echo "$venv/bin/python"
