/*
 * allreduce_hierarchical.c - allreduce in three phases over the nodes of a
 * communicator that spans several (lib/topo.c): reduce-scatter inside each
 * node, allreduce of each chunk across the nodes, allgather inside each node.
 *
 * L ranks per node (every node has as many: nodes_uniform), N >= 2 nodes,
 * n bytes, m = n / L (the chunk of one local rank), an/bn: alpha_node and
 * beta_node (the transport inside a node), alpha/beta: across nodes.
 *
 * Cost = (L-1)(an + m bn) + (L-1)/L n gamma                   intra reduce-scatter
 *      + min(2 (N-1) alpha + 2 m (N-1)/N beta + m (N-1)/N gamma,   inter ring
 *            lg N'.(alpha + m beta + m gamma) [+ 2 (alpha + m beta) + m gamma])
 *                                                           inter recursive doubling
 *      + (L-1)(an + m bn)                                     intra allgather
 * (N' the largest power of two <= N, the bracket when N is not one). INFINITY
 * when the communicator has one node or nodes of different sizes.
 *
 * 1. Intra-node reduce-scatter, a ring among the node's ranks: the vector is
 *    cut into L chunks (sizes differ by at most one element, the larger
 *    first); in step s = 0 .. L-2 local rank i sends chunk (i - s - 1) mod L
 *    to local rank i + 1 and receives chunk (i - s - 2) mod L from i - 1,
 *    reducing it with its own input into recvbuf. Afterwards local rank i
 *    owns chunk i, reduced over its node.
 * 2. Inter-node allreduce of chunk i among the N ranks of local rank i (one
 *    per node, numbered by node): a ring (reduce-scatter then allgather of
 *    the chunk cut into N pieces) or recursive doubling (folding a
 *    non-power-of-two N as allreduce_recursive_doubling.c does), whichever
 *    the cost model predicts faster for the chunk. The chunk's size is the
 *    same on the N ranks of one local rank, and so is the cost model, so
 *    they choose alike (ranks of other local ranks may choose otherwise:
 *    they never talk to each other in this phase).
 * 3. Intra-node allgather, a ring: in step s local rank i sends chunk
 *    (i - s) mod L to i + 1 and receives chunk (i - s - 1) mod L into recvbuf.
 *
 * Empty chunks or pieces (count < L, or a chunk < N) are skipped on both
 * sides alike. Every piece of the result is reduced at one rank and copied to
 * the others, or (recursive doubling) reduced symmetrically, so all ranks
 * end with identical bits. With one rank per node (L = 1) the vector is
 * first copied to recvbuf (not in place) and phases 1 and 3 are empty.
 * Messages of different phases between the same two ranks follow each other
 * in the same order on both sides (every step completes before the next
 * posts), so one transport tag serves the whole op.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"
#include "algo.h"

enum { H_RS = 0, H_IRS, H_IAG, H_FOLD, H_RD, H_UNFOLD, H_AG, H_DONE };

typedef struct hier_state {
    int stage;        /* H_RS .. H_DONE */
    int step;         /* step within the stage */
    int posted;       /* the step's transfers were posted */
    int L, lr;        /* ranks per node, this rank's local rank */
    int N, nd;        /* nodes, this rank's node */
    size_t es;        /* element size */
    size_t clo, chi;  /* this rank's chunk: elements [clo, chi) */
    int rd;           /* inter-node phase by recursive doubling */
    int rem, newrank; /* recursive doubling: N - N', this node's participant number (-1: folded away) */
    int rdrounds;     /* lg N' */
} hier_state_t;
_Static_assert(sizeof(hier_state_t) <= WEFT__PRIV_BYTES, "hier_state_t does not fit op->priv");

/* Inter-node ring and recursive doubling for an m-byte chunk on N nodes.
 * Pure; any thread. */
static double inter_ring_cost(int N, double m, const weft__cost_t *c)
{
    double f = (double)(N - 1) / N;
    return 2.0 * (N - 1) * c->alpha + 2.0 * m * f * c->beta + m * f * c->gamma;
}

static double inter_rd_cost(int N, double m, const weft__cost_t *c)
{
    int lg = weft__floor_log2(N);
    double t = lg * (c->alpha + m * c->beta + m * c->gamma);
    if ((1 << lg) != N) t += 2.0 * (c->alpha + m * c->beta) + m * c->gamma;
    return t;
}

/* Thread contract: any thread (pure function of its arguments). */
static double hier_cost(int p, size_t n, const weft__cost_t *c)
{
    if (!weft__hier_ok(p, c)) return INFINITY;
    const int L = c->ppn, N = c->nnodes;
    const double nb = (double)n, m = nb / L;
    const double an = weft__node_alpha(c), bn = weft__node_beta(c);
    double intra = 2.0 * (L - 1) * (an + m * bn) + nb * (L - 1) / L * c->gamma;
    double ring = inter_ring_cost(N, m, c), rd = inter_rd_cost(N, m, c);
    return intra + (ring < rd ? ring : rd);
}

