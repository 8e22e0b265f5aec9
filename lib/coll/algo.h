/*
 * algo.h - the algorithm interface: an operation as an algorithm sees it,
 * the algorithm's entry points (weft__algo_impl_t, registered in
 * lib/coll/algos.c) and the transfer helpers and scratch memory algorithms
 * use (lib/op.c). Everything here runs on the engine side unless stated.
 */
#ifndef WEFT_ALGO_H
#define WEFT_ALGO_H

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "log.h"
#include "node.h"
#include "progress.h"
#include "reduce.h"
#include "sys.h"
#include "transport.h"

/* ---- operations ----------------------------------------------------------- */
/* What kind of operation (for profiles, traces, logs). */
typedef enum weft__opkind {
    WEFT__OP_ALLREDUCE = WEFT_COLL_ALLREDUCE,
    WEFT__OP_REDUCE_SCATTER = WEFT_COLL_REDUCE_SCATTER,
    WEFT__OP_ALLGATHER = WEFT_COLL_ALLGATHER,
    WEFT__OP_BCAST = WEFT_COLL_BCAST,
    WEFT__OP_REDUCE = WEFT_COLL_REDUCE,
    WEFT__OP_ALLTOALL = WEFT_COLL_ALLTOALL,
    WEFT__OP_GATHER = WEFT_COLL_GATHER,
    WEFT__OP_SCATTER = WEFT_COLL_SCATTER,
    WEFT__OP_BARRIER = WEFT_COLL_BARRIER,
    WEFT__OP_ALLGATHERV = WEFT_COLL_ALLGATHERV,
    WEFT__OP_ALLTOALLV = WEFT_COLL_ALLTOALLV,
    WEFT__OP_GATHERV = WEFT_COLL_GATHERV,
    WEFT__OP_SCATTERV = WEFT_COLL_SCATTERV,
    WEFT__OP_REDUCE_SCATTERV = WEFT_COLL_REDUCE_SCATTERV,
    WEFT__OP_SEND = WEFT_COLL_COUNT,
    WEFT__OP_RECV,
    WEFT__OP_HALO,
    WEFT__OP_STREAM, /* a stream-side step (copy, flag) run by the engine */
    WEFT__OP_KIND_COUNT
} weft__opkind_t;

const char *weft__opkind_name(weft__opkind_t k);

typedef struct weft__op weft__op_t;

/**
 * An algorithm: a nonblocking state machine. start() is called once, step()
 * until it returns something other than WEFT_INPROGRESS; both run on the
 * engine side (engine thread or a caller holding the progress lock), never
 * block, and may return WEFT_SUCCESS at once. cleanup() frees what start()
 * allocated; it runs exactly once after the op finished, failed or timed out
 * (after the engine cancelled its active transfers).
 */
typedef struct weft__algo_impl {
    weft_algo_t id;
    weft__opkind_t kind;
    /** Predicted seconds for p ranks and n bytes (per-rank vector as the
     * user passes it). NULL: never chosen by the model (explicit only). */
    double (*cost)(int p, size_t n, const weft__cost_t *c);
    /** May this algorithm serve (dtype, op)? NULL: every valid pair. */
    bool (*supports)(weft_datatype_t dtype, weft_op_t op);
    weft_status_t (*start)(weft__op_t *op);
    weft_status_t (*step)(weft__op_t *op);
    void (*cleanup)(weft__op_t *op);
} weft__algo_impl_t;

#define WEFT__MAX_XFER 64
#define WEFT__PRIV_BYTES 512

struct weft__op {
    /** What the engine drives (progress/progress.h): its list links, the
     * start flag and time, and the completion word. First member: the
     * engine's task is the op (weft__op_of). */
    weft__task_t task;
    /* -- set when issued (caller thread), read-only afterwards -- */
    weft__opkind_t kind;
    weft__comm_t *comm;
    const weft__algo_impl_t *impl;
    weft_algo_t algo;
    const void *sendbuf;     /* already resolved: == recvbuf for in place */
    void *recvbuf;
    size_t count;            /* elements (per-rank block for gather-like ops) */
    size_t bytes;            /* count * element size */
    weft_datatype_t dtype;
    weft_op_t rop;           /* the user's op (algorithms reduce AVG as SUM) */
    int root;                /* root or peer rank */
    int user_tag;            /* point-to-point tag */
    uint32_t tag;            /* transport tag, unique per op on its comm */
    void *arg;               /* op-specific extra arguments (halo plan, ...) */
    /** Optional: may the op start? (stream ordering). NULL = yes. */
    bool (*ready)(weft__op_t *op);
    /** Optional: runs once on the engine side after success, before completion. */
    weft_status_t (*finish)(weft__op_t *op);
    /** Weft's own step on a user's communicator (an agreement): never bound
     * to the communicator's stream, ordered with its collectives. */
    int unbound;
    /** Memory the op owns, freed with it (the widened AVG's buffers). */
    void *owned;
    void *user_recvbuf;      /* widened AVG: the caller's output buffer */
    size_t user_count;       /* widened AVG: elements of this rank's output */
    weft_datatype_t user_dtype; /* widened AVG: the caller's datatype */
    /** lib/stream.c: stream-side state of an op on a stream-bound comm (NULL otherwise). */
    struct weft__stream_op *sop;

