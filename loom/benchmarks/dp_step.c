/*
 * dp_step.c - `mpiexec -n P loom_dp_step` (a benchmark, built, not installed): what Loom's bucketed overlap of
 * the gradient all-reduction buys when the compute runs on a device.
 *
 * When every core is busy with compute (2 ranks on a 2-core host), Weft's
 * progress engine gets no core, and CPU-busy compute cannot overlap the
 * CPU-driven communication; `loom train --dp-mode overlap|blocking` measures
 * that case.  Here the compute is device-style: the host thread sleeps, as it
 * does while a GPU computes, for the layer times measured on the CPU divided
 * by a speed-up S.  Everything else is the real data-parallel step: the
 * model's gradient array, dp.c's bucket plan, loom_dp_begin,
 * loom_dp_notify after each layer with the offset the model's backward hook
 * reports, loom_dp_finish.
 *
 * 1. Calibration: a few real forward+backward steps on seeded synthetic
 *    input, the backward hook timestamping each layer; per-layer medians,
 *    then the maximum over the ranks, so that every rank replays the same
 *    schedule (no artificial skew).
 * 2. Replay of one step: sleep forward/S; loom_dp_begin; for each layer in
 *    backward order sleep until its deadline on a cumulative schedule
 *    (clock_nanosleep, TIMER_ABSTIME: a late wake-up does not delay the later
 *    deadlines), then loom_dp_notify(the layer's ready_from); loom_dp_finish.
 *    No optimiser step (on a device it is one more kernel).  The sleeps keep
 *    the kernel's default timer slack: a shorter slack keeps the core busy in
 *    the timer path, which is CPU-busy compute (doc/benchmarks.md).
 * 3. Four kinds of step, interleaved round by round with the order rotated,
 *    each after an MPI_Barrier (rank skew is not measured) and timed as the
 *    maximum over the ranks; medians are reported:
 *      compute   the replay without data-parallel calls (sleep overshoot included)
 *      blocking  the replay, then one weft_allreduce of all gradients
 *      overlap   the replay with the buckets started during backward
 *      pure      no sleeps: the blocking all-reduce alone (pure communication)
 *    hidden_pct = 100 * (blocking - overlap) / pure.
 *
 * Threads: all on the calling thread (plus Weft's progress engine).
 */
#define _POSIX_C_SOURCE 200809L
#include "../cli/options.h"
#include "../src/internal.h" /* LOOM_CHECK_GOTO */
#include "loom_mesh.h"
#include "loom_par.h"

#include <stddef.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SPEEDUPS 16


typedef struct {
    const char *model, *csv;
    int batch, steps, warmup, calib, threads, mesh_size, ns, help_only;
    double bucket_mb, width, speedup[MAX_SPEEDUPS];
    long seed;
    int mesh;
} dargs_t;

#define F(x) offsetof(dargs_t, x)
#define G "Options"
static const cli_opt_t dps_options[] = {
    {"model", CLI_STR, F(model), 0, 0, 0, NULL, 1, "NAME", "resnet20 (default) | resnet(6k+2) | mesh", G},
    {"batch", CLI_INT, F(batch), 1, 65536, 0, NULL, 1, "B", "samples per rank (default 32; mesh 4)", G},
    {"bucket-mb", CLI_NUM, F(bucket_mb), 1e-9, 1e6, 0, NULL, 1, "X",
     "gradient bucket size in MiB (default 0.25)", G},
    {"steps", CLI_INT, F(steps), 1, 1000000, 0, NULL, 1, "N",
     "timed steps per mode and speed-up (default 30)", G},
    {"warmup", CLI_INT, F(warmup), 0, 1000000, 0, NULL, 1, "W", "untimed rounds before them (default 5)", G},
    {"speedup", CLI_LIST, F(speedup), 0, MAX_SPEEDUPS, F(ns), NULL, 1, "S[,S...]",
     "device compute = CPU time / S; one row each (default 1)", G},
    {"calib", CLI_INT, F(calib), 1, 1000, 0, NULL, 1, "N",
     "CPU forward+backward steps measured for the schedule (default 5)", G},
    {"threads", CLI_INT, F(threads), 1, 256, 0, NULL, 1, "T",
     "Loom threads of the calibration (default 1)", G},
    {"seed", CLI_LONG, F(seed), 0, 9007199254740992.0, 0, NULL, 1, "N",
     "weights and synthetic input (default 1)", G},
    {"csv", CLI_STR, F(csv), 0, 0, 0, NULL, 1, "FILE", "also write the rows as CSV (header first)", G},
    {"mesh-size", CLI_INT, F(mesh_size), 8, 1 << 16, 0, NULL, 1, "N",
     "mesh: cells per side, a multiple of 8 (default 128)", G},
    {"width", CLI_NUM, F(width), 1e-3, 64, 0, NULL, 1, "X", "mesh: width multiplier (default 0.125)", G},
    CLI_END};

