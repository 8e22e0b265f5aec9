#!/usr/bin/env bash
# multinode_ssh.sh - the "ssh" that scripts/multinode.sh hands to MPICH's
# launcher (mpiexec -launcher ssh -launcher-exec scripts/multinode_ssh.sh).
#
# Hydra calls it as ssh:  multinode_ssh.sh [-x] HOST WORD...
# and it runs WORD... the way sshd would (joined by spaces, through a shell),
# but on the one-machine "node" HOST: inside HOST's network namespace (which
# `ip netns exec` enters, bind-mounting /etc/netns/HOST/hosts over
# /etc/hosts) and in a UTS namespace of its own whose host name is HOST.
# With MULTINODE_IPC=1 in the environment (multinode.sh --mpich-tcp) also in
# an IPC namespace of its own, so that UCX, which tells hosts apart by boot
# id and IPC namespace, does not reach the other nodes through shared memory
# (doc/testing.md, "Several nodes on one machine").
#
# HOST must be one of multinode.sh's nodes (weft-PID-nI, and the namespace
# must exist): nothing else is ever entered. Exit 255 (ssh's own failure
# code) on a bad call.
set -euo pipefail
fail() { echo "multinode_ssh.sh: $*" >&2; exit 255; }
# ssh options Hydra may pass before the host: -x (no X forwarding) or -X
while [ $# -gt 0 ]; do
  case $1 in
    -x|-X|-q|-T) shift ;;
    -*) fail "unexpected option '$1'" ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || fail "usage: multinode_ssh.sh [-x] HOST COMMAND..."
host=$1
shift
[[ $host =~ ^weft-[0-9]+-n[0-9]+$ ]] || fail "'$host' is not a node of multinode.sh"
[ -e "/run/netns/$host" ] || fail "no network namespace '$host'"
ns=(--uts)
[ "${MULTINODE_IPC:-0}" = 1 ] && ns+=(--ipc)
# As sshd does: the words joined by spaces, run by a shell.
exec ip netns exec "$host" unshare "${ns[@]}" -- \
  sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
