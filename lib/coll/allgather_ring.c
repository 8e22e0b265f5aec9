/*
 * allgather_ring.c - allgather by a ring: in round s every rank passes the
 * block it received in round s-1 to its right neighbour.
 *
 * Cost (p ranks, n bytes per rank's block): (p-1).alpha + (p-1).n.beta
 * (bandwidth-optimal; latency grows linearly with p).
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * c->alpha + (double)(p - 1) * (double)n * c->beta;
}

static weft_status_t post(weft__op_t *op, int s)
{
    int p = op->comm->size, r = op->comm->rank;
    size_t b = op->bytes;
    char *rb = op->recvbuf;
    int sblk = weft__mod(r - s, p), rblk = weft__mod(r - s - 1, p);
    WEFT__CHECK(weft__coll_irecv(op, rb + (size_t)rblk * b, b, weft__mod(r - 1, p)));
    WEFT__CHECK(weft__coll_isend(op, rb + (size_t)sblk * b, b, (r + 1) % p));
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0) return WEFT_SUCCESS;
    return weft__rounds_drive(op, op->comm->size - 1, post, NULL);
}

/* Engine side: own block into place (unless in place), then the rounds. */
static weft_status_t start(weft__op_t *op)
{
    char *own = (char *)op->recvbuf + (size_t)op->comm->rank * op->bytes;
    if (op->bytes && op->sendbuf != own) memcpy(own, op->sendbuf, op->bytes);
    return step(op);
}

const weft__algo_impl_t weft__allgather_ring_impl = {
    .id = WEFT_ALGO_RING, .kind = WEFT__OP_ALLGATHER, .cost = cost,
    .start = start, .step = step, .cleanup = NULL,
};
