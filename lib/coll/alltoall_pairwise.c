/*
 * alltoall_pairwise.c - alltoall by pairwise exchange: in round s (1..p-1)
 * a rank sends block r+s to rank r+s and receives block r-s from rank r-s,
 * one pair of messages per round (no incast).
 *
 * Cost (p ranks, n bytes per block): (p-1).alpha + (p-1).n.beta
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * (c->alpha + (double)n * c->beta);
}

/* The source blocks: the user's sendbuf, or a copy of recvbuf in place. */
static const char *src(weft__op_t *op) { return op->tmp ? op->tmp : op->sendbuf; }

static weft_status_t post(weft__op_t *op, int k)
{
    int p = op->comm->size, r = op->comm->rank, s = k + 1;
    int to = (r + s) % p, from = weft__mod(r - s, p);
    size_t b = op->bytes;
    WEFT__CHECK(weft__coll_irecv(op, (char *)op->recvbuf + (size_t)from * b, b, from));
    return weft__coll_isend(op, src(op) + (size_t)to * b, b, to);
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, op->comm->size - 1, post, NULL);
}

/* Engine side. */
static weft_status_t start(weft__op_t *op)
{
    int p = op->comm->size, r = op->comm->rank;
    size_t b = op->bytes;
    if (b == 0) return WEFT_SUCCESS;
    if (op->sendbuf == op->recvbuf) {
        if (p == 1) return WEFT_SUCCESS;
        WEFT__CHECK(weft__coll_alloc_tmp(op, (size_t)p * b));
        memcpy(op->tmp, op->recvbuf, (size_t)p * b);
    } else {
        memcpy((char *)op->recvbuf + (size_t)r * b, (const char *)op->sendbuf + (size_t)r * b, b);
    }
    return step(op);
}

const weft__algo_impl_t weft__alltoall_pairwise_impl = {
    .id = WEFT_ALGO_PAIRWISE, .kind = WEFT__OP_ALLTOALL, .cost = cost,
    .start = start, .step = step, .cleanup = weft__coll_free_tmp,
};
