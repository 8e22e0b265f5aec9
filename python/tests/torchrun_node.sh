#!/usr/bin/env bash
# torchrun_node.sh TORCHRUN JOB [ARG...] - one node's torchrun agent, as
# scripts/multinode.sh starts it (one process per node, --ppn 1): the node's
# index is Hydra's PMI_RANK, the rendezvous is on node 0 (multinode.sh names
# the nodes PREFIX-n0, PREFIX-n1, ... in every node's /etc/hosts), and each
# agent starts 2 workers. The workers make Weft's world through torch's
# store (weft.init_with_store), not through Hydra.
set -eu
torchrun=$1
shift
me=$(hostname)
exec "$torchrun" --nnodes 2 --node-rank "$PMI_RANK" --master-addr "${me%-n*}-n0" \
    --master-port 29561 --nproc-per-node 2 "$@"
