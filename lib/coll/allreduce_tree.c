/*
 * allreduce_tree.c - allreduce by a binomial-tree reduce to rank 0 followed
 * by a binomial-tree broadcast from rank 0.
 *
 * Cost = 2 lg p alpha + 2 n lg p beta + n lg p gamma   (lg p rounded up)
 *
 * The tree: the parent of rank r > 0 is r - lowbit(r); its children are
 * r + m for m = lowbit(r)/2, ..., 2, 1 (for rank 0: every power of two
 * below p) when r + m < p. Reduce: rank r combines its children in the
 * order r+1, r+2, r+4, ... (one child per round, into recvbuf; the first
 * reduction reads sendbuf: no copy), then sends its partial result to its
 * parent. Broadcast: receive the result from the parent into recvbuf, send
 * it to every child at once. The result is computed once, at rank 0, and
 * copied, so every rank holds identical bits.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"
#include "algo.h"

enum { TR_REDUCE = 0, TR_SENT_UP, TR_GOT_RESULT, TR_DONE };

typedef struct tree_state {
    int mask;     /* reduce: distance of the child being received, 0 at first */
    int have;     /* 1 once recvbuf holds this rank's partial result */
} tree_state_t;
_Static_assert(sizeof(tree_state_t) <= WEFT__PRIV_BYTES, "tree_state_t does not fit op->priv");

/* Lowest set bit of r. Pure. */
static int lowbit(int r) { return r & -r; }

/* Thread contract: engine side. Never blocks. */
static weft_status_t tree_step(weft__op_t *op)
{
    tree_state_t *s = (tree_state_t *)op->priv;
    const int rank = op->comm->rank, p = op->comm->size;
    weft_status_t st;

    for (;;) {
        if (op->nxfer > 0) {
            st = weft__coll_test(op);
            if (st != WEFT_SUCCESS) return st;
        }
        switch (op->phase) {
        case TR_REDUCE:
            if (s->mask > 0) { /* child rank + mask has delivered */
                weft__reduce3(op->recvbuf, s->have ? op->recvbuf : op->sendbuf, op->tmp,
                              op->count, op->dtype, op->rop);
                s->have = 1;
                s->mask <<= 1;
            } else {
                s->mask = 1;
            }
            /* Next child, or send up when bit `mask` of my rank is set. */
            while (s->mask < p && !(rank & s->mask) && rank + s->mask >= p) s->mask <<= 1;
            if (s->mask < p && !(rank & s->mask)) {
                WEFT__CHECK(weft__coll_irecv(op, op->tmp, op->bytes, rank + s->mask));
                continue;
            }
            if (rank == 0) { /* root: reduced; broadcast */
                op->phase = TR_GOT_RESULT;
                continue;
            }
            WEFT__CHECK(weft__coll_isend(op, s->have ? op->recvbuf : op->sendbuf, op->bytes,
                                         rank - lowbit(rank)));
            op->phase = TR_SENT_UP;
            continue;
        case TR_SENT_UP: /* the send buffer is free again (in place: recvbuf) */
            WEFT__CHECK(weft__coll_irecv(op, op->recvbuf, op->bytes, rank - lowbit(rank)));
            op->phase = TR_GOT_RESULT;
            continue;
        case TR_GOT_RESULT: {
            int top;
            if (rank == 0) {
                top = 1;
                while (top < p) top <<= 1;
            } else {
                top = lowbit(rank);
            }
            for (int m = top >> 1; m >= 1; m >>= 1)
                if (rank + m < p) WEFT__CHECK(weft__coll_isend(op, op->recvbuf, op->bytes, rank + m));
            op->phase = TR_DONE;
            continue;
        }
        case TR_DONE:
            return WEFT_SUCCESS;
        default:
            WEFT__ERROR("allreduce tree: bad phase %d", op->phase);
            return WEFT_ERR_INTERNAL;
        }
    }
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t tree_start(weft__op_t *op)
{
    tree_state_t *s = (tree_state_t *)op->priv;
    const int p = op->comm->size, rank = op->comm->rank;

    memset(s, 0, sizeof(*s));
    op->phase = TR_REDUCE;
    if (weft__allreduce_trivial(op)) return WEFT_SUCCESS;
    /* Only ranks with a child need scratch: even ranks below p - 1. */
    if (rank % 2 == 0 && rank + 1 < p) {
        WEFT__CHECK(weft__coll_alloc_tmp(op, op->bytes));
    }
    return tree_step(op);
}

/* Thread contract: any thread (pure function). */
static double tree_cost(int p, size_t n, const weft__cost_t *c)
{
    if (p <= 1) return 0.0;
    int lg = 0;
    while ((1 << lg) < p) lg++;
    double nb = (double)n;
    return 2.0 * lg * (c->alpha + nb * c->beta) + lg * nb * c->gamma;
}

const weft__algo_impl_t weft__allreduce_tree_impl = {
    .id = WEFT_ALGO_TREE,
    .kind = WEFT__OP_ALLREDUCE,
    .cost = tree_cost,
    .supports = NULL,
    .start = tree_start,
    .step = tree_step,
    .cleanup = weft__coll_free_tmp,
};
