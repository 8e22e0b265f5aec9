/*
 * nccl.c - NCCL collectives for device buffers on CUDA-stream communicators
 * (the weft__nccl_backend_t of backends/device.h).
 *
 * A Weft communicator bound to a CUDA stream gets one NCCL communicator at
 * creation: rank 0 makes the unique id (ncclGetUniqueId) and broadcasts it,
 * with its status, over the communicator's control channel (lib/ctl.h); every rank then
 * joins with ncclCommInitRank. ncclAllReduce is enqueued on the stream by the
 * issuing thread; the progress engine polls ncclCommGetAsyncError while the
 * kernel runs and aborts the NCCL communicator (ncclCommAbort) on an error or
 * a timeout, so that a stuck kernel returns.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "device.h"
#include "log.h"
#include "reduce.h"
#include "sys.h"
#include "transport.h"

static weft_status_t nccl_error(ncclResult_t r, const char *call, const char *file, int line)
{
    weft__log_write(WEFT__LOG_ERROR, file, line, "%s failed: %s (%d)%s%s", call,
                    ncclGetErrorString(r), (int)r, ncclGetLastError(NULL) ? ": " : "",
                    ncclGetLastError(NULL) ? ncclGetLastError(NULL) : "");
    return WEFT_ERR_NCCL;
}

#define WEFT__NCCL_CHECK(call)                                                   \
    do {                                                                        \
        ncclResult_t weft__r = (call);                                          \
        if (WEFT__UNLIKELY(weft__r != ncclSuccess && weft__r != ncclInProgress)) \
            return nccl_error(weft__r, #call, __FILE__, __LINE__);              \
    } while (0)

#define WEFT__NCCL_CHECK_GOTO(call, st, label)                                   \
    do {                                                                        \
        ncclResult_t weft__r = (call);                                          \
        if (WEFT__UNLIKELY(weft__r != ncclSuccess && weft__r != ncclInProgress)) { \
            (st) = nccl_error(weft__r, #call, __FILE__, __LINE__);              \
            goto label;                                                         \
        }                                                                       \
    } while (0)

typedef struct nccl_state {
    ncclComm_t comm;
    _Atomic int aborted;
    int id;             /* the Weft comm's id, for logs */
    int rank;           /* this rank in it */
} nccl_state_t;

/* Caller thread, collective over comm (weft_comm_create). */
static weft_status_t n_comm_open(struct weft__comm *c, void **out)
{
    /* the communicator's rank, size, id and control channel: the view
     * transports get (backends/transport.h) */
    const weft__tp_comm_t *comm = weft__tp_comm(c);
    weft_status_t st = WEFT_SUCCESS;
    struct {
        int status;
        ncclUniqueId id;
    } msg;
    memset(&msg, 0, sizeof msg);
    nccl_state_t *ns = calloc(1, sizeof *ns);
    if (ns == NULL) return WEFT_ERR_NO_MEMORY;
    ns->id = comm->id;
    ns->rank = comm->rank;
    if (comm->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&msg.id);
        msg.status = r == ncclSuccess ? 0 : (int)nccl_error(r, "ncclGetUniqueId", __FILE__, __LINE__);
    }
    /* Rank 0's status travels with the id, so no rank waits for a failed one. */
    WEFT__CHECK_GOTO(weft__ctl_bcast(comm->ctl, &msg, sizeof msg, 0), st, fail);
    if (msg.status != 0) {
        st = WEFT_ERR_NCCL;
        goto fail;
    }
    ncclResult_t r = ncclCommInitRank(&ns->comm, comm->size, msg.id, comm->rank);
    if (r != ncclSuccess) {
        /* Not an error of the job: the caller falls back to host transfer on
         * every rank (e.g. NCCL before 2.30 refuses two ranks on one GPU). */
        const char *why = ncclGetLastError(NULL);
        WEFT__WARN("comm %d: ncclCommInitRank: %s (%d)%s%s; device buffers will use host "
                   "transfer", comm->id, ncclGetErrorString(r), (int)r, why ? ": " : "",
                   why ? why : "");
        st = WEFT_ERR_NCCL;
        goto fail;
    }
    *out = ns;
    return WEFT_SUCCESS;

fail:
    free(ns);
    return st;
}

/* Caller thread (weft_comm_destroy), after the comm's ops completed. */
static void n_comm_close(void *state)
{
    nccl_state_t *ns = state;
    if (ns == NULL) return;
    if (!atomic_load_explicit(&ns->aborted, memory_order_acquire)) {
        ncclResult_t r = ncclCommDestroy(ns->comm);
        if (r != ncclSuccess) nccl_error(r, "ncclCommDestroy", __FILE__, __LINE__);
    }
    free(ns);
}

static bool n_dtype(weft_datatype_t d, ncclDataType_t *out)
{
    switch (d) {
    case WEFT_INT8: *out = ncclInt8; return true;
    case WEFT_UINT8: *out = ncclUint8; return true;
    case WEFT_INT32: *out = ncclInt32; return true;
    case WEFT_UINT32: *out = ncclUint32; return true;
    case WEFT_INT64: *out = ncclInt64; return true;
    case WEFT_UINT64: *out = ncclUint64; return true;
    case WEFT_FLOAT16: *out = ncclFloat16; return true;
    case WEFT_BFLOAT16: *out = ncclBfloat16; return true;
    case WEFT_FLOAT32: *out = ncclFloat32; return true;
    case WEFT_FLOAT64: *out = ncclFloat64; return true;
    default: return false;
    }
}

