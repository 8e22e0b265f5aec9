/*
 * obs.h - observability: the profiler and the trace (lib/obs.c,
 * lib/profile.c, lib/trace.c) and their hooks.
 */
#ifndef WEFT_OBS_H
#define WEFT_OBS_H

#include <stdatomic.h>

#include "algo.h"
#include "global.h"

/* ---- observability (lib/profile.c, lib/trace.c) ----------------------------- */
/** Open the profile/trace sinks asked for (weft_init) and write them (weft_finalize). */
weft_status_t weft__obs_init(void);
void weft__obs_fini(void);

/*
 * Observability hooks. weft__g.obs_on is a bit set (WEFT__OBS_PROFILE,
 * WEFT__OBS_TRACE), 0 when both are off; every hook site is guarded by one
 * predictable branch, WEFT__OBS_ON(), so the cost when off is one relaxed load
 * and a not-taken branch. Building with -DWEFT_OBS_DISABLE compiles the hook
 * sites out (used to measure that cost; doc/observability.md).
 */
#define WEFT__OBS_PROFILE 1
#define WEFT__OBS_TRACE 2
#ifdef WEFT_OBS_DISABLE
#define WEFT__OBS_ON() 0
#else
#define WEFT__OBS_ON() \
    WEFT__UNLIKELY(atomic_load_explicit(&weft__g.obs_on, memory_order_relaxed) != 0)
#endif
/** The guard of every per-op hook after the issue: op was issued while
 * observability was on (op->timed) and it still is. An op issued while it
 * was off records nothing later: half an op would skew the profile. */
#define WEFT__OP_OBSERVED(op) ((op)->timed && WEFT__OBS_ON())
/** Op issued (op->t_issue set, before submission). Caller thread. */
void weft__obs_issue(weft__op_t *op);
/** Op started (after impl->start returned st). Engine side (progress lock held). */
void weft__obs_start(weft__op_t *op, weft_status_t st);
/** Run impl->step(op) and record a step event when it advanced. Engine side. */
weft_status_t weft__obs_step(weft__op_t *op);
/** Op finished with st (before its completion is published). Engine side. */
void weft__obs_done(weft__op_t *op, weft_status_t st);
/** weft__op_wait_done(op), timing how long the caller was blocked. Any thread. */
void weft__obs_wait_done(weft__op_t *op);
/** A stream-side wait on comm c from t0 to t1 (weft__now() seconds); `what`
 * is a constant string. For lib/stream.c and the device layer. Any thread. */
void weft__obs_stream_wait(const weft__comm_t *c, const char *what, double t0, double t1);
/* Internal split of lib/obs.c: profile (lib/profile.c) and trace (lib/trace.c). */
weft_status_t weft__profile_init(void);
void weft__profile_fini(void);
void weft__profile_done(const weft__op_t *op, double t_end);
void weft__profile_wait(const weft__op_t *op, double waited);
weft_status_t weft__trace_init(void); /* collective over MPI_COMM_WORLD (clock sync) */
void weft__trace_fini(void);
/** The file rank `rank` writes for WEFT_TRACE (PATH.RANK.json). */
void weft__trace_file(char *out, size_t cap, int rank);
void weft__trace_issue(const weft__op_t *op);
void weft__trace_start(const weft__op_t *op, weft_status_t st);
void weft__trace_step(const weft__op_t *op, int phase, int stepno, double t_end);
void weft__trace_done(const weft__op_t *op, weft_status_t st, double t_end);
void weft__trace_span(const weft__comm_t *c, const char *cat, const char *what, double t0,
                      double t1);

#endif /* WEFT_OBS_H */
