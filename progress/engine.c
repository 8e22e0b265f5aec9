/*
 * engine.c - the progress engine: one background thread per process drives
 * every task (the core's operations) in flight. It knows a task only through
 * progress.h: the class the core registered runs, steps and finishes it.
 *
 * Shape:
 *  - Submission: a lock-free multi-producer stack (one CAS per push); the
 *    consumer detaches the whole stack at once and reverses it, so tasks keep
 *    their submission order.
 *  - Progress pass (weft__engine_try_progress): run by whoever holds the
 *    progress lock (a try-lock): the engine thread, or a caller waiting in
 *    weft_wait, which avoids a thread hand-off for small messages. A pass
 *    drains the submission stack into the active list (submission order),
 *    starts tasks (per queue - a communicator - strictly in order, and only
 *    when ready, e.g. the stream work before them is done), steps started
 *    tasks, finishes completed ones, runs the hang watchdog and the progress
 *    hooks (transports' workers). It is never re-entered.
 *  - Inline start (weft__engine_start_inline): a blocking call with nothing
 *    else in flight starts its task on its own thread under the lock, without
 *    the submission stack.
 *  - Backoff: spin (WEFT_SPIN empty passes), then sched_yield while work is
 *    in flight; on a futex when idle. Oversubscribed nodes (more ranks than
 *    cores) spin a few passes, then sleep with a growing interval capped at
 *    WEFT_MAX_SLEEP_US, so a waiting rank's core goes to a rank that can
 *    progress. While a caller polls in weft_wait the engine naps instead of
 *    spinning beside it: one poller per process.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "progress_private.h"

/* ---- state ------------------------------------------------------------------ */
/* Fields written by different threads sit on separate cache lines: callers
 * push to submit_top and count inflight on every issue, the engine takes the
 * lock on every pass and its private list below changes on every op. Packed
 * into two lines, an issue had to pull the line the engine had just written
 * (issue + wait of a finished op: doc/benchmarks.md, "Overlap"); the
 * submission's three fields share one line of their own. */
/* E.sleeping: awake; asleep until woken (a submission must wake it); in a
 * 20 us nap beside a polling waiter (a submission need not wake it). */
enum { SLEEP_NONE, SLEEP_DEEP, SLEEP_NAP };
static struct {
    /* What a submission touches, on one line: an issue after a device-style
     * compute finds its lines cold, and each costs it a miss. The engine
     * writes this line once per task too (drain, completion), never per
     * polling pass. */
    _Alignas(64) _Atomic(weft__task_t *) submit_top; /* multi-producer stack */
    _Atomic int inflight;                        /* issued and not completed */
    _Atomic int sleeping;                        /* SLEEP_*: engine is (about to be) asleep */
    _Alignas(64) atomic_flag lock;                 /* the progress lock */
    _Alignas(64) _Atomic uint32_t wake;            /* futex word the idle engine sleeps on */
    _Atomic int stop;
    _Atomic int running;
    _Atomic int finalize_fail;                   /* fail every task with WEFT_ERR_FINALIZING */
    _Alignas(64) _Atomic int waiters;              /* callers polling in a wait right now */
    _Alignas(64) pthread_t thread;
    pthread_mutex_t start_mutex;
    /* engine side (under the progress lock) */
    weft__task_t *active_head, *active_tail;
    weft__task_t *callbacks; /* finished ops whose callbacks run after the lock */
    uint64_t pass;
    double next_watchdog;
    /* progress hooks: written before nhooks counts them (release) */
    struct {
        weft__progress_fn fn;
        void *arg;
    } hooks[WEFT__PROGRESS_HOOKS];
    _Atomic int nhooks;
} E = {.lock = ATOMIC_FLAG_INIT, .start_mutex = PTHREAD_MUTEX_INITIALIZER};

