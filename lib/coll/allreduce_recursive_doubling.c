/*
 * allreduce_recursive_doubling.c - allreduce by recursive doubling.
 *
 * Cost = lg p alpha + n lg p beta + n lg p gamma        (p a power of two)
 *      + 2 alpha + 2 n beta + n gamma                   (otherwise: fold/unfold)
 *
 * p' = the largest power of two <= p, rem = p - p'. Fold: among the first
 * 2 rem ranks, each even rank sends its vector to the odd rank above it and
 * waits; the odd rank reduces. The p' remaining ranks (new rank = rank / 2
 * below 2 rem, rank - rem above) run lg p' rounds: in round k exchange the
 * whole vector with new rank ^ 2^k and reduce. Unfold: each odd rank of the
 * first 2 rem sends the result back to its even partner.
 *
 * Every member of an aligned group of 2^k new ranks holds the same bits
 * after round k (the reduction is bitwise symmetric), so all ranks end with
 * identical bits. The first reduction reads sendbuf and writes recvbuf
 * (weft__reduce3), so no copy is made; recvbuf is the only output.
 *
 * Over a transport that unpacks piecewise (UCX), a round's message of at most
 * WEFT_FUSED_REDUCE_MAX bytes is reduced as it arrives (weft__rr_t): result =
 * current OP message, straight from the transport's buffers, with no scratch
 * copy. The result then goes to the buffer this round does not send from
 * (recvbuf, or tmp when the current data is recvbuf), and is copied to recvbuf
 * after the last round if it ended in tmp.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"
#include "algo.h"

enum { RD_FOLD = 0, RD_FOLD_SENT, RD_FOLD_RECVD, RD_ROUND, RD_UNFOLD, RD_WAIT_RESULT,
       RD_DONE };

typedef struct rd_state {
    int newrank;    /* rank among the p' participants, -1 for a folded-away rank */
    int rem;        /* p - p' */
    int mask;       /* current round's distance */
    int partner;    /* real rank of the current round's partner */
    int fused;      /* rounds reduce on arrival (weft__coll_irecv_reduce) */
    void *res;      /* this rank's partial result once there is one (recvbuf,
                       or tmp after a fused round that wrote it), else NULL */
    weft__rr_t rr;  /* the current round's fused receive */
} rd_state_t;
_Static_assert(sizeof(rd_state_t) <= WEFT__PRIV_BYTES, "rd_state_t does not fit op->priv");

/* Real rank of participant `newrank` after the fold. Pure; any thread. */
static int real_rank(int newrank, int rem) { return newrank < rem ? 2 * newrank + 1 : newrank + rem; }

/* Current data of this rank: its partial result once a reduction wrote one,
 * else sendbuf. Engine side. */
static const void *cur(const weft__op_t *op, const rd_state_t *s)
{
    return s->res ? s->res : op->sendbuf;
}

/* recvbuf = current OP tmp (the message received into tmp). Engine side. */
static void absorb(weft__op_t *op, rd_state_t *s)
{
    weft__reduce3(op->recvbuf, cur(op, s), op->tmp, op->count, op->dtype, op->rop);
    s->res = op->recvbuf;
}

/* Post round `mask`'s exchange with s->partner. Engine side. */
static weft_status_t post_round(weft__op_t *op, rd_state_t *s)
{
    const void *c = cur(op, s);
    if (s->fused) { /* result = c OP message, into the buffer not being sent */
        void *dst = c == op->recvbuf ? op->tmp : op->recvbuf;
        WEFT__CHECK(weft__coll_irecv_reduce(op, &s->rr, dst, c, op->count, s->partner));
    } else {
        WEFT__CHECK(weft__coll_irecv(op, op->tmp, op->bytes, s->partner));
    }
    return weft__coll_isend(op, c, op->bytes, s->partner);
}

