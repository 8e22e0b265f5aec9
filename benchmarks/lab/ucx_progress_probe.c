/*
 * ucx_progress_probe.c - an LD_PRELOAD profiling shim: times every
 * ucp_worker_progress call of the process, per UCX worker, and at exit prints
 * for each worker how many calls delivered something (returned > 0), the
 * median duration of those calls, and how many calls were made per delivering
 * one. Used by benchmarks/lab/ucx_profile.sh to attribute the point-to-point
 * latency difference between Weft's UCX transport and its MPI transport (doc/
 * notes/ucx_measurements.md): in a ping-pong nearly every delivering call is the one
 * that copies the arriving message out of UCX's shared-memory queue into the
 * receive buffer, so its duration is UCX's receive cost on that worker.
 *
 *   mpiexec -n 2 -env LD_PRELOAD build/benchmarks/lab/libucx_progress_probe.so \
 *       build/benchmarks/weft_osu_transports --test lat -m 4096:4096
 *
 * Workers are numbered in the order of their first progress call. In a
 * process that runs MPICH over UCX (ch4:ucx) and Weft, worker 1 is MPICH's
 * (MPI_Init polls it) and worker 2 Weft's (its first UCX communicator); a
 * program that creates a worker of its own before either says so.
 *
 * For a per-message split (weft_lat_split), the probe also times
 * ucp_tag_send_nbx and exports, for the program to read after each call:
 *   ucx_probe_stamp[0], [1]  start and end of the last delivering progress call
 *   ucx_probe_stamp[2], [3]  start and end of the last ucp_tag_send_nbx call
 *   uint64_t ucx_probe_ticks(void)        the probe's clock
 *   double ucx_probe_ns_per_tick(void)    its rate, measured since start-up
 * (MPICH's sends go through ucp_tag_send_nbx as well as Weft's.)
 *
 * Environment: PROBE_RANK=N prints only for the process whose PMI_RANK is
 * N (default: every process). Output goes to stderr, one line per worker.
 *
 * Timing: the time-stamp counter between lfence instructions on x86-64
 * (converted to ns with the counter's rate measured against CLOCK_MONOTONIC
 * over the whole run), CLOCK_MONOTONIC elsewhere. Each call costs about 40 ns
 * more under the probe, the same for every worker.
 *
 * Thread contract: UCX allows one thread at a time per worker (Weft and MPICH
 * create theirs UCS_THREAD_MODE_SERIALIZED), so each worker's counters are
 * written by one thread at a time; slots are claimed with a compare-and-swap.
 * The report runs in a destructor, after the program's threads stopped.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ucp/api/ucp.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#define PROBE_TSC 1
#endif

enum { MAX_WORKERS = 8, BIN_TICKS = 4, NBINS = 1 << 14 };

typedef struct worker_stats {
    _Atomic(void *) worker;
    uint64_t calls, delivering, sum_ticks;
    uint32_t hist[NBINS + 1]; /* delivering calls by duration; the last bin overflows */
} worker_stats_t;

static worker_stats_t g_stats[MAX_WORKERS];
static unsigned (*g_real)(ucp_worker_h);
static uint64_t g_t0_ticks, g_t0_ns;
static ucs_status_ptr_t (*g_real_send)(ucp_ep_h, const void *, size_t, ucp_tag_t,
                                       const ucp_request_param_t *);

/* Exported for weft_lat_split (see the top of the file). Written by the
 * thread in the call, read by the program's thread after its Weft call
 * returned; relaxed atomics (a stamp is a sample, not a synchronisation). */
_Atomic uint64_t ucx_probe_stamp[4];
uint64_t ucx_probe_ticks(void);
double ucx_probe_ns_per_tick(void);

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ticks(void)
{
#ifdef PROBE_TSC
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
#else
    return now_ns();
#endif
}

uint64_t ucx_probe_ticks(void) { return ticks(); }

double ucx_probe_ns_per_tick(void)
{
#ifdef PROBE_TSC
    uint64_t dt = ticks() - g_t0_ticks, dns = now_ns() - g_t0_ns;
    return dt > 0 ? (double)dns / (double)dt : 1.0;
#else
    return 1.0;
#endif
}

