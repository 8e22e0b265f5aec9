/*
 * bcast_scatter_allgather.c - broadcast for large buffers (van de Geijn):
 * the buffer is cut into p pieces, scattered down a binomial tree (each rank
 * gets the pieces of its subtree), then a ring allgather completes it.
 *
 * Cost (p ranks, n bytes):
 *   (ceil(lg p) + p - 1).alpha + 2.(p-1)/p.n.beta
 * (bandwidth-optimal; more messages than the binomial tree).
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return (weft__ceil_log2(p) + p - 1) * c->alpha + 2.0 * (p - 1) / p * (double)n * c->beta;
}

static int rel(weft__op_t *op) { return weft__mod(op->comm->rank - op->root, op->comm->size); }
static int real(weft__op_t *op, int relrank)
{
    return (weft__mod(relrank, op->comm->size) + op->root) % op->comm->size;
}
static size_t piece_bytes(weft__op_t *op) { return (op->bytes + op->comm->size - 1) / op->comm->size; }

/* Post a transfer of pieces [a, b) (relative numbering), skipping empty ones. */
static weft_status_t xfer(weft__op_t *op, int send, int a, int b, int peer_rel)
{
    size_t lo, hi;
    int p = op->comm->size;
    if (b > p) b = p;
    weft__piece_range(op->bytes, piece_bytes(op), a, b, &lo, &hi);
    if (hi <= lo) return WEFT_SUCCESS;
    char *buf = (char *)op->recvbuf + lo;
    if (send) return weft__coll_isend(op, buf, hi - lo, real(op, peer_rel));
    return weft__coll_irecv(op, buf, hi - lo, real(op, peer_rel));
}

/* Rounds: 0 receive my subtree's pieces, 1 send the children theirs,
 * 2 .. p ring allgather steps. */
static weft_status_t post(weft__op_t *op, int k)
{
    int p = op->comm->size, rr = rel(op);
    int top = rr ? weft__lowbit(rr) : (1 << weft__ceil_log2(p));
    if (k == 0) return rr ? xfer(op, 0, rr, rr + top, rr - top) : WEFT_SUCCESS;
    if (k == 1) {
        for (int m = top >> 1; m > 0; m >>= 1)
            if (rr + m < p) WEFT__CHECK(xfer(op, 1, rr + m, rr + 2 * m, rr + m));
        return WEFT_SUCCESS;
    }
    int s = k - 2, sp = weft__mod(rr - s, p), rp = weft__mod(rr - s - 1, p);
    WEFT__CHECK(xfer(op, 0, rp, rp + 1, rr - 1));
    return xfer(op, 1, sp, sp + 1, rr + 1);
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0 || op->comm->size == 1) return WEFT_SUCCESS;
    return weft__rounds_drive(op, op->comm->size + 1, post, NULL);
}

const weft__algo_impl_t weft__bcast_scatter_allgather_impl = {
    .id = WEFT_ALGO_SCATTER_ALLGATHER, .kind = WEFT__OP_BCAST, .cost = cost,
    .start = step, .step = step, .cleanup = NULL,
};
