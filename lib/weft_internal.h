/*
 * weft_internal.h - the core's own declarations (lib/): issuing operations,
 * their life cycle, agreement steps. The layers and extension points have
 * their own headers, included here for the files of lib/: base/sys.h, base/log.h,
 * base/handle.h, progress/progress.h, backends/transport.h, lib/coll/algo.h,
 * lib/select.h, lib/obs.h, lib/stream.h, lib/ctl.h (MPI itself only in lib/mpi_interop.h,
 * which this header does not include). Never installed.
 *
 * Names: internal functions are weft__*, file-local ones are static.
 */
#ifndef WEFT_INTERNAL_H
#define WEFT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"
#include "algo.h"
#include "comm.h"
#include "config.h"
#include "ctl.h"
#include "global.h"
#include "handle.h"
#include "log.h"
#include "obs.h"
#include "progress.h"
#include "reduce.h"
#include "select.h"
#include "stream.h"
#include "sys.h"
#include "transport.h"

/* ---- requests (lib/request.c) ---------------------------------------------- */
weft_status_t weft__request_new(weft__op_t *op, weft_request_t *req);
/** Drop every request slot (weft_finalize, engine stopped). */
void weft__request_fini(void);
/** Mark op complete with status (engine side): release store + futex wake. */

/**
 * The arguments of a collective call as every rank must pass them alike;
 * -1 where a field does not apply.
 */
typedef struct weft__coll_args {
    weft_coll_t coll;
    long long count;
    int dtype, op, root;
} weft__coll_args_t;
/**
 * Every collective entry point calls this once, after it found its
 * communicator, with st its own checks' verdict (WEFT_SUCCESS: about to
 * issue). A refused call still takes its place in c's collective order, so
 * that a later collective never matches the messages of one that other ranks
 * issued and this rank refused. Under WEFT_CHECK_ARGS=1 the ranks first
 * agree: a refusal or an argument that differs on any rank fails the call on
 * every rank (WEFT_ERR_INVALID_ARG where this rank's own checks passed).
 * Returns the call's status. Caller thread.
 */
weft_status_t weft__coll_agree(weft__comm_t *c, weft_status_t st, const weft__coll_args_t *a);

/**
 * A blocking allgather of `bytes` per rank that Weft itself runs on a user's
 * communicator (an agreement step): it takes its place in c's collective
 * order like any collective but is never bound to c's stream, so it has
 * finished when this returns, also on a stream-bound communicator. Caller
 * thread, as a collective on c.
 */
weft_status_t weft__allgather_internal(weft__comm_t *c, const void *mine, void *all, size_t bytes);

/**
 * Make op (an AVG allreduce, reduce_scatter or reduce, caller thread, before
 * weft__issue) sum in the wide type: its input is widened into memory the op
 * owns, the algorithm runs on the wide type, and a finish step divides and
 * narrows into the caller's buffer. in_count / out_count: elements of the
 * input and of this rank's output (0: none). Not for stream-bound ops.
 */
weft_status_t weft__avg_prepare(weft__op_t *op, size_t in_count, size_t out_count);

/** op->finish for AVG: the algorithm reduced as SUM; divide recvbuf once. Engine side. */
weft_status_t weft__finish_avg(weft__op_t *op);

/** Allocate and fill the common fields of an op (caller thread). */
weft_status_t weft__op_new(weft__comm_t *comm, weft__opkind_t kind, weft__op_t **out);
void weft__op_free(weft__op_t *op);

/**
 * Issue an op: assigns its tag (issue order), queues it to the engine. With
 * req != NULL returns at once with a request handle; with req == NULL waits
 * for it (the caller helps progress) and returns its status. The op is owned
 * by Weft from here on, also on error. Any thread.
 */
weft_status_t weft__issue(weft__op_t *op, weft_request_t *req);

/** How the engine runs ops (lib/op.c), given to weft__progress_init. */
extern const weft__task_class_t weft__op_class;
/** Wait until op completed, driving progress (weft__task_wait). Any thread. */
void weft__op_wait_done(weft__op_t *op);

/** Free the calling thread's cache of ops (weft_finalize; other threads' caches
 * are freed when they exit). */
void weft__op_cache_trim(void);

/** Validate buffers and size: WEFT_ERR_DATATYPE, _COUNT_OVERFLOW, _INVALID_ARG
 * (NULL buffer with count > 0); *bytes = count * element size. Any thread. */
weft_status_t weft__check_buffers(const void *sendbuf, const void *recvbuf, size_t count,
                                  weft_datatype_t dtype, size_t *bytes);

#endif /* WEFT_INTERNAL_H */
