/*
 * engine.c - the progress engine: one background thread per process drives
 * every operation in flight.
 *
 * Shape:
 *  - Submission: a lock-free multi-producer stack (one CAS per push); the
 *    consumer detaches the whole stack at once and reverses it, so ops keep
 *    their issue order.
 *  - Progress pass (weft__engine_try_progress): run by whoever holds the
 *    progress lock (a try-lock): the engine thread, or a caller waiting in
 *    weft_wait, which avoids a thread hand-off for small messages. A pass
 *    drains the submission stack into the active list (issue order), starts
 *    ops (per communicator strictly in issue order, and only when ready(),
 *    e.g. the stream work before them is done), steps started ops, completes
 *    finished ones and runs the hang watchdog. It is never re-entered.
 *  - Inline start (weft__engine_start_inline): a blocking call with nothing
 *    else in flight starts its op on its own thread under the lock, without
 *    the submission stack.
 *  - Backoff: spin (WEFT_SPIN empty passes), then sched_yield for
 *    YIELD_PASSES passes, then sleep with a growing interval capped at
 *    WEFT_MAX_SLEEP_US while work is in flight; on a futex when idle.
 *    Oversubscribed nodes (more ranks than cores) spin a few passes, then
 *    sleep at once, so a waiting rank's core goes to a rank that can
 *    progress. While a caller polls in weft_wait the engine naps instead of
 *    spinning beside it (until the last waiter leaves): one poller per
 *    process.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "weft_internal.h"

/* ---- state ------------------------------------------------------------------ */
/* Fields written by different threads sit on separate cache lines: callers
 * push to submit_top and count inflight on every issue, the engine takes the
 * lock on every pass and its private list below changes on every op. Packed
 * into two lines, an issue had to pull the line the engine had just written
 * (issue + wait of a finished op: doc/benchmarks.md, "Overlap"). */
/* E.sleeping: awake; asleep until woken (a submission must wake it); in a
 * 20 us nap beside a polling waiter (a submission need not wake it). */
enum { SLEEP_NONE, SLEEP_DEEP, SLEEP_NAP };
static struct {
    _Alignas(64) _Atomic(weft__op_t *) submit_top; /* multi-producer stack */
    _Alignas(64) atomic_flag lock;                 /* the progress lock */
    _Alignas(64) _Atomic uint32_t wake;            /* futex word the idle engine sleeps on */
    _Atomic int sleeping;                        /* SLEEP_*: engine is (about to be) asleep */
    _Atomic int stop;
    _Atomic int running;
    _Atomic int finalize_fail;                   /* fail every op with WEFT_ERR_FINALIZING */
    _Alignas(64) _Atomic int inflight;             /* issued and not completed */
    _Alignas(64) _Atomic int waiters;              /* callers polling in a wait right now */
    _Alignas(64) pthread_t thread;
    pthread_mutex_t start_mutex;
    /* engine side (under the progress lock) */
    weft__op_t *active_head, *active_tail;
    weft__op_t *callbacks; /* finished ops whose callbacks run after the lock */
    uint64_t pass;
    double next_watchdog;
} E = {.lock = ATOMIC_FLAG_INIT, .start_mutex = PTHREAD_MUTEX_INITIALIZER};

int weft__engine_inflight(void) { return atomic_load_explicit(&E.inflight, memory_order_acquire); }

/* ---- submission (any thread) --------------------------------------------------- */
void weft__engine_submit(weft__op_t *op, bool nowake)
{
    atomic_fetch_add_explicit(&E.inflight, 1, memory_order_relaxed);
    weft__op_t *top = atomic_load_explicit(&E.submit_top, memory_order_relaxed);
    do {
        op->next = top;
        /* release: the op's fields are visible to the consumer that pops it. */
    } while (!atomic_compare_exchange_weak_explicit(&E.submit_top, &top, op, memory_order_release,
                                                    memory_order_relaxed));
    if (!nowake) weft__engine_wake();
}

