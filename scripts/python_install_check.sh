#!/usr/bin/env bash
# Install a configured build (meson install into its own --prefix) and use
# the weft Python package from there: import it from the prefix's
# site-packages, check that it loaded the installed libweft (its generated
# _paths.py), and run an allreduce on 2 ranks.
# Usage: bash scripts/python_install_check.sh BUILD_DIR PYTHON
set -euo pipefail
dir=${1:?usage: python_install_check.sh BUILD_DIR PYTHON}
py=${2:?usage: python_install_check.sh BUILD_DIR PYTHON}
dir=$(cd "$dir" && pwd)
prefix=$(meson introspect --buildoptions "$dir" |
         "$py" -c 'import json, sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
meson install -C "$dir" --quiet
init=$(find "$prefix" -path '*/weft/__init__.py' | head -n 1)
if [ -z "$init" ]; then
  echo "python_install_check: no weft package under $prefix after meson install" >&2
  exit 1
fi
site=$(dirname "$(dirname "$init")")
cd /   # nowhere near the source or build tree
PYTHONPATH="$site" WEFT_PY_TORCH_FIRST=0 WEFT_TIMEOUT=60 mpiexec -n 2 "$py" -c '
import sys, numpy as np, weft
prefix, site = sys.argv[1], sys.argv[2]
assert weft.__file__.startswith(site), weft.__file__
assert weft.library_path().startswith(prefix), weft.library_path()
weft.init()
c = weft.Comm.world()
x = np.full(1000, c.rank + 1.0)
c.allreduce(x)
assert (x == c.size * (c.size + 1) / 2).all()
if c.rank == 0:
    print("python_install_check: weft %s from %s, libweft %s: allreduce on %d ranks ok"
          % (weft.version(), weft.__file__, weft.library_path(), c.size))
' "$prefix" "$site"