/* Comm rank of local rank i of this rank's node. Engine side. */
static int intra_peer(const weft__op_t *op, const hier_state_t *s, int i)
{
    return weft__node_member(op->comm, s->nd, weft__mod(i, s->L));
}

/* Comm rank of node j's rank with this rank's local rank. Engine side. */
static int inter_peer(const weft__op_t *op, const hier_state_t *s, int j)
{
    return weft__node_member(op->comm, weft__mod(j, s->N), s->lr);
}

/* Participant number -> node for recursive doubling (the fold). Pure. */
static int rd_real(int newrank, int rem) { return weft__fold_real(newrank, rem); }

/* Steps of a stage for this rank. Engine side. */
static int stage_steps(const hier_state_t *s, int stage)
{
    const bool chunk = s->chi > s->clo;
    switch (stage) {
    case H_RS:
    case H_AG: return s->L - 1;
    case H_IRS:
    case H_IAG: return chunk && !s->rd ? s->N - 1 : 0;
    case H_FOLD:
    case H_UNFOLD: return chunk && s->rd && s->nd < 2 * s->rem ? 1 : 0;
    case H_RD: return chunk && s->rd && s->newrank >= 0 ? s->rdrounds : 0;
    default: return 0;
    }
}

/* Elements [*lo, *hi) of piece k of this rank's chunk cut in N pieces. */
static void piece(const hier_state_t *s, int k, size_t *lo, size_t *hi)
{
    weft__block_range(s->chi - s->clo, s->N, weft__mod(k, s->N), lo, hi);
    *lo += s->clo;
    *hi += s->clo;
}

/* Elements [*lo, *hi) of chunk k (of L). */
static void chunk(const weft__op_t *op, const hier_state_t *s, int k, size_t *lo, size_t *hi)
{
    weft__block_range(op->count, s->L, weft__mod(k, s->L), lo, hi);
}

/* Post a send of elements [lo, hi) of buf, and a receive of [rlo, rhi) into
 * dst, skipping empty ones (the peer skips the same). Engine side. */
static weft_status_t xfer(weft__op_t *op, const hier_state_t *s, const char *buf, size_t lo,
                          size_t hi, int to, char *dst, size_t rlo, size_t rhi, int from)
{
    if (rhi > rlo) WEFT__CHECK(weft__coll_irecv(op, dst, (rhi - rlo) * s->es, from));
    if (hi > lo) WEFT__CHECK(weft__coll_isend(op, buf + lo * s->es, (hi - lo) * s->es, to));
    return WEFT_SUCCESS;
}

/* Post step k of the current stage. Engine side. */
static weft_status_t post(weft__op_t *op, hier_state_t *s, int k)
{
    char *rbuf = op->recvbuf;
    size_t lo, hi, rlo, rhi;
    switch (s->stage) {
    case H_RS: /* send chunk lr-k-1 (own input at k = 0), receive lr-k-2 into tmp */
        chunk(op, s, s->lr - k - 1, &lo, &hi);
        chunk(op, s, s->lr - k - 2, &rlo, &rhi);
        return xfer(op, s, k == 0 ? (const char *)op->sendbuf : rbuf, lo, hi,
                    intra_peer(op, s, s->lr + 1), op->tmp, rlo, rhi, intra_peer(op, s, s->lr - 1));
    case H_AG: /* send chunk lr-k, receive chunk lr-k-1 in place */
        chunk(op, s, s->lr - k, &lo, &hi);
        chunk(op, s, s->lr - k - 1, &rlo, &rhi);
        return xfer(op, s, rbuf, lo, hi, intra_peer(op, s, s->lr + 1), rbuf + rlo * s->es, rlo,
                    rhi, intra_peer(op, s, s->lr - 1));
    case H_IRS: /* the chunk's ring among nodes: reduce-scatter of its N pieces */
        piece(s, s->nd - k - 1, &lo, &hi);
        piece(s, s->nd - k - 2, &rlo, &rhi);
        return xfer(op, s, rbuf, lo, hi, inter_peer(op, s, s->nd + 1), op->tmp, rlo, rhi,
                    inter_peer(op, s, s->nd - 1));
    case H_IAG:
        piece(s, s->nd - k, &lo, &hi);
        piece(s, s->nd - k - 1, &rlo, &rhi);
        return xfer(op, s, rbuf, lo, hi, inter_peer(op, s, s->nd + 1), rbuf + rlo * s->es, rlo,
                    rhi, inter_peer(op, s, s->nd - 1));
    case H_FOLD: /* even node of a pair hands its chunk to the odd one */
        if (s->nd % 2 == 0)
            return xfer(op, s, rbuf, s->clo, s->chi, inter_peer(op, s, s->nd + 1), NULL, 0, 0, -1);
        return xfer(op, s, NULL, 0, 0, -1, op->tmp, s->clo, s->chi, inter_peer(op, s, s->nd - 1));
    case H_RD: {
        int partner = inter_peer(op, s, rd_real(s->newrank ^ (1 << k), s->rem));
        return xfer(op, s, rbuf, s->clo, s->chi, partner, op->tmp, s->clo, s->chi, partner);
    }
    case H_UNFOLD: /* the odd node returns the result */
        if (s->nd % 2 == 1)
            return xfer(op, s, rbuf, s->clo, s->chi, inter_peer(op, s, s->nd - 1), NULL, 0, 0, -1);
        return xfer(op, s, NULL, 0, 0, -1, rbuf + s->clo * s->es, s->clo, s->chi,
                    inter_peer(op, s, s->nd + 1));
    default:
        WEFT__ERROR("allreduce hierarchical: bad stage %d", s->stage);
        return WEFT_ERR_INTERNAL;
    }
}