static const char *dps_synopsis =
    "mpiexec -n P loom_dp_step [OPTIONS]\n"
    "  The data-parallel step (P ranks) with device-style compute: the host thread sleeps\n"
    "  for the CPU-measured layer times divided by S while the gradient buckets are\n"
    "  all-reduced; overlap (buckets during backward) against blocking (one all-reduce\n"
    "  after backward), interleaved.  CPU-busy figures: `loom train` / parallel.sh.\n"
    "  Ends with: final: speedup=S compute_ms=C blocking_ms=B overlap_ms=O overlap_over_blocking=R\n"
    "  hidden_pct=H pure_comm_ms=P (the first S).";

/* 0: run, 1: help or version printed, 2: bad (message printed by rank 0). */
static int parse(int argc, char **argv, dargs_t *a, int rank)
{
    *a = (dargs_t){.model = "resnet20", .batch = -1, .steps = 30, .warmup = 5, .calib = 5,
                   .threads = 1, .mesh_size = 128, .ns = 1, .bucket_mb = 0.25, .width = 0.125,
                   .speedup = {1.0}, .seed = 1};
    char version[64];
    snprintf(version, sizeof version, "loom_dp_step (loom %d.%d)", LOOM_VERSION_MAJOR,
             LOOM_VERSION_MINOR);
    int rc = cli_parse(dps_options, 1, "loom_dp_step", dps_synopsis, version, argc, argv, a,
                       rank == 0);
    if (rc != 0)
        return rc;
    if (strcmp(a->model, "mesh") != 0 && strncmp(a->model, "resnet", 6) != 0)
        return rank == 0 ? cli_usage_error("loom_dp_step", stderr,
                                           "--model must be resnetN or mesh (got '%s')", a->model)
                         : 2;
    a->mesh = !strcmp(a->model, "mesh");
    if (a->mesh && a->mesh_size % 8)
        return rank == 0 ? cli_usage_error("loom_dp_step", stderr,
                                           "--mesh-size %d is not a multiple of 8", a->mesh_size)
                         : 2;
    if (a->batch < 0)
        a->batch = a->mesh ? 4 : 32;
    return 0;
}

/* ------------------------------------------------------------ schedule */
typedef struct {
    int nops;
    double fwd;    /* seconds of the forward pass */
    double *bwd;   /* [nops] seconds of each layer's backward, in backward order */
    size_t *ready; /* [nops] ready_from the hook reports after that layer */
} sched_t;

typedef struct {
    double *t;
    size_t *ready;
    int n, cap;
} stamps_t;

