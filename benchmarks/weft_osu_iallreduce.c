/*
 * weft_osu_iallreduce - OSU's overlap method for nonblocking allreduce, for
 * Weft (weft_iallreduce + compute + weft_wait) and for MPI (MPI_Iallreduce +
 * compute + MPI_Wait) side by side, in the same run.
 *
 *   mpiexec -n 2 weft_osu_iallreduce [shared options] [--compute=busy|device]
 *
 * Per size and library (each iteration timed on its own, then an MPI_Barrier
 * outside the timed part, as OSU's nonblocking benchmarks do: without it the
 * ranks drift apart by the jitter of their compute and the leading rank's
 * wait measures that skew, not the library):
 *   1. Pure Comm.: issue + wait with nothing in between (interleaved rounds,
 *      median of the per-iteration average, max over ranks);
 *   2. Overall: issue, compute for as long as that library's pure
 *      communication time (as OSU does), wait; Compute is the compute time
 *      measured inside that loop;
 *   Overlap(%) = max(0, 100 - 100 * (Overall - Compute) / Pure Comm.).
 *
 * Compute modes (a table, so that a later mode, e.g. work queued on a device
 * stream, is one more entry):
 *   busy   - a CPU loop that calls neither MPI nor Weft;
 *   device - the caller sleeps (clock_nanosleep), as a host thread does while
 *            a GPU computes.
 */
#include <math.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "weft_stream.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

/* ---- compute modes ------------------------------------------------------------- */
typedef struct compute_mode {
    const char *name;   /* --compute=NAME */
    const char *header; /* what the header line says */
    /** Prepare (may be NULL): called once after option parsing, collective-free.
     * Returns 0 or nonzero with a message printed. */
    int (*setup)(bench_ctx_t *b, void **ctx);
    /** Compute for about `seconds`; must not call MPI or Weft unless the mode says so. */
    void (*compute)(void *ctx, double seconds);
    /** Release what setup made (may be NULL). */
    void (*teardown)(void *ctx);
    /** Stream modes (NULL otherwise): the communicator Weft's collective runs
     * on, and, after weft_wait, wait for the stream and return the compute
     * seconds that ran on it (-1 on error). */
    weft_comm_t (*comm)(void *ctx);
    double (*sync)(void *ctx);
} compute_mode_t;

static volatile double busy_sink;

static void compute_busy(void *ctx, double seconds)
{
    (void)ctx;
    busy_sink += bench_busy(seconds);
}

static void compute_device(void *ctx, double seconds)
{
    (void)ctx;
    bench_sleep(seconds);
}

/* The device mode keeps the kernel's default timer slack (50 us), on purpose.
 * A host thread waiting for a GPU is off its core; a sleep that is to stand
 * in for it must be too. On the 2-core VM a nanosleep costs about 21-29 us of
 * CPU time in the kernel's timer path whatever its length, so with the
 * smallest slack a 6 us sleep ran 29 us of wall time at 100% CPU (busy
 * compute, not device compute), while with the default slack it ran 89 us at
 * 24% CPU (doc/benchmarks.md, "Device-style compute"). The overlap formula
 * uses the measured compute time, so the longer sleep is accounted for. */
static int setup_device(bench_ctx_t *b, void **ctx)
{
    *ctx = NULL;
    /* Say what a short sleep costs here, so that a reader can tell device
     * compute from busy compute on this machine. */
    enum { N = 200 };
    struct timespec c0, c1;
    double w0 = bench_now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    for (int i = 0; i < N; i++) bench_sleep(5e-6);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double wall = (bench_now() - w0) / N * 1e6;
    double cpu = ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / N / 1e3;
    bench_printf(b, "# device compute: a 5 us sleep takes %.1f us here (rank 0), %.1f us of it on "
                    "the CPU (%.0f%%)\n", wall, cpu, wall > 0 ? 100.0 * cpu / wall : 0.0);
    return 0;
}

/* --compute=stream: the communicator is bound to a host stream, and the
 * compute is a task enqueued on that stream that sleeps for the compute time
 * (standing in for a kernel). The host thread only enqueues; the collective
 * and the task run concurrently (stream order: issue, task, weft_wait's stream
 * wait), and the host synchronises with the stream after weft_wait. The MPI
 * baseline gets the same task on the same stream while the host is in MPI_Wait. */
