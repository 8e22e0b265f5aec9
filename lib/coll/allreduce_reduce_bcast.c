/*
 * allreduce_reduce_bcast.c - allreduce as the binomial reduce to rank 0
 * (reduce_binomial.c) followed by the binomial broadcast from rank 0
 * (bcast_binomial.c), by running those two algorithms' entry points one
 * after the other on this op. A composition kept as the test of "a new
 * algorithm is its file and one table row"; the tree algorithm does the same
 * exchange with fewer copies.
 *
 * Cost (p ranks, n bytes): the reduce's plus the bcast's plus one pass over
 * n bytes for the reduce's copies (sendbuf into its scratch, and back into
 * recvbuf at rank 0), counted as a reduction pass:
 *   2 ceil(lg p) alpha + 2 n ceil(lg p) beta + n ceil(lg p) gamma + n gamma
 * i.e. the tree's plus n gamma: the cost model never prefers it to the tree
 * (on a tie, gamma = 0, the tree comes first in the table and wins).
 *
 * The stage is the scratch buffer's ownership: the reduce allocates op->tmp
 * and this file frees it when the reduce is done, before the broadcast
 * (which needs none) starts on recvbuf. The reduce leaves the result in
 * rank 0's recvbuf only; the broadcast sends it from there, so every rank
 * holds rank 0's bits. In place works as is: the reduce starts from a copy
 * of sendbuf.
 */
#include "coll_util.h"

extern const weft__algo_impl_t weft__reduce_binomial_impl;
extern const weft__algo_impl_t weft__bcast_binomial_impl;

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return weft__reduce_binomial_impl.cost(p, n, c) + weft__bcast_binomial_impl.cost(p, n, c) +
           (double)n * c->gamma;
}

/* The reduce is done: free its scratch, reset the round driver's state, and
 * start the broadcast. Engine side. */
static weft_status_t to_bcast(weft__op_t *op)
{
    weft__reduce_binomial_impl.cleanup(op);
    op->phase = 0;
    op->stepno = 0;
    op->nxfer = 0;
    return weft__bcast_binomial_impl.start(op);
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->tmp == NULL) return weft__bcast_binomial_impl.step(op);
    weft_status_t st = weft__reduce_binomial_impl.step(op);
    return st == WEFT_SUCCESS ? to_bcast(op) : st;
}

/* Engine side. */
static weft_status_t start(weft__op_t *op)
{
    if (weft__allreduce_trivial(op)) return WEFT_SUCCESS;
    op->root = 0; /* the reduce's and the bcast's root (an allreduce has none) */
    weft_status_t st = weft__reduce_binomial_impl.start(op);
    return st == WEFT_SUCCESS ? to_bcast(op) : st;
}

/* Engine side: the reduce's scratch if the op ended during the reduce. */
static void cleanup(weft__op_t *op)
{
    if (op->tmp != NULL) weft__reduce_binomial_impl.cleanup(op);
}

const weft__algo_impl_t weft__allreduce_reduce_bcast_impl = {
    .id = WEFT_ALGO_REDUCE_BCAST, .kind = WEFT__OP_ALLREDUCE, .cost = cost,
    .start = start, .step = step, .cleanup = cleanup,
};
