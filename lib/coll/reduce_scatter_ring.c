/*
 * reduce_scatter_ring.c - reduce_scatter (equal blocks) by a ring: in round
 * s a rank sends its partial sum of block r-s-1 to the right and adds the
 * left neighbour's partial sum of block r-s-2 to its own input; after p-1
 * rounds block r is complete on rank r.
 *
 * Cost (p ranks, n bytes per result block):
 *   (p-1).alpha + (p-1).n.beta + (p-1).n.gamma
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * c->alpha + (double)(p - 1) * (double)n * (c->beta + c->gamma);
}

/* tmp = [recv block | partial A | partial B] */
static char *rbuf(weft__op_t *op) { return op->tmp; }
static char *acc(weft__op_t *op, int s) { return (char *)op->tmp + (size_t)(1 + (s & 1)) * op->bytes; }
static const char *in_blk(weft__op_t *op, int blk)
{
    return (const char *)op->sendbuf + (size_t)blk * op->bytes;
}

static weft_status_t post(weft__op_t *op, int s)
{
    int p = op->comm->size, r = op->comm->rank;
    const char *src = s == 0 ? in_blk(op, weft__mod(r - 1, p)) : acc(op, s - 1);
    WEFT__CHECK(weft__coll_irecv(op, rbuf(op), op->bytes, weft__mod(r - 1, p)));
    return weft__coll_isend(op, src, op->bytes, (r + 1) % p);
}

static weft_status_t after(weft__op_t *op, int s)
{
    int p = op->comm->size, r = op->comm->rank;
    if (s < p - 2)
        weft__reduce3(acc(op, s), in_blk(op, weft__mod(r - s - 2, p)), rbuf(op), op->count,
                      op->dtype, op->rop);
    else /* last round: block r is complete */
        weft__reduce3(op->recvbuf, in_blk(op, r), rbuf(op), op->count, op->dtype, op->rop);
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, op->comm->size - 1, post, after);
}

/* Engine side. */
static weft_status_t start(weft__op_t *op)
{
    if (op->bytes == 0) return WEFT_SUCCESS;
    if (op->comm->size == 1) {
        if (op->sendbuf != op->recvbuf) memcpy(op->recvbuf, op->sendbuf, op->bytes);
        return WEFT_SUCCESS;
    }
    WEFT__CHECK(weft__coll_alloc_tmp(op, 3 * op->bytes));
    return step(op);
}

const weft__algo_impl_t weft__reduce_scatter_ring_impl = {
    .id = WEFT_ALGO_RING, .kind = WEFT__OP_REDUCE_SCATTER, .cost = cost,
    .start = start, .step = step, .cleanup = weft__coll_free_tmp,
};
