/*
 * reduce_scatter_recursive_halving.c - reduce_scatter (equal blocks) by
 * recursive halving: in round k a rank keeps half of its current range of
 * blocks, sends the other half to the rank pof2/2^(k+1) away and adds what
 * that rank sends for the kept half. A non-power-of-two group folds first
 * (the even rank of each of the first rem = p - pof2 pairs sends its whole
 * vector to its odd neighbour) and unfolds at the end (the odd rank sends
 * the even one its finished block).
 *
 * Cost (p ranks, n bytes per result block), p a power of two:
 *   lg p.alpha + (p-1).n.beta + (p-1).n.gamma
 * otherwise: (lg pof2 + 2).alpha + (2p-1).n.beta + (2p-1).n.gamma (about)
 */
#include "coll_util.h"

typedef struct rs_halving {
    int lo, hi; /* current range of new ranks whose blocks this rank reduces */
} rs_halving_t;
_Static_assert(sizeof(rs_halving_t) <= WEFT__PRIV_BYTES, "priv too small");

static double cost(int p, size_t n, const weft__cost_t *c)
{
    int pof2 = 1 << weft__floor_log2(p), lg = weft__floor_log2(p);
    double t = lg * c->alpha + (double)(p - 1) * (double)n * (c->beta + c->gamma);
    if (pof2 != p) t += 2 * c->alpha + (double)p * (double)n * (c->beta + c->gamma) + n * c->beta;
    return t;
}

/* tmp = [accumulator: p blocks | receive buffer: p blocks] */
static char *accb(weft__op_t *op) { return op->tmp; }
static char *rbuf(weft__op_t *op) { return (char *)op->tmp + (size_t)op->comm->size * op->bytes; }

/* Rounds: 0 fold, 1..lg pof2 halving, lg pof2 + 1 unfold. */
static weft_status_t post(weft__op_t *op, int k)
{
    rs_halving_t *s = (rs_halving_t *)op->priv;
    weft__comm_t *c = op->comm;
    int p = c->size, r = c->rank, rem = p - c->pof2, lg = weft__floor_log2(c->pof2);
    int nr = weft__fold_newrank(r, rem);
    size_t b = op->bytes;

    if (k == 0) {
        if (r < 2 * rem) {
            if (r & 1) return weft__coll_irecv(op, rbuf(op), (size_t)p * b, r - 1);
            return weft__coll_isend(op, accb(op), (size_t)p * b, r + 1);
        }
        return WEFT_SUCCESS;
    }
    if (k == lg + 1) {
        if (r < 2 * rem) {
            if (r & 1) return weft__coll_isend(op, accb(op) + (size_t)(r - 1) * b, b, r - 1);
            return weft__coll_irecv(op, op->recvbuf, b, r + 1);
        }
        return WEFT_SUCCESS;
    }
    if (nr < 0) return WEFT_SUCCESS;
    int mask = c->pof2 >> k, mid = s->lo + (s->hi - s->lo) / 2;
    int keep_lo, keep_hi, give_lo, give_hi;
    if (nr < mid) { keep_lo = s->lo; keep_hi = mid; give_lo = mid; give_hi = s->hi; }
    else { keep_lo = mid; keep_hi = s->hi; give_lo = s->lo; give_hi = mid; }
    int peer = weft__fold_real(nr ^ mask, rem);
    size_t klo = (size_t)weft__fold_first(keep_lo, rem) * b, khi = (size_t)weft__fold_first(keep_hi, rem) * b;
    size_t glo = (size_t)weft__fold_first(give_lo, rem) * b, ghi = (size_t)weft__fold_first(give_hi, rem) * b;
    WEFT__CHECK(weft__coll_irecv(op, rbuf(op) + klo, khi - klo, peer));
    WEFT__CHECK(weft__coll_isend(op, accb(op) + glo, ghi - glo, peer));
    s->lo = keep_lo;
    s->hi = keep_hi;
    return WEFT_SUCCESS;
}

static weft_status_t after(weft__op_t *op, int k)
{
    rs_halving_t *s = (rs_halving_t *)op->priv;
    weft__comm_t *c = op->comm;
    int p = c->size, r = c->rank, rem = p - c->pof2, lg = weft__floor_log2(c->pof2);
    size_t b = op->bytes;
    if (k == 0) {
        if (r < 2 * rem && (r & 1))
            weft__reduce(accb(op), rbuf(op), (size_t)p * op->count, op->dtype, op->rop);
    } else if (k <= lg) {
        if (weft__fold_newrank(r, rem) >= 0) {
            size_t lo = (size_t)weft__fold_first(s->lo, rem), hi = (size_t)weft__fold_first(s->hi, rem);
            weft__reduce(accb(op) + lo * b, rbuf(op) + lo * b, (hi - lo) * op->count, op->dtype,
                         op->rop);
        }
    } else if (!(r < 2 * rem && !(r & 1))) {
        memcpy(op->recvbuf, accb(op) + (size_t)r * b, b);
    }
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, weft__floor_log2(op->comm->pof2) + 2, post, after);
}

/* Engine side. */
static weft_status_t start(weft__op_t *op)
{
    rs_halving_t *s = (rs_halving_t *)op->priv;
    size_t total = (size_t)op->comm->size * op->bytes;
    if (op->bytes == 0) return WEFT_SUCCESS;
    WEFT__CHECK(weft__coll_alloc_tmp(op, 2 * total));
    memcpy(accb(op), op->sendbuf, total);
    s->lo = 0;
    s->hi = op->comm->pof2;
    return step(op);
}

const weft__algo_impl_t weft__reduce_scatter_recursive_halving_impl = {
    .id = WEFT_ALGO_RECURSIVE_HALVING, .kind = WEFT__OP_REDUCE_SCATTER, .cost = cost,
    .start = start, .step = step, .cleanup = weft__coll_free_tmp,
};
