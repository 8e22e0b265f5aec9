#!/usr/bin/env bash
# test_lab_cli.sh NAME MPIEXEC PROGRAM - the command-line convention of a lab
# program (not installed, so scripts/test_install.sh does not see it):
# --help and --version exit 0 (a usage line; the version), --no-such-option
# and -Q exit 2 and name the option. MPIEXEC empty: the program runs alone;
# else under MPIEXEC -n 1.
set -uo pipefail
name=$1
mpiexec=$2
exe=$3
launch=()
[ -n "$mpiexec" ] && launch=("$mpiexec" -n 1)
out=$(mktemp "${TMPDIR:-/tmp}/weft-lab-cli.XXXXXX")
trap 'rm -f "$out"' EXIT
fail() { echo "test_lab_cli: $name: FAIL: $*" >&2; cat "$out" >&2; exit 1; }

"${launch[@]}" "$exe" --help > "$out" 2>&1 || fail "--help exits $?"
grep -qi "usage" "$out" || fail "--help prints no usage"
"${launch[@]}" "$exe" --version > "$out" 2>&1 || fail "--version exits $?"
grep -q "[0-9]\.[0-9]" "$out" || fail "--version prints no version"
for bad in --no-such-option -Q; do
    rc=0
    "${launch[@]}" "$exe" "$bad" > "$out" 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "$bad exits $rc, not 2"
    grep -q -- "$bad" "$out" || fail "the usage error does not name $bad"
done
echo "ok: $name: --help, --version, usage errors"
