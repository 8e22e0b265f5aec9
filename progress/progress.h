/*
 * progress.h - the progress layer: the engine that drives tasks (the core's
 * operations) in flight, their completion, and waiting for them
 * (progress/engine.c, progress/completion.c). Depends on base/ only.
 */
#ifndef WEFT_PROGRESS_H
#define WEFT_PROGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "sys.h"

/* ---- tasks ---------------------------------------------------------------------- */
/*
 * A task is what the engine drives: the core embeds one at the start of each
 * operation (lib/op.c) and tells the engine, once, how to run its tasks
 * (weft__task_class_t). The engine knows nothing else of an operation.
 */
typedef struct weft__task weft__task_t;

/**
 * Tasks of one queue (a communicator's) start in submission order: a task
 * whose queue has an earlier task not yet started waits. Engine-private;
 * zero-initialised by its owner.
 */
typedef struct weft__task_queue {
    int blocked; /* the pass (+1) in which an earlier task of it could not start */
} weft__task_queue_t;

/** Completion callback of a task (weft_request_on_complete's). */
typedef void (*weft__task_cb_t)(void *arg, weft_status_t status);

struct weft__task {
    /* -- set by the owner before submission -- */
    weft__task_queue_t *queue;
    /** Optional: takes over the publication of the finished task (a stream
     * that owns it): returns true if it did (the task may be freed then),
     * false to publish as usual. Engine side. */
    bool (*on_finish)(weft__task_t *t, weft_status_t status);
    /* -- engine side -- */
    weft__task_t *next;      /* submission stack, active list */
    int started;             /* the class's start ran */
    double t_start;          /* set by the class's start (the watchdog counts from it) */
    /* -- completion (progress/completion.c) -- */
    _Alignas(64) _Atomic uint32_t done; /* futex word: 0 running, then complete */
    weft_status_t status;    /* written before completion is published */
    weft__task_cb_t cb_fn;   /* weft__task_on_complete, under the caller's lock */
    void *cb_arg;            /* cb_fn's or cb_comm_fn's */
    /* or a communicator's callback (weft_comm_set_on_complete), preset before
     * submission with the request's address */
    weft_comm_callback_t cb_comm_fn;
    weft_request_t *cb_req;
};

/**
 * How the engine runs tasks; set once by the core (weft__progress_init).
 * Every function runs on the engine side (the engine thread, or a caller
 * holding the progress lock), never blocks, and is never re-entered.
 */
typedef struct weft__task_class {
    /** May t start now (the work it is ordered after is done)? */
    bool (*ready)(weft__task_t *t);
    /** Start t (sets t->t_start): WEFT_INPROGRESS, WEFT_SUCCESS or an error. */
    weft_status_t (*start)(weft__task_t *t);
    /** Advance a started t: WEFT_INPROGRESS until it finished. */
    weft_status_t (*step)(weft__task_t *t);
    /** t finished with st (or the watchdog failed it): release what it holds
     * on the engine side; returns the status to publish. */
    weft_status_t (*finish)(weft__task_t *t, weft_status_t st);
    /** One line about t for the watchdog's report. */
    void (*describe)(const weft__task_t *t, char *buf, size_t cap);
} weft__task_class_t;

/** The engine's settings (from the configuration, weft_init). */
typedef struct weft__progress_params {
    double timeout_s;     /* watchdog: a task running longer fails (0: off) */
    int spin;             /* empty passes before the backoff yields */
    int max_sleep_us;     /* oversubscribed: longest backoff sleep */
    int linger_us;        /* stay awake this long after the last task */
    int wait_spin_us;     /* a waiter drives progress this long without any before it sleeps */
    int oversubscribed;   /* more ranks on this node than cores */
} weft__progress_params_t;

/** Set the task class and the settings. weft_init, before the engine starts. */
void weft__progress_init(const weft__task_class_t *cls, const weft__progress_params_t *params);

