/*
 * scatterv_linear.c - scatterv straight from the root: the root sends every
 * rank its block (its own length and place, weft__vblocks_t, the root's
 * only), WEFT__MAX_XFER at a time; each other rank receives once. Empty
 * blocks still travel (as empty messages), so that a length a rank does not
 * expect fails on a truncated receive instead of waiting.
 *
 * Cost (p ranks, n bytes per block on average): (p-1).alpha + (p-1).n.beta
 * (at the root)
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (p - 1) * (c->alpha + (double)n * c->beta);
}

static weft_status_t post(weft__op_t *op, int k)
{
    const int p = op->comm->size, r = op->comm->rank;
    if (r != op->root) return k == 0 ? weft__coll_irecv(op, op->recvbuf, op->bytes, op->root) : WEFT_SUCCESS;
    const weft__vblocks_t *v = op->arg;
    for (int i = 1 + k * WEFT__MAX_XFER; i < p && i <= (k + 1) * WEFT__MAX_XFER; i++) {
        const int to = (op->root + i) % p;
        WEFT__CHECK(weft__coll_isend(op, (const char *)op->sendbuf + v->send_off[to], v->send_len[to],
                                     to));
    }
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, weft__linear_rounds(op->comm->size), post, NULL);
}

/* Engine side. In place at the root, recvbuf already points at its block. */
static weft_status_t start(weft__op_t *op)
{
    if (op->comm->rank == op->root) {
        const weft__vblocks_t *v = op->arg;
        const char *own = (const char *)op->sendbuf + v->send_off[op->root];
        if (v->send_len[op->root] && op->recvbuf != own)
            memcpy(op->recvbuf, own, v->send_len[op->root]);
    }
    return step(op);
}

const weft__algo_impl_t weft__scatterv_linear_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_SCATTERV, .cost = cost,
    .start = start, .step = step, .cleanup = NULL,
};
