/*
 * allreduce_rabenseifner.c - allreduce by recursive halving (reduce-scatter)
 * then recursive doubling (allgather).
 *
 * Cost = 2 lg p alpha + 2 n (p-1)/p beta + n (p-1)/p gamma   (p a power of two)
 *      + 2 alpha + 2 n beta + n gamma                        (otherwise: fold/unfold)
 *
 * p' = largest power of two <= p, rem = p - p'. Fold as in recursive
 * doubling: among the first 2 rem ranks the even ones hand their vector to
 * the odd one above and wait for the result at the end.
 *
 * The vector is cut into p' blocks whose sizes differ by at most one
 * element (block i starts at i q + min(i, r), q = count / p', r = count % p').
 * Halving: with mask = p'/2, p'/4, ..., 1, a participant keeps the half of
 * its current window of blocks on its own side of bit `mask` of its new
 * rank, sends the other half to new rank ^ mask and reduces the half it
 * receives into recvbuf. It ends owning block `newrank`, fully reduced.
 * Doubling: with mask = 1, 2, ..., p'/2, exchange the current window with
 * new rank ^ mask (received straight into recvbuf) and merge the windows.
 * Each block is reduced at one rank only and then copied, so every rank
 * ends with identical bits. Empty windows (count < p') are skipped on both
 * sides alike.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"
#include "algo.h"

enum { RB_FOLD = 0, RB_FOLD_SENT, RB_FOLD_RECVD, RB_HALVE, RB_DOUBLE, RB_UNFOLD,
       RB_DONE };

typedef struct rb_state {
    int newrank;   /* -1 for a folded-away rank */
    int rem;
    int mask;      /* current distance, 0 before the first round of a phase */
    int lo, hi;    /* current window of blocks [lo, hi) */
    int klo, khi;  /* halving: the half being received and reduced */
    int have;      /* 1 once recvbuf holds all the data this rank needs (see cur) */
} rb_state_t;
_Static_assert(sizeof(rb_state_t) <= WEFT__PRIV_BYTES, "rb_state_t does not fit op->priv");

/* Real rank of participant `newrank` after the fold. Pure; any thread. */
static int real_rank(int newrank, int rem) { return newrank < rem ? 2 * newrank + 1 : newrank + rem; }

/* First element of block b of p' blocks. Pure; any thread. */
static size_t blk(const weft__op_t *op, int b)
{
    size_t q = op->count / (size_t)op->comm->pof2, r = op->count % (size_t)op->comm->pof2;
    return (size_t)b * q + ((size_t)b < r ? (size_t)b : r);
}

