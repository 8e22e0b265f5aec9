/*
 * progress.h - the progress layer: the engine that drives operations in
 * flight, and their completion and waiting.
 */
#ifndef WEFT_PROGRESS_H
#define WEFT_PROGRESS_H

#include <stdbool.h>

#include "sys.h"

typedef struct weft__op weft__op_t;

/* ---- engine (progress/) ----------------------------------------------------- */
/** Start the engine thread if not running. Any thread. */
weft_status_t weft__engine_start(void);
/** Stop and join it after the in-flight ops finish (bounded). weft_finalize only. */
weft_status_t weft__engine_stop(double timeout_s);
/** Queue an op (lock-free, any thread) and wake the engine unless nowake. */
void weft__engine_submit(weft__op_t *op, bool nowake);
/**
 * A blocking call's op when nothing else is in flight in the process: start
 * it on the caller thread under the progress lock, without the submission
 * stack and the pass that would drain it. Returns true if the op was taken
 * (finished, or started and on the active list for the caller's wait to
 * drive); false if it must be submitted as usual (other ops in flight, or
 * the lock held elsewhere). Any thread; op not stream-bound (no op->ready).
 */
bool weft__engine_start_inline(weft__op_t *op);
/**
 * Try to run one progress pass on the caller thread (try-lock): returns the
 * amount of work done, or -1 if another thread is progressing. Any thread.
 */
int weft__engine_try_progress(void);
/**
 * Hold the progress lock outside a progress pass, so that no pass runs
 * meanwhile (a transport's user-thread paths that touch state the engine side
 * uses without a lock of its own, e.g. UCX endpoint creation). Spins with
 * sched_yield until it gets the lock. Any thread that does not hold it already;
 * never from inside a pass (not reentrant). Keep the section short.
 */
void weft__engine_lock(void);
void weft__engine_unlock(void);
/** Back off after `idle` consecutive empty polls: spin (WEFT_SPIN), then
 * yield; on an oversubscribed node sleep instead of yielding (growing, capped
 * by WEFT_MAX_SLEEP_US). Any thread. */
void weft__engine_backoff(unsigned idle);
/** A caller starts (+1) / stops (-1) polling in a wait; the engine naps
 * meanwhile. Any thread. */
void weft__engine_waiter(int delta);
/** Count of step transfers completed (engine side, under the progress lock):
 * weft__coll_test bumps it so that progress passes see the work. */
extern unsigned weft__engine_events;
/** Make sure the engine thread is awake (before a caller sleeps). Any thread. */
void weft__engine_wake(void);
/** Number of ops issued and not yet completed, process-wide. */
int weft__engine_inflight(void);

/**
 * A progress hook: a transport's worker, driven once per progress pass
 * (engine side, progress lock held) after the ops' steps; returns the work
 * it did (events), 0 when idle. Registered by the transport when it starts
 * its worker, so the engine calls no transport by name.
 */
typedef int (*weft__progress_fn)(void *arg);
#define WEFT__PROGRESS_HOOKS 8
/** Add a hook (a second add of the same fn/arg is a no-op). WEFT_ERR_INTERNAL
 * when WEFT__PROGRESS_HOOKS are registered. Any thread, passes may run. */
weft_status_t weft__progress_hook_add(weft__progress_fn fn, void *arg);
/** Remove a hook. Only while no pass runs: the engine stopped (weft_finalize),
 * or the caller holds the progress lock (weft__engine_lock). */
void weft__progress_hook_remove(weft__progress_fn fn, void *arg);

/* ---- completion (lib/request.c) ------------------------------------------ */
void weft__op_complete(weft__op_t *op, weft_status_t status);
/** Wait until op->done, helping progress with backoff. Any thread. */
void weft__op_wait_done(weft__op_t *op);
/**
 * Engine side, as the op finishes (progress lock held): store the status and
 * publish the op, as weft__op_complete, unless a completion callback is
 * registered: then return true and leave it unpublished, to be published by
 * weft__op_complete_callback once the progress lock is released, so that the
 * user's callback never runs under it.
 */
bool weft__op_finish(weft__op_t *op, weft_status_t status);
/** Publish op (as weft__op_complete) and run its callback. Progress lock not held. */
void weft__op_complete_callback(weft__op_t *op);

#endif /* WEFT_PROGRESS_H */