typedef struct stream_mode {
    weft_stream_t stream;
    weft_comm_t comm;
    double seconds;  /* the task's target, set before each enqueue */
    double ran_s;    /* what the task measured, read after synchronize */
    int slack_set;   /* the stream thread's timer slack was lowered */
} stream_mode_t;

static weft_status_t stream_task(void *arg)
{
    stream_mode_t *m = arg;
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
    if (!m->slack_set) { /* the stream's thread: the smallest timer slack */
        (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
        m->slack_set = 1;
    }
#endif
    double t0 = bench_now();
    bench_sleep(m->seconds);
    m->ran_s = bench_now() - t0;
    return WEFT_SUCCESS;
}

static int setup_stream(bench_ctx_t *b, void **ctx)
{
    stream_mode_t *m = calloc(1, sizeof *m);
    *ctx = m;
    if (m == NULL) return 1;
    weft_status_t st = weft_stream_create_host(&m->stream);
    /* Collective over MPI_COMM_WORLD: every rank calls setup at the same point. */
    if (st == WEFT_SUCCESS) st = weft_comm_create(MPI_COMM_WORLD, m->stream, &m->comm);
    if (st != WEFT_SUCCESS) {
        bench_error(b, "--compute=stream: cannot create a host stream and its communicator: %s",
                    weft_strerror(st));
        return 1;
    }
    return 0;
}

static void compute_stream(void *ctx, double seconds)
{
    stream_mode_t *m = ctx;
    m->seconds = seconds;
    m->ran_s = 0;
    if (weft_stream_enqueue(m->stream, stream_task, m) != WEFT_SUCCESS) m->ran_s = -1;
}

static weft_comm_t comm_stream(void *ctx) { return ((stream_mode_t *)ctx)->comm; }

static double sync_stream(void *ctx)
{
    stream_mode_t *m = ctx;
    weft_status_t st = weft_stream_synchronize(m->stream);
    if (st != WEFT_SUCCESS || m->ran_s < 0) return -1;
    double r = m->ran_s;
    m->ran_s = 0;
    return r;
}

static void teardown_stream(void *ctx)
{
    stream_mode_t *m = ctx;
    if (m == NULL) return;
    if (m->comm) weft_comm_destroy(m->comm);
    if (m->stream) weft_stream_destroy(m->stream);
    free(m);
}

static const compute_mode_t compute_modes[] = {
    {"busy", "CPU-busy loop on the calling thread (--compute=busy)", NULL, compute_busy, NULL,
     NULL, NULL},
    {"device", "device-style: the calling thread sleeps (clock_nanosleep) as while a GPU computes "
               "(--compute=device)",
     setup_device, compute_device, NULL, NULL, NULL},
    {"stream", "a task on the communicator's host stream that sleeps, as a kernel on a CUDA "
               "stream (--compute=stream)",
     setup_stream, compute_stream, teardown_stream, comm_stream, sync_stream},
};
#define N_COMPUTE_MODES ((int)(sizeof compute_modes / sizeof compute_modes[0]))

typedef struct extra_opts {
    const compute_mode_t *mode;
} extra_opts_t;

static int parse_extra(void *ud, const char *name, const char *value)
{
    extra_opts_t *e = ud;
    if (strcmp(name, "compute") != 0) return BENCH_OPT_UNKNOWN;
    if (!value) return BENCH_OPT_NEEDS_VALUE;
    for (int i = 0; i < N_COMPUTE_MODES; i++)
        if (strcmp(value, compute_modes[i].name) == 0) {
            e->mode = &compute_modes[i];
            return BENCH_OPT_OK;
        }
    return BENCH_OPT_BAD_VALUE;
}

/* ---- the timed loops ---------------------------------------------------------------- */
typedef struct state {
    bench_ctx_t *b;
    weft_datatype_t dt;
    MPI_Datatype mdt;
    size_t count;
    void *wsend, *wrecv, *msend, *mrecv;
    const compute_mode_t *mode;
    void *mode_ctx;
    double compute_s[2];                 /* target compute per iteration: [0] Weft, [1] MPI */
    double comp_us[2][BENCH_MAX_ROUNDS]; /* measured compute per iteration, per round */
    double timed_s[2];                   /* timed part of the current loop: [0] Weft, [1] MPI */
    double acc[2][3];                    /* --osu: seconds of compute, issue and wait in timed
                                          * iterations (round >= 0), per library */
    int cur_round;                       /* the round of the loop running (-1: warm-up) */
    int osu_mpi;                         /* --osu=mpi: -c checks MPI's buffers */
} state_t;

/* Stream modes: wait for the stream; the compute time is what ran on it. */
static int stream_sync(state_t *s, double compute_s, double *comp_acc)
{
    double ran = s->mode->sync(s->mode_ctx);
    if (ran < 0) {
        bench_error(s->b, "stream synchronisation failed (count=%zu)", s->count);
        return 1;
    }
    if (compute_s > 0) *comp_acc += ran;
    return 0;
}

static int weft_issue_wait(state_t *s, double compute_s, double *comp_acc)
{
    weft_request_t req = WEFT_REQUEST_NULL;
    weft_comm_t comm = s->mode->comm ? s->mode->comm(s->mode_ctx) : s->b->comm;
    double t_issue = bench_now();
    weft_status_t st =
        weft_iallreduce(s->wsend, s->wrecv, s->count, s->dt, WEFT_SUM, comm, &req);
    t_issue = bench_now() - t_issue;
    if (st != WEFT_SUCCESS) {
        bench_error(s->b, "weft_iallreduce(count=%zu): %s (%s)", s->count, weft_status_name(st),
                    weft_strerror(st));
        return 1;
    }
    if (compute_s > 0) {
        double t0 = bench_now();
        s->mode->compute(s->mode_ctx, compute_s);
        if (!s->mode->sync) *comp_acc += bench_now() - t0; /* stream modes: see stream_sync */
    }
    double t_wait = bench_now();
    st = weft_wait(&req);
    t_wait = bench_now() - t_wait;
    if (st != WEFT_SUCCESS) {
        bench_error(s->b, "weft_wait(count=%zu): %s (%s)", s->count, weft_status_name(st),
                    weft_strerror(st));
        return 1;
    }
    if (s->cur_round >= 0) {
        s->acc[0][1] += t_issue;
        s->acc[0][2] += t_wait;
    }
    if (s->mode->sync && stream_sync(s, compute_s, comp_acc) != 0) return 1;
    return 0;
}

static int mpi_issue_wait(state_t *s, double compute_s, double *comp_acc)
{
    MPI_Request req = MPI_REQUEST_NULL;
    double t_issue = bench_now();
    int rc = MPI_Iallreduce(s->msend, s->mrecv, (int)s->count, s->mdt, MPI_SUM, s->b->mpi_comm,
                            &req);
    t_issue = bench_now() - t_issue;
    if (rc != MPI_SUCCESS) {
        bench_error(s->b, "MPI_Iallreduce(count=%zu) failed (code %d)", s->count, rc);
        return 1;
    }
    if (compute_s > 0) {
        double t0 = bench_now();
        s->mode->compute(s->mode_ctx, compute_s);
        if (!s->mode->sync) *comp_acc += bench_now() - t0; /* stream modes: see stream_sync */
    }
    double t_wait = bench_now();
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    t_wait = bench_now() - t_wait;
    if (rc != MPI_SUCCESS) {
        bench_error(s->b, "MPI_Wait(count=%zu) failed (code %d)", s->count, rc);
        return 1;
    }
    if (s->cur_round >= 0) {
        s->acc[1][1] += t_issue;
        s->acc[1][2] += t_wait;
    }
    if (s->mode->sync && stream_sync(s, compute_s, comp_acc) != 0) return 1;
    return 0;
}

static int run_loop(state_t *s, int lib, int with_compute, long iters, int round)
{
    double comp = 0, timed = 0;
    double target = with_compute ? s->compute_s[lib] : 0;
    s->cur_round = round;
    for (long i = 0; i < iters; i++) {
        double t0 = bench_now();
        int rc = lib == 0 ? weft_issue_wait(s, target, &comp) : mpi_issue_wait(s, target, &comp);
        timed += bench_now() - t0;
        if (rc != 0) return rc;
        rc = MPI_Barrier(s->b->ctl); /* untimed: the next iteration starts together */
        if (rc != MPI_SUCCESS) {
            bench_error(s->b, "MPI_Barrier between iterations failed (code %d)", rc);
            return 1;
        }
    }
    s->timed_s[lib] = timed;
    if (round >= 0) s->acc[lib][0] += comp;
    if (with_compute && round >= 0 && round < BENCH_MAX_ROUNDS)
        s->comp_us[lib][round] = comp / (double)iters * 1e6;
    return 0;
}

static int weft_pure(void *ud, long it, int r) { return run_loop(ud, 0, 0, it, r); }
static int mpi_pure(void *ud, long it, int r) { return run_loop(ud, 1, 0, it, r); }
static int weft_overall(void *ud, long it, int r) { return run_loop(ud, 0, 1, it, r); }
static int mpi_overall(void *ud, long it, int r) { return run_loop(ud, 1, 1, it, r); }

static double overlap_pct(double overall, double compute, double pure)
{
    if (!(pure > 0)) return 0;
    double v = 100.0 - 100.0 * (overall - compute) / pure;
    return v < 0 ? 0 : v;
}

/* ---- --osu ---------------------------------------------------------------------- */
/* -c: iteration `iter`'s input in the send buffer of the library timed, its
 * receive buffer cleared. */
static int osu_prepare(void *ud, long iter)
{
    state_t *s = ud;
    bench_fill_seed(s->osu_mpi ? s->msend : s->wsend, s->count, s->dt, bench_seed(s->b->rank, iter));
    memset(s->osu_mpi ? s->mrecv : s->wrecv, 0, s->count * weft_datatype_size(s->dt));
    return 0;
}

/* -c: the elements that differ from the sum over ranks of their inputs. */
static long osu_check(void *ud, long iter)
{
    state_t *s = ud;
    const void *r = s->osu_mpi ? s->mrecv : s->wrecv;
    long bad = 0;
    for (size_t i = 0; i < s->count; i++) {
        double want = 0;
        for (int k = 0; k < s->b->size; k++) want += bench_value(i, bench_seed(k, iter), s->dt);
        bad += bench_get(r, i, s->dt) != want;
    }
    return bad;
}

/* OSU OMB 7's osu_iallreduce: pure communication timed OSU's way, then the
 * overlapped loop with compute as long as the pure time (its average over
 * ranks); every figure averaged over ranks; OSU's overlap (no MPI_Test calls
 * during the compute: MPI_Test(us) is 0). CSV size_bytes,overall_us,
 * compute_us,init_us,wait_us,pure_us,pure_min_us,pure_max_us,overlap_pct,
 * errors. Returns 0, or 1. */
static int run_osu_mode(bench_ctx_t *b, const bench_opts_t *o, state_t *s, bench_csv_t *csv)
{
    const size_t esz = weft_datatype_size(o->dtype);
    const int lib = o->osu == BENCH_OSU_MPI;
    s->osu_mpi = lib;
    bench_osu_preamble(b, o, "OSU MPI Non-blocking Allreduce Latency Test");
    bench_osu_nbc_preamble(b);
    bench_osu_datatype(b, s->mdt, o->dtype);
    bench_osu_nbc_header(b, o);
    bench_variant_t vp = {"pure", lib ? mpi_pure : weft_pure, s, &s->timed_s[lib]};
    bench_variant_t vo = {"overall", lib ? mpi_overall : weft_overall, s, &s->timed_s[lib]};
    bench_osu_check_t chk = {osu_prepare, osu_check, s};
    BENCH_FOR_SIZES(o, bytes) {
        if (bytes < esz) continue;
        s->count = bytes / esz;
        bench_osu_result_t rp, ro;
        if (bench_run_osu(b, o, bytes, &vp, &chk, 0, &rp) != 0) {
            bench_error(b, "size %zu: pure communication failed", bytes);
            return 1;
        }
        s->compute_s[lib] = rp.avg_us * 1e-6;
        memset(s->acc, 0, sizeof s->acc);
        if (bench_run_osu(b, o, bytes, &vo, &chk, 0, &ro) != 0) {
            bench_error(b, "size %zu: overlapped communication failed", bytes);
            return 1;
        }
        /* compute, issue and wait: each rank's mean, averaged over ranks */
        double mean[3], sum[3];
        for (int k = 0; k < 3; k++) mean[k] = s->acc[lib][k] * 1e6 / (double)ro.iters;
        if (MPI_Allreduce(mean, sum, 3, MPI_DOUBLE, MPI_SUM, b->ctl) != MPI_SUCCESS) {
            bench_error(b, "MPI_Allreduce of the compute times failed");
            return 1;
        }
        double us[9] = {ro.avg_us, sum[0] / b->size, sum[1] / b->size, 0.0, sum[2] / b->size,
                        rp.avg_us, rp.min_us, rp.max_us, 0};
        us[8] = overlap_pct(us[0], us[1], us[5]);
        long errors = rp.errors + ro.errors;
        bench_osu_nbc_row(b, o, bytes, us, errors);
        bench_csv_row(csv, "%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.2f,%ld", bytes, us[0], us[1],
                      us[2], us[4], us[5], us[6], us[7], us[8], errors);
        if (errors > 0) {
            bench_osu_validation_failed(b, bytes);
            return 1;
        }
        bench_progress(b, "weft_osu_iallreduce --osu: %zu bytes done", bytes);
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    extra_opts_t ex = {&compute_modes[0]};
    bench_spec_t spec = {.prog = "weft_osu_iallreduce",
                         .what = "Overlap of nonblocking allreduce with computation (OSU method), Weft and MPI side by "
                                 "side.",
                         .extra_usage = "  --compute=MODE       busy: a CPU loop that calls neither MPI nor Weft (default);\n"
                                        "                       device: the caller sleeps, as a host thread while a GPU computes;\n"
                                        "                       stream: a task on the communicator's host stream sleeps, as a\n"
                                        "                       kernel on a CUDA stream (the collective runs on a comm bound to\n"
                                        "                       that stream; the host synchronises with it after the wait)\n",
                         .extra = parse_extra,
                         .extra_ud = &ex,
                         .osu = 1};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    rc = bench_apply_algo(&b, &o, WEFT_COLL_ALLREDUCE);
    if (rc != 0) return bench_finalize(&b, rc);
    if (o.osu == BENCH_OSU_MPI && bench_mpi_dtype(o.dtype) == MPI_DATATYPE_NULL) {
        if (b.rank == 0)
            fprintf(stderr, "weft_osu_iallreduce: error: --osu=mpi: MPI has no such datatype (-T)\n"
                            "Try 'weft_osu_iallreduce --help'.\n");
        return bench_finalize(&b, BENCH_PARSE_USAGE);
    }

    state_t *s = calloc(1, sizeof *s);
    if (!s) {
        bench_error(&b, "out of memory");
        return bench_finalize(&b, 1);
    }
    s->b = &b;
    s->dt = o.dtype;
    s->mdt = bench_mpi_dtype(o.dtype);
    s->mode = ex.mode;
    const int have_mpi = s->mdt != MPI_DATATYPE_NULL;
    const size_t esz = weft_datatype_size(o.dtype);
    const size_t maxcount = o.max_bytes / esz;
    bench_csv_t csv = {NULL};
    int mode_ready = 0;

    s->wsend = bench_alloc(maxcount * esz);
    s->wrecv = bench_alloc(maxcount * esz);
    s->msend = bench_alloc(maxcount * esz);
    s->mrecv = bench_alloc(maxcount * esz);
    int ok = s->wsend && s->wrecv && s->msend && s->mrecv, all_ok = 0;
    if (ok && s->mode->setup) {
        ok = s->mode->setup(&b, &s->mode_ctx) == 0;
        mode_ready = ok;
    } else {
        mode_ready = ok;
    }
    /* -a applies to a stream mode's communicator too */
    if (ok && s->mode->comm && o.algo_given &&
        weft_comm_set_algo(s->mode->comm(s->mode_ctx), WEFT_COLL_ALLREDUCE, o.algo) != WEFT_SUCCESS)
        ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS || !all_ok) {
        bench_error(&b, "setup failed (buffers of %zu bytes, compute mode %s)", maxcount * esz,
                    s->mode->name);
        rc = 1;
        goto out;
    }
    bench_fill(s->wsend, maxcount, o.dtype, b.rank);
    bench_fill(s->msend, maxcount, o.dtype, b.rank);

    if (bench_csv_open(&b, &csv, o.csv_path,
                       o.osu ? "size_bytes,overall_us,compute_us,init_us,wait_us,pure_us,pure_min_us,"
                               "pure_max_us,overlap_pct,errors"
                             : "size_bytes,weft_overall_us,weft_compute_us,weft_pure_us,weft_overlap_pct,"
                               "mpi_overall_us,mpi_compute_us,mpi_pure_us,mpi_overlap_pct") != 0) {
        rc = 1;
        goto out;
    }
    if (o.osu) {
        rc = run_osu_mode(&b, &o, s, &csv);
        if (bench_csv_close(&csv) != 0) rc = 1;
        goto out;
    }
    bench_print_header(&b, &o, "Weft nonblocking allreduce overlap test (weft_osu_iallreduce)",
                       "WEFT_ALLREDUCE_ALGO");
    bench_printf(&b, "# Compute: %s\n", s->mode->header);
    bench_printf(&b, "# Compute time per size = that library's measured pure communication time "
                     "(OSU method); Overlap(%%) = max(0, 100 - 100*(Overall - Compute)/Pure)\n");
    if (!have_mpi)
        bench_printf(&b, "# MPI has no %s datatype: no MPI baseline\n",
                     weft_datatype_name(o.dtype));
    bench_printf(&b, "%-10s%56s  %56s\n", "#",
                 "------------------------- Weft -------------------------",
                 "-------------------------- MPI -------------------------");
    bench_printf(&b, "%-10s%14s%14s%16s%12s  %14s%14s%16s%12s\n", "# Size", "Overall(us)",
                 "Compute(us)", "Pure Comm.(us)", "Overlap(%)", "Overall(us)", "Compute(us)",
                 "Pure Comm.(us)", "Overlap(%)");

    rc = 0;
    BENCH_FOR_SIZES(&o, bytes) {
        if (bytes >= esz) {
            s->count = bytes / esz;
            int nv = have_mpi ? 2 : 1;
            bench_timing_t tm = bench_timing_for(&o, bytes);
            /* 1. Pure communication. */
            bench_variant_t vp[2] = {{"weft", weft_pure, s, &s->timed_s[0]},
                                     {"mpi", mpi_pure, s, &s->timed_s[1]}};
            bench_result_t rp[2];
            if (bench_run_interleaved(&b, &tm, vp, nv, rp) != 0) {
                bench_error(&b, "size %zu: pure communication failed", bytes);
                rc = 1;
                break;
            }
            /* 2. Communication + compute of the same length. */
            s->compute_s[0] = rp[0].median_us * 1e-6;
            s->compute_s[1] = have_mpi ? rp[1].median_us * 1e-6 : 0;
            memset(s->comp_us, 0, sizeof s->comp_us);
            bench_variant_t vo[2] = {{"weft", weft_overall, s, &s->timed_s[0]},
                                     {"mpi", mpi_overall, s, &s->timed_s[1]}};
            bench_result_t ro[2];
            if (bench_run_interleaved(&b, &tm, vo, nv, ro) != 0) {
                bench_error(&b, "size %zu: overlapped communication failed", bytes);
                rc = 1;
                break;
            }
            if (bench_max_over_ranks(&b, &s->comp_us[0][0], 2 * BENCH_MAX_ROUNDS) != 0) {
                rc = 1;
                break;
            }
            double w_all = ro[0].median_us, w_cmp = bench_median(s->comp_us[0], tm.rounds);
            double w_pure = rp[0].median_us, w_ovl = overlap_pct(w_all, w_cmp, w_pure);
            if (have_mpi) {
                double m_all = ro[1].median_us, m_cmp = bench_median(s->comp_us[1], tm.rounds);
                double m_pure = rp[1].median_us, m_ovl = overlap_pct(m_all, m_cmp, m_pure);
                bench_printf(&b, "%-10zu%14.2f%14.2f%16.2f%12.2f  %14.2f%14.2f%16.2f%12.2f\n",
                             bytes, w_all, w_cmp, w_pure, w_ovl, m_all, m_cmp, m_pure, m_ovl);
                bench_csv_row(&csv, "%zu,%.3f,%.3f,%.3f,%.2f,%.3f,%.3f,%.3f,%.2f", bytes, w_all,
                              w_cmp, w_pure, w_ovl, m_all, m_cmp, m_pure, m_ovl);
            } else {
                bench_printf(&b, "%-10zu%14.2f%14.2f%16.2f%12.2f  %14s%14s%16s%12s\n", bytes,
                             w_all, w_cmp, w_pure, w_ovl, "n/a", "n/a", "n/a", "n/a");
                bench_csv_row(&csv, "%zu,%.3f,%.3f,%.3f,%.2f,,,,", bytes, w_all, w_cmp, w_pure,
                              w_ovl);
            }
            bench_progress(&b, "weft_osu_iallreduce: %zu bytes done", bytes);
        }
    }
    if (bench_csv_close(&csv) != 0) rc = 1;

out:
    if (mode_ready && s->mode->teardown) s->mode->teardown(s->mode_ctx);
    free(s->wsend);
    free(s->wrecv);
    free(s->msend);
    free(s->mrecv);
    free(s);
    return bench_finalize(&b, rc);
}