void weft__engine_wake(void)
{
    /* seq_cst pairs with the engine's store to `sleeping` followed by its check
     * of the submission stack (Dekker): one of the two sees the other. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&E.sleeping, memory_order_relaxed) == SLEEP_DEEP) {
        atomic_fetch_add_explicit(&E.wake, 1, memory_order_release);
        weft__futex_wake(&E.wake);
    }
}

/* ---- engine-side helpers (progress lock held) ---------------------------------- */
static void drain_submissions(void)
{
    /* A plain load first: most polling passes find nothing submitted, and
     * the exchange is a locked instruction. */
    if (atomic_load_explicit(&E.submit_top, memory_order_relaxed) == NULL) return;
    /* acquire: pairs with the release CAS in weft__engine_submit. */
    weft__op_t *list = atomic_exchange_explicit(&E.submit_top, NULL, memory_order_acquire);
    weft__op_t *rev = NULL;
    while (list) { /* the stack is newest-first: reverse to issue order */
        weft__op_t *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        weft__op_t *n = rev->next;
        rev->next = NULL;
        if (E.active_tail) E.active_tail->next = rev;
        else E.active_head = rev;
        E.active_tail = rev;
        rev = n;
    }
}

static void cancel_xfers(weft__op_t *op)
{
    for (int i = 0; i < op->nxfer; i++)
        if (op->xfer[i].active) op->comm->tp->cancel(op->comm, &op->xfer[i]);
    op->nxfer = 0;
}

/* Finish an op: cleanup, finish hook, publish. Engine side. */
static void finish_op(weft__op_t *op, weft_status_t st)
{
    if (st < 0) {
        cancel_xfers(op);
        /* Sticky: later ops on this communicator fail fast. */
        int zero = 0;
        atomic_compare_exchange_strong_explicit(&op->comm->error, &zero, (int)st,
                                                memory_order_relaxed, memory_order_relaxed);
    }
    if (op->started && op->impl && op->impl->cleanup) op->impl->cleanup(op);
    if (st == WEFT_SUCCESS && op->finish) st = op->finish(op);
    if (WEFT__OP_OBSERVED(op)) weft__obs_done(op, st); /* before op may be freed */
    atomic_fetch_sub_explicit(&op->comm->inflight, 1, memory_order_release);
    atomic_fetch_sub_explicit(&E.inflight, 1, memory_order_release);
    if (weft__op_finish(op, st)) {
        /* a callback: published by run_callbacks once the lock is released
         * (callbacks of different ops have no order) */
        op->next = E.callbacks;
        E.callbacks = op;
    }
}

/* Publish the ops taken off E.callbacks and run their callbacks. Progress
 * lock NOT held: a callback may issue nonblocking operations or test its
 * request, and a slow one must not stall the engine's other ops' passes on
 * other threads. */
static void run_callbacks(weft__op_t *list)
{
    while (list) {
        weft__op_t *next = list->next;
        list->next = NULL;
        weft__op_complete_callback(list); /* list may be freed from here */
        list = next;
    }
}

static void report_stuck(weft__op_t *op, double now, const char *why)
{
    WEFT__ERROR("%s: %s on comm %d (rank %d of %d), tag %u, algorithm %s, phase %d step %d, "
                "%d transfers pending, %.1f s since %s",
                why, weft__opkind_name(op->kind), op->comm->id, op->comm->rank, op->comm->size,
                op->tag, weft_algo_name(op->algo) ? weft_algo_name(op->algo) : "?", op->phase,
                op->stepno, op->nxfer, now - (op->started ? op->t_start : op->t_issue),
                op->started ? "start" : "issue (never started)");
}

/* Transfers completed by algorithm steps (weft__coll_test), so that a pass
 * that moved a long op forward counts as work and the backoff stays hot.
 * Engine side only (under the progress lock). */
unsigned weft__engine_events;

/* Start op (its turn came, it is ready). Engine side (progress lock held). */
static weft_status_t start_op(weft__op_t *op)
{
    op->started = 1;
    op->t_start = op->timed ? weft__now() : weft__now_coarse();
    const weft_status_t st = op->impl->start(op);
    if (WEFT__OP_OBSERVED(op)) weft__obs_start(op, st);
    return st;
}

/* One pass over the active list. Returns the amount of work done: ops started
 * or completed, steps whose transfers completed, transport events. */
static int progress_pass(void)
{
    int work = 0;
    unsigned events0 = weft__engine_events;
    drain_submissions();
    E.pass++;

    double now = 0;
    bool watchdog = false;
    bool fail_all = atomic_load_explicit(&E.finalize_fail, memory_order_acquire) != 0;
    /* The watchdog every 64 passes (it fires every 50 ms at most), on the
     * cheap clock: a polling pass is a few hundred ns. */
    if (fail_all || (weft__cfg.timeout_s > 0 && (E.pass & 63) == 0)) {
        now = weft__now_coarse();
        if (now >= E.next_watchdog || fail_all) {
            watchdog = true;
            E.next_watchdog = now + 0.05;
        }
    }

    weft__op_t *prev = NULL, *op = E.active_head;
    while (op) {
        weft__op_t *next = op->next;
        weft_status_t st = WEFT_INPROGRESS;
        weft__comm_t *c = op->comm;

        if (!op->started) {
            if ((uint64_t)c->engine_blocked == (E.pass & 0x7fffffff) + 1) {
                st = WEFT_INPROGRESS; /* an earlier op on this comm has not started */
            } else if (op->ready && !op->ready(op)) {
                c->engine_blocked = (int)((E.pass & 0x7fffffff) + 1);
            } else {
                st = start_op(op);
                work++;
            }
        }
        if (op->started && st == WEFT_INPROGRESS) {
            if (WEFT__OP_OBSERVED(op)) st = weft__obs_step(op); /* times the step (trace) */
            else st = op->impl->step(op);
        }

        if (st == WEFT_INPROGRESS && watchdog) {
            if (fail_all) {
                report_stuck(op, now, "weft_finalize: operation did not complete");
                st = WEFT_ERR_FINALIZING;
            } else if (op->started && now - op->t_start > weft__cfg.timeout_s) {
                /* Counted from the start: an op held back by long work on its
                 * stream is not stuck. */
                report_stuck(op, now, "hang watchdog (WEFT_TIMEOUT)");
                st = WEFT_ERR_TIMEOUT;
            }
        }
        if (st != WEFT_INPROGRESS) {
            /* unlink before publishing: the waiter may free op at once */
            if (prev) prev->next = next;
            else E.active_head = next;
            if (E.active_tail == op) E.active_tail = prev;
            op->next = NULL;
            finish_op(op, st);
            work++;
        } else {
            prev = op;
        }
        op = next;
    }
    /* The transport's own progress last: it may skip it when the ops' tests
     * above already progressed it (UCX). Every pass, even with no op of a
     * UCX communicator active: UCX may still owe a peer a protocol message
     * after our side of a transfer completed (a rendezvous acknowledgement
     * queued while the shared-memory queue was full), and the peer's op
     * waits for it. */
    const weft__transport_t *ucx = weft__transport_ucx();
    if (ucx && ucx->progress) work += ucx->progress();
    return work + (int)(weft__engine_events - events0);
}

bool weft__engine_start_inline(weft__op_t *op)
{
    /* Nothing issued and not completed anywhere (a submission counts itself
     * before it pushes): no earlier op of this communicator can be waiting
     * to start, so starting op here keeps the per-communicator order. An op
     * another thread issues concurrently has no order with this one. */
    if (atomic_load_explicit(&E.inflight, memory_order_relaxed) != 0) return false;
    /* acquire: as in weft__engine_try_progress. */
    if (atomic_flag_test_and_set_explicit(&E.lock, memory_order_acquire)) return false;
    if (E.active_head != NULL || atomic_load_explicit(&E.submit_top, memory_order_relaxed) != NULL) {
        atomic_flag_clear_explicit(&E.lock, memory_order_release);
        return false;
    }
    atomic_fetch_add_explicit(&E.inflight, 1, memory_order_relaxed);
    op->next = NULL;
    const weft_status_t st = start_op(op);
    if (st == WEFT_INPROGRESS) E.active_head = E.active_tail = op;
    else finish_op(op, st);
    /* release: publish engine state to the next holder. */
    atomic_flag_clear_explicit(&E.lock, memory_order_release);
    return true;
}

int weft__engine_try_progress(void)
{
    /* acquire: the previous holder's writes to engine state are visible. */
    if (atomic_flag_test_and_set_explicit(&E.lock, memory_order_acquire)) return -1;
    int work = progress_pass();
    weft__op_t *cbs = E.callbacks;
    E.callbacks = NULL;
    /* release: publish engine state to the next holder. */
    atomic_flag_clear_explicit(&E.lock, memory_order_release);
    if (cbs) run_callbacks(cbs);
    return work;
}

void weft__engine_lock(void)
{
    /* acquire: as in weft__engine_try_progress. */
    while (atomic_flag_test_and_set_explicit(&E.lock, memory_order_acquire)) sched_yield();
}

void weft__engine_unlock(void) { atomic_flag_clear_explicit(&E.lock, memory_order_release); }

static int spin_limit(void)
{
    int s = weft__cfg.spin;
    if (weft__g.oversubscribed && s > 16) s = 16;
    return s;
}

/* Empty passes that yield, after the spinning ones, before the backoff
 * sleeps on a node that is not oversubscribed by Weft's count (about 0.1 -
 * 0.3 ms: a peer that answers within that keeps its hot path). A yielding
 * loop does not reliably hand its core over: on 2 cores used by 2 ranks'
 * training threads (or by other jobs), `perf sched` showed an engine
 * yielding for a whole 4 ms scheduler tick while the thread it waited for
 * sat runnable on that core, and a DDP step of a compute-bound model took
 * 3 - 6 ms more CPU than on gloo (whose threads sleep in the kernel). */
#define YIELD_PASSES 256u

/* Backoff after `idle` empty passes. Any thread. Spin, then (with free
 * cores) yield for YIELD_PASSES passes, then sleep with an interval that
 * grows to WEFT_MAX_SLEEP_US, so the core goes to a thread that can
 * progress. Oversubscribed: a few spins, then the sleeps at once. */
void weft__engine_backoff(unsigned idle)
{
    unsigned spin = (unsigned)spin_limit();
    unsigned yields = weft__g.oversubscribed ? 0u : YIELD_PASSES;
    if (idle < spin) {
        weft__cpu_relax();
    } else if (idle < spin + yields) {
        sched_yield();
    } else {
        unsigned k = idle - spin - yields;
        long us = 1L << (k / 2 > 10 ? 10 : k / 2);
        if (us > weft__cfg.max_sleep_us) us = weft__cfg.max_sleep_us;
        if (us < 1) us = 1;
        struct timespec ts = {0, us * 1000L};
        nanosleep(&ts, NULL);
    }
}

void weft__engine_waiter(int delta)
{
    /* seq_cst: the last waiter's decrement and its load of `sleeping` pair
     * with the napping engine's store to `sleeping` and its load of `waiters`
     * (Dekker): either the engine sees no waiter and does not nap, or the
     * waiter sees the nap and ends it. */
    const int left = atomic_fetch_add_explicit(&E.waiters, delta, memory_order_seq_cst) + delta;
    if (left == 0 && atomic_load_explicit(&E.sleeping, memory_order_seq_cst) == SLEEP_NAP) {
        atomic_fetch_add_explicit(&E.wake, 1, memory_order_release);
        weft__futex_wake(&E.wake);
    }
}

static void *engine_main(void *arg)
{
    WEFT__UNUSED(arg);
    unsigned idle = 0;
    double last_work = weft__now();
    const double linger = weft__g.oversubscribed ? 0.0 : 1e-6 * weft__cfg.linger_us;
#if defined(PR_SET_TIMERSLACK)
    /* Backoff naps are tens of microseconds: ask for a precise timer. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
    while (!atomic_load_explicit(&E.stop, memory_order_acquire)) {
        if (atomic_load_explicit(&E.waiters, memory_order_relaxed) > 0) {
            /* A caller is driving progress in a wait: stay off the lock (an
             * engine preempted while holding it would stall the waiter for a
             * scheduler tick) and off the cores, asleep until the last
             * waiter leaves (weft__engine_waiter wakes the nap). A
             * submission does not end the nap (SLEEP_NAP): the waiter's
             * passes take it up, while a futex wake from weft_iallreduce let
             * the engine preempt the issuing thread on its own core for the
             * whole collective. The nap used to end every 20 us to look for
             * the waiter's departure: on 2 fully used cores each of those
             * wake-ups preempted the spinning waiter (10 us of engine time
             * every 37 us, `perf sched timehist`; a nonblocking 1 MiB
             * allreduce waited on at once took 1.7x the blocking call in one
             * run at load 5, not in a later one at load 9). The timeout is
             * only a safety net now. */
            uint32_t seen = atomic_load_explicit(&E.wake, memory_order_acquire);
            atomic_store_explicit(&E.sleeping, SLEEP_NAP, memory_order_seq_cst);
            if (atomic_load_explicit(&E.waiters, memory_order_seq_cst) > 0 &&
                atomic_load_explicit(&E.submit_top, memory_order_seq_cst) == NULL)
                weft__futex_wait(&E.wake, seen, 10 * 1000 * 1000L); /* not begun if one is pending */
            atomic_store_explicit(&E.sleeping, SLEEP_NONE, memory_order_relaxed);
            continue;
        }
        int w = weft__engine_try_progress();
        if (w > 0) {
            idle = 0;
            last_work = -1; /* read the clock only once idle */
            continue;
        }
        if (w == 0 && weft__engine_inflight() == 0 && idle >= (unsigned)spin_limit()) {
            double now = weft__now();
            if (last_work < 0) last_work = now;
            if (now - last_work < linger) { /* linger (yielding) before sleeping */
                sched_yield();
                continue;
            }
            /* Idle for WEFT_LINGER_US: sleep until something is submitted.
             * The linger keeps the next op of a burst (a training step's
             * gradient buckets) from paying a futex wake-up. */
            uint32_t seen = atomic_load_explicit(&E.wake, memory_order_acquire);
            atomic_store_explicit(&E.sleeping, SLEEP_DEEP, memory_order_seq_cst);
            if (atomic_load_explicit(&E.submit_top, memory_order_seq_cst) == NULL &&
                !atomic_load_explicit(&E.stop, memory_order_acquire) &&
                weft__engine_inflight() == 0)
                weft__futex_wait(&E.wake, seen, 0);
            atomic_store_explicit(&E.sleeping, SLEEP_NONE, memory_order_relaxed);
            idle = 0;
            last_work = -1;
            continue;
        }
        if (w < 0) { /* another thread (a stream, a destroy) is progressing */
            sched_yield();
            continue;
        }
        weft__engine_backoff(idle++);
    }
    return NULL;
}

