/*
 * allgatherv_ring.c - allgatherv by a ring: in round s every rank passes
 * the block it received in round s-1 (its own in round 0) to its right
 * neighbour, each block at its own length and place (weft__vblocks_t).
 * Zero-length blocks still travel (as empty messages), so that ranks that
 * disagree on a length fail on a truncated receive instead of waiting.
 *
 * Cost (p ranks, n bytes per rank's block on average): (p-1).alpha +
 * (p-1).n.beta; the round of the longest block sets each round's pace.
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * c->alpha + (double)(p - 1) * (double)n * c->beta;
}

static weft_status_t post(weft__op_t *op, int s)
{
    const weft__vblocks_t *v = op->arg;
    int p = op->comm->size, r = op->comm->rank;
    char *rb = op->recvbuf;
    int sblk = weft__mod(r - s, p), rblk = weft__mod(r - s - 1, p);
    WEFT__CHECK(weft__coll_irecv(op, rb + v->recv_off[rblk], v->recv_len[rblk], weft__mod(r - 1, p)));
    return weft__coll_isend(op, rb + v->recv_off[sblk], v->recv_len[sblk], (r + 1) % p);
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0) return WEFT_SUCCESS; /* every block empty, on every rank */
    return weft__rounds_drive(op, op->comm->size - 1, post, NULL);
}

/* Engine side: own block into place (unless in place), then the rounds. */
static weft_status_t start(weft__op_t *op)
{
    const weft__vblocks_t *v = op->arg;
    const int r = op->comm->rank;
    char *own = (char *)op->recvbuf + v->recv_off[r];
    if (v->recv_len[r] && op->sendbuf != own) memcpy(own, op->sendbuf, v->recv_len[r]);
    return step(op);
}

const weft__algo_impl_t weft__allgatherv_ring_impl = {
    .id = WEFT_ALGO_RING, .kind = WEFT__OP_ALLGATHERV, .cost = cost,
    .start = start, .step = step, .cleanup = NULL,
};