    /* -- engine side state -- */
    int phase, stepno;       /* free for the algorithm */
    weft__xfer_t xfer[WEFT__MAX_XFER];
    int nxfer;               /* transfers posted in the current step */
    void *tmp;               /* scratch owned by the algorithm (freed in cleanup) */
    size_t tmp_bytes;
    /* weft__now() when the op was issued with observability on (timed = 1:
     * the profiler and the trace see only such ops), else the coarse clock,
     * which is all the watchdog needs and costs less than the precise one */
    double t_issue;          /* (the start time is task.t_start) */
    int timed;
    _Alignas(16) unsigned char priv[WEFT__PRIV_BYTES]; /* algorithm-private state */
};

/** The blocks of a vector collective (allgatherv, alltoallv; gatherv's
 * receive and scatterv's send arrays at the root, none elsewhere;
 * reduce_scatterv: the receive arrays are the blocks of the input vector,
 * laid end to end), in bytes:
 * send_len[r] bytes at send_off[r] of sendbuf go to rank r, recv_len[r]
 * bytes from rank r land at recv_off[r] of recvbuf (allgatherv: the send
 * arrays are unused, its one block is op->sendbuf, recv_len[rank] bytes).
 * In place (sendbuf == recvbuf) the send arrays are the receive arrays.
 * One allocation (lib/collectives.c), owned by the op (op->owned) and
 * pointed to by op->arg; written on the caller thread before the op is
 * issued, read-only afterwards. */
typedef struct weft__vblocks {
    size_t *send_len, *send_off, *recv_len, *recv_off;
    size_t recv_extent; /* max over r of recv_off[r] + recv_len[r] */
} weft__vblocks_t;

/** The op whose task t is (the task is its first member). Any thread. */
static inline weft__op_t *weft__op_of(weft__task_t *t) { return (weft__op_t *)(void *)t; }

/**
 * Scratch memory for algorithms, engine side (under the progress lock). A few
 * freed buffers are kept for reuse: a fresh multi-megabyte malloc per op is
 * mmap'ed, faulted in page by page and unmapped again on free, which cost
 * more than the transfer at 8 MiB. weft__scratch_trim frees the cache
 * (weft_finalize).
 */
void *weft__scratch_alloc(size_t bytes);
void weft__scratch_free(void *p);
void weft__scratch_trim(void);

/* Algorithm helpers for lib/coll (engine side). Each posts into op->xfer[op->nxfer++]. */
weft_status_t weft__coll_isend(weft__op_t *op, const void *buf, size_t bytes, int peer);
/** weft__coll_isend with the transfer's eager hint set (see weft__xfer_t). */
weft_status_t weft__coll_isend_eager(weft__op_t *op, const void *buf, size_t bytes, int peer);
/** Send / receive a weft__xfer_dt_t message (only when the comm's transport has
 * isend_dt / irecv_dt); the send with the eager hint set. */
weft_status_t weft__coll_isend_dt(weft__op_t *op, const weft__xfer_dt_t *d, int peer);
weft_status_t weft__coll_irecv_dt(weft__op_t *op, const weft__xfer_dt_t *d, int peer);
weft_status_t weft__coll_irecv(weft__op_t *op, void *buf, size_t bytes, int peer);
/** May a message of `bytes` be received with weft__coll_irecv_reduce (the
 * transport unpacks piecewise, and 2 KiB <= bytes <= WEFT_FUSED_REDUCE_MAX)? */
bool weft__coll_can_recv_reduce(const weft__op_t *op, size_t bytes);
/** Receive count elements of op's dtype from peer as out = a OP message
 * (op->rop), reduced on arrival (weft__rr_t, which must live until the step's
 * transfers completed; check weft__rr_failed then). */
weft_status_t weft__coll_irecv_reduce(weft__op_t *op, weft__rr_t *rr, void *out, const void *a,
                                      size_t count, int peer);
/**
 * WEFT_SUCCESS when every transfer of the current step completed (nxfer is
 * then reset to 0), WEFT_INPROGRESS if some are still running, or an error.
 */
weft_status_t weft__coll_test(weft__op_t *op);

#endif /* WEFT_ALGO_H */
