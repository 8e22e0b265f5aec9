#!/usr/bin/env bash
# multinode.sh - run an MPI program on 2 or 3 "nodes" made on this machine.
#
#   scripts/multinode.sh [--nodes N] [--ppn K] [--stats] [--mpich-tcp] [--keep-going] -- CMD [ARG...]
#
# Each node is a network namespace plus, for the processes started in it, a
# UTS namespace (its own host name). The nodes are joined by veth pairs the
# script creates (2 nodes: one pair, node to node; 3 nodes: one pair per
# node into a bridge that lives in a fourth namespace, the "switch"), so
# nothing is added to the machine's own network. Node I is weft-PID-nI (PID:
# this script's, so parallel runs do not collide), has 198.18.0.(I+1)/24 on
# its interface wf0 (198.18.0.0/15 is the range set aside for benchmarking,
# RFC 2544; no other address is ever used), lo up, IPv6 off, and
# /etc/netns/weft-PID-nI/hosts naming every node (`ip netns exec` mounts it
# over /etc/hosts).
#
# MPICH's launcher (Hydra) runs in node 0 and starts one proxy per node
# through scripts/multinode_ssh.sh, its "ssh", which enters the node's
# namespaces; the proxy starts the node's K ranks (N*K in all), so
# `mpiexec -hosts weft-PID-n0,... -ppn K -n N*K CMD ARG...` sees N hosts.
# The script exits with CMD's status (mpiexec's: the first non-zero exit of
# a rank), 77 when the nodes cannot be made here (not root, no `ip`, no
# permission for namespaces), 2 on a usage error.
#
# How MPICH and UCX see the nodes (checked by tests/mpi/test_nodes.c, with
# MPICH 4.0.2 and UCX 1.13.1):
# - MPICH groups ranks into nodes by the process mapping Hydra gives it
#   (PMI's process mapping: the ranks one proxy started share a node);
#   MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) and Weft's node topology
#   follow it, and MPI_Get_processor_name returns the node's host name (its
#   UTS namespace). Host names play no part: `mpiexec -hosts vm,127.0.0.1
#   -ppn 2 -n 4` on one host named vm gives two SHARED groups of 2 ranks,
#   all named vm. MPICH moves data within a node through its own shared
#   memory, between nodes through UCX.
# - UCX takes two processes for one host when their boot id (the same for
#   every namespace of one kernel) and their IPC namespace are the same:
#   then its shared-memory transports (posix, sysv) and cma
#   (process_vm_readv, which checks the PID namespace only) reach each
#   other, whatever the network namespace.
# - By default the nodes share the IPC namespace and Weft's UCX context is
#   told to use TCP over wf0 (WEFT_UCX_TLS=tcp,self, WEFT_UCX_NET_DEVICES=wf0):
#   Weft's traffic between nodes crosses the veths; MPICH's UCX context keeps
#   shared memory between nodes.
# - --mpich-tcp: each node gets an IPC namespace of its own as well, and
#   UCX_TLS=^cma, UCX_NET_DEVICES=wf0 hold for both contexts, so that
#   MPICH's traffic between nodes goes over TCP too. MPICH 4.0.2 with UCX
#   1.13.1 then often hangs in MPI_Finalize (the UCX TCP endpoints'
#   disconnect never completes; seen on one host with UCX_TLS=tcp,self as
#   well), hence not the default.
# Each variable is set only where the caller has not set it.
#
# Cleanup, on every exit (normal, error, SIGINT, SIGTERM, SIGHUP): every
# process still in a node's namespace is ended (TERM, then KILL), the
# namespaces are deleted (which deletes the veths and the bridge), and
# /etc/netns/weft-PID-* (and /etc/netns, when this run made it and it is
# empty) are removed.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
ssh_helper=$src/scripts/multinode_ssh.sh
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)

usage() {
  cat <<EOF
Usage: scripts/multinode.sh [OPTION...] -- CMD [ARG...]
Run CMD under MPICH's mpiexec on N "nodes" made on this machine (network
and UTS namespaces joined by veth pairs, addresses 198.18.0.0/15), K ranks
per node. Needs root. Exits with CMD's status, 77 when the nodes cannot be
made here, 2 on a usage error.

  --nodes N      nodes, 2 or 3 (default 2)
  --ppn K        ranks per node, 1 to 64 (default 2)
  --stats        after CMD, print each node's wf0 byte counters to stderr
  --mpich-tcp    MPICH's traffic between nodes over TCP too (an IPC
                 namespace per node, UCX_TLS=^cma UCX_NET_DEVICES=wf0); with
                 MPICH 4.0.2 and UCX 1.13.1 MPI_Finalize then often hangs
  --keep-going   when the nodes cannot be made, run CMD on this machine
                 alone (plain mpiexec -n N*K) instead of exiting 77
  -h, --help     this text
  -V, --version  the version

