/*
 * reduce_scatterv_ring.c - reduce_scatterv (blocks of their own lengths,
 * laid end to end in the input; weft__vblocks_t's receive arrays) by a
 * ring, as reduce_scatter_ring: in round s a rank sends its partial sum of
 * block r-s-1 to the right and adds the left neighbour's partial sum of
 * block r-s-2 to its own input; after p-1 rounds block r is complete on
 * rank r. Empty blocks still travel (as empty messages), so that ranks that
 * disagree on a length fail on a truncated receive instead of waiting.
 *
 * Cost (p ranks, n bytes per result block on average):
 *   (p-1).alpha + (p-1).n.beta + (p-1).n.gamma
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * c->alpha + (double)(p - 1) * (double)n * (c->beta + c->gamma);
}

/* Private state: the longest block's bytes (each slot of tmp). */
typedef struct rsv {
    size_t slot;
} rsv_t;

/* tmp = [recv block | partial A | partial B], a slot each */
static rsv_t *st_of(weft__op_t *op) { return (rsv_t *)(void *)op->priv; }
static char *rbuf(weft__op_t *op) { return op->tmp; }
static char *acc(weft__op_t *op, int s)
{
    return (char *)op->tmp + (size_t)(1 + (s & 1)) * st_of(op)->slot;
}
static const weft__vblocks_t *blocks(const weft__op_t *op) { return op->arg; }
static const char *in_blk(weft__op_t *op, int b)
{
    return (const char *)op->sendbuf + blocks(op)->recv_off[b];
}
static size_t elems(const weft__op_t *op, int b)
{
    return blocks(op)->recv_len[b] / weft__dtype_size(op->dtype);
}

static weft_status_t post(weft__op_t *op, int s)
{
    const int p = op->comm->size, r = op->comm->rank;
    const int sb = weft__mod(r - s - 1, p), rb = weft__mod(r - s - 2, p);
    const char *src = s == 0 ? in_blk(op, sb) : acc(op, s - 1);
    WEFT__CHECK(weft__coll_irecv(op, rbuf(op), blocks(op)->recv_len[rb], weft__mod(r - 1, p)));
    return weft__coll_isend(op, src, blocks(op)->recv_len[sb], (r + 1) % p);
}

static weft_status_t after(weft__op_t *op, int s)
{
    const int p = op->comm->size, r = op->comm->rank, b = weft__mod(r - s - 2, p);
    weft__reduce3(acc(op, s), in_blk(op, b), rbuf(op), elems(op, b), op->dtype, op->rop);
    /* last round: block r is complete; through tmp, since in place the
     * output (recvbuf's start) may overlap the input block */
    if (s == p - 2 && blocks(op)->recv_len[r] > 0)
        memcpy(op->recvbuf, acc(op, s), blocks(op)->recv_len[r]);
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
    const int p = op->comm->size;
    const weft__vblocks_t *v = blocks(op);
    if (p == 1) {
        if (v->recv_len[0] && op->sendbuf != op->recvbuf)
            memcpy(op->recvbuf, op->sendbuf, v->recv_len[0]);
        return WEFT_SUCCESS;
    }
    size_t slot = 0;
    for (int b = 0; b < p; b++)
        if (v->recv_len[b] > slot) slot = v->recv_len[b];
    st_of(op)->slot = slot;
    /* at least a byte: empty blocks are received into a real address */
    WEFT__CHECK(weft__coll_alloc_tmp(op, slot > 0 ? 3 * slot : 1));
    return step(op);
}

const weft__algo_impl_t weft__reduce_scatterv_ring_impl = {
    .id = WEFT_ALGO_RING, .kind = WEFT__OP_REDUCE_SCATTERV, .cost = cost,
    .start = start, .step = step, .cleanup = weft__coll_free_tmp,
};
