/*
 * alltoallv_pairwise.c - alltoallv by pairwise exchange: in round s
 * (1..p-1) a rank sends its block for rank r+s and receives the block of
 * rank r-s, each at its own length and place (weft__vblocks_t). Empty
 * blocks still travel (as empty messages), so that ranks that disagree on
 * a length fail on a truncated receive instead of waiting.
 *
 * Cost (p ranks, n bytes per block on average): (p-1).alpha + (p-1).n.beta
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
    const weft__vblocks_t *v = op->arg;
    int p = op->comm->size, r = op->comm->rank, s = k + 1;
    int to = (r + s) % p, from = weft__mod(r - s, p);
    WEFT__CHECK(weft__coll_irecv(op, (char *)op->recvbuf + v->recv_off[from], v->recv_len[from], from));
    return weft__coll_isend(op, src(op) + v->send_off[to], v->send_len[to], to);
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, op->comm->size - 1, post, NULL);
}

/* Engine side. In place the blocks to send are copied first: a block that
 * arrives may overwrite one not yet sent. */
static weft_status_t start(weft__op_t *op)
{
    const weft__vblocks_t *v = op->arg;
    const int p = op->comm->size, r = op->comm->rank;
    if (op->sendbuf == op->recvbuf) {
        if (p == 1) return WEFT_SUCCESS;
        if (v->recv_extent > 0) {
            WEFT__CHECK(weft__coll_alloc_tmp(op, v->recv_extent));
            memcpy(op->tmp, op->recvbuf, v->recv_extent);
        }
    } else if (v->recv_len[r] > 0) {
        memcpy((char *)op->recvbuf + v->recv_off[r], (const char *)op->sendbuf + v->send_off[r],
               v->recv_len[r]);
    }
    return step(op);
}

const weft__algo_impl_t weft__alltoallv_pairwise_impl = {
    .id = WEFT_ALGO_PAIRWISE, .kind = WEFT__OP_ALLTOALLV, .cost = cost,
    .start = start, .step = step, .cleanup = weft__coll_free_tmp,
};