weft_status_t weft__progress_hook_add(weft__progress_fn fn, void *arg)
{
    pthread_mutex_lock(&E.start_mutex);
    const int n = atomic_load_explicit(&E.nhooks, memory_order_relaxed);
    weft_status_t st = WEFT_SUCCESS;
    for (int i = 0; i < n; i++)
        if (E.hooks[i].fn == fn && E.hooks[i].arg == arg) goto out; /* already there */
    if (n == WEFT__PROGRESS_HOOKS) {
        st = WEFT_ERR_INTERNAL;
        goto out;
    }
    E.hooks[n].fn = fn;
    E.hooks[n].arg = arg;
    /* release: the entry is written before a pass that sees the count reads it */
    atomic_store_explicit(&E.nhooks, n + 1, memory_order_release);
out:
    pthread_mutex_unlock(&E.start_mutex);
    return st;
}

void weft__progress_hook_remove(weft__progress_fn fn, void *arg)
{
    pthread_mutex_lock(&E.start_mutex);
    int n = atomic_load_explicit(&E.nhooks, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        if (E.hooks[i].fn != fn || E.hooks[i].arg != arg) continue;
        E.hooks[i] = E.hooks[n - 1];
        n--;
        break;
    }
    atomic_store_explicit(&E.nhooks, n, memory_order_release);
    pthread_mutex_unlock(&E.start_mutex);
}

weft__progress_params_t weft__pp; /* set by weft__progress_init, before the engine starts */
static weft__task_class_t K; /* how tasks run (weft__progress_init) */

void weft__progress_init(const weft__task_class_t *cls, const weft__progress_params_t *params)
{
    K = *cls;
    weft__pp = *params;
}

int weft__engine_inflight(void) { return atomic_load_explicit(&E.inflight, memory_order_acquire); }

/* ---- submission (any thread) --------------------------------------------------- */
void weft__engine_submit(weft__task_t *t, bool nowake)
{
    atomic_fetch_add_explicit(&E.inflight, 1, memory_order_relaxed);
    weft__task_t *top = atomic_load_explicit(&E.submit_top, memory_order_relaxed);
    do {
        t->next = top;
        /* release: the task's fields are visible to the consumer that pops it;
         * seq_cst: the push and the load of `sleeping` below against the
         * engine's seq_cst store to `sleeping` and load of the stack
         * (Dekker: one of the two sees the other), with no fence of its own
         * (on x86 the locked exchange is one already). */
    } while (!atomic_compare_exchange_weak_explicit(&E.submit_top, &top, t, memory_order_seq_cst,
                                                    memory_order_relaxed));
    if (!nowake && atomic_load_explicit(&E.sleeping, memory_order_seq_cst) == SLEEP_DEEP) {
        atomic_fetch_add_explicit(&E.wake, 1, memory_order_release);
        weft__futex_wake(&E.wake);
    }
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

void weft__engine_wake_nap(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&E.sleeping, memory_order_relaxed) != SLEEP_NONE) {
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
    weft__task_t *list = atomic_exchange_explicit(&E.submit_top, NULL, memory_order_acquire);
    weft__task_t *rev = NULL;
    while (list) { /* the stack is newest-first: reverse to issue order */
        weft__task_t *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        weft__task_t *n = rev->next;
        rev->next = NULL;
        if (E.active_tail) E.active_tail->next = rev;
        else E.active_head = rev;
        E.active_tail = rev;
        rev = n;
    }
}

/* Finish a task: the class releases it, then it is published (or queued
 * for its callback). Engine side. */
static void finish_task(weft__task_t *t, weft_status_t st)
{
    st = K.finish(t, st);
    atomic_fetch_sub_explicit(&E.inflight, 1, memory_order_release);
    if (weft__task_finish(t, st)) {
        /* a callback: published by run_callbacks once the lock is released
         * (callbacks of different tasks have no order) */
        t->next = E.callbacks;
        E.callbacks = t;
    }
}

/* Publish the ops taken off E.callbacks and run their callbacks. Progress
 * lock NOT held: a callback may issue nonblocking operations or test its
 * request, and a slow one must not stall the engine's other ops' passes on
 * other threads. */
static void run_callbacks(weft__task_t *list)
{
    while (list) {
        weft__task_t *next = list->next;
        list->next = NULL;
        weft__task_run_callback(list); /* list may be freed from here */
        list = next;
    }
}

static void report_stuck(weft__task_t *t, double now, const char *why)
{
    char what[256] = "";
    K.describe(t, what, sizeof what);
    WEFT__ERROR("%s: %s, %.1f s since %s", why, what, now - t->t_start,
                t->started ? "start" : "issue (never started)");
}

