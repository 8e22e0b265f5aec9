/*
 * allreduce_hierarchical.c - allreduce in three phases over the nodes of a
 * communicator that spans several (lib/topo.c): reduce-scatter inside each
 * node, allreduce of each chunk across the nodes, allgather inside each node.
 *
 * L ranks per node (every node has as many: nodes_uniform), N >= 2 nodes,
 * n bytes, m = n / L (the chunk of one local rank), an/bn: alpha_node and
 * beta_node (the transport inside a node), as/bs: alpha_shm and beta_shm
 * (the node's shared-memory path), alpha/beta: across nodes.
 *
 * Cost = intra + (L-1)/L n gamma                              intra reduction
 *      + min(2 (N-1) alpha + 2 m (N-1)/N beta + m (N-1)/N gamma,   inter ring
 *            lg N'.(alpha + m beta + m gamma) [+ 2 (alpha + m beta) + m gamma])
 *                                                           inter recursive doubling
 * intra = 2 (2 as + (L-1)/L n bs)  on the node's path (n <= 16 KiB:
 *         2 (as + n bs), the inline areas), else 2 (L-1)(an + m bn)
 * (N' the largest power of two <= N, the bracket when N is not one). INFINITY
 * when the communicator has one node or nodes of different sizes.
 *
 * Phases 1 and 3 run on the node's shared-memory path (backends/node.h,
 * lib/coll/shm_common.c's two halves of an allreduce) when the communicator
 * has it (every node opened it: lib/comm.c), else as rings over the
 * transport. On the path a rank reads its peers' buffers once, where the
 * rings send and receive every chunk through the transport (over TCP on
 * some clusters' nodes), so only the inter-node phase crosses the
 * transport: 2 (N-1)/N n/L bytes sent per rank (ring), against
 * 2 (p-1)/p n for a flat ring or Rabenseifner.
 *
 * The vector is cut into S segments (sizes differ by at most one element),
 * each reduced by the three phases below, and the segments are pipelined:
 * segment g runs its phases one round behind segment g - 1, so while one
 * segment crosses the nodes the next is reduced inside them. S: the chunk of
 * one local rank in one segment is about WEFT_HIER_SEGMENT bytes on the
 * node's path, WEFT_RING_CHUNK bytes over the transport (0: S = 1), at most
 * 16 segments. On the node's path a segment costs four synchronisations of
 * the node's ranks: no pipeline there by default (one segment was the
 * fastest on the 2-core multinode setup, doc/notes/node_measurements.md).
 *
 * 1. Intra-node reduce-scatter. On the node's path: one node operation
 *    (WEFT__SHM_RS_HALF over the segment) in which local rank i reduces chunk
 *    i of every local rank's input, in local rank order. Else a ring among
 *    the node's ranks: the segment is cut into L chunks (sizes differ by at
 *    most one element, the larger first); in step s = 0 .. L-2 local rank i sends chunk (i - s - 1) mod L
 *    to local rank i + 1 and receives chunk (i - s - 2) mod L from i - 1,
 *    reducing it with its own input into recvbuf. Afterwards local rank i
 *    owns chunk i, reduced over its node.
 * 2. Inter-node allreduce of chunk i among the N ranks of local rank i (one
 *    per node, numbered by node): a ring (reduce-scatter then allgather of
 *    the chunk cut into N pieces) or recursive doubling (folding a
 *    non-power-of-two N as allreduce_recursive_doubling.c does), whichever
 *    the cost model predicts faster for the largest chunk of a segment.
 * 3. Intra-node allgather. On the node's path: one node operation
 *    (WEFT__SHM_AG_HALF) in which local rank i copies every other chunk from
 *    its owner's recvbuf. Else a ring: in step s local rank i sends chunk
 *    (i - s) mod L to i + 1 and receives chunk (i - s - 1) mod L into recvbuf.
 *
 * Rounds: a segment's phases take the same rounds on every rank, R = 2 P
 * + I (P: 1 on the node's path, L - 1 for the rings; I: 2 (N-1) for the
 * ring, lg N' [+ 2 for the fold] for recursive doubling; a rank with nothing
 * to do in a round, a folded-away node or an empty chunk, idles). Round t
 * posts, for g = 0 .. S-1 in order, round t - g of segment g's transfers,
 * then runs the round's node operations (the allgather of segment t - R + 1,
 * then the reduce-scatter of segment t: the order in which the op numbered
 * them, all 2 S at its start, so every rank of a node runs them in one
 * order), waits for the transfers, then reduces what arrived. The node
 * operations touch other segments than the round's transfers. Every rank
 * posts the messages it exchanges with a given peer in the same order as the
 * peer posts the matching ones (round, then segment, then phase order, all
 * fixed), so one transport tag serves the whole op. The phases' peers do not
 * mix: the intra-node ones share a node, the inter-node ones do not.
 *
 * Empty chunks or pieces (count < S L, or a chunk < N) are skipped on both
 * sides alike. Every piece of the result is reduced at one rank and copied to
 * the others, or (recursive doubling) reduced symmetrically, so all ranks
 * end with identical bits. With one rank per node (L = 1) the vector is
 * first copied to recvbuf (not in place) and phases 1 and 3 are empty.
 * The cost above is the unpipelined one (the pipeline overlaps the phases'
 * transfers at the price of S - 1 more rounds of latency).
 */
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"
#include "coll_shm.h"
#include "algo.h"
#include "config.h"