/* Consume step k of the current stage (its transfers completed). Engine side. */
static void after(weft__op_t *op, hier_state_t *s, int k)
{
    char *rbuf = op->recvbuf;
    size_t lo, hi;
    switch (s->stage) {
    case H_RS: /* recvbuf[chunk] = own input OP received partial */
        chunk(op, s, s->lr - k - 2, &lo, &hi);
        if (hi > lo)
            weft__reduce3(rbuf + lo * s->es, (const char *)op->sendbuf + lo * s->es, op->tmp,
                          hi - lo, op->dtype, op->rop);
        return;
    case H_IRS:
        piece(s, s->nd - k - 2, &lo, &hi);
        if (hi > lo)
            weft__reduce3(rbuf + lo * s->es, rbuf + lo * s->es, op->tmp, hi - lo, op->dtype,
                          op->rop);
        return;
    case H_FOLD: /* the odd node reduces as in a round */
    case H_RD:
        if (s->stage == H_FOLD && s->nd % 2 == 0) return;
        weft__reduce3(rbuf + s->clo * s->es, rbuf + s->clo * s->es, op->tmp, s->chi - s->clo,
                      op->dtype, op->rop);
        return;
    default:
        return;
    }
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t hier_step(weft__op_t *op)
{
    hier_state_t *s = (hier_state_t *)op->priv;
    weft_status_t st;
    for (;;) {
        if (op->nxfer > 0) {
            st = weft__coll_test(op);
            if (st != WEFT_SUCCESS) return st;
        }
        if (s->posted) {
            after(op, s, s->step);
            s->posted = 0;
            s->step++;
        }
        while (s->stage < H_DONE && s->step >= stage_steps(s, s->stage)) {
            s->stage++;
            s->step = 0;
        }
        if (s->stage == H_DONE) return WEFT_SUCCESS;
        WEFT__CHECK(post(op, s, s->step));
        s->posted = 1;
    }
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t hier_start(weft__op_t *op)
{
    hier_state_t *s = (hier_state_t *)op->priv;
    const weft__comm_t *c = op->comm;

    memset(s, 0, sizeof(*s));
    s->stage = H_DONE;
    if (weft__allreduce_trivial(op)) return WEFT_SUCCESS;
    if (!c->nodes_uniform || c->nnodes < 1) { /* selection never runs it there */
        WEFT__ERROR("allreduce hierarchical: comm %d has nodes of different sizes", c->id);
        return WEFT_ERR_INTERNAL;
    }
    s->L = c->local_size;
    s->lr = c->local_rank;
    s->N = c->nnodes;
    s->nd = c->node;
    s->es = op->bytes / op->count;
    weft__block_range(op->count, s->L, s->lr, &s->clo, &s->chi);
    if (s->N >= 2 && s->chi > s->clo) {
        double m = (double)(s->chi - s->clo) * (double)s->es;
        s->rd = inter_rd_cost(s->N, m, &c->cost) < inter_ring_cost(s->N, m, &c->cost);
        s->rdrounds = weft__floor_log2(s->N);
        s->rem = s->N - (1 << s->rdrounds);
        s->newrank = weft__fold_newrank(s->nd, s->rem);
    }
    if (s->L == 1 && op->recvbuf != op->sendbuf) memcpy(op->recvbuf, op->sendbuf, op->bytes);
    /* tmp: one chunk (the largest: chunk 0) */
    WEFT__CHECK(weft__coll_alloc_tmp(op, (op->count / (size_t)s->L + 1) * s->es));
    s->stage = H_RS;
    return hier_step(op);
}

const weft__algo_impl_t weft__allreduce_hierarchical_impl = {
    .id = WEFT_ALGO_HIERARCHICAL,
    .kind = WEFT__OP_ALLREDUCE,
    .cost = hier_cost,
    .supports = NULL,
    .start = hier_start,
    .step = hier_step,
    .cleanup = weft__coll_free_tmp,
};