/* Work steps did that their status does not show (weft__coll_test's
 * completed transfers). Engine side only (under the progress lock). */
unsigned weft__engine_events;

/* Start t (its turn came, it is ready). Engine side (progress lock held). */
static weft_status_t start_task(weft__task_t *t)
{
    t->started = 1;
    return K.start(t);
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
    if (fail_all || (weft__pp.timeout_s > 0 && (E.pass & 63) == 0)) {
        now = weft__now_coarse();
        if (now >= E.next_watchdog || fail_all) {
            watchdog = true;
            E.next_watchdog = now + 0.05;
        }
    }

    weft__task_t *prev = NULL, *t = E.active_head;
    while (t) {
        weft__task_t *next = t->next;
        weft_status_t st = WEFT_INPROGRESS;
        weft__task_queue_t *q = t->queue;

        if (!t->started) {
            if ((uint64_t)q->blocked == (E.pass & 0x7fffffff) + 1) {
                st = WEFT_INPROGRESS; /* an earlier task of its queue has not started */
            } else if (!K.ready(t)) {
                q->blocked = (int)((E.pass & 0x7fffffff) + 1);
            } else {
                st = start_task(t);
                work++;
            }
        }
        if (t->started && st == WEFT_INPROGRESS) st = K.step(t);

        if (st == WEFT_INPROGRESS && watchdog) {
            if (fail_all) {
                report_stuck(t, now, "weft_finalize: operation did not complete");
                st = WEFT_ERR_FINALIZING;
            } else if (t->started && now - t->t_start > weft__pp.timeout_s) {
                /* Counted from the start: a task held back by long work on its
                 * stream is not stuck. */
                report_stuck(t, now, "hang watchdog (WEFT_TIMEOUT)");
                st = WEFT_ERR_TIMEOUT;
            }
        }
        if (st != WEFT_INPROGRESS) {
            /* unlink before publishing: the waiter may free t at once */
            if (prev) prev->next = next;
            else E.active_head = next;
            if (E.active_tail == t) E.active_tail = prev;
            t->next = NULL;
            finish_task(t, st);
            work++;
        } else {
            prev = t;
        }
        t = next;
    }
    /* The progress hooks (transports' workers) last: a hook may skip its
     * work when the ops' tests above already progressed it (UCX). Every
     * pass, even with no op of that transport active: UCX may still owe a peer a protocol message
     * after our side of a transfer completed (a rendezvous acknowledgement
     * queued while the shared-memory queue was full), and the peer's op
     * waits for it. */
    const int nhooks = atomic_load_explicit(&E.nhooks, memory_order_acquire);
    for (int i = 0; i < nhooks; i++) work += E.hooks[i].fn(E.hooks[i].arg);
    return work + (int)(weft__engine_events - events0);
}

bool weft__engine_start_inline(weft__task_t *t)
{
    /* Nothing submitted and not completed anywhere (a submission counts
     * itself before it pushes): no earlier task of its queue can be waiting
     * to start, so starting t here keeps the queue's order. A task another
     * thread submits concurrently has no order with this one. */
    if (atomic_load_explicit(&E.inflight, memory_order_relaxed) != 0) return false;
    /* acquire: as in weft__engine_try_progress. */
    if (atomic_flag_test_and_set_explicit(&E.lock, memory_order_acquire)) return false;
    if (E.active_head != NULL || atomic_load_explicit(&E.submit_top, memory_order_relaxed) != NULL) {
        atomic_flag_clear_explicit(&E.lock, memory_order_release);
        return false;
    }
    atomic_fetch_add_explicit(&E.inflight, 1, memory_order_relaxed);
    t->next = NULL;
    const weft_status_t st = start_task(t);
    if (st == WEFT_INPROGRESS) E.active_head = E.active_tail = t;
    else finish_task(t, st);
    /* release: publish engine state to the next holder. */
    atomic_flag_clear_explicit(&E.lock, memory_order_release);
    return true;
}

int weft__engine_try_progress(void)
{
    /* acquire: the previous holder's writes to engine state are visible. */
    if (atomic_flag_test_and_set_explicit(&E.lock, memory_order_acquire)) return -1;
    int work = progress_pass();
    weft__task_t *cbs = E.callbacks;
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
    int s = weft__pp.spin;
    if (weft__pp.oversubscribed && s > 16) s = 16;
    return s;
}

