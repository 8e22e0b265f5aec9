/*
 * weft_osu_transports - Weft over its MPI transport and over UCX, each on a
 * communicator of its own in the same processes, and plain MPI, timed
 * interleaved in one run (median over rounds): the transports compared under
 * the same conditions, without a run-to-run difference between them.
 *
 *   mpiexec -n 2 weft_osu_transports [--test lat|allreduce|both] [-m MIN:MAX]
 *                                    [-i ITERS] [-x WARMUP] [-r ROUNDS] [-T TYPE]
 *                                    [--csv FILE]
 *
 * lat: ping-pong between ranks 0 and 1 (weft_send/weft_recv, MPI_Send/MPI_Recv),
 * half the round trip, as osu_latency (ranks above 1 only take part in the
 * timing barriers). allreduce: weft_allreduce on each communicator, with each
 * one's automatic algorithm choice (or -a ALGO on both; the algorithm column
 * names both when they differ, MPI transport's first), and MPI_Allreduce (SUM,
 * -T TYPE, float32 by default). -m is in bytes, default 4:64K: the ping-pong
 * sends each size as it is, the allreduce rounds it down to whole -T elements
 * (sizes below one element are left out of it). Needs a build with the UCX
 * transport (exit 77 without: there is nothing to compare).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"


typedef struct state {
    bench_ctx_t *b;
    weft_comm_t comm[2]; /* [0] MPI transport, [1] UCX */
    size_t bytes, count;
    weft_datatype_t dt;
    MPI_Datatype mdt;
    char *sbuf[3], *rbuf[3]; /* per side: MPI transport, UCX, plain MPI */
} state_t;

typedef struct side {
    state_t *s;
    int k; /* 0, 1: Weft on comm[k]; 2: plain MPI */
} side_t;

static int weft_fail(state_t *s, const char *what, weft_status_t st, int k)
{
    bench_error(s->b, "%s(%zu bytes, %s transport): %s (%s)", what, s->bytes,
                k == 0 ? "MPI" : "UCX", weft_status_name(st), weft_strerror(st));
    return 1;
}

/* One message of the ping-pong on side k (bench_pingpong's step). */
static int lat_step(void *ud, int send, int peer)
{
    side_t *d = ud;
    state_t *s = d->s;
    const int k = d->k;
    if (k < 2) return bench_weft_step(s->b, s->comm[k], s->sbuf[k], s->rbuf[k], s->bytes, send, peer);
    return bench_mpi_step(s->b, s->sbuf[2], s->rbuf[2], s->bytes, send, peer);
}

static int lat_run(void *ud, long iters, int round)
{
    side_t *d = ud;
    (void)round;
    return bench_pingpong(d->s->b, iters, lat_step, d);
}

static int allreduce_run(void *ud, long iters, int round)
{
    side_t *d = ud;
    state_t *s = d->s;
    const int k = d->k;
    (void)round;
    for (long i = 0; i < iters; i++) {
        if (k < 2) {
            weft_status_t st =
                weft_allreduce(s->sbuf[k], s->rbuf[k], s->count, s->dt, WEFT_SUM, s->comm[k]);
            if (st != WEFT_SUCCESS) return weft_fail(s, "weft_allreduce", st, k);
        } else {
            int rc = MPI_Allreduce(s->sbuf[2], s->rbuf[2], (int)s->count, s->mdt, MPI_SUM,
                                   s->b->mpi_comm);
            if (rc != MPI_SUCCESS) {
                bench_error(s->b, "MPI_Allreduce(%zu bytes) failed (MPI code %d)", s->bytes, rc);
                return 1;
            }
        }
    }
    return 0;
}

static int parse_extra(void *ud, const char *name, const char *value)
{
    int *mode = ud;
    if (strcmp(name, "test") != 0) return BENCH_OPT_UNKNOWN;
    if (value == NULL) return BENCH_OPT_NEEDS_VALUE;
    if (strcmp(value, "lat") == 0) *mode = 1;
    else if (strcmp(value, "allreduce") == 0) *mode = 2;
    else if (strcmp(value, "both") == 0) *mode = 3;
    else return BENCH_OPT_BAD_VALUE;
    return BENCH_OPT_OK;
}

