#!/usr/bin/env bash
# Weft as a user installs it (doc/install.md), from a build directory:
#   1. `meson install` into a temporary staging directory (DESTDIR): the
#      installed tree is relocatable (run paths $ORIGIN/../lib, weft.pc's
#      prefix from its own place, WeftConfig.cmake from its own place);
#   2. what must and must not be installed (nothing of benchmarks/lab/);
#   3. the examples copied out of PREFIX/share/doc/weft/examples and built
#      outside the source tree, one with pkg-config (make), one with CMake;
#   4. both run under mpiexec -n 2 with nothing in the environment but PATH;
#   5. every installed program: --help and --version exit 0, a bad option
#      exits 2 naming it (loom: --help and --version only; its CLI is Loom's);
#   6. `man -M PREFIX/share/man weft_iallreduce` and a program's page.
# The temporary directory is removed however the script ends.
#
# Usage: test_install.sh BUILD_DIR PREFIX MPIEXEC
set -euo pipefail
build=$1
inst_prefix=$2
mpiexec=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

# ---- 1. install -------------------------------------------------------------------
meson install -C "$build" --destdir "$tmp/stage" --no-rebuild --quiet > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install"; }
prefix=$tmp/stage$inst_prefix
[ -d "$prefix" ] || fail "nothing installed under $prefix"
# Moved once more, so that nothing may depend on the staging path either.
mv "$tmp/stage$inst_prefix" "$tmp/prefix"
prefix=$tmp/prefix
echo "installed into $prefix"

# ---- 2. contents --------------------------------------------------------------------
for f in include/weft.h include/weft_mpi.h lib/libweft.so lib/pkgconfig/weft.pc \
         lib/cmake/Weft/WeftConfig.cmake lib/cmake/Weft/WeftConfigVersion.cmake \
         share/man/man3/weft_iallreduce.3 share/man/man3/weft_allreduce.3 share/man/man7/weft.7 \
         share/man/man1/weft-info.1 share/doc/weft/README.md share/doc/weft/install.md \
         share/doc/weft/examples/stream_allreduce.c bin/weft-info bin/weft-trace; do
    [ -e "$prefix/$f" ] || fail "$f is not installed"