/* Backoff after `idle` empty passes. Any thread. With free cores: spin,
 * then yield (a rank that waits for its peer keeps its core hot, as the
 * peer needs no core of ours). Oversubscribed: a few spins, then sleeps that
 * grow to WEFT_MAX_SLEEP_US, so the core goes to a rank that can progress.
 * (Sleeping after some hundred yields as well was tried: it took the
 * device-style overlap of a 2 MiB allreduce from 99.7 - 99.9% to 57 - 73%;
 * doc/notes/engine_measurements.md.) */
static _Atomic(weft__idle_fn) idle_fn;
static void *_Atomic idle_arg;

bool weft__progress_idle_available(void)
{
    return atomic_load_explicit(&idle_fn, memory_order_acquire) != NULL;
}

void weft__progress_idle_set(weft__idle_fn fn, void *arg)
{
    atomic_store_explicit(&idle_arg, arg, memory_order_relaxed);
    atomic_store_explicit(&idle_fn, fn, memory_order_release);
}

void weft__engine_backoff(unsigned idle)
{
    const unsigned spin = (unsigned)spin_limit();
    if (idle < spin) {
        weft__cpu_relax();
    } else if (!weft__pp.oversubscribed) {
        sched_yield();
    } else {
        unsigned k = idle - spin;
        long us = 1L << (k / 2 > 10 ? 10 : k / 2);
        if (us > weft__pp.max_sleep_us) us = weft__pp.max_sleep_us;
        if (us < 1) us = 1;
        weft__idle_fn fn = atomic_load_explicit(&idle_fn, memory_order_acquire);
        if (fn != NULL && fn(atomic_load_explicit(&idle_arg, memory_order_relaxed), us * 1000L))
            return;
        struct timespec ts = {0, us * 1000L};
        nanosleep(&ts, NULL);
    }
}

void weft__engine_waiter(int delta)
{
    atomic_fetch_add_explicit(&E.waiters, delta, memory_order_relaxed);
}

static void *engine_main(void *arg)
{
    WEFT__UNUSED(arg);
    unsigned idle = 0;
    double last_work = weft__now();
    const double linger = weft__pp.oversubscribed ? 0.0 : 1e-6 * weft__pp.linger_us;
#if defined(PR_SET_TIMERSLACK)
    /* Backoff naps are tens of microseconds: ask for a precise timer. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
    while (!atomic_load_explicit(&E.stop, memory_order_acquire)) {
        if (atomic_load_explicit(&E.waiters, memory_order_relaxed) > 0) {
            /* A caller is driving progress in a wait: stay off the lock (an
             * engine preempted while holding it would stall the waiter for a
             * scheduler tick) and off the cores, in 20 us naps. Measured on
             * 2 cores: better than a yielding engine, and than a 1 ms sleep.
             * A submission does not end the nap (SLEEP_NAP): the waiter's
             * passes take it up, and the nap ends in 20 us anyway, while a
             * futex wake from weft_iallreduce let the engine preempt the
             * issuing thread on its own core for the whole collective.
             * (A nap until the last waiter leaves, ended by the departing
             * waiter or the next submission, was tried: the device-style
             * overlap of 1 - 4 MiB allreduces fell to 42 - 81% in some rows;
             * doc/notes/engine_measurements.md.) */
            uint32_t seen = atomic_load_explicit(&E.wake, memory_order_acquire);
            atomic_store_explicit(&E.sleeping, SLEEP_NAP, memory_order_seq_cst);
            /* Oversubscribed with an idle wait, the waiter stays until its op
             * completed and wakes the engine as it leaves
             * (weft__engine_wake_nap): nap long, since every wake-up of
             * this thread takes a core a rank needs. */
            const long nap_ns = weft__pp.oversubscribed && weft__progress_idle_available()
                                    ? 2000 * 1000L
                                    : 20 * 1000L;
            if (atomic_load_explicit(&E.submit_top, memory_order_seq_cst) == NULL)
                weft__futex_wait(&E.wake, seen, nap_ns); /* not begun if one is pending */
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
