/*
 * stream.h - communicators bound to streams (lib/stream.c).
 */
#ifndef WEFT_STREAM_INTERNAL_H
#define WEFT_STREAM_INTERNAL_H

#include "algo.h"

/* ---- streams (lib/stream.c): bind a comm to its stream at creation ------- */
weft_status_t weft__stream_comm_attach(weft__comm_t *comm);
void weft__stream_comm_detach(weft__comm_t *comm);

/** Set op->ready / stream hooks for an op on a stream-bound comm (no-op otherwise).
 * Called by weft__issue for every op. On error the op is untouched (the caller
 * frees it). Caller thread. */
weft_status_t weft__stream_prepare(weft__op_t *op);
/** weft__issue, for an op with op->sop, after its tag is assigned and before it
 * is submitted: records the start flag on the stream (or launches the device
 * collective); blocking = 1 also makes the stream wait for the op and hands the
 * op to the stream side (freed when it completes). Caller thread. */
weft_status_t weft__stream_issue(weft__op_t *op, int blocking);
/** weft_wait/weft_test on an op with op->sop: make the stream wait for it.
 * Returns 1 if the op now belongs to the stream side (the caller must not free
 * it), 0 if it already completed (the caller frees it as usual). Caller thread. */
int weft__stream_op_wait(weft__op_t *op);
/** weft_query_algo: the algorithm for a stream-bound comm (NCCL for device
 * buffers on a CUDA stream; NCCL on host buffers mapped to a host algorithm),
 * given the host selection host_choice. Any thread. */
weft_algo_t weft__stream_query_algo(weft__comm_t *c, weft_coll_t coll, size_t bytes,
                                    weft_datatype_t dtype, weft_algo_t host_choice);
/** weft__op_free: drop the op's reference to its stream state. Any thread. */
void weft__stream_op_release(weft__op_t *op);

#endif /* WEFT_STREAM_INTERNAL_H */
