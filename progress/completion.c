/*
 * completion.c - a task's completion and the wait for it.
 *
 * t->done, the futex word of a task: 0 while it runs, DONE (a value of its
 * own) once complete. While running it may carry SLEEPER (a waiter sleeps on
 * the futex: the completer must wake it) and CB (a completion callback is
 * registered); CLOSING marks a task that finished with a callback and is
 * published (DONE) only once the progress lock is released, just before its
 * callback runs. Keeping the callback flag in this word costs a finishing
 * task no atomic instruction beyond the one that publishes it.
 */
#include <sched.h>

#include "progress_private.h"

enum { DONE = 1, SLEEPER = 2, CB = 4, CLOSING = 8 };

/* Publish: status and output visible, a sleeper woken. */
static void publish(weft__task_t *t)
{
    /* release: status and the output buffer are visible to whoever sees done
     * (acquire: nothing). The wake-up syscall only when a waiter sleeps:
     * most tasks complete under their polling waiter, and a futex call would
     * add a fifth to a small allreduce. */
    uint32_t old = atomic_exchange_explicit(&t->done, DONE, memory_order_acq_rel);
    if (old & SLEEPER) weft__futex_wake(&t->done);
}

bool weft__task_done(weft__task_t *t)
{
    /* acquire: pairs with the release exchange in publish. */
    return atomic_load_explicit(&t->done, memory_order_acquire) == DONE;
}

bool weft__task_finish(weft__task_t *t, weft_status_t status)
{
    /* A task someone else publishes (a stream's) never has a callback. */
    if (t->on_finish != NULL && t->on_finish(t, status)) return false;
    t->status = status;
    uint32_t cur = atomic_load_explicit(&t->done, memory_order_relaxed);
    uint32_t next;
    do {
        next = (cur & CB) ? (cur | CLOSING) : DONE;
        /* acq_rel: release publishes status and output (DONE); acquire takes
         * the registrant's cb_fn/cb_arg (CB was set by a release CAS) */
    } while (!atomic_compare_exchange_weak_explicit(&t->done, &cur, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (cur & CB) return true; /* weft__task_run_callback publishes it */
    if (cur & SLEEPER) weft__futex_wake(&t->done);
    return false;
}

void weft__task_run_callback(weft__task_t *t)
{
    const weft__task_cb_t fn = t->cb_fn;
    const weft_comm_callback_t comm_fn = t->cb_comm_fn;
    void *const arg = t->cb_arg;
    weft_request_t *const req = t->cb_req;
    const weft_status_t st = t->status;
    publish(t); /* a waiter may free t from here on */
    if (comm_fn != NULL) comm_fn(arg, req, st);
    else fn(arg, st);
}

void weft__task_preset_comm_callback(weft__task_t *t, weft_comm_callback_t fn, void *arg,
                                     weft_request_t *req)
{
    t->cb_comm_fn = fn;
    t->cb_arg = arg;
    t->cb_req = req;
    /* relaxed: the submission's release publishes it with the task */
    atomic_store_explicit(&t->done, CB, memory_order_relaxed);
}

bool weft__task_on_complete(weft__task_t *t, weft__task_cb_t fn, void *arg)
{
    t->cb_fn = fn;
    t->cb_arg = arg;
    uint32_t cur = atomic_load_explicit(&t->done, memory_order_acquire);
    while (cur != DONE) {
        /* release: cb_fn/cb_arg to the finisher's CAS (acquire) */
        if (atomic_compare_exchange_weak_explicit(&t->done, &cur, cur | CB, memory_order_release,
                                                  memory_order_acquire))
            return true;
    }
    return false; /* complete already (acquire above: its status is visible) */
}

/*
 * The waiter drives the task on this thread (no thread hand-off for short
 * tasks; the engine naps off the lock meanwhile, so one thread per process
 * polls) until it has seen no progress for WEFT_WAIT_SPIN_US (10 us on an
 * oversubscribed node), then hands the task to the engine and sleeps on its
 * futex. A nonblocking task was driven by the engine while the caller
 * computed; the waiter takes over what is left. (Leaving it to the engine
 * while the waiter watched cost 8 us per small op in hand-offs on the
 * 2-core machine, and a futex wake-up there takes 0.1 to 5 ms, which is
 * why the budget is long where cores are not oversubscribed.)
 */
/* An oversubscribed node with an idle wait (the node's doorbells): the
 * caller drives progress until t completed and sleeps on the doorbell
 * between passes, woken at once when a peer publishes. No hand-off to the
 * engine: that costs two wake-ups (the engine's, then the caller's), and each
 * waits for a core that the node's ranks share. */
static void wait_oversubscribed(weft__task_t *t)
{
    unsigned idle = 0;
    weft__engine_waiter(+1);
    while (!weft__task_done(t)) {
        int w = weft__engine_try_progress();
        if (weft__task_done(t)) break;
        if (w > 0) idle = 0;
        else if (w < 0) sched_yield(); /* the lock holder may be preempted */
        else weft__engine_backoff(idle++);
    }
    weft__engine_waiter(-1);
    if (weft__engine_inflight() > 0) weft__engine_wake_nap();
}

void weft__task_wait(weft__task_t *t, int pauses)
{
    if (weft__task_done(t)) return;
    if (weft__pp.oversubscribed && weft__progress_idle_available()) {
        wait_oversubscribed(t);
        return;
    }
    double budget = 1e-6 * (weft__pp.oversubscribed && weft__pp.wait_spin_us > 10
                                ? 10 : weft__pp.wait_spin_us);
    /* A budget of milliseconds is kept well enough by the kernel tick's clock,
     * which costs less to read in this loop than the precise one. */
    double (*clock)(void) = budget >= 2e-3 ? weft__now_coarse : weft__now;
    double t_end = clock() + budget;
    unsigned idle = 0;
    if (pauses < 1) pauses = 1;
    weft__engine_waiter(+1);
    while (!weft__task_done(t)) {
        int w = weft__engine_try_progress();
        if (weft__task_done(t)) break;
        if (w > 0) { /* the budget counts time without progress */
            if (idle > 0) t_end = clock() + budget;
            idle = 0;
            continue;
        }
        if ((++idle & 15) == 0 && clock() > t_end) break;
        /* w < 0: the lock holder may be preempted; let it run. */
        if (w < 0 || weft__pp.oversubscribed) sched_yield();
        else for (int k = 0; k < pauses; k++) weft__cpu_relax();
    }
    weft__engine_waiter(-1);
    /* Tasks still in flight - other threads', or this one handed over - go
     * back to the engine (a napping engine resumes by itself within its nap). */
    const bool done = weft__task_done(t);
    if (!done || weft__engine_inflight() > 0) weft__engine_wake();
    if (done) return;
    /* Hand over: the engine stays awake while tasks are in flight and wakes
     * this futex when t completes; the timeout is only a safety net. */
    while (!weft__task_done(t)) {
        /* announce the sleeper (keeping the callback flags); not once done */
        uint32_t cur = atomic_load_explicit(&t->done, memory_order_acquire);
        while (cur != DONE && !(cur & SLEEPER) &&
               !atomic_compare_exchange_weak_explicit(&t->done, &cur, cur | SLEEPER,
                                                      memory_order_acq_rel, memory_order_acquire)) {
        }
        if (cur == DONE || weft__task_done(t)) break;
        weft__futex_wait(&t->done, cur | SLEEPER, 10 * 1000 * 1000L);
    }
}
