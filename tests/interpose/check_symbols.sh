#!/bin/bash
# check_symbols.sh LIBWEFT LIBWEFT_MPI: libweft must not reference any MPI_
# function the interposer defines (it calls their PMPI_ entries, or its own
# traffic would re-enter the interposer under LD_PRELOAD), and the interposer
# exports nothing but those MPI_ functions.
set -u
libweft=$1 interposer=$2
defined=$(nm -D --defined-only "$interposer" | awk '$2 == "T" {print $3}' | sort)
[ -n "$defined" ] || { echo "no symbols read from $interposer"; exit 1; }
fail=0
other=$(grep -v '^MPI_' <<<"$defined")
if [ -n "$other" ]; then echo "interposer exports non-MPI symbols:"; echo "$other"; fail=1; fi
used=$(nm -D --undefined-only "$libweft" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
both=$(comm -12 <(echo "$defined") <(echo "$used"))
if [ -n "$both" ]; then
    echo "libweft calls MPI_ functions the interposer defines (use their PMPI_ entries):"
    echo "$both"; fail=1
fi
[ $fail -eq 0 ] && echo "$(wc -l <<<"$defined") MPI_ functions interposed; libweft uses none of them"
exit $fail