By default Weft's UCX context uses TCP over the veths between nodes
(WEFT_UCX_TLS=tcp,self WEFT_UCX_NET_DEVICES=wf0 WEFT_UCX_RNDV_THRESH=inf
unless set: UCX's rendezvous over TCP stalls here); the
environment passes to every rank (-genvall). Example:
  scripts/multinode.sh --nodes 2 --ppn 2 -- build/benchmarks/weft_osu_allreduce -a ring -m 1M:16M
EOF
}

die_usage() { echo "multinode.sh: $*" >&2; echo "Try 'scripts/multinode.sh --help'." >&2; exit 2; }

nodes=2 ppn=2 stats=0 keep_going=0 mpich_tcp=0
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) [ $# -ge 2 ] || die_usage "--nodes needs a value"; nodes=$2; shift 2 ;;
    --nodes=*) nodes=${1#*=}; shift ;;
    --ppn) [ $# -ge 2 ] || die_usage "--ppn needs a value"; ppn=$2; shift 2 ;;
    --ppn=*) ppn=${1#*=}; shift ;;
    --stats) stats=1; shift ;;
    --mpich-tcp) mpich_tcp=1; shift ;;
    --keep-going) keep_going=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -V|--version) echo "multinode.sh (Weft) $version"; exit 0 ;;
    --) shift; break ;;
    *) die_usage "unknown option '$1'" ;;
  esac
