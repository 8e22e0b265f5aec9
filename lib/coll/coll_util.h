/*
 * coll_util.h - small helpers shared by the round-based algorithms in
 * lib/coll (block ranges, rank folding for non-power-of-two sizes, cost
 * helpers). Header-only, file-static inline functions. Any thread.
 */
#ifndef WEFT_COLL_UTIL_H
#define WEFT_COLL_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"

/**
 * The cases every allreduce algorithm shares: nothing to reduce, or a single
 * rank (the result is the input). Returns true when op is complete.
 * Engine side.
 */
static inline bool weft__allreduce_trivial(weft__op_t *op)
{
    if (op->count == 0) return true;
    if (op->comm->size > 1) return false;
    if (op->recvbuf != op->sendbuf) memcpy(op->recvbuf, op->sendbuf, op->bytes);
    return true;
}

/** ceil(log2(p)) for p >= 1. */
static inline int weft__ceil_log2(int p)
{
    int k = 0;
    while ((1 << k) < p) k++;
    return k;
}

/** floor(log2(p)) for p >= 1. */
static inline int weft__floor_log2(int p)
{
    int k = 0;
    while ((2 << k) <= p) k++;
    return k;
}

/** Lowest set bit of x > 0. */
static inline int weft__lowbit(int x) { return x & -x; }

static inline int weft__mod(int a, int p) { return ((a % p) + p) % p; }

/*
 * Folding a non-power-of-two group onto pof2 "new ranks" (as MPICH does):
 * with rem = p - pof2, ranks r < 2*rem pair up, the even one (r) hands its
 * data to the odd one (r + 1) and sits out; new rank i < rem is real rank
 * 2i + 1 and owns real blocks 2i and 2i + 1; new rank i >= rem is real rank
 * i + rem and owns block i + rem. The blocks owned by a range of new ranks
 * are contiguous: [weft__fold_first(a), weft__fold_first(b)).
 */
static inline int weft__fold_newrank(int r, int rem)
{
    if (r < 2 * rem) return (r & 1) ? r / 2 : -1;
    return r - rem;
}
static inline int weft__fold_real(int newrank, int rem)
{
    return newrank < rem ? 2 * newrank + 1 : newrank + rem;
}
static inline int weft__fold_first(int newrank, int rem)
{
    return newrank < rem ? 2 * newrank : newrank + rem;
}

/** Byte range [lo, hi) of pieces [a, b) when n bytes are cut in pieces of bs bytes. */
static inline void weft__piece_range(size_t n, size_t bs, int a, int b, size_t *lo, size_t *hi)
{
    size_t l = (size_t)a * bs, h = (size_t)b * bs;
    *lo = l < n ? l : n;
    *hi = h < n ? h : n;
}

/** Rounds of a linear (root-centred) algorithm whose root talks to the p-1
 * others WEFT__MAX_XFER at a time. */
static inline int weft__linear_rounds(int p)
{
    return (p - 1 + WEFT__MAX_XFER - 1) / WEFT__MAX_XFER;
}
/** One round of a round-based algorithm: post (or process) round k. */
typedef weft_status_t (*weft__round_fn)(weft__op_t *op, int k);

/*
 * Drive rounds 0..nrounds-1: post(op, k) posts round k's transfers (maybe
 * none), and once they all completed after(op, k) (may be NULL) consumes
 * them. op->phase is the "round posted" flag, op->stepno the round. Returns
 * WEFT_SUCCESS once every round is done, WEFT_INPROGRESS while transfers are
 * outstanding, or an error. Engine side only; never blocks.
 */
static inline weft_status_t weft__rounds_drive(weft__op_t *op, int nrounds, weft__round_fn post,
                                               weft__round_fn after)
{
    weft_status_t st;
    for (;;) {
        if (op->phase) {
            if (op->nxfer > 0) {
                st = weft__coll_test(op);
                if (st != WEFT_SUCCESS) return st;
            }
            op->phase = 0;
            if (after) {
                st = after(op, op->stepno);
                if (st < 0) return st;
            }
            op->stepno++;
        }
        if (op->stepno >= nrounds) return WEFT_SUCCESS;
        st = post(op, op->stepno);
        if (st < 0) return st;
        op->phase = 1;
    }
}

/* ---- the hierarchical algorithms (nodes of a communicator) ---------------- */
/** Can a hierarchical algorithm run on a communicator of p ranks as c
 * describes it: at least two nodes with ppn ranks each? Pure; any thread. */
static inline bool weft__hier_ok(int p, const weft__cost_t *c)
{
    return c->nnodes >= 2 && c->ppn > 0 && (long long)c->nnodes * c->ppn == p;
}

/** Seconds per message / per byte between two ranks of one node (alpha_node,
 * beta_node; alpha, beta when the model has no node figures). Pure. */
static inline double weft__node_alpha(const weft__cost_t *c)
{
    return c->alpha_node > 0 ? c->alpha_node : c->alpha;
}
static inline double weft__node_beta(const weft__cost_t *c)
{
    return c->beta_node > 0 ? c->beta_node : c->beta;
}

/** Comm rank of the rank with local rank lr on node nd (uniform nodes, or
 * any node that has lr). Read-only topology; any thread. */
static inline int weft__node_member(const weft__comm_t *c, int nd, int lr)
{
    return c->by_node[c->node_first[nd] + lr];
}

/** Element range [*lo, *hi) of block b when n elements are cut in g blocks
 * whose sizes differ by at most one (the larger ones first). Pure. */
static inline void weft__block_range(size_t n, int g, int b, size_t *lo, size_t *hi)
{
    size_t q = n / (size_t)g, r = n % (size_t)g, ub = (size_t)b;
    *lo = ub * q + (ub < r ? ub : r);
    *hi = *lo + q + (ub < r ? 1 : 0);
}

/** Free op->tmp (the cleanup of every algorithm that only uses op->tmp). Engine side. */
static inline void weft__coll_free_tmp(weft__op_t *op)
{
    weft__scratch_free(op->tmp);
    op->tmp = NULL;
    op->tmp_bytes = 0;
}

/** Allocate op->tmp (bytes may be 0) from the engine's scratch cache. Engine side. */
static inline weft_status_t weft__coll_alloc_tmp(weft__op_t *op, size_t bytes)
{
    op->tmp = weft__scratch_alloc(bytes);
    if (!op->tmp) {
        WEFT__ERROR("%s: cannot allocate %zu bytes of scratch", weft__opkind_name(op->kind), bytes);
        return WEFT_ERR_NO_MEMORY;
    }
    op->tmp_bytes = bytes;
    return WEFT_SUCCESS;
}

#endif /* WEFT_COLL_UTIL_H */