#define HIER_MAX_SEGS 16 /* 2 transfers per segment in a round: within WEFT__MAX_XFER */
_Static_assert(2 * HIER_MAX_SEGS <= WEFT__MAX_XFER, "a round's transfers must fit op->xfer");

typedef struct hier_state {
    int L, lr;        /* ranks per node, this rank's local rank */
    int N, nd;        /* nodes, this rank's node */
    int S;            /* segments */
    int I, R;         /* rounds of the inter-node phase, of a segment */
    int P;            /* rounds of phase 1 (and 3): 1 on the node's path, else L - 1 */
    int shm;          /* phases 1 and 3 on the node's shared-memory path */
    int t;            /* current round (0 .. R + S - 2) */
    int posted;       /* round t's transfers were posted */
    int jg;           /* node path: the next segment whose node operation round t runs */
    int job_on;       /* node path: job is started and not cleaned up */
    int nops;         /* node path: node operations finished (numbers seq0 + nops on) */
    uint64_t seq0;    /* node path: the first of the 2 S node operation numbers */
    int rd;           /* inter-node phase by recursive doubling */
    int rem, newrank; /* recursive doubling: N - N', this node's participant number (-1: folded away) */
    int rdrounds;     /* lg N' */
    int W;            /* scratch slots (segments that may receive into scratch at once) */
    size_t es;        /* element size */
    size_t slot;      /* elements of one scratch slot (the largest chunk of a segment) */
    weft__shm_job_t job; /* node path: the node operation in progress */
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
    /* phases 1 and 3: the node's path when the comm has it (alpha_shm > 0:
     * agreed by all its ranks), else the rings over the transport */
    double intra = c->alpha_shm > 0 ? weft__shm_halves_cost(L, n, c)
                                    : 2.0 * (L - 1) * (an + m * bn);
    intra += nb * (L - 1) / L * c->gamma;
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

/* Elements [*lo, *hi) of chunk k (of L) of segment g. Engine side. */
static void chunk(const weft__op_t *op, const hier_state_t *s, int g, int k, size_t *lo, size_t *hi)
{
    size_t slo, shi;
    weft__block_range(op->count, s->S, g, &slo, &shi);
    weft__block_range(shi - slo, s->L, weft__mod(k, s->L), lo, hi);
    *lo += slo;
    *hi += slo;
}

/* Elements [*lo, *hi) of piece k (of N) of this rank's chunk of segment g.
 * Engine side. */
static void piece(const weft__op_t *op, const hier_state_t *s, int g, int k, size_t *lo,
                  size_t *hi)
{
    size_t clo, chi;
    chunk(op, s, g, s->lr, &clo, &chi);
    weft__block_range(chi - clo, s->N, weft__mod(k, s->N), lo, hi);
    *lo += clo;
    *hi += clo;
}

/* Segment g's scratch slot. Engine side. */
static char *slot(const weft__op_t *op, const hier_state_t *s, int g)
{
    return (char *)op->tmp + (size_t)(g % s->W) * s->slot * s->es;
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

/* What segment round q is: *ph the phase (0 reduce-scatter, 1 inter-node,
 * 2 allgather), *k the round within it. Pure. */
static void phase_of(const hier_state_t *s, int q, int *ph, int *k)
{
    if (q < s->P) *ph = 0, *k = q;
    else if (q < s->P + s->I) *ph = 1, *k = q - s->P;
    else *ph = 2, *k = q - (s->P + s->I);
}

/* Post round q of segment g. Engine side. */
static weft_status_t post(weft__op_t *op, const hier_state_t *s, int g, int q)
{
    char *rbuf = op->recvbuf;
    size_t lo, hi, rlo, rhi, clo, chi;
    int ph, k;
    phase_of(s, q, &ph, &k);
    if (ph != 1 && s->shm) return WEFT_SUCCESS; /* a node operation (node_jobs) */
    if (ph == 0) { /* send chunk lr-k-1 (own input at k = 0), receive lr-k-2 into scratch */
        chunk(op, s, g, s->lr - k - 1, &lo, &hi);
        chunk(op, s, g, s->lr - k - 2, &rlo, &rhi);
        return xfer(op, s, k == 0 ? (const char *)op->sendbuf : rbuf, lo, hi,
                    intra_peer(op, s, s->lr + 1), slot(op, s, g), rlo, rhi,
                    intra_peer(op, s, s->lr - 1));
    }
    if (ph == 2) { /* send chunk lr-k, receive chunk lr-k-1 in place */
        chunk(op, s, g, s->lr - k, &lo, &hi);
        chunk(op, s, g, s->lr - k - 1, &rlo, &rhi);
        return xfer(op, s, rbuf, lo, hi, intra_peer(op, s, s->lr + 1), rbuf + rlo * s->es, rlo,
                    rhi, intra_peer(op, s, s->lr - 1));
    }
    if (!s->rd) { /* the chunk's ring among nodes: reduce-scatter, then allgather */
        const int rs = k < s->N - 1, kk = rs ? k : k - (s->N - 1);
        piece(op, s, g, s->nd - kk - (rs ? 1 : 0), &lo, &hi);
        piece(op, s, g, s->nd - kk - (rs ? 2 : 1), &rlo, &rhi);
        return xfer(op, s, rbuf, lo, hi, inter_peer(op, s, s->nd + 1),
                    rs ? slot(op, s, g) : rbuf + rlo * s->es, rlo, rhi,
                    inter_peer(op, s, s->nd - 1));
    }
    chunk(op, s, g, s->lr, &clo, &chi);
    if (s->rem > 0 && (k == 0 || k == s->I - 1)) { /* fold / unfold */
        if (s->nd >= 2 * s->rem) return WEFT_SUCCESS;
        const bool even = s->nd % 2 == 0, fold = k == 0;
        if (even == fold) /* fold: the even node hands its chunk over; unfold: the odd returns it */
            return xfer(op, s, rbuf, clo, chi, inter_peer(op, s, s->nd + (even ? 1 : -1)), NULL, 0,
                        0, -1);
        return xfer(op, s, NULL, 0, 0, -1, fold ? slot(op, s, g) : rbuf + clo * s->es, clo, chi,
                    inter_peer(op, s, s->nd + (even ? 1 : -1)));
    }
    if (s->newrank < 0) return WEFT_SUCCESS; /* folded away: waits for the unfold */
    const int r = k - (s->rem > 0 ? 1 : 0);
    const int partner = inter_peer(op, s, weft__fold_real(s->newrank ^ (1 << r), s->rem));
    return xfer(op, s, rbuf, clo, chi, partner, slot(op, s, g), clo, chi, partner);
}

/* Consume round q of segment g (its transfers completed). Engine side. */
static void after(weft__op_t *op, const hier_state_t *s, int g, int q)
{
    char *rbuf = op->recvbuf;
    size_t lo, hi;
    int ph, k;
    phase_of(s, q, &ph, &k);
    if (ph != 1 && s->shm) return; /* a node operation: done in node_jobs */
    if (ph == 0) { /* recvbuf[chunk] = own input OP received partial */
        chunk(op, s, g, s->lr - k - 2, &lo, &hi);
        if (hi > lo)
            weft__reduce3(rbuf + lo * s->es, (const char *)op->sendbuf + lo * s->es,
                          slot(op, s, g), hi - lo, op->dtype, op->rop);
        return;
    }
    if (ph != 1) return;
    if (!s->rd) {
        if (k >= s->N - 1) return; /* allgather: received in place */
        piece(op, s, g, s->nd - k - 2, &lo, &hi);
    } else {
        if (s->rem > 0 && k == s->I - 1) return; /* unfold: received in place */
        if (s->rem > 0 && k == 0 && !(s->nd < 2 * s->rem && s->nd % 2 == 1)) return;
        if (s->newrank < 0) return;
        chunk(op, s, g, s->lr, &lo, &hi);
    }
    if (hi > lo)
        weft__reduce3(rbuf + lo * s->es, rbuf + lo * s->es, slot(op, s, g), hi - lo, op->dtype,
                      op->rop);
}

/* Run round t's node operations from segment s->jg on, in segment order
 * (the allgather of an earlier segment before the reduce-scatter of a later
 * one), each as the next of the numbers the op took at its start.
 * WEFT_SUCCESS when all are done, WEFT_INPROGRESS while one waits for the
 * node's peers (the round's transfers are tested meanwhile), or an error.
 * Engine side. Never blocks. */
static weft_status_t node_jobs(weft__op_t *op, hier_state_t *s)
{
    for (; s->jg < s->S; s->jg++) {
        const int g = s->jg, q = s->t - g;
        int ph, k;
        if (q < 0 || q >= s->R) continue;
        phase_of(s, q, &ph, &k);
        if (ph == 1) continue;
        weft__shm_job_t *j = &s->job;
        if (!s->job_on) { /* segment g's reduce-scatter (phase 1) or allgather (phase 3) */
            size_t slo, shi;
            weft__block_range(op->count, s->S, g, &slo, &shi);
            memset(j, 0, sizeof *j);
            j->node = (weft__node_t *)op->comm->node_state;
            j->kind = WEFT__OP_ALLREDUCE;
            j->part = ph == 0 ? WEFT__SHM_RS_HALF : WEFT__SHM_AG_HALF;
            j->sendbuf = (const char *)op->sendbuf + slo * s->es;
            j->recvbuf = (char *)op->recvbuf + slo * s->es;
            j->count = shi - slo;
            j->bytes = j->count * s->es;
            j->dtype = op->dtype;
            j->rop = op->rop;
            j->id = op->comm->id;
            s->job_on = 1;
            weft_status_t st = weft__shm_job_start(j, s->seq0 + (uint64_t)s->nops);
            if (st < 0) return st;
        }
        weft_status_t st = weft__shm_job_step(j);
        if (st == WEFT_INPROGRESS) { /* keep the transport's transfers moving */
            if (op->nxfer > 0) {
                weft_status_t ts = weft__coll_test(op);
                if (ts < 0) return ts;
            }
            return WEFT_INPROGRESS;
        }
        if (st != WEFT_SUCCESS) return st;
        weft__shm_job_cleanup(j);
        s->job_on = 0;
        s->nops++;
    }
    return WEFT_SUCCESS;
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t hier_step(weft__op_t *op)
{
    hier_state_t *s = (hier_state_t *)op->priv;
    const int rounds = s->R + s->S - 1;
    weft_status_t st;
    for (;;) {
        if (s->t >= rounds) return WEFT_SUCCESS;
        if (!s->posted) { /* round t: segment g's round t - g */
            for (int g = 0; g < s->S; g++)
                if (s->t - g >= 0 && s->t - g < s->R) WEFT__CHECK(post(op, s, g, s->t - g));
            s->posted = 1;
            s->jg = 0;
        }
        if (s->shm) {
            st = node_jobs(op, s);
            if (st != WEFT_SUCCESS) return st;
        }
        if (op->nxfer > 0) { /* nothing posted (idle round): straight on */
            st = weft__coll_test(op);
            if (st != WEFT_SUCCESS) return st;
        }
        /* round t completed: reduce what arrived */
        for (int g = 0; g < s->S; g++)
            if (s->t - g >= 0 && s->t - g < s->R) after(op, s, g, s->t - g);
        s->posted = 0;
        s->t++;
    }
}

/* Thread contract: engine side (after the op failed, finished or timed
 * out). */
static void hier_cleanup(weft__op_t *op)
{
    hier_state_t *s = (hier_state_t *)op->priv;
    if (s->job_on) weft__shm_job_cleanup(&s->job);
    s->job_on = 0;
    /* the numbers this op took and did not finish (it failed): the node's
     * next operation may run */
    if (s->shm && s->seq0 != 0)
        weft__node_end((weft__node_t *)op->comm->node_state, s->seq0 + 2 * (uint64_t)s->S - 1);
    weft__coll_free_tmp(op);
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t hier_start(weft__op_t *op)
{
    hier_state_t *s = (hier_state_t *)op->priv;
    const weft__comm_t *c = op->comm;

    memset(s, 0, sizeof(*s));
    if (weft__allreduce_trivial(op)) return WEFT_SUCCESS; /* R + S - 1 = -1 rounds: done */
    if (!c->nodes_uniform) { /* selection never runs it there */
        WEFT__ERROR("allreduce hierarchical: comm %d has nodes of different sizes", c->id);
        return WEFT_ERR_INTERNAL;
    }
    s->L = c->local_size;
    s->lr = c->local_rank;
    s->N = c->nnodes;
    s->nd = c->node;
    s->es = op->bytes / op->count;
    /* phases 1 and 3 on the node's path: every rank of the comm has it or
     * none (lib/comm.c), so every rank takes the same rounds */
    s->shm = c->node_state != NULL && s->L >= 2;
    /* segments: a local rank's chunk of one is about WEFT_HIER_SEGMENT bytes
     * on the node's path, WEFT_RING_CHUNK over the transport */
    size_t seg = s->shm ? weft__cfg.hier_segment : weft__cfg.ring_chunk;
    size_t per_rank = op->bytes / (size_t)s->L;
    size_t nseg = seg == 0 ? 1 : (per_rank + seg - 1) / seg;
    if (nseg > HIER_MAX_SEGS) nseg = HIER_MAX_SEGS;
    if (nseg > op->count) nseg = op->count;
    s->S = nseg < 1 ? 1 : (int)nseg;
    /* the inter-node algorithm: the same on every rank (the largest chunk) */
    size_t clo, chi;
    chunk(op, s, 0, 0, &clo, &chi);
    s->slot = chi - clo;
    s->rdrounds = weft__floor_log2(s->N);
    s->rem = s->N - (1 << s->rdrounds);
    s->newrank = weft__fold_newrank(s->nd, s->rem);
    double m = (double)s->slot * (double)s->es;
    s->rd = s->N >= 2 && inter_rd_cost(s->N, m, &c->cost) < inter_ring_cost(s->N, m, &c->cost);
    s->I = s->rd ? s->rdrounds + (s->rem > 0 ? 2 : 0) : 2 * (s->N - 1);
    s->P = s->shm ? 1 : s->L - 1;
    s->R = 2 * s->P + s->I;
    s->W = s->S < s->P + s->I ? s->S : s->P + s->I;
    /* Two node operations per segment, numbered now, before anything can
     * fail: in the engine's start order, which every rank of the node
     * shares. */
    if (s->shm) {
        weft__node_t *n = (weft__node_t *)c->node_state;
        s->seq0 = weft__node_begin(n);
        for (int i = 1; i < 2 * s->S; i++) weft__node_begin(n);
    }
    if (s->W < 1) s->W = 1;
    if (s->L == 1 && op->recvbuf != op->sendbuf) memcpy(op->recvbuf, op->sendbuf, op->bytes);
    WEFT__CHECK(weft__coll_alloc_tmp(op, (size_t)s->W * s->slot * s->es));
    return hier_step(op);
}

const weft__algo_impl_t weft__allreduce_hierarchical_impl = {
    .id = WEFT_ALGO_HIERARCHICAL,
    .kind = WEFT__OP_ALLREDUCE,
    .cost = hier_cost,
    .supports = NULL,
    .start = hier_start,
    .step = hier_step,
    .cleanup = hier_cleanup,
};
