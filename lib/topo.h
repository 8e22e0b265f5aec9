/*
 * topo.h - a communicator's node topology (lib/topo.c): which ranks share a
 * node, agreed when the communicator is created. The shared-memory path
 * (backends/shm) serves ranks of one node; the hierarchical algorithms split
 * a collective into node-local and cross-node phases with it.
 */
#ifndef WEFT_TOPO_H
#define WEFT_TOPO_H

#include "weft.h"

struct weft__comm;

/**
 * Set comm's topology fields (lib/comm.h: nnodes, node, local_rank,
 * local_size, node_of, local_of, by_node, node_first, node_ctl, node_local,
 * nodes_uniform): nodes are
 * MPI_COMM_TYPE_SHARED groups, or with WEFT_NODE_RANKS=k groups of k
 * consecutive ranks (a test setting: several "nodes" on one machine without
 * namespaces). Nodes are numbered in the order of their lowest rank.
 * Collective over comm's control channel. Caller thread of creation.
 */
weft_status_t weft__topo_init(struct weft__comm *comm);
/** Free what weft__topo_init allocated (idempotent). Caller thread of destruction. */
void weft__topo_fini(struct weft__comm *comm);

#endif /* WEFT_TOPO_H */
