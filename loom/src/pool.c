/*
 * pool.c - Loom's worker threads.
 *
 * loom_set_threads(T) is the single thread setting: layers split their work
 * into T static parts (samples, channels or element ranges) run by the
 * caller (part 0) and T-1 workers, and OpenBLAS is set to one thread, so
 * every sgemm runs inside exactly one Loom thread and BLAS threads are never
 * nested inside Loom's (or Loom's inside BLAS's).  Static partitions and
 * reductions in a fixed order keep results bit-identical from run to run
 * for a given T.
 *
 * Dispatch: the caller bumps a generation counter; workers spin briefly on
 * it (layers follow each other closely) and then sleep on a condition
 * variable.  The caller runs its own part and then waits for the others.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <immintrin.h>

#define MAX_THREADS 64
#define SPIN_ITERS 4000

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* workers wait for a new generation */
    pthread_cond_t done_cv; /* the caller waits for pending == 0 */
    pthread_t tid[MAX_THREADS];
    int nthreads;           /* including the caller */
    atomic_uint gen;        /* bumped per dispatch */
    atomic_int pending;     /* workers still running the current task */
    atomic_int quit;
    loom__task_fn fn;
    void *arg;
} P = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 1, 0, 0, 0,
       NULL, NULL};

static _Thread_local int in_task;

static void *worker(void *argp)
{
    int me = (int)(intptr_t)argp;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        /* acquire: pairs with the release in loom__parallel, so fn/arg are visible */
        while ((g = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&P.quit, memory_order_relaxed))
                return NULL;
            if (++spins < SPIN_ITERS) {
                _mm_pause();
                continue;
            }
            pthread_mutex_lock(&P.mu);
            while (atomic_load_explicit(&P.gen, memory_order_acquire) == seen &&
                   !atomic_load_explicit(&P.quit, memory_order_relaxed))
                pthread_cond_wait(&P.cv, &P.mu);
            pthread_mutex_unlock(&P.mu);
        }
        seen = g;
        if (atomic_load_explicit(&P.quit, memory_order_relaxed))
            return NULL;
        in_task = 1;
        P.fn(P.arg, me, P.nthreads);
        in_task = 0;
        /* release: the caller's acquire load sees this worker's writes */
        if (atomic_fetch_sub_explicit(&P.pending, 1, memory_order_release) == 1) {
            pthread_mutex_lock(&P.mu);
            pthread_cond_broadcast(&P.done_cv);
            pthread_mutex_unlock(&P.mu);
        }
    }
}

static void stop_workers(void)
{
    if (P.nthreads <= 1)
        return;
    pthread_mutex_lock(&P.mu);
    atomic_store(&P.quit, 1);
    atomic_fetch_add(&P.gen, 1);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    for (int i = 1; i < P.nthreads; i++)
        pthread_join(P.tid[i], NULL);
    atomic_store(&P.quit, 0);
    P.nthreads = 1;
}

void loom_set_threads(int n)
{
    if (n < 1)
        n = 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    openblas_set_num_threads(1);
    if (n == P.nthreads)
        return;
    stop_workers();
    int started = 1;
    atomic_store(&P.gen, 0);
    for (int i = 1; i < n; i++) {
        if (pthread_create(&P.tid[i], NULL, worker, (void *)(intptr_t)i) != 0)
            break;
        started++;
    }
    P.nthreads = started;
}

int loom_get_threads(void) { return P.nthreads; }

void loom__parallel(loom__task_fn fn, void *arg)
{
    if (P.nthreads <= 1 || in_task) {
        fn(arg, 0, 1);
        return;
    }
    P.fn = fn;
    P.arg = arg;
    atomic_store_explicit(&P.pending, P.nthreads - 1, memory_order_relaxed);
    pthread_mutex_lock(&P.mu);
    /* release: publishes fn/arg to the workers' acquire loads of gen */
    atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    in_task = 1;
    fn(arg, 0, P.nthreads);
    in_task = 0;
    /* acquire: pairs with the workers' release decrements.  Spin briefly,
     * then sleep: on an oversubscribed machine a spinning caller would
     * steal the core of the worker it waits for. */
    for (int spins = 0; atomic_load_explicit(&P.pending, memory_order_acquire) > 0; spins++) {
        if (spins < SPIN_ITERS) {
            _mm_pause();
            continue;
        }
        pthread_mutex_lock(&P.mu);
        while (atomic_load_explicit(&P.pending, memory_order_acquire) > 0)
            pthread_cond_wait(&P.done_cv, &P.mu);
        pthread_mutex_unlock(&P.mu);
    }
}

void loom__range(size_t n, int tid, int nt, size_t *begin, size_t *end)
{
    *begin = n * (size_t)tid / (size_t)nt;
    *end = n * (size_t)(tid + 1) / (size_t)nt;
}