/* Round `mask`'s exchange completed: fold the message in. Engine side. */
static weft_status_t end_round(weft__op_t *op, rd_state_t *s)
{
    if (!s->fused) {
        absorb(op, s);
        return WEFT_SUCCESS;
    }
    if (weft__rr_failed(&s->rr)) return WEFT_ERR_INTERNAL;
    s->res = s->rr.out;
    return WEFT_SUCCESS;
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t rd_step(weft__op_t *op)
{
    rd_state_t *s = (rd_state_t *)op->priv;
    const int rank = op->comm->rank;
    const int pof2 = op->comm->pof2;
    weft_status_t st;

    for (;;) {
        if (op->nxfer > 0) {
            st = weft__coll_test(op);
            if (st != WEFT_SUCCESS) return st; /* in progress, or an error */
        }
        switch (op->phase) {
        case RD_FOLD:
            if (rank < 2 * s->rem) {
                if (rank % 2 == 0) { /* give my vector away, get the result later */
                    WEFT__CHECK(weft__coll_isend(op, op->sendbuf, op->bytes, rank + 1));
                    op->phase = RD_FOLD_SENT;
                } else {
                    WEFT__CHECK(weft__coll_irecv(op, op->tmp, op->bytes, rank - 1));
                    op->phase = RD_FOLD_RECVD;
                }
                continue;
            }
            op->phase = RD_ROUND;
            continue;
        case RD_FOLD_SENT: /* send complete (in place: recvbuf is free again) */
            WEFT__CHECK(weft__coll_irecv(op, op->recvbuf, op->bytes, rank + 1));
            op->phase = RD_DONE;
            continue;
        case RD_FOLD_RECVD:
            absorb(op, s);
            op->phase = RD_ROUND;
            continue;
        case RD_ROUND:
            if (s->mask > 0) { /* the exchange of round `mask` has completed */
                WEFT__CHECK(end_round(op, s));
                s->mask <<= 1;
            } else {
                s->mask = 1;
            }
            if (s->mask < pof2) {
                s->partner = real_rank(s->newrank ^ s->mask, s->rem);
                WEFT__CHECK(post_round(op, s));
                continue;
            }
            if (s->res && s->res != op->recvbuf) { /* the last fused round wrote tmp */
                memcpy(op->recvbuf, s->res, op->bytes);
                s->res = op->recvbuf;
            }
            op->phase = RD_UNFOLD;
            continue;
        case RD_UNFOLD:
            if (!s->res) { /* p' == 1 and no fold: only possible for p == 1 */
                if (op->recvbuf != op->sendbuf) memcpy(op->recvbuf, op->sendbuf, op->bytes);
                s->res = op->recvbuf;
            }
            if (rank < 2 * s->rem) /* odd rank: hand the result back */
                WEFT__CHECK(weft__coll_isend(op, op->recvbuf, op->bytes, rank - 1));
            op->phase = RD_DONE;
            continue;
        case RD_DONE:
            return WEFT_SUCCESS;
        default:
            WEFT__ERROR("allreduce recursive_doubling: bad phase %d", op->phase);
            return WEFT_ERR_INTERNAL;
        }
    }
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t rd_start(weft__op_t *op)
{
    rd_state_t *s = (rd_state_t *)op->priv;
    const int p = op->comm->size, rank = op->comm->rank;

    memset(s, 0, sizeof(*s));
    op->phase = RD_FOLD;
    op->stepno = 0;
    if (weft__allreduce_trivial(op)) return WEFT_SUCCESS;
    s->rem = p - op->comm->pof2;
    s->newrank = rank < 2 * s->rem ? (rank % 2 ? rank / 2 : -1) : rank - s->rem;
    if (s->newrank >= 0) {
        WEFT__CHECK(weft__coll_alloc_tmp(op, op->bytes));
        s->fused = weft__coll_can_recv_reduce(op, op->bytes);
    }
    return rd_step(op);
}

/* Thread contract: any thread (pure function). */
static double rd_cost(int p, size_t n, const weft__cost_t *c)
{
    if (p <= 1) return 0.0;
    int lg = 0, pof2 = 1;
    while (pof2 * 2 <= p) { pof2 *= 2; lg++; }
    double nb = (double)n;
    double t = lg * (c->alpha + nb * c->beta + nb * c->gamma);
    if (pof2 != p) t += 2.0 * (c->alpha + nb * c->beta) + nb * c->gamma;
    return t;
}

const weft__algo_impl_t weft__allreduce_recursive_doubling_impl = {
    .id = WEFT_ALGO_RECURSIVE_DOUBLING,
    .kind = WEFT__OP_ALLREDUCE,
    .cost = rd_cost,
    .supports = NULL,
    .start = rd_start,
    .step = rd_step,
    .cleanup = weft__coll_free_tmp,
};
