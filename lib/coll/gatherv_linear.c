/*
 * gatherv_linear.c - gatherv straight to the root: every rank sends its
 * block (its own length) to the root, which receives them WEFT__MAX_XFER at
 * a time, each at its place (weft__vblocks_t, the root's only). Empty blocks
 * still travel (as empty messages), so that a length the root does not
 * expect fails on a truncated receive instead of waiting.
 *
 * Cost (p ranks, n bytes per block on average): (p-1).alpha + (p-1).n.beta
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
    const int p = op->comm->size, r = op->comm->rank;
    if (r != op->root) return k == 0 ? weft__coll_isend(op, op->sendbuf, op->bytes, op->root) : WEFT_SUCCESS;
    const weft__vblocks_t *v = op->arg;
    for (int i = 1 + k * WEFT__MAX_XFER; i < p && i <= (k + 1) * WEFT__MAX_XFER; i++) {
        const int from = (op->root + i) % p;
        WEFT__CHECK(weft__coll_irecv(op, (char *)op->recvbuf + v->recv_off[from], v->recv_len[from],
                                     from));
    }
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, weft__linear_rounds(op->comm->size), post, NULL);
}

/* Engine side: the root's own block into place (unless in place). */
static weft_status_t start(weft__op_t *op)
{
    if (op->comm->rank == op->root) {
        const weft__vblocks_t *v = op->arg;
        char *own = (char *)op->recvbuf + v->recv_off[op->root];
        if (v->recv_len[op->root] && op->sendbuf != own)
            memcpy(own, op->sendbuf, v->recv_len[op->root]);
    }
    return step(op);
}

const weft__algo_impl_t weft__gatherv_linear_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_GATHERV, .cost = cost,
    .start = start, .step = step, .cleanup = NULL,
};