/* This rank's current data: recvbuf once written, else sendbuf. Engine side. */
static const char *cur(const weft__op_t *op, const rb_state_t *s)
{
    return s->have ? (const char *)op->recvbuf : (const char *)op->sendbuf;
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t rb_step(weft__op_t *op)
{
    rb_state_t *s = (rb_state_t *)op->priv;
    const int rank = op->comm->rank, pof2 = op->comm->pof2;
    const size_t es = op->count ? op->bytes / op->count : 0;
    char *rbuf = op->recvbuf;
    weft_status_t st;

    for (;;) {
        if (op->nxfer > 0) {
            st = weft__coll_test(op);
            if (st != WEFT_SUCCESS) return st;
        }
        switch (op->phase) {
        case RB_FOLD:
            if (rank < 2 * s->rem) {
                if (rank % 2 == 0) {
                    WEFT__CHECK(weft__coll_isend(op, op->sendbuf, op->bytes, rank + 1));
                    op->phase = RB_FOLD_SENT;
                } else {
                    WEFT__CHECK(weft__coll_irecv(op, op->tmp, op->bytes, rank - 1));
                    op->phase = RB_FOLD_RECVD;
                }
                continue;
            }
            op->phase = RB_HALVE;
            continue;
        case RB_FOLD_SENT:
            WEFT__CHECK(weft__coll_irecv(op, op->recvbuf, op->bytes, rank + 1));
            op->phase = RB_DONE;
            continue;
        case RB_FOLD_RECVD:
            weft__reduce3(op->recvbuf, op->sendbuf, op->tmp, op->count, op->dtype, op->rop);
            s->have = 1;
            op->phase = RB_HALVE;
            continue;
        case RB_HALVE: {
            if (s->mask > 0) { /* reduce the half received in this round */
                size_t a = blk(op, s->klo), b = blk(op, s->khi);
                if (b > a)
                    weft__reduce3(rbuf + a * es, cur(op, s) + a * es, op->tmp, b - a, op->dtype,
                                  op->rop);
                s->lo = s->klo;
                s->hi = s->khi;
                s->have = 1; /* the window we keep now lives in recvbuf */
                s->mask >>= 1;
            } else {
                s->mask = pof2 >> 1;
                s->lo = 0;
                s->hi = pof2;
            }
            if (s->mask == 0) { /* own block newrank is complete */
                op->phase = RB_DOUBLE;
                continue;
            }
            int mid = s->lo + (s->hi - s->lo) / 2, slo, shi;
            if (s->newrank & s->mask) { s->klo = mid; s->khi = s->hi; slo = s->lo; shi = mid; }
            else { s->klo = s->lo; s->khi = mid; slo = mid; shi = s->hi; }
            int peer = real_rank(s->newrank ^ s->mask, s->rem);
            size_t ka = blk(op, s->klo), kb = blk(op, s->khi);
            size_t sa = blk(op, slo), sb = blk(op, shi);
            if (kb > ka) WEFT__CHECK(weft__coll_irecv(op, op->tmp, (kb - ka) * es, peer));
            if (sb > sa) WEFT__CHECK(weft__coll_isend(op, cur(op, s) + sa * es, (sb - sa) * es, peer));
            continue;
        }
        case RB_DOUBLE: {
            if (s->mask > 0) { /* windows merged: partner's window arrived */
                int w = s->hi - s->lo;
                if (s->newrank & s->mask) s->lo -= w; else s->hi += w;
                s->mask <<= 1;
            } else {
                s->mask = 1;
            }
            if (s->mask >= pof2) {
                op->phase = RB_UNFOLD;
                continue;
            }
            int w = s->hi - s->lo, plo, phi;
            if (s->newrank & s->mask) { plo = s->lo - w; phi = s->lo; }
            else { plo = s->hi; phi = s->hi + w; }
            int peer = real_rank(s->newrank ^ s->mask, s->rem);
            size_t ra = blk(op, plo), rb = blk(op, phi), ma = blk(op, s->lo), mb = blk(op, s->hi);
            if (rb > ra) WEFT__CHECK(weft__coll_irecv(op, rbuf + ra * es, (rb - ra) * es, peer));
            if (mb > ma) WEFT__CHECK(weft__coll_isend(op, rbuf + ma * es, (mb - ma) * es, peer));
            continue;
        }
        case RB_UNFOLD:
            if (rank < 2 * s->rem)
                WEFT__CHECK(weft__coll_isend(op, op->recvbuf, op->bytes, rank - 1));
            op->phase = RB_DONE;
            continue;
        case RB_DONE:
            return WEFT_SUCCESS;
        default:
            WEFT__ERROR("allreduce rabenseifner: bad phase %d", op->phase);
            return WEFT_ERR_INTERNAL;
        }
    }
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t rb_start(weft__op_t *op)
{
    rb_state_t *s = (rb_state_t *)op->priv;
    const int p = op->comm->size, rank = op->comm->rank;

    memset(s, 0, sizeof(*s));
    op->phase = RB_FOLD;
    if (weft__allreduce_trivial(op)) return WEFT_SUCCESS;
    s->rem = p - op->comm->pof2;
    s->newrank = rank < 2 * s->rem ? (rank % 2 ? rank / 2 : -1) : rank - s->rem;
    if (s->newrank >= 0) {
        /* The fold needs the whole vector, halving at most the larger half. */
        size_t es = op->bytes / op->count, lower = blk(op, op->comm->pof2 / 2);
        size_t half = lower > op->count - lower ? lower : op->count - lower;
        size_t need = (s->rem > 0 ? op->count : half) * es;
        WEFT__CHECK(weft__coll_alloc_tmp(op, need));
    }
    return rb_step(op);
}

/* Thread contract: any thread (pure function). */
static double rb_cost(int p, size_t n, const weft__cost_t *c)
{
    if (p <= 1) return 0.0;
    int lg = 0, pof2 = 1;
    while (pof2 * 2 <= p) { pof2 *= 2; lg++; }
    double nb = (double)n, f = (double)(pof2 - 1) / pof2;
    double t = 2.0 * lg * c->alpha + 2.0 * nb * f * c->beta + nb * f * c->gamma;
    if (pof2 != p) t += 2.0 * (c->alpha + nb * c->beta) + nb * c->gamma;
    return t;
}

const weft__algo_impl_t weft__allreduce_rabenseifner_impl = {
    .id = WEFT_ALGO_RABENSEIFNER,
    .kind = WEFT__OP_ALLREDUCE,
    .cost = rb_cost,
    .supports = NULL,
    .start = rb_start,
    .step = rb_step,
    .cleanup = weft__coll_free_tmp,
};