done
# The lab (benchmarks/lab/: investigation programs, scripts and the
# LD_PRELOAD probe) stays in the build tree: no file of the prefix may be named
# after one of its sources (NAME.c gives NAME and libNAME.so), and the build's
# own account (meson introspect) must mark none of its targets as installed.
lab=$(cd "$(dirname "$0")/../benchmarks/lab" && pwd)
nlab=0
for src in "$lab"/*.c "$lab"/*.sh; do
    base=$(basename "$src"); stem=${base%.c}
    for n in "$base" "$stem" "lib$stem.so"; do
        if find "$prefix" -name "$n" | grep -q .; then
            fail "$(cd "$prefix" && find . -name "$n" | head -n 1) is installed (benchmarks/lab/$base)"
        fi
    done
    nlab=$((nlab + 1))
done
[ "$nlab" -ge 5 ] || fail "only $nlab sources found in $lab"
meson introspect "$build" --targets | python3 -c '
import json, sys
bad = [t["name"] for t in json.load(sys.stdin)
       if "/benchmarks/lab/" in t["defined_in"] and t["installed"]]
if bad:
    sys.exit("test_install: FAIL: lab targets marked installed: " + ", ".join(bad))
' || exit 1
echo "ok: nothing of benchmarks/lab ($nlab sources) installed"

# ---- 3. build two user programs outside the source tree -------------------------------
mkdir "$tmp/pc" "$tmp/cm"
cp "$prefix/share/doc/weft/examples/"* "$tmp/pc/"
cp "$prefix/share/doc/weft/examples/"* "$tmp/cm/"
# pkg-config: only weft.pc's place is given (the build's convention, as for any
# library outside the system paths).
(cd "$tmp/pc" && make -s PKG_CONFIG_PATH="$prefix/lib/pkgconfig" stream_allreduce \
    > "$tmp/make.log" 2>&1) || { cat "$tmp/make.log" >&2; fail "make with pkg-config"; }
# CMake: found through PATH (CMake looks in PREFIX/lib/cmake for PREFIX/bin in PATH).
(cd "$tmp/cm" && env PATH="$prefix/bin:$PATH" cmake -S . -B b -DCMAKE_BUILD_TYPE=Release \
    > "$tmp/cmake.log" 2>&1 && cmake --build b --target halo_overlap >> "$tmp/cmake.log" 2>&1) ||
    { cat "$tmp/cmake.log" >&2; fail "CMake find_package(Weft)"; }

# ---- 4. run them with nothing but PATH -------------------------------------------------
clean_path="$prefix/bin:$(dirname "$mpiexec"):/usr/bin:/bin"
run_clean() { env -i PATH="$clean_path" "$@"; }
for exe in "$tmp/pc/stream_allreduce" "$tmp/cm/b/halo_overlap"; do
    lib=$(env -i PATH="$clean_path" ldd "$exe" | awk '/libweft/ {print $3}')
    [ "$lib" = "$(readlink -f "$prefix/lib/libweft.so.0")" ] ||
        [ "$(readlink -f "$lib")" = "$(readlink -f "$prefix/lib/libweft.so.0")" ] ||
        fail "$(basename "$exe") resolves libweft to '$lib', not the prefix's"
    run_clean "$mpiexec" -n 2 "$exe" > "$tmp/run.log" 2>&1 ||
        { cat "$tmp/run.log" >&2; fail "$(basename "$exe") under mpiexec -n 2"; }
    echo "ok: $(basename "$exe") built and run from the prefix"
done

# ---- 5. every installed program's command line ----------------------------------------
nprog=0
for exe in "$prefix"/bin/*; do
    name=$(basename "$exe")
    # Programs that initialise MPI run under mpiexec -n 1, the others alone.
    case $name in weft_*|loom) launch=("$mpiexec" -n 1) ;; *) launch=() ;; esac
    run_clean "${launch[@]}" "$exe" --help > "$tmp/out" 2>&1 ||
        { cat "$tmp/out" >&2; fail "$name --help exits $?"; }
    grep -qi "usage" "$tmp/out" || fail "$name --help prints no usage"
    run_clean "${launch[@]}" "$exe" --version > "$tmp/out" 2>&1 ||
        { cat "$tmp/out" >&2; fail "$name --version"; }
    grep -q "[0-9]\.[0-9]" "$tmp/out" || fail "$name --version prints no version"
    if [ "$name" != loom ]; then
        rc=0
        run_clean "${launch[@]}" "$exe" --no-such-option > "$tmp/out" 2>&1 || rc=$?
        [ "$rc" = 2 ] || { cat "$tmp/out" >&2; fail "$name --no-such-option exits $rc, not 2"; }
        grep -q -- "--no-such-option" "$tmp/out" || fail "$name: the usage error does not name the option"
        rc=0
        run_clean "${launch[@]}" "$exe" -Q > "$tmp/out" 2>&1 || rc=$?
        [ "$rc" = 2 ] || { cat "$tmp/out" >&2; fail "$name -Q exits $rc, not 2"; }
        grep -q -- "-Q" "$tmp/out" || fail "$name: the usage error does not name -Q"
    fi
    nprog=$((nprog + 1))
done
echo "ok: $nprog installed programs: --help, --version, usage errors"

# ---- 6. man pages -----------------------------------------------------------------------
for page in weft_iallreduce weft_init weft-info weft_osu_allreduce; do
    run_clean man -M "$prefix/share/man" "$page" > "$tmp/man.txt" 2>&1 ||
        { cat "$tmp/man.txt" >&2; fail "man $page"; }
    grep -q "$page" "$tmp/man.txt" || fail "man $page shows another page"
done
# Every installed program has its page, and every program page an installed
# program (a program moved out of the product, to benchmarks/lab/, takes its
# page along).
for exe in "$prefix"/bin/*; do
    name=$(basename "$exe")
    [ "$name" = loom ] && continue
    [ -e "$prefix/share/man/man1/$name.1" ] || fail "no man page for $name"
done
for page in "$prefix"/share/man/man1/*.1; do
    name=$(basename "$page" .1)
    [ -e "$prefix/bin/$name" ] || fail "man page $name.1 for a program that is not installed"
done
echo "ok: man pages"
