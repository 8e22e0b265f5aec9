/*
 * gather_linear.c - gather straight to the root: every rank sends its block
 * to the root, which receives them WEFT__MAX_XFER at a time into place.
 *
 * Cost (p ranks, n bytes per block): (p-1).alpha + (p-1).n.beta
 * (at the root; the sends overlap in the network).
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * (c->alpha + (double)n * c->beta);
}

/* Round k at the root: receive from relative ranks 1 + k*MAX .. ; elsewhere one send. */
static weft_status_t post(weft__op_t *op, int k)
{
    int p = op->comm->size, r = op->comm->rank;
    size_t b = op->bytes;
    if (r != op->root) return k == 0 ? weft__coll_isend(op, op->sendbuf, b, op->root) : WEFT_SUCCESS;
    for (int i = 1 + k * WEFT__MAX_XFER; i < p && i <= (k + 1) * WEFT__MAX_XFER; i++) {
        int from = (op->root + i) % p;
        WEFT__CHECK(weft__coll_irecv(op, (char *)op->recvbuf + (size_t)from * b, b, from));
    }
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0) return WEFT_SUCCESS;
    return weft__rounds_drive(op, weft__linear_rounds(op->comm->size), post, NULL);
}

/* Engine side. */
static weft_status_t start(weft__op_t *op)
{
    if (op->comm->rank == op->root && op->bytes) {
        char *own = (char *)op->recvbuf + (size_t)op->root * op->bytes;
        if (op->sendbuf != own) memcpy(own, op->sendbuf, op->bytes);
    }
    return step(op);
}

const weft__algo_impl_t weft__gather_linear_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_GATHER, .cost = cost,
    .start = start, .step = step, .cleanup = NULL,
};