weft_status_t weft__engine_start(void)
{
    if (atomic_load_explicit(&E.running, memory_order_acquire)) return WEFT_SUCCESS;
    weft_status_t st = WEFT_SUCCESS;
    pthread_mutex_lock(&E.start_mutex);
    if (!atomic_load_explicit(&E.running, memory_order_relaxed)) {
        atomic_store_explicit(&E.stop, 0, memory_order_relaxed);
        atomic_store_explicit(&E.finalize_fail, 0, memory_order_relaxed);
        int rc = pthread_create(&E.thread, NULL, engine_main, NULL);
        if (rc != 0) {
            WEFT__ERROR("cannot start the progress engine thread: %s", strerror(rc));
            st = WEFT_ERR_INTERNAL;
        } else {
            /* release: pairs with the acquire fast-path check above. */
            atomic_store_explicit(&E.running, 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&E.start_mutex);
    return st;
}

weft_status_t weft__engine_stop(double timeout_s)
{
    weft_status_t st = WEFT_SUCCESS;
    double deadline = weft__now() + timeout_s;
    unsigned idle = 0;
    /* Let in-flight ops finish, helping progress; fail them at the deadline. */
    while (weft__engine_inflight() > 0) {
        if (weft__now() > deadline && !atomic_load_explicit(&E.finalize_fail, memory_order_relaxed)) {
            atomic_store_explicit(&E.finalize_fail, 1, memory_order_release);
            st = WEFT_ERR_FINALIZING;
        }
        int w = weft__engine_try_progress();
        if (w > 0) idle = 0;
        else weft__engine_backoff(idle++);
    }
    if (atomic_load_explicit(&E.running, memory_order_acquire)) {
        atomic_store_explicit(&E.stop, 1, memory_order_release);
        atomic_store_explicit(&E.sleeping, SLEEP_DEEP, memory_order_relaxed);
        weft__engine_wake();
        pthread_join(E.thread, NULL);
        atomic_store_explicit(&E.running, 0, memory_order_release);
    }
    E.active_head = E.active_tail = NULL;
    return st;
}