/** Reset t's engine and completion fields (before submission). Any thread. */
static inline void weft__task_reset(weft__task_t *t, weft__task_queue_t *queue)
{
    t->queue = queue;
    t->on_finish = NULL;
    t->next = NULL;
    t->started = 0;
    t->t_start = 0;
    atomic_init(&t->done, 0);
    t->status = WEFT_SUCCESS;
    t->cb_fn = NULL;
    t->cb_arg = NULL;
    t->cb_comm_fn = NULL;
    t->cb_req = NULL;
}

/** Has t completed (its status and outputs visible: acquire)? Any thread. */
bool weft__task_done(weft__task_t *t);
/**
 * Wait until t completed. The caller drives progress on its thread (the
 * engine naps meanwhile: one poller per process) until it has seen none for
 * WEFT_WAIT_SPIN_US, then hands t to the engine and sleeps on t's futex.
 * pauses: CPU pauses between two idle polls (the transport's poll_pause).
 * Any thread.
 */
void weft__task_wait(weft__task_t *t, int pauses);
/**
 * Register fn(arg, status) to run once when t completes, on the completing
 * thread after the progress lock is released. Returns false when t has
 * completed already (fn not registered: the caller runs it). At most one
 * callback per task; the caller serialises registration with its own lock
 * and with the release of the task. Any thread.
 */
bool weft__task_on_complete(weft__task_t *t, weft__task_cb_t fn, void *arg);
/**
 * Register a communicator's callback, fn(arg, req, status), on t before its
 * submission (nobody else sees t yet: no atomic exchange). The submitting
 * thread, once.
 */
void weft__task_preset_comm_callback(weft__task_t *t, weft_comm_callback_t fn, void *arg,
                                     weft_request_t *req);

/* ---- engine (progress/) ----------------------------------------------------- */
/** Start the engine thread if not running. Any thread. */
weft_status_t weft__engine_start(void);
/** Stop and join it after the in-flight ops finish (bounded). weft_finalize only. */
weft_status_t weft__engine_stop(double timeout_s);
/** Queue a task (lock-free, any thread) and wake the engine unless nowake. */
void weft__engine_submit(weft__task_t *t, bool nowake);
/**
 * A blocking call's task when nothing else is in flight in the process:
 * start it on the caller thread under the progress lock, without the
 * submission stack and the pass that would drain it. Returns true if the
 * task was taken (finished, or started and on the active list for the
 * caller's wait to drive); false if it must be submitted as usual (other
 * tasks in flight, or the lock held elsewhere). Any thread; for tasks that
 * are always ready (the class's ready is not asked).
 */
bool weft__engine_start_inline(weft__task_t *t);
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
/** Work a step did that its status does not show (transfers completed while
 * the step goes on), so that the pass counts as busy and the backoff stays
 * hot. Engine side (progress lock held). */
extern unsigned weft__engine_events;
/** Make sure the engine thread is awake (before a caller sleeps). Any thread. */
void weft__engine_wake(void);
/** The same, ending a nap too (a waiter that leaves with work in flight). Any thread. */
void weft__engine_wake_nap(void);
/** Number of tasks submitted and not yet completed, process-wide. */
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

/**
 * An idle wait: a mechanism that sleeps until another process signals (the
 * node's doorbells, backends/shm). fn(arg, timeout_ns) sleeps at most
 * timeout_ns and returns true, or returns false at once when it has nothing
 * to wait on. The backoff on an oversubscribed node calls it instead of
 * sleeping a fixed time, so that a rank whose peer posts wakes at once.
 * One per process (a later set replaces it). Any thread; fn is called from
 * any thread that backs off, outside the progress lock.
 */
typedef bool (*weft__idle_fn)(void *arg, long timeout_ns);
void weft__progress_idle_set(weft__idle_fn fn, void *arg);
/** Is an idle wait set? Any thread. */
bool weft__progress_idle_available(void);

#endif /* WEFT_PROGRESS_H */
