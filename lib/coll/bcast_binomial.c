/*
 * bcast_binomial.c - broadcast down a binomial tree rooted at `root`: a rank
 * receives the whole buffer from its parent, then sends it to its children
 * (relative ranks rel + 2^j below its lowest set bit), all at once.
 *
 * Cost (p ranks, n bytes): ceil(lg p).(alpha + n.beta)
 * (latency-optimal; every edge of the tree carries the whole buffer).
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return weft__ceil_log2(p) * (c->alpha + (double)n * c->beta);
}

static int rel(weft__op_t *op) { return weft__mod(op->comm->rank - op->root, op->comm->size); }
static int real(weft__op_t *op, int relrank) { return (relrank + op->root) % op->comm->size; }

/* Round 0: receive from the parent; round 1: send to every child. */
static weft_status_t post(weft__op_t *op, int k)
{
    int p = op->comm->size, rr = rel(op);
    int top = rr ? weft__lowbit(rr) : (1 << weft__ceil_log2(p));
    if (k == 0) {
        if (rr) return weft__coll_irecv(op, op->recvbuf, op->bytes, real(op, rr - top));
        return WEFT_SUCCESS;
    }
    for (int m = top >> 1; m > 0; m >>= 1)
        if (rr + m < p) WEFT__CHECK(weft__coll_isend(op, op->recvbuf, op->bytes, real(op, rr + m)));
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0 || op->comm->size == 1) return WEFT_SUCCESS;
    return weft__rounds_drive(op, 2, post, NULL);
}

const weft__algo_impl_t weft__bcast_binomial_impl = {
    .id = WEFT_ALGO_BINOMIAL, .kind = WEFT__OP_BCAST, .cost = cost,
    .start = step, .step = step, .cleanup = NULL,
};
