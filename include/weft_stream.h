/*
 * weft_stream.h - host streams: ordered executors that let a CPU program use
 * the same pipeline model as a GPU program (see doc/streams.md).
 *
 * A stream runs its tasks one after the other, in the order they were
 * enqueued, on a thread of its own. A communicator bound to a stream
 * (weft_comm_create in weft_mpi.h) orders its collectives with the stream's
 * tasks: a collective starts after the tasks enqueued before it, and tasks
 * enqueued after a blocking collective (or after weft_wait on a nonblocking
 * one) run after it completed, while the host thread never blocks.
 *
 * Errors: a task returns a weft_status_t. The first negative status (of a
 * task, or of a collective the stream waited for) becomes the stream's sticky
 * error: later user tasks are skipped (not run) until weft_stream_synchronize
 * returns that error and clears it. Weft's own stream steps still run, so
 * collectives on other ranks are never left waiting.
 */
#ifndef WEFT_STREAM_H
#define WEFT_STREAM_H

#include "weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A task: runs on the stream's thread; a negative return fails the stream. */
typedef weft_status_t (*weft_stream_fn_t)(void *arg);

/**
 * Create a host stream (starts its thread, which sleeps while idle). May be
 * called before weft_init. Thread: any.
 */
WEFT_EXPORT weft_status_t weft_stream_create_host(weft_stream_t *stream);
/**
 * Enqueue fn(arg) on the stream; returns at once. On a CUDA stream the task
 * runs as a host function in stream order (it must not call CUDA).
 * Thread: any; tasks enqueued from several threads run in the order the
 * enqueue calls happened.
 */
WEFT_EXPORT weft_status_t weft_stream_enqueue(weft_stream_t stream, weft_stream_fn_t fn, void *arg);
/**
 * Block until every task enqueued so far (including Weft's collective steps)
 * ran. Returns the stream's sticky error and clears it, WEFT_SUCCESS if none.
 * Thread: any (not from a task of the same stream).
 */
WEFT_EXPORT weft_status_t weft_stream_synchronize(weft_stream_t stream);
/**
 * WEFT_SUCCESS if the stream is idle, WEFT_INPROGRESS if work is pending, or
 * the sticky error (not cleared). Never blocks. Thread: any.
 */
WEFT_EXPORT weft_status_t weft_stream_query(weft_stream_t stream);
/**
 * Wait for the stream's work, then free it (a wrapped device stream is left
 * to its owner). Destroy the communicators bound to it first. Returns the
 * sticky error if there was one. Thread: any, once, with no other call on
 * the stream in progress.
 */
WEFT_EXPORT weft_status_t weft_stream_destroy(weft_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_STREAM_H */