done
[[ $nodes =~ ^[23]$ ]] || die_usage "--nodes must be 2 or 3, not '$nodes'"
[[ $ppn =~ ^[1-9][0-9]?$ && $ppn -le 64 ]] || die_usage "--ppn must be 1 to 64, not '$ppn'"
[ $# -ge 1 ] || die_usage "no command (put it after --)"
nranks=$((nodes * ppn))
cmd=("$@")

mpiexec=$(command -v mpiexec || true)
[ -n "$mpiexec" ] || { echo "multinode.sh: no mpiexec in PATH" >&2; exit 77; }

# The nodes cannot be made: skip (77), or with --keep-going run CMD on this
# machine alone.
cannot() {
  echo "multinode.sh: cannot make nodes here: $*" >&2
  [ "$keep_going" = 1 ] || exit 77
  cleanup
  trap - EXIT HUP INT TERM
  echo "multinode.sh: --keep-going: running on this machine alone (-n $nranks)" >&2
  local rc=0
  "$mpiexec" -n "$nranks" "${cmd[@]}" || rc=$?
  exit "$rc"
}

prefix=weft-$$
ns_list=()          # namespaces made so far, cleaned up in reverse
# /etc/netns is shared with other runs (and other tools): a run that finds
# it missing makes it and leaves a mark in it; the run that removes the last
# entry besides the mark removes both. Runs take turns for these steps with
# an advisory lock on /etc itself (flock), so that nothing is left behind.
netns_mark=/etc/netns/.made-by-weft-multinode
etc_lock() { exec 9</etc && flock 9; }
etc_unlock() { flock -u 9; exec 9<&-; }
node_name() { echo "$prefix-n$1"; }
node_addr() { echo "198.18.0.$(($1 + 1))"; }

cleanup() {
  local ns pids i
  # a second signal (timeout(1) signals the process and then its group)
  # must not cut the cleanup short
  trap '' HUP INT TERM
  # End what still runs in the nodes (mpiexec, proxies, ranks): TERM, up
  # to 3 s, then KILL. `ip netns pids` lists them by namespace, whatever
  # their session or process group.
  for sig in TERM TERM TERM TERM TERM TERM KILL; do
    pids=()
    for ns in "${ns_list[@]}"; do
      mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "$ns" 2>/dev/null || true)
    done
    [ ${#pids[@]} -gt 0 ] || break
    kill -s "$sig" "${pids[@]}" 2>/dev/null || true
    [ "$sig" = KILL ] || sleep 0.5
  done
  for ((i = ${#ns_list[@]} - 1; i >= 0; i--)); do
    ns=${ns_list[i]}
    ip netns del "$ns" 2>/dev/null || echo "multinode.sh: could not delete namespace $ns" >&2
  done
  if [ ${#ns_list[@]} -gt 0 ] && etc_lock; then
    for ns in "${ns_list[@]}"; do rm -rf "/etc/netns/$ns"; done
    if [ -e "$netns_mark" ] && [ -z "$(ls -A /etc/netns | grep -vx "${netns_mark##*/}")" ]; then
      rm -f "$netns_mark"
      rmdir /etc/netns 2>/dev/null || true
    fi
    etc_unlock
  fi
  ns_list=()
}
trap cleanup EXIT
# A signal ends the run through the EXIT trap, with the shell's usual status.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

[ "$(id -u)" = 0 ] || cannot "not root (network namespaces need CAP_SYS_ADMIN)"
command -v ip >/dev/null || cannot "no 'ip' command (iproute2)"
command -v unshare >/dev/null || cannot "no 'unshare' command (util-linux)"
[ -x "$ssh_helper" ] || cannot "$ssh_helper is missing or not executable"

# ip -n NS ...: a command in a namespace the script made; an error there
# means the nodes cannot be made here.
in_ns() { local ns=$1; shift; ip -n "$ns" "$@" || cannot "'ip -n $ns $*' failed"; }
add_ns() {
  local err
  err=$(ip netns add "$1" 2>&1) || cannot "'ip netns add $1' failed: $err"
  ns_list+=("$1")
  # IPv6 off before any interface appears, so that no address outside
  # 198.18.0.0/15 (link-local, router solicitations) is ever used.
  if [ -e /proc/sys/net/ipv6 ]; then
    ip netns exec "$1" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 &&
                              echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' ||
      cannot "cannot turn IPv6 off in $1"
  fi
  in_ns "$1" link set lo up
}

hosts=$(printf '127.0.0.1\tlocalhost\n'
        for ((i = 0; i < nodes; i++)); do printf '%s\t%s\n' "$(node_addr $i)" "$(node_name $i)"; done)
for ((i = 0; i < nodes; i++)); do add_ns "$(node_name $i)"; done
etc_lock || cannot "cannot lock /etc"
if [ ! -d /etc/netns ]; then
  mkdir /etc/netns && : > "$netns_mark" || { etc_unlock; cannot "cannot make /etc/netns"; }
fi
for ((i = 0; i < nodes; i++)); do
  n=$(node_name $i)
  mkdir "/etc/netns/$n" && printf '%s\n' "$hosts" > "/etc/netns/$n/hosts" ||
    { etc_unlock; cannot "cannot write /etc/netns/$n/hosts"; }
done
etc_unlock
if [ "$nodes" = 2 ]; then
  # node to node: one veth pair, wf0 at both ends
  in_ns "$(node_name 0)" link add wf0 type veth peer name wf0 netns "$(node_name 1)"
else
  # a bridge in a namespace of its own, one veth pair per node
  sw=$prefix-sw
  add_ns "$sw"
  in_ns "$sw" link add br0 type bridge
  in_ns "$sw" link set br0 up
  for ((i = 0; i < nodes; i++)); do
    in_ns "$sw" link add "p$i" type veth peer name wf0 netns "$(node_name $i)"
    in_ns "$sw" link set "p$i" master br0
    in_ns "$sw" link set "p$i" up
  done
fi
for ((i = 0; i < nodes; i++)); do
  n=$(node_name $i)
  in_ns "$n" addr add "$(node_addr $i)/24" dev wf0
  in_ns "$n" link set wf0 up
done
# A veth is usable (UCX lists only interfaces up and running) a moment after
# both ends are up: wait for it, up to 5 s.
for ((i = 0; i < nodes; i++)); do
  n=$(node_name $i)
  for ((t = 0; ; t++)); do
    state=$(ip netns exec "$n" cat /sys/class/net/wf0/operstate 2>/dev/null || true)
    [ "$state" = up ] && break
    [ $t -lt 100 ] || cannot "wf0 of $n is not up after 5 s (state '$state')"
    sleep 0.05
  done
done

# UCX between nodes (see the top): Weft's context over TCP on wf0; with
# --mpich-tcp MPICH's too, never shared memory or cma.
if [ "$mpich_tcp" = 1 ]; then
  export MULTINODE_IPC=1
  export UCX_TLS=${UCX_TLS:-^cma}
  export UCX_NET_DEVICES=${UCX_NET_DEVICES:-wf0}
else
  export MULTINODE_IPC=0
  export WEFT_UCX_TLS=${WEFT_UCX_TLS:-tcp,self}
  export WEFT_UCX_NET_DEVICES=${WEFT_UCX_NET_DEVICES:-wf0}
fi
# UCX 1.13's rendezvous over TCP stalls about 40 ms per large message here
# (a 1 MiB ring allreduce on 2 x 2: 108 ms; eager only: 13 ms): Weft's
# context sends eagerly unless told otherwise.
export WEFT_UCX_RNDV_THRESH=${WEFT_UCX_RNDV_THRESH:-inf}
ns_flags=(--uts)
[ "$MULTINODE_IPC" = 1 ] && ns_flags+=(--ipc)

host_list=$(for ((i = 0; i < nodes; i++)); do node_name $i; done | paste -sd,)
# mpiexec runs in node 0 (its namespaces, as its "ssh"
# would place it), in the background so that a signal reaches the traps.
rc=0
ip netns exec "$(node_name 0)" unshare "${ns_flags[@]}" -- \
  sh -c 'hostname "$0" && exec "$@"' "$(node_name 0)" \
  "$mpiexec" -launcher ssh -launcher-exec "$ssh_helper" -hosts "$host_list" -ppn "$ppn" \
  -n "$nranks" -genvall "${cmd[@]}" &
wait $! || rc=$?

if [ "$stats" = 1 ]; then
  for ((i = 0; i < nodes; i++)); do
    n=$(node_name $i)
    ip netns exec "$n" sh -c 'printf "multinode.sh: %s %s wf0 rx_bytes %s tx_bytes %s\n" \
      "$0" "$1" "$(cat /sys/class/net/wf0/statistics/rx_bytes)" \
      "$(cat /sys/class/net/wf0/statistics/tx_bytes)"' "$n" "$(node_addr $i)" >&2 || true
  done
fi
exit "$rc"
