/*
 * bcast_hierarchical.c - broadcast over the nodes of a communicator that
 * spans several (lib/topo.c): first among the ranks that have the root's
 * local rank (one per node), then inside every node from that rank.
 *
 * L ranks per node (nodes_uniform), N >= 2 nodes, n bytes:
 * Cost = ceil(lg N).(alpha + n beta) + ceil(lg L).(alpha_node + n beta_node)
 * (INFINITY on one node or on nodes of different sizes). Each phase is a
 * binomial tree (bcast_binomial.c): a rank receives the whole buffer from its
 * parent, then sends it to its children. The cross-node phase carries the
 * buffer lg N times over the slower links instead of lg p times, the rest
 * stays inside the nodes.
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    if (!weft__hier_ok(p, c)) return INFINITY;
    return weft__ceil_log2(c->nnodes) * (c->alpha + (double)n * c->beta) +
           weft__ceil_log2(c->ppn) * (weft__node_alpha(c) + (double)n * weft__node_beta(c));
}

/* Group g of this op: 0 the root's local rank across nodes (members by node),
 * 1 this rank's node (members by local rank). Its size, this rank's index in
 * it, the root's index, and the comm rank of member i. Engine side. */
static int gsize(const weft__op_t *op, int g) { return g == 0 ? op->comm->nnodes : op->comm->local_size; }
static int groot(const weft__op_t *op, int g)
{
    return g == 0 ? op->comm->node_of[op->root] : op->comm->local_of[op->root];
}
static int gme(const weft__op_t *op, int g) { return g == 0 ? op->comm->node : op->comm->local_rank; }
static int gmember(const weft__op_t *op, int g, int i)
{
    const weft__comm_t *c = op->comm;
    return g == 0 ? weft__node_member(c, i, c->local_of[op->root]) : weft__node_member(c, c->node, i);
}

/* Rounds 0, 1: the cross-node tree (ranks of the root's local rank only);
 * rounds 2, 3: the tree inside the node. Round 2k receives from the parent,
 * round 2k + 1 sends to every child. Engine side. */
static weft_status_t post(weft__op_t *op, int k)
{
    const int g = k / 2, p = gsize(op, g), root = groot(op, g);
    if (g == 0 && op->comm->local_rank != op->comm->local_of[op->root]) return WEFT_SUCCESS;
    if (p == 1) return WEFT_SUCCESS;
    const int rr = weft__mod(gme(op, g) - root, p);
    const int top = rr ? weft__lowbit(rr) : (1 << weft__ceil_log2(p));
    if (k % 2 == 0) {
        if (rr) return weft__coll_irecv(op, op->recvbuf, op->bytes, gmember(op, g, (rr - top + root) % p));
        return WEFT_SUCCESS;
    }
    for (int m = top >> 1; m > 0; m >>= 1)
        if (rr + m < p)
            WEFT__CHECK(weft__coll_isend(op, op->recvbuf, op->bytes, gmember(op, g, (rr + m + root) % p)));
    return WEFT_SUCCESS;
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0 || op->comm->size == 1) return WEFT_SUCCESS;
    if (!op->comm->nodes_uniform) { /* selection never runs it there */
        WEFT__ERROR("bcast hierarchical: comm %d has nodes of different sizes", op->comm->id);
        return WEFT_ERR_INTERNAL;
    }
    return weft__rounds_drive(op, 4, post, NULL);
}

const weft__algo_impl_t weft__bcast_hierarchical_impl = {
    .id = WEFT_ALGO_HIERARCHICAL, .kind = WEFT__OP_BCAST, .cost = cost,
    .start = step, .step = step, .cleanup = NULL,
};
