/*
 * obs.c - observability: the switch (weft__g.obs_on), the hooks the core calls
 * and their dispatch to the profiler (lib/profile.c) and the trace
 * (lib/trace.c), and the public weft_profile_* calls.
 *
 * Cost when off: every hook site in the core is `if (WEFT__OBS_ON()) ...`,
 * one relaxed load of weft__g.obs_on and a branch predicted not taken. When on,
 * the hooks below run; what they cost is measured in doc/observability.md.
 *
 * Thread contract: weft__obs_init / weft__obs_fini run in weft_init /
 * weft_finalize (one thread, engine stopped at fini). The hooks run where
 * their declaration in weft_internal.h says. weft_profile_enable and
 * weft_profile_dump: any thread between weft_init and weft_finalize.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weft_internal.h"

/* Bit set of WEFT__OBS_PROFILE / WEFT__OBS_TRACE. Relaxed everywhere: the
 * sinks it guards are made ready (under their own locks) before a bit is set,
 * and a hook that sees a stale value either skips one event or finds the sink
 * ready; the sinks are torn down only after the engine stopped. */

static inline int bits(void) { return atomic_load_explicit(&weft__g.obs_on, memory_order_relaxed); }

/* Can `path` be written at finalize? An existing regular file must be
 * writable, else its directory must exist and be writable. Logs why not. */
static int output_ok(const char *var, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            WEFT__ERROR("%s: %s is a directory, not a file", var, path);
            return 0;
        }
        if (access(path, W_OK) != 0) {
            WEFT__ERROR("%s: cannot write %s: %s", var, path, strerror(errno));
            return 0;
        }
        return 1;
    }
    if (errno != ENOENT) {
        WEFT__ERROR("%s: cannot write %s: %s", var, path, strerror(errno));
        return 0;
    }
    char copy[1100];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        WEFT__ERROR("%s: cannot write %s: directory %s does not exist", var, path, dir);
        return 0;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        WEFT__ERROR("%s: cannot write %s: directory %s: %s", var, path, dir, strerror(errno));
        return 0;
    }
    return 1;
}

/* weft_init, collective over MPI_COMM_WORLD: the output paths are checked
 * now (an unwritable one fails weft_init on every rank, instead of the data
 * being lost at finalize), and the ranks agree on tracing, which measures
 * the clocks collectively. */
weft_status_t weft__obs_init(void)
{
    atomic_store_explicit(&weft__g.obs_on, 0, memory_order_relaxed);
    int rank = weft__g.world_rank;
    /* [0] a path is wrong here, [1] this rank traces, [2] it does not */
    int mine[3] = {0, weft__cfg.trace_path[0] != 0, weft__cfg.trace_path[0] == 0}, all[3];
    if (weft__cfg.profile_path[0] && rank == 0 && !output_ok("WEFT_PROFILE", weft__cfg.profile_path))
        mine[0] = 1;
    if (weft__cfg.trace_path[0]) {
        char path[1100];
        weft__trace_file(path, sizeof path, rank);
        if (!output_ok("WEFT_TRACE", path)) mine[0] = 1;
    }
    WEFT__CHECK(weft__ctl_allreduce(weft__ctl_world(), mine, all, 3, WEFT__CTL_INT, WEFT__CTL_MAX));
    if (all[0]) {
        if (!mine[0] && rank == 0)
            WEFT__ERROR("WEFT_PROFILE/WEFT_TRACE: another rank cannot write its output");
        return WEFT_ERR_INVALID_ARG;
    }
    if (all[1] && all[2]) {
        WEFT__ERROR("WEFT_TRACE is set on some ranks only: set it on every rank or none");
        return WEFT_ERR_INVALID_ARG;
    }
    if (weft__cfg.profile_path[0]) {
        if (weft__profile_init() == WEFT_SUCCESS)
            atomic_fetch_or_explicit(&weft__g.obs_on, WEFT__OBS_PROFILE, memory_order_relaxed);
        else
            WEFT__ERROR("WEFT_PROFILE=%s: profiler not started", weft__cfg.profile_path);
    }
    if (all[1]) {
        weft_status_t st = weft__trace_init();
        if (st != WEFT_SUCCESS) {
            WEFT__ERROR("WEFT_TRACE=%s: trace not started", weft__cfg.trace_path);
            return st;
        }
        atomic_fetch_or_explicit(&weft__g.obs_on, WEFT__OBS_TRACE, memory_order_relaxed);
    }
    return WEFT_SUCCESS;
}

/* weft_finalize: engine stopped, MPI still usable, communicators still alive. */
void weft__obs_fini(void)
{
    atomic_store_explicit(&weft__g.obs_on, 0, memory_order_relaxed);
    weft__profile_fini();
    weft__trace_fini();
}

/* ---- hooks ---------------------------------------------------------------------- */
void weft__obs_issue(weft__op_t *op)
{
    if (bits() & WEFT__OBS_TRACE) weft__trace_issue(op);
}

void weft__obs_start(weft__op_t *op, weft_status_t st)
{
    if (bits() & WEFT__OBS_TRACE) weft__trace_start(op, st);
}

weft_status_t weft__obs_step(weft__op_t *op)
{
    int phase = op->phase, stepno = op->stepno;
    weft_status_t st = op->impl->step(op);
    /* A step event when the algorithm moved on (its phase or step counter
     * changed) or finished; polls that changed nothing are not recorded. */
    if ((bits() & WEFT__OBS_TRACE) &&
        (st != WEFT_INPROGRESS || op->phase != phase || op->stepno != stepno))
        weft__trace_step(op, phase, stepno, weft__now());
    return st;
}

void weft__obs_done(weft__op_t *op, weft_status_t st)
{
    int b = bits();
    double t = weft__now();
    if (b & WEFT__OBS_PROFILE) weft__profile_done(op, t);
    if (b & WEFT__OBS_TRACE) weft__trace_done(op, st, t);
}

void weft__obs_wait_done(weft__op_t *op)
{
    double t0 = weft__now();
    weft__op_wait_done(op);
    double t1 = weft__now();
    int b = bits();
    if (b & WEFT__OBS_PROFILE) weft__profile_wait(op, t1 - t0);
    if (b & WEFT__OBS_TRACE) weft__trace_span(op->comm, "wait", "wait", t0, t1);
}

void weft__obs_stream_wait(const weft__comm_t *c, const char *what, double t0, double t1)
{
    if (WEFT__OBS_ON() && (bits() & WEFT__OBS_TRACE) && c != NULL)
        weft__trace_span(c, "stream", what ? what : "stream wait", t0, t1);
}

/* ---- public -------------------------------------------------------------------- */
weft_status_t weft_profile_enable(int on)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (on) {
        WEFT__CHECK(weft__profile_init()); /* idempotent: keeps counts gathered so far */
        atomic_fetch_or_explicit(&weft__g.obs_on, WEFT__OBS_PROFILE, memory_order_relaxed);
    } else {
        atomic_fetch_and_explicit(&weft__g.obs_on, ~WEFT__OBS_PROFILE, memory_order_relaxed);
    }
    return WEFT_SUCCESS;
}