/* The real function behind name (next in the lookup order); aborts if none. */
static void *real_fn(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "ucx_progress_probe: %s not found: %s\n", name, dlerror());
        abort();
    }
    return f;
}

/* Resolved once, before any thread can call the wrappers (the preloaded
 * library's constructor runs before main): the wrappers only read them. */
__attribute__((constructor)) static void probe_init(void)
{
    g_t0_ns = now_ns();
    g_t0_ticks = ticks();
    g_real = (unsigned (*)(ucp_worker_h))real_fn("ucp_worker_progress");
    g_real_send = (ucs_status_ptr_t(*)(ucp_ep_h, const void *, size_t, ucp_tag_t,
                                       const ucp_request_param_t *))real_fn("ucp_tag_send_nbx");
}

static worker_stats_t *slot_of(void *w)
{
    for (int i = 0; i < MAX_WORKERS; i++) {
        void *cur = atomic_load_explicit(&g_stats[i].worker, memory_order_acquire);
        if (cur == w) return &g_stats[i];
        if (cur == NULL) {
            void *expected = NULL;
            if (atomic_compare_exchange_strong(&g_stats[i].worker, &expected, w)) return &g_stats[i];
            if (expected == w) return &g_stats[i];
        }
    }
    return NULL; /* more workers than slots: not counted */
}

unsigned ucp_worker_progress(ucp_worker_h worker)
{
    uint64_t a = ticks();
    unsigned n = g_real(worker);
    uint64_t b = ticks(), d = b - a;
    if (n > 0) {
        atomic_store_explicit(&ucx_probe_stamp[0], a, memory_order_relaxed);
        atomic_store_explicit(&ucx_probe_stamp[1], b, memory_order_relaxed);
    }
    worker_stats_t *s = slot_of(worker);
    if (s != NULL) {
        s->calls++;
        if (n > 0) {
            s->delivering++;
            s->sum_ticks += d;
            uint64_t bin = d / BIN_TICKS;
            s->hist[bin < NBINS ? bin : NBINS]++;
        }
    }
    return n;
}

ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count, ucp_tag_t tag,
                                  const ucp_request_param_t *param)
{
    uint64_t a = ticks();
    ucs_status_ptr_t r = g_real_send(ep, buffer, count, tag, param);
    atomic_store_explicit(&ucx_probe_stamp[3], ticks(), memory_order_relaxed);
    atomic_store_explicit(&ucx_probe_stamp[2], a, memory_order_relaxed);
    return r;
}

/* Median of the delivering calls' durations, in ticks (bin centre). */
static double median_ticks(const worker_stats_t *s)
{
    uint64_t half = (s->delivering + 1) / 2, seen = 0;
    for (int b = 0; b <= NBINS; b++) {
        seen += s->hist[b];
        if (seen >= half) return ((double)b + 0.5) * BIN_TICKS;
    }
    return 0;
}

__attribute__((destructor)) static void probe_report(void)
{
    const char *want = getenv("PROBE_RANK");
    const char *rank = getenv("PMI_RANK");
    if (want != NULL && *want != '\0' && (rank == NULL || strcmp(want, rank) != 0)) return;
    const double ns_per_tick = ucx_probe_ns_per_tick();
    for (int i = 0; i < MAX_WORKERS; i++) {
        const worker_stats_t *s = &g_stats[i];
        if (atomic_load(&s->worker) == NULL) break;
        if (s->delivering == 0) {
            fprintf(stderr, "ucx_progress_probe: rank %s worker %d: %llu calls, none delivered\n",
                    rank ? rank : "?", i + 1, (unsigned long long)s->calls);
            continue;
        }
        double med = median_ticks(s);
        fprintf(stderr,
                "ucx_progress_probe: rank %s worker %d: %llu delivering calls, median %.0f ns "
                "(%.0f ticks), mean %.0f ns; %.1f calls per delivering one\n",
                rank ? rank : "?", i + 1, (unsigned long long)s->delivering, med * ns_per_tick, med,
                (double)s->sum_ticks / (double)s->delivering * ns_per_tick,
                (double)s->calls / (double)s->delivering);
    }
}
