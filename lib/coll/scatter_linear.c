/*
 * scatter_linear.c - scatter straight from the root: the root sends every
 * rank its block, WEFT__MAX_XFER at a time; each other rank receives once.
 *
 * Cost (p ranks, n bytes per block): (p-1).alpha + (p-1).n.beta (at the root)
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * (c->alpha + (double)n * c->beta);
}

static weft_status_t post(weft__op_t *op, int k)
{
    int p = op->comm->size, r = op->comm->rank;
    size_t b = op->bytes;
    if (r != op->root) return k == 0 ? weft__coll_irecv(op, op->recvbuf, b, op->root) : WEFT_SUCCESS;
    for (int i = 1 + k * WEFT__MAX_XFER; i < p && i <= (k + 1) * WEFT__MAX_XFER; i++) {
        int to = (op->root + i) % p;
        WEFT__CHECK(weft__coll_isend(op, (const char *)op->sendbuf + (size_t)to * b, b, to));
    }
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0) return WEFT_SUCCESS;
    return weft__rounds_drive(op, weft__linear_rounds(op->comm->size), post, NULL);
}

/* Engine side. In place at the root, recvbuf already points at its block. */
static weft_status_t start(weft__op_t *op)
{
    if (op->comm->rank == op->root && op->bytes) {
        const char *own = (const char *)op->sendbuf + (size_t)op->root * op->bytes;
        if (op->recvbuf != own) memcpy(op->recvbuf, own, op->bytes);
    }
    return step(op);
}

const weft__algo_impl_t weft__scatter_linear_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_SCATTER, .cost = cost,
    .start = start, .step = step, .cleanup = NULL,
};