static int stamp_hook(void *arg, int op, size_t ready_from)
{
    stamps_t *s = arg;
    (void)op;
    if (s->n < s->cap) {
        s->t[s->n] = loom_now();
        s->ready[s->n] = ready_from;
    }
    s->n++;
    return LOOM_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
    if (n < 1)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Real CPU steps with the hook timestamping each layer; the schedule is the
 * per-layer median, then the maximum over comm's ranks.  Installs and
 * removes its own backward hook: call it before loom_dp_create. */
static int calibrate(loom_model_t *m, int batch, int steps, uint64_t seed, weft_comm_t comm,
                     sched_t *sc)
{
    int nops = loom_model_num_ops(m), st = LOOM_OK;
    stamps_t s = {.t = malloc(sizeof(double) * (size_t)nops),
                  .ready = malloc(sizeof(size_t) * (size_t)nops), .cap = nops};
    double *samp = malloc(sizeof(double) * (size_t)(nops + 1) * (size_t)steps);
    double *sched = malloc(sizeof(double) * (size_t)(nops + 1));
    sc->nops = nops;
    sc->bwd = malloc(sizeof(double) * (size_t)(nops > 0 ? nops : 1));
    sc->ready = malloc(sizeof(size_t) * (size_t)(nops > 0 ? nops : 1));
    if (!s.t || !s.ready || !samp || !sched || !sc->bwd || !sc->ready) {
        st = loom_error(LOOM_ERR_NOMEM, "out of memory for the calibration");
        goto out;
    }
    loom_rng_t g;
    loom_rng_seed(&g, seed * 7919 + 11);
    float *x = loom_model_input(m);
    for (size_t i = 0; i < loom_shape_count(loom_model_input_shape(m)); i++)
        x[i] = loom_rng_normal(&g);
    loom_shape_t os = loom_model_output_shape(m);
    loom_model_set_backward_hook(m, stamp_hook, &s);
    for (int it = 0; it <= steps; it++) { /* it 0: warm-up (workspace, caches) */
        double t0 = loom_now();
        LOOM_CHECK_GOTO(loom_model_forward(m, batch, 1), st, unhook);
        double t1 = loom_now();
        float *d = loom_model_doutput(m);
        for (size_t i = 0; i < loom_shape_count(os); i++)
            d[i] = 1e-3f * (float)((int)(i % 7) - 3);
        loom_model_zero_grad(m);
        s.n = 0;
        double tb = loom_now();
        LOOM_CHECK_GOTO(loom_model_backward(m, batch), st, unhook);
        if (s.n != nops) {
            st = loom_error(LOOM_ERR_INTERNAL, "the backward hook ran %d times for %d layers",
                            s.n, nops);
            goto unhook;
        }
        if (it == 0)
            continue;
        samp[it - 1] = t1 - t0;
        for (int j = 0; j < nops; j++)
            samp[(size_t)(j + 1) * steps + it - 1] = s.t[j] - (j ? s.t[j - 1] : tb);
    }
    for (int j = 0; j <= nops; j++)
        sched[j] = median(samp + (size_t)j * steps, steps);
    int ws = weft_allreduce(WEFT_IN_PLACE, sched, (size_t)nops + 1, WEFT_FLOAT64, WEFT_MAX, comm);
    if (ws != WEFT_SUCCESS) {
        st = loom_weft_error(ws, "weft_allreduce (maximum) of the layer times");
        goto unhook;
    }
    sc->fwd = sched[0];
    memcpy(sc->bwd, sched + 1, sizeof(double) * (size_t)nops);
    memcpy(sc->ready, s.ready, sizeof(size_t) * (size_t)nops);
unhook:
    loom_model_set_backward_hook(m, NULL, NULL);
out:
    free(s.t);
    free(s.ready);
    free(samp);
    free(sched);
    return st;
}

/* Sleeps until loom_now() reaches t (CLOCK_MONOTONIC seconds); a deadline
 * already past costs no system call. */
static void sleep_until(double t)
{
    if (loom_now() >= t)
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* ---------------------------------------------------------------- steps */
enum { K_COMPUTE, K_BLOCKING, K_OVERLAP, K_PURE, K_COUNT };
static const char *const kind_name[K_COUNT] = {"compute", "blocking", "overlap", "pure"};

typedef struct {
    loom_model_t *m;
    loom_dp_t *dp;
    const sched_t *sc;
} ctx_t;

/* Deterministic gradients (the reduction's input; no NaN can appear). */
static void fill_grads(loom_model_t *m)
{
    float *g = loom_model_grads(m);
    size_t n = loom_model_param_count(m);
    for (size_t i = 0; i < n; i++)
        g[i] = 1e-3f * (float)(i % 1000);
}

/* One step of `kind` at speed-up S: *secs its time on this rank, *wait the
 * time loom_dp_finish blocked, *early the buckets started during backward. */
static int run_step(ctx_t *c, int kind, double S, double *secs, double *wait, int *early)
{
    int st = LOOM_OK;
    fill_grads(c->m);
    if (kind != K_COMPUTE &&
        (st = loom_dp_set_mode(c->dp, kind == K_OVERLAP ? LOOM_DP_OVERLAP : LOOM_DP_BLOCKING)) < 0)
        return st;
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        return loom_error(LOOM_ERR_INTERNAL, "MPI_Barrier before a %s step failed",
                          kind_name[kind]);
    int dp = kind != K_COMPUTE;
    double inv = kind == K_PURE ? 0.0 : 1.0 / S;
    double w0 = loom_dp_wait_seconds(c->dp);
    double t0 = loom_now(), deadline = t0 + c->sc->fwd * inv;
    sleep_until(deadline);
    if (dp && (st = loom_dp_begin(c->dp)) < 0)
        return st;
    for (int k = 0; k < c->sc->nops; k++) {
        deadline += c->sc->bwd[k] * inv;
        sleep_until(deadline);
        if (dp && (st = loom_dp_notify(c->dp, c->sc->ready[k])) < 0) {
            (void)loom_dp_finish(c->dp); /* collects what was started; st is the error */
            return st;
        }
    }
    if (dp && (st = loom_dp_finish(c->dp)) < 0)
        return st;
    *secs = loom_now() - t0;
    *wait = loom_dp_wait_seconds(c->dp) - w0;
    *early = kind == K_OVERLAP ? loom_dp_early_buckets(c->dp) : 0;
    return LOOM_OK;
}

/* Wall and CPU time of a 5 us device-style sleep on this machine. */
static void sleep_cost(double *wall_us, double *cpu_us)
{
    enum { N = 20 };
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    double t0 = loom_now();
    for (int i = 0; i < N; i++)
        sleep_until(loom_now() + 5e-6);
    double t1 = loom_now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    *wall_us = (t1 - t0) * 1e6 / N;
    *cpu_us = ((double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec)) * 1e6 / N;
}

/* ----------------------------------------------------------------- main */
/* 100 * (blocking - overlap) / pure; NAN on one rank (nothing to hide). */
static double hidden_pct(int size, double blocking, double overlap, double pure)
{
    return size > 1 && pure > 0 ? 100.0 * (blocking - overlap) / pure : NAN;
}

/* "%.1f", or "n/a" for NAN. */
static const char *fmt_pct(char *buf, size_t n, double v)
{
    if (isnan(v))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "%.1f", v);
    return buf;
}

typedef struct {
    double compute, blocking, overlap, pure, bwait, owait;
    int early;
} row_t;

static int run(const dargs_t *a, int rank, int size, weft_comm_t comm, FILE *csv)
{
    loom_model_t *m = NULL;
    loom_dp_t *dp = NULL;
    sched_t sc = {0};
    double *times = NULL;
    row_t rows[MAX_SPEEDUPS] = {{0}};
    int st, rc = 1, ws;
    loom_shape_t in = a->mesh ? (loom_shape_t){a->batch, LOOM_MESH_CHANNELS, a->mesh_size, a->mesh_size}
                              : (loom_shape_t){a->batch, 1, 28, 28};
    st = a->mesh ? loom_mesh_model_create(&m, in, (float)a->width, (uint64_t)a->seed)
                 : loom_resnet_create(&m, a->model, in, 10, (uint64_t)a->seed);
    if (st < 0) {
        /* the same arguments fail the same way on every rank */
        if (rank == 0)
            fprintf(stderr, "loom_dp_step: cannot build model '%s': %s\n", a->model, loom_last_error());
        rc = st == LOOM_ERR_INVALID ? 2 : 1;
        goto out;
    }
    if ((st = calibrate(m, a->batch, a->calib, (uint64_t)a->seed + (uint64_t)rank, comm, &sc)) < 0)
        goto fail;
    loom_dp_desc_t dd = LOOM_DP_DESC_INIT;
    dd.comm = comm;
    dd.bucket_bytes = (size_t)(a->bucket_mb * 1048576.0);
    if (dd.bucket_bytes < 1)
        dd.bucket_bytes = 1;
    dd.op = WEFT_AVG;
    if ((st = loom_dp_create(&dp, m, &dd)) < 0)
        goto fail;
    size_t np = loom_model_param_count(m);
    double bwd_total = 0.0;
    for (int k = 0; k < sc.nops; k++)
        bwd_total += sc.bwd[k];
    /* the sleep's cost on every rank at once, after a barrier (nobody computes) */
    double cost[2];
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
        st = loom_error(LOOM_ERR_INTERNAL, "MPI_Barrier failed");
        goto fail;
    }
    sleep_cost(&cost[0], &cost[1]);
    ws = weft_allreduce(WEFT_IN_PLACE, cost, 2, WEFT_FLOAT64, WEFT_MAX, comm);
    if (ws != WEFT_SUCCESS) {
        st = loom_weft_error(ws, "weft_allreduce (maximum) of the sleep cost");
        goto fail;
    }
    if (rank == 0) {
        printf("# loom_dp_step: device-style compute: the host thread sleeps for the CPU-measured "
               "layer times divided by S; CPU-busy figures are in `loom train` / parallel.sh\n");
        printf("# model %s, input %dx%dx%d, batch %d per rank, %zu parameters = %zu bytes of "
               "gradients; data parallel over ranks: %d (WEFT_AVG)%s\n",
               a->model, in.c, in.h, in.w, a->batch, np, np * sizeof(float), size,
               size == 1 ? "; one rank: the all-reductions move nothing, so hidden_pct is not "
                           "defined (n/a) and the figures time the replay alone"
                         : "");
        printf("# bucket plan: --bucket-mb %g (%zu bytes) -> buckets: %d\n", a->bucket_mb,
               dd.bucket_bytes, loom_dp_num_buckets(dp));
        loom_dp_print_algos(dp, stdout);
        printf("# schedule: %d CPU forward+backward steps per rank after 1 warm-up (Loom "
               "threads: %d), per-layer medians, maximum over ranks: forward %.2f ms + backward "
               "%.2f ms over %d layers = %.2f ms per step on the CPU\n",
               a->calib, a->threads, sc.fwd * 1e3, bwd_total * 1e3, sc.nops,
               (sc.fwd + bwd_total) * 1e3);
        printf("# a 5 us sleep takes %.1f us here, %.1f us of it on the CPU (mean of 20, maximum "
               "over ranks; default timer slack)\n", cost[0], cost[1]);
        printf("# per S: %d timed rounds after %d warm-up rounds; a round is one step of each kind "
               "(compute only, blocking, overlap, pure communication) in rotating order, each after "
               "an MPI_Barrier, timed as the maximum over ranks; medians. No optimiser step.\n",
               a->steps, a->warmup);
        fflush(stdout);
    }
    /* times[(s * K_COUNT + kind) * steps + i], then the finish waits of
     * blocking and overlap, then the early buckets of overlap */
    size_t per = (size_t)a->steps, nt = (size_t)a->ns * (K_COUNT + 3) * per;
    times = calloc(nt, sizeof *times);
    if (!times) {
        st = loom_error(LOOM_ERR_NOMEM, "out of memory for %zu step times", nt);
        goto fail;
    }
    ctx_t c = {.m = m, .dp = dp, .sc = &sc};
    for (int s = 0; s < a->ns; s++) {
        double *ts = times + (size_t)s * (K_COUNT + 3) * per;
        for (int r = -a->warmup; r < a->steps; r++) {
            for (int j = 0; j < K_COUNT; j++) {
                int kind = (j + r + a->warmup) % K_COUNT, early = 0;
                double secs = 0.0, wait = 0.0;
                if ((st = run_step(&c, kind, a->speedup[s], &secs, &wait, &early)) < 0) {
                    fprintf(stderr, "loom_dp_step: rank %d: %s step at S=%g\n", rank, kind_name[kind],
                            a->speedup[s]);
                    goto fail;
                }
                if (r < 0)
                    continue;
                ts[(size_t)kind * per + (size_t)r] = secs;
                if (kind == K_BLOCKING)
                    ts[(size_t)K_COUNT * per + (size_t)r] = wait;
                if (kind == K_OVERLAP) {
                    ts[(size_t)(K_COUNT + 1) * per + (size_t)r] = wait;
                    /* fewest early buckets = largest negated count under MAX */
                    ts[(size_t)(K_COUNT + 2) * per + (size_t)r] = -(double)early;
                }
            }
        }
    }
    ws = weft_allreduce(WEFT_IN_PLACE, times, nt, WEFT_FLOAT64, WEFT_MAX, comm);
    if (ws != WEFT_SUCCESS) {
        st = loom_weft_error(ws, "weft_allreduce (maximum) of the step times");
        goto fail;
    }
    if (rank != 0) {
        rc = 0;
        goto out;
    }
    /* pure communication: all rounds of all S together */
    double *pure = malloc(sizeof(double) * per * (size_t)a->ns);
    if (!pure) {
        st = loom_error(LOOM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int s = 0; s < a->ns; s++)
        memcpy(pure + (size_t)s * per, times + ((size_t)s * (K_COUNT + 3) + K_PURE) * per,
               sizeof(double) * per);
    double pure_s = median(pure, (int)per * a->ns);
    free(pure);
    for (int s = 0; s < a->ns; s++) {
        double *ts = times + (size_t)s * (K_COUNT + 3) * per;
        row_t *w = &rows[s];
        w->compute = median(ts + K_COMPUTE * per, (int)per);
        w->blocking = median(ts + K_BLOCKING * per, (int)per);
        w->overlap = median(ts + K_OVERLAP * per, (int)per);
        w->pure = median(ts + K_PURE * per, (int)per);
        w->bwait = median(ts + K_COUNT * per, (int)per);
        w->owait = median(ts + (K_COUNT + 1) * per, (int)per);
        double most = ts[(K_COUNT + 2) * per];
        for (size_t i = 1; i < per; i++)
            most = fmax(most, ts[(K_COUNT + 2) * per + i]);
        w->early = (int)-most;
    }
    printf("# pure communication (blocking weft_allreduce of all %zu bytes, no compute): median "
           "%.3f ms over %zu steps\n", np * sizeof(float), pure_s * 1e3, per * (size_t)a->ns);
    printf("%8s %11s %12s %11s %17s %11s\n", "speedup", "compute_ms", "blocking_ms", "overlap_ms",
           "overlap/blocking", "hidden_pct");
    char pb[32];
    for (int s = 0; s < a->ns; s++) {
        const row_t *w = &rows[s];
        printf("%8g %11.3f %12.3f %11.3f %17.3f %11s\n", a->speedup[s], w->compute * 1e3,
               w->blocking * 1e3, w->overlap * 1e3, w->overlap / w->blocking,
               fmt_pct(pb, sizeof pb, hidden_pct(size, w->blocking, w->overlap, pure_s)));
    }
    for (int s = 0; s < a->ns; s++) {
        const row_t *w = &rows[s];
        printf("# S=%g: scheduled compute %.3f ms; time in loom_dp_finish: blocking %.3f ms, overlap "
               "%.3f ms; buckets started during backward (overlap, fewest over steps and ranks): "
               "%d of %d; pure communication in these rounds %.3f ms\n",
               a->speedup[s], (sc.fwd + bwd_total) / a->speedup[s] * 1e3, w->bwait * 1e3,
               w->owait * 1e3, w->early, loom_dp_num_buckets(dp), w->pure * 1e3);
    }
    const row_t *f = &rows[0];
    printf("final: speedup=%g compute_ms=%.3f blocking_ms=%.3f overlap_ms=%.3f "
           "overlap_over_blocking=%.3f hidden_pct=%s pure_comm_ms=%.3f\n",
           a->speedup[0], f->compute * 1e3, f->blocking * 1e3, f->overlap * 1e3,
           f->overlap / f->blocking,
           fmt_pct(pb, sizeof pb, hidden_pct(size, f->blocking, f->overlap, pure_s)), pure_s * 1e3);
    if (csv) {
        fprintf(csv, "model,ranks,batch,params,grad_bytes,bucket_bytes,buckets,speedup,compute_ms,"
                     "blocking_ms,overlap_ms,overlap_over_blocking,hidden_pct,pure_comm_ms,"
                     "blocking_finish_ms,overlap_finish_ms,early_buckets,steps,warmup\n");
        for (int s = 0; s < a->ns; s++) {
            const row_t *w = &rows[s];
            fprintf(csv, "%s,%d,%d,%zu,%zu,%zu,%d,%g,%.4f,%.4f,%.4f,%.4f,%s,%.4f,%.4f,%.4f,%d,%d,%d\n",
                    a->model, size, a->batch, np, np * sizeof(float), dd.bucket_bytes,
                    loom_dp_num_buckets(dp), a->speedup[s], w->compute * 1e3, w->blocking * 1e3,
                    w->overlap * 1e3, w->overlap / w->blocking,
                    fmt_pct(pb, sizeof pb, hidden_pct(size, w->blocking, w->overlap, pure_s)),
                    pure_s * 1e3,
                    w->bwait * 1e3, w->owait * 1e3, w->early, a->steps, a->warmup);
        }
        if (fflush(csv) != 0 || ferror(csv)) {
            st = loom_error(LOOM_ERR_IO, "writing %s failed", a->csv);
            goto fail;
        }
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "loom_dp_step: rank %d: %s\n", rank, loom_last_error());
    rc = 1;
out:
    free(times);
    loom_dp_destroy(dp);
    free(sc.bwd);
    free(sc.ready);
    loom_model_destroy(m);
    return rc;
}

/* A failure on this rank alone: stop the job, others may wait in a collective. */
static void abort_job(int size)
{
    if (size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static int dp_step_main(int argc, char **argv)
{
    int rank = 0, size = 1;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) {
        fprintf(stderr, "loom_dp_step: MPI_Comm_rank/size failed\n");
        return 1;
    }
    dargs_t a;
    int pr = parse(argc, argv, &a, rank);
    if (pr != 0)
        return pr == 1 ? 0 : 2;
    loom_set_threads(a.threads);
    weft_comm_t comm = NULL;
    int ws = weft_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (ws != WEFT_SUCCESS) {
        fprintf(stderr, "loom_dp_step: rank %d: weft_comm_create: %s\n", rank, weft_strerror(ws));
        return 1; /* collective: every rank fails it */
    }
    /* rank 0 opens the CSV; every rank learns whether it could */
    FILE *csv = NULL;
    int32_t nofile = 0;
    if (rank == 0 && a.csv && !(csv = fopen(a.csv, "w"))) {
        fprintf(stderr, "loom_dp_step: cannot write %s: %s\n", a.csv, strerror(errno));
        nofile = 1;
    }
    ws = weft_allreduce(WEFT_IN_PLACE, &nofile, 1, WEFT_INT32, WEFT_MAX, comm);
    int rc = 1; /* a missing CSV file fails every rank alike */
    if (ws != WEFT_SUCCESS) {
        fprintf(stderr, "loom_dp_step: rank %d: weft_allreduce: %s\n", rank, weft_strerror(ws));
        abort_job(size);
    } else if (!nofile && (rc = run(&a, rank, size, comm, csv)) == 1) {
        abort_job(size);
    }
    if (csv && fclose(csv) != 0 && rc == 0) {
        fprintf(stderr, "loom_dp_step: closing %s: %s\n", a.csv, strerror(errno));
        rc = 1;
    }
    ws = weft_comm_destroy(comm);
    if (ws != WEFT_SUCCESS && rc == 0) {
        fprintf(stderr, "loom_dp_step: rank %d: weft_comm_destroy: %s\n", rank, weft_strerror(ws));
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    weft_init_params_t ip = WEFT_INIT_PARAMS_INITIALIZER;
    ip.argc = &argc;
    ip.argv = &argv;
    int ws = weft_init(&ip);
    if (ws != WEFT_SUCCESS) {
        fprintf(stderr, "loom_dp_step: weft_init: %s (%s)\n", weft_strerror(ws), weft_status_name(ws));
        return 1;
    }
    int rc = dp_step_main(argc, argv);
    ws = weft_finalize();
    if (ws != WEFT_SUCCESS && rc == 0) {
        fprintf(stderr, "loom_dp_step: weft_finalize: %s (%s)\n", weft_strerror(ws),
                weft_status_name(ws));
        rc = 1;
    }
    return rc;
}
