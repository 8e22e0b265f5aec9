/*
 * allgather_recursive_doubling.c - allgather by recursive doubling: in round
 * k a rank swaps everything it holds with the rank 2^k away, so the held
 * range doubles. A non-power-of-two group first folds: with rem = p - pof2,
 * the even rank of each of the first rem pairs hands its block to its odd
 * neighbour, sits out, and gets the whole result back at the end.
 *
 * Cost (p ranks, n bytes per rank's block), p a power of two:
 *   lg p.alpha + (p-1).n.beta
 * otherwise (pof2 = largest power of two <= p):
 *   (lg pof2 + 2).alpha + (p-1).n.beta + (p+1).n.beta
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    int pof2 = 1 << weft__floor_log2(p), lg = weft__floor_log2(p);
    double t = lg * c->alpha + (double)(p - 1) * (double)n * c->beta;
    if (pof2 != p) t += 2 * c->alpha + (double)(p + 1) * (double)n * c->beta;
    return t;
}

/* Rounds: 0 fold, 1..lg pof2 doubling, lg pof2 + 1 unfold. */
static weft_status_t post(weft__op_t *op, int k)
{
    weft__comm_t *c = op->comm;
    int p = c->size, r = c->rank, pof2 = c->pof2, rem = p - pof2;
    int lg = weft__floor_log2(pof2), nr = weft__fold_newrank(r, rem);
    size_t b = op->bytes;
    char *rb = op->recvbuf;

    if (k == 0) { /* fold */
        if (r < 2 * rem) {
            if (r & 1) return weft__coll_irecv(op, rb + (size_t)(r - 1) * b, b, r - 1);
            return weft__coll_isend(op, rb + (size_t)r * b, b, r + 1);
        }
        return WEFT_SUCCESS;
    }
    if (k == lg + 1) { /* unfold: the odd rank of a pair returns everything */
        if (r < 2 * rem) {
            if (r & 1) return weft__coll_isend(op, rb, (size_t)p * b, r - 1);
            return weft__coll_irecv(op, rb, (size_t)p * b, r + 1);
        }
        return WEFT_SUCCESS;
    }
    if (nr < 0) return WEFT_SUCCESS;
    int mask = 1 << (k - 1);
    int base = nr & ~(mask - 1), pbase = base ^ mask, partner = nr ^ mask;
    size_t lo = (size_t)weft__fold_first(base, rem) * b;
    size_t hi = (size_t)weft__fold_first(base + mask, rem) * b;
    size_t plo = (size_t)weft__fold_first(pbase, rem) * b;
    size_t phi = (size_t)weft__fold_first(pbase + mask, rem) * b;
    int peer = weft__fold_real(partner, rem);
    WEFT__CHECK(weft__coll_irecv(op, rb + plo, phi - plo, peer));
    return weft__coll_isend(op, rb + lo, hi - lo, peer);
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    if (op->bytes == 0) return WEFT_SUCCESS;
    return weft__rounds_drive(op, weft__floor_log2(op->comm->pof2) + 2, post, NULL);
}

/* Engine side. */
static weft_status_t start(weft__op_t *op)
{
    char *own = (char *)op->recvbuf + (size_t)op->comm->rank * op->bytes;
    if (op->bytes && op->sendbuf != own) memcpy(own, op->sendbuf, op->bytes);
    return step(op);
}

const weft__algo_impl_t weft__allgather_recursive_doubling_impl = {
    .id = WEFT_ALGO_RECURSIVE_DOUBLING, .kind = WEFT__OP_ALLGATHER, .cost = cost,
    .start = start, .step = step, .cleanup = NULL,
};
