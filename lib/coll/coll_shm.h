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
 */
#ifndef WEFT_COLL_SHM_H
#define WEFT_COLL_SHM_H

#include "algo.h"

weft_status_t weft__shm_start(weft__op_t *op);
weft_status_t weft__shm_step(weft__op_t *op);
void weft__shm_cleanup(weft__op_t *op);
/** Predicted seconds of kind's shm algorithm (p ranks, n bytes as the
 * collective's cost functions count them); INFINITY without the path. Any thread. */
double weft__shm_cost(weft__opkind_t kind, int p, size_t n, const weft__cost_t *c);

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
