/*
 * coll_shm.h - the collectives of the node's shared-memory path
 * (backends/node.h): one state machine (lib/coll/shm_common.c) that the
 * algorithms `shm` of allreduce, reduce_scatter, allgather, bcast and reduce
 * (lib/coll/<coll>_shm.c) run, and their cost. Engine side unless stated.
 *
 * Small operations (their data within WEFT__NODE_INLINE) copy it into the
 * rank's inline area, publish, and read the peers' areas: one
 * synchronisation. Large ones publish their buffers' addresses and read
 * the peers' buffers directly, in chunks of WEFT_SHM_CHUNK bytes:
 *  - allreduce: rank r reduces block r of every rank's input into its
 *    output, in rank order (so every rank's result is the same bit for bit),
 *    publishing each chunk; then reads every other block from its owner's
 *    output as soon as the chunk is published (reduce-scatter, allgather:
 *    every input byte read once, every output byte written once);
 *  - reduce_scatter: the first half of that; allgather: the second, from the
 *    peers' inputs; bcast: every rank reads the root's buffer; reduce: the
 *    root reduces every rank's input.
 * A rank finishes once every peer said it reads nothing more of it
 * (WEFT__NODE_DONE), so buffers are the caller's again at completion.
 *
 * The state machine runs a job (weft__shm_job_t): one node operation with
 * its buffers, which an shm algorithm runs as its whole op and another
 * algorithm may run as a phase of its own (the hierarchical allreduce runs
 * the two halves of an allreduce inside each node, WEFT__SHM_RS_HALF and
 * WEFT__SHM_AG_HALF, on communicators that span nodes).
 */
#ifndef WEFT_COLL_SHM_H
#define WEFT_COLL_SHM_H

#include "algo.h"

/** What part of an allreduce a job runs; WEFT__SHM_WHOLE for other kinds.
 * Blocks: the count elements cut in `size` blocks by weft__block_range. */
typedef enum weft__shm_part {
    WEFT__SHM_WHOLE,
    /** node rank r reduces block r of every rank's sendbuf (rank order) into
     * the same elements of its recvbuf; the rest of recvbuf is untouched.
     * Like every large job it completes once no peer reads its buffers:
     * a rank's slot holds the addresses of one operation at a time, so a
     * rank that went on to post the next would show a reader of this one
     * the wrong buffers. */
    WEFT__SHM_RS_HALF,
    /** node rank r copies block q of rank q's recvbuf into its own for every
     * q != r: each rank's block r must be final when it starts the job */
    WEFT__SHM_AG_HALF,
} weft__shm_part_t;

/** One operation on the node's path: the caller fills the first group, then
 * weft__shm_job_start; the rest is the state machine's. Engine side. */
typedef struct weft__shm_job {
    weft__node_t *node;
    weft__opkind_t kind;      /* allreduce, reduce_scatter, allgather, bcast, reduce */
    weft__shm_part_t part;
    const void *sendbuf;      /* == recvbuf: in place */
    void *recvbuf;
    size_t count, bytes;      /* elements, bytes: the vector, or a rank's block
                               * (reduce_scatter, allgather: as the op counts them) */
    weft_datatype_t dtype;
    weft_op_t rop;
    int root;                 /* bcast, reduce: the root's node rank */
    int id;                   /* communicator id, for logs */
    /* -- the state machine's -- */
    uint64_t seq;             /* the node's number of this operation */
    int rank, size;           /* node rank and size */
    int phase;
    int small;                /* inline path */
    int ended;                /* weft__node_end called */
    int staged;               /* allreduce through the staging areas (WEFT_SHM_COPY) */
    int mode_call;            /* WEFT_SHM_COPY=auto: the call's number in its class and
                               * period (shm_common.c, settle_mode); -1: mode fixed */
    int trial;                /* 1 + the mode trial this job is (0: none) */
    int cls;                  /* its size class (trials) */
    double t0;                /* trials: when every rank had arrived (0: not yet) */
    double tstep;             /* trials: the start of the step that runs (before t0 is known) */
    int sub;                  /* staged: the round's part (shm_common.c, staged_step) */
    int pi;                   /* gather cursor: peers done (1 .. p-1) */
    size_t es;                /* element size */
    size_t chunk;             /* bytes per chunk (a multiple of the element size);
                               * staged: elements per block of a full round */
    size_t ci;                /* work cursor: chunk index within the current block */
    size_t abase;             /* staged: the staging areas' rotation at round 0 */
    unsigned char *scratch;   /* three chunks (reductions only), from weft__scratch_alloc */
    unsigned char *ta, *tb, *tmine;
    unsigned char *acc;       /* reduce_scatter in place: the result, copied out at the end */
} weft__shm_job_t;

/** Start job j as the node's operation seq (from weft__node_begin, called
 * in the same order on every rank of the node). WEFT_INPROGRESS, or an
 * error (the job must still be cleaned up). Engine side. */
weft_status_t weft__shm_job_start(weft__shm_job_t *j, uint64_t seq);
/** Advance j: WEFT_INPROGRESS, WEFT_SUCCESS once this rank's part is done
 * and nobody reads its buffers any more (weft__node_end called), or an
 * error. Never blocks. Engine side. */
weft_status_t weft__shm_job_step(weft__shm_job_t *j);
/** Free j's scratch; a job that did not finish ends its number so that the
 * node's next operation may run. Idempotent. Engine side. */
void weft__shm_job_cleanup(weft__shm_job_t *j);

/* The shm algorithms' entry points (a job in op->priv). */
weft_status_t weft__shm_start(weft__op_t *op);
weft_status_t weft__shm_step(weft__op_t *op);
void weft__shm_cleanup(weft__op_t *op);
/** Predicted seconds of kind's shm algorithm (p ranks, n bytes as the
 * collective's cost functions count them); INFINITY without the path or on
 * a communicator that spans nodes. Any thread. */
double weft__shm_cost(weft__opkind_t kind, int p, size_t n, const weft__cost_t *c);
/** Predicted seconds of an allreduce's two halves on the path among p
 * ranks of a node, n bytes (WEFT__SHM_RS_HALF then WEFT__SHM_AG_HALF), for
 * algorithms that run them as phases; INFINITY without the path. Any thread. */
double weft__shm_halves_cost(int p, size_t n, const weft__cost_t *c);

/** The impl of kind's shm algorithm (one line per collective file). */
#define WEFT__SHM_IMPL(coll_, kind_, id_)                                               \
    static double cost(int p, size_t n, const weft__cost_t *c)                        \
    {                                                                                 \
        return weft__shm_cost(kind_, p, n, c);                                        \
    }                                                                                 \
    const weft__algo_impl_t weft__##coll_##_shm_impl = {                              \
        .id = id_, .kind = kind_, .cost = cost, .start = weft__shm_start,              \
        .step = weft__shm_step, .cleanup = weft__shm_cleanup}

#endif /* WEFT_COLL_SHM_H */
