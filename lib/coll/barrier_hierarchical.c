/*
 * barrier_hierarchical.c - barrier over the nodes of a communicator that
 * spans several (lib/topo.c): every rank of a node tells its leader (local
 * rank 0), the leaders run a dissemination barrier among themselves, then
 * each leader releases its node.
 *
 * L ranks per node (nodes_uniform), N >= 2 nodes:
 * Cost = 2 (L-1) alpha_node + ceil(lg N) alpha
 * (the leader receives, then sends, L-1 empty messages; INFINITY on one node
 * or on nodes of different sizes). No rank leaves before every rank arrived:
 * a leader finishes the dissemination only after every leader heard (through
 * the rounds) from every other, and a leader enters it only after its node's
 * ranks arrived.
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    WEFT__UNUSED(n);
    if (!weft__hier_ok(p, c)) return INFINITY;
    return 2.0 * (c->ppn - 1) * weft__node_alpha(c) + weft__ceil_log2(c->nnodes) * c->alpha;
}

/* Round 0: arrive at the leader; rounds 1 .. ceil(lg N): dissemination among
 * the leaders; the last round: the leader releases its node. Engine side. */
static weft_status_t post(weft__op_t *op, int k)
{
    static char dummy[1];
    const weft__comm_t *c = op->comm;
    const int L = c->local_size, N = c->nnodes, last = weft__ceil_log2(N) + 1;
    const int leader = weft__node_member(c, c->node, 0);
    if (k == 0 || k == last) {
        if (c->local_rank != 0) {
            if (k == 0) return weft__coll_isend(op, dummy, 0, leader);
            return weft__coll_irecv(op, op->priv, 0, leader);
        }
        for (int i = 1; i < L; i++) {
            int r = weft__node_member(c, c->node, i);
            if (k == 0) WEFT__CHECK(weft__coll_irecv(op, op->priv, 0, r));
            else WEFT__CHECK(weft__coll_isend(op, dummy, 0, r));
        }
        return WEFT_SUCCESS;
    }
    if (c->local_rank != 0) return WEFT_SUCCESS;
    const int d = 1 << (k - 1);
    WEFT__CHECK(weft__coll_irecv(op, op->priv, 0, weft__node_member(c, weft__mod(c->node - d, N), 0)));
    return weft__coll_isend(op, dummy, 0, weft__node_member(c, (c->node + d) % N, 0));
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, weft__ceil_log2(op->comm->nnodes) + 2, post, NULL);
}

const weft__algo_impl_t weft__barrier_hierarchical_impl = {
    .id = WEFT_ALGO_HIERARCHICAL, .kind = WEFT__OP_BARRIER, .cost = cost,
    .start = step, .step = step, .cleanup = NULL,
};