static bool n_op(weft_op_t o, ncclRedOp_t *out)
{
    switch (o) {
    case WEFT_SUM: *out = ncclSum; return true;
    case WEFT_PROD: *out = ncclProd; return true;
    case WEFT_MIN: *out = ncclMin; return true;
    case WEFT_MAX: *out = ncclMax; return true;
    case WEFT_AVG: *out = ncclAvg; return true;
    default: return false; /* bitwise ops: host transfer */
    }
}

/* Any thread. */
static bool n_supports(weft_datatype_t dtype, weft_op_t op)
{
    ncclDataType_t t;
    ncclRedOp_t o;
    /* ncclAvg on integers truncates differently from Weft's AVG: keep it on floats */
    if (op == WEFT_AVG && weft__dtype_is_int(dtype)) return false;
    return n_dtype(dtype, &t) && n_op(op, &o);
}

/* Caller thread (issue): enqueue on the stream, returns at once. */
static weft_status_t n_coll(void *state, weft_coll_t coll, const void *sendbuf, void *recvbuf,
                            size_t count, weft_datatype_t dtype, weft_op_t op, int root,
                            struct weft_stream *s)
{
    nccl_state_t *ns = state;
    ncclDataType_t t;
    ncclRedOp_t o;
    cudaStream_t cs = (cudaStream_t)s->handle;
    if (!n_dtype(dtype, &t) || !n_op(op, &o)) return WEFT_ERR_DATATYPE;
    if (atomic_load_explicit(&ns->aborted, memory_order_acquire)) return WEFT_ERR_COMM_BROKEN;
    switch (coll) {
    case WEFT_COLL_ALLREDUCE:
        WEFT__NCCL_CHECK(ncclAllReduce(sendbuf, recvbuf, count, t, o, ns->comm, cs));
        return WEFT_SUCCESS;
    case WEFT_COLL_BCAST:
        WEFT__NCCL_CHECK(ncclBroadcast(sendbuf, recvbuf, count, t, root, ns->comm, cs));
        return WEFT_SUCCESS;
    case WEFT_COLL_ALLGATHER: /* Weft's in place (own block at rank) is NCCL's */
        WEFT__NCCL_CHECK(ncclAllGather(sendbuf, recvbuf, count, t, ns->comm, cs));
        return WEFT_SUCCESS;
    case WEFT_COLL_REDUCE_SCATTER:
        if (sendbuf == recvbuf && ns->rank != 0) {
            /* Weft's in place (the result at the start) is not NCCL's (the
             * result at the rank's block): reduce in NCCL's, then move it. */
            const size_t bytes = count * weft_datatype_size(dtype);
            char *own = (char *)recvbuf + (size_t)ns->rank * bytes;
            WEFT__NCCL_CHECK(ncclReduceScatter(sendbuf, own, count, t, o, ns->comm, cs));
            return s->dev->copy(s, recvbuf, own, bytes); /* in stream order, after it */
        }
        WEFT__NCCL_CHECK(ncclReduceScatter(sendbuf, recvbuf, count, t, o, ns->comm, cs));
        return WEFT_SUCCESS;
    default:
        return WEFT_ERR_UNSUPPORTED;
    }
}

/* Engine side: polled while an op is in flight. */
static weft_status_t n_async_error(void *state)
{
    nccl_state_t *ns = state;
    if (atomic_load_explicit(&ns->aborted, memory_order_acquire)) return WEFT_ERR_COMM_BROKEN;
    ncclResult_t ar = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(ns->comm, &ar);
    if (r != ncclSuccess) return nccl_error(r, "ncclCommGetAsyncError", __FILE__, __LINE__);
    if (ar != ncclSuccess && ar != ncclInProgress) {
        WEFT__ERROR("NCCL communicator of comm %d: asynchronous error %s (%d)", ns->id,
                    ncclGetErrorString(ar), (int)ar);
        return WEFT_ERR_NCCL;
    }
    return WEFT_SUCCESS;
}

/* Engine side (op cleanup after an error or a timeout). Once. */
static void n_abort(void *state)
{
    nccl_state_t *ns = state;
    int expected = 0;
    /* acq_rel: later users see the comm as aborted. */
    if (!atomic_compare_exchange_strong_explicit(&ns->aborted, &expected, 1, memory_order_acq_rel,
                                                 memory_order_acquire))
        return;
    ncclResult_t r = ncclCommAbort(ns->comm);
    if (r != ncclSuccess) nccl_error(r, "ncclCommAbort", __FILE__, __LINE__);
}

const weft__nccl_backend_t weft__nccl_backend_impl = {
    .comm_open = n_comm_open,
    .comm_close = n_comm_close,
    .supports = n_supports,
    .coll = n_coll,
    .async_error = n_async_error,
    .abort = n_abort,
};