/* One size of one test: the three sides interleaved; prints and records. */
static int run_size(state_t *s, const bench_opts_t *o, bench_csv_t *csv, int lat)
{
    side_t sides[3] = {{s, 0}, {s, 1}, {s, 2}};
    int (*fn)(void *, long, int) = lat ? lat_run : allreduce_run;
    bench_variant_t v[3] = {{"weft-mpi", fn, &sides[0], NULL},
                            {"weft-ucx", fn, &sides[1], NULL},
                            {"mpi", fn, &sides[2], NULL}};
    bench_result_t r[3];
    bench_timing_t tm = bench_timing_for(o, s->bytes);
    if (bench_run_interleaved(s->b, &tm, v, 3, r) != 0) {
        bench_error(s->b, "%s, %zu bytes failed", lat ? "latency" : "allreduce", s->bytes);
        return 1;
    }
    double us[3];
    for (int k = 0; k < 3; k++) us[k] = lat ? r[k].median_us / 2 : r[k].median_us;
    double ratio = us[0] > 0 ? us[1] / us[0] : NAN;
    /* Each communicator chooses for itself (its own alpha/beta): both names
     * when they differ, as "MPI-transport's/UCX's". */
    char aname[64] = "-";
    if (!lat) {
        const char *n[2] = {"?", "?"};
        for (int k = 0; k < 2; k++) {
            weft_algo_t algo = WEFT_ALGO_AUTO;
            if (weft_query_algo(s->comm[k], WEFT_COLL_ALLREDUCE, s->count, s->dt, &algo) ==
                    WEFT_SUCCESS && weft_algo_name(algo))
                n[k] = weft_algo_name(algo);
        }
        if (strcmp(n[0], n[1]) == 0) snprintf(aname, sizeof aname, "%s", n[0]);
        else snprintf(aname, sizeof aname, "%s/%s", n[0], n[1]);
    }
    bench_printf(s->b, "%-10zu%14.3f%14.3f%14.3f%12.3f  %s\n", s->bytes, us[0], us[1], us[2], ratio,
                 aname);
    bench_csv_row(csv, "%s,%zu,%.4f,%.4f,%.4f,%.4f,%s", lat ? "latency" : "allreduce", s->bytes,
                  us[0], us[1], us[2], ratio, aname);
    bench_progress(s->b, "weft_osu_transports: %s %zu bytes done", lat ? "latency" : "allreduce",
                   s->bytes);
    return 0;
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    int mode = 3;
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    bench_spec_t spec = {.prog = "weft_osu_transports",
                         .what = "Weft over the MPI transport and over UCX (a communicator each, same "
                                 "processes) and plain MPI, interleaved in one run.",
                         .extra_usage = "  --test lat|allreduce|both   what to time (default both)\n"
                                        "  (-a forces the allreduce algorithm on both communicators)\n",
                         .extra = parse_extra,
                         .extra_ud = &mode,
                         .min_bytes = 4,
                         .max_bytes = 64u << 10,
                         /* -m is in bytes for the ping-pong (1 B is a size); the
                          * allreduce rounds each size down to whole -T elements
                          * and skips those below one. */
                         .bytes_only = 1};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    if ((mode & 1) && b.size < 2) {
        if (b.rank == 0) fprintf(stderr, "weft_osu_transports: the latency test needs 2 ranks\n");
        return bench_finalize(&b, 2);
    }

    state_t s = {.b = &b, .dt = o.dtype};
    s.mdt = bench_mpi_dtype(o.dtype);
    const size_t es = weft_datatype_size(o.dtype);
    if ((mode & 2) && s.mdt == MPI_DATATYPE_NULL) {
        if (b.rank == 0) fprintf(stderr, "weft_osu_transports: MPI has no %s datatype\n",
                                 weft_datatype_name(o.dtype));
        return bench_finalize(&b, 2);
    }
    /* The two communicators: a transport this build lacks ends the run (77). */
    const weft_transport_t tp[2] = {WEFT_TRANSPORT_MPI, WEFT_TRANSPORT_UCX};
    for (int k = 0; k < 2; k++) {
        weft_comm_params_t p = WEFT_COMM_PARAMS_INITIALIZER;
        p.transport = tp[k];
        weft_status_t st = weft_comm_create_ex(MPI_COMM_WORLD, NULL, &p, &s.comm[k]);
        if (st == WEFT_ERR_UNSUPPORTED) {
            bench_printf(&b, "# this Weft has no UCX transport: nothing to compare (skipped)\n");
            rc = 77;
            goto out_comms;
        }
        if (st != WEFT_SUCCESS) {
            bench_error(&b, "weft_comm_create_ex(%s): %s (%s)", weft_transport_name(tp[k]),
                        weft_status_name(st), weft_strerror(st));
            rc = 1;
            goto out_comms;
        }
        if ((rc = bench_apply_algo_to(&b, &o, s.comm[k], WEFT_COLL_ALLREDUCE)) != 0)
            goto out_comms;
    }
    if (bench_alloc_pairs(&b, s.sbuf, s.rbuf, 3, o.max_bytes) != 0) {
        rc = 1;
        goto out_free;
    }
    for (int k = 0; k < 3; k++) bench_fill(s.sbuf[k], o.max_bytes / es, o.dtype, b.rank);

    bench_csv_t csv;
    if (bench_csv_open(&b, &csv, o.csv_path,
                       "test,size_bytes,weft_mpi_us,weft_ucx_us,mpi_us,ucx_over_mpi_transport,"
                       "algorithm") != 0) {
        rc = 1;
        goto out_free;
    }
    b.own_comms = 1; /* comm[0], comm[1]: the Sides line says which is which */
    bench_print_header(&b, &o, "Weft transports compared (weft_osu_transports)", NULL);
    bench_printf(&b, "# Sides: weft-mpi = Weft on a communicator over the MPI transport, weft-ucx "
                     "= over UCX, mpi = plain MPI on its own dup of MPI_COMM_WORLD\n");
    for (int pass = 1; pass <= 2 && rc == 0; pass++) {
        if (!(mode & pass)) continue;
        const int lat = pass == 1;
        bench_printf(&b, "# %s\n%-10s%14s%14s%14s%12s  %s\n",
                     lat ? "Latency (half round trip, us)" : "Allreduce latency (us)", "# Size",
                     "weft-mpi", "weft-ucx", "mpi", "ucx/mpi-tp", "algorithm");
        BENCH_FOR_SIZES(&o, bytes)
        {
            if (!lat && bytes < es) continue;
            s.bytes = lat ? bytes : bytes / es * es;
            s.count = s.bytes / es;
            if ((rc = run_size(&s, &o, &csv, lat)) != 0) break;
        }
    }
    if (bench_csv_close(&csv) != 0) rc = 1;
out_free:
    for (int k = 0; k < 3; k++) {
        free(s.sbuf[k]);
        free(s.rbuf[k]);
    }
out_comms:
    for (int k = 0; k < 2; k++)
        if (s.comm[k]) {
            weft_status_t st = weft_comm_destroy(s.comm[k]);
            if (st != WEFT_SUCCESS) rc = weft_fail(&s, "weft_comm_destroy", st, k);
        }
    return bench_finalize(&b, rc);
}
