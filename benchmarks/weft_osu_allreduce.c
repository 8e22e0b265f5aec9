/*
 * weft_osu_allreduce - OSU-style latency of weft_allreduce, with MPI_Allreduce
 * (on its own dup of MPI_COMM_WORLD) timed in the same run, interleaved.
 *
 *   mpiexec -n 2 weft_osu_allreduce [-m MIN:MAX] [-i ITERS] [-x WARMUP]
 *                                   [-T TYPE] [-a ALGO] [--csv FILE]
 *
 * Per size: median over rounds of the per-iteration average (max over ranks)
 * for Weft and for MPI, their ratio, and the algorithm weft_query_algo says
 * Weft used.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

typedef struct state {
    bench_ctx_t *b;
    weft_datatype_t dt;
    MPI_Datatype mdt;
    size_t count;
    void *wsend, *wrecv; /* Weft's buffers */
    void *msend, *mrecv; /* MPI's buffers */
} state_t;

static int run_weft(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    for (long i = 0; i < iters; i++) {
        weft_status_t st =
            weft_allreduce(s->wsend, s->wrecv, s->count, s->dt, WEFT_SUM, s->b->comm);
        if (st != WEFT_SUCCESS) {
            bench_error(s->b, "weft_allreduce(count=%zu): %s (%s)", s->count, weft_status_name(st),
                        weft_strerror(st));
            return 1;
        }
    }
    return 0;
}

static int run_mpi(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    for (long i = 0; i < iters; i++) {
        int rc = MPI_Allreduce(s->msend, s->mrecv, (int)s->count, s->mdt, MPI_SUM, s->b->mpi_comm);
        if (rc != MPI_SUCCESS) {
            bench_error(s->b, "MPI_Allreduce(count=%zu) failed (code %d)", s->count, rc);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    bench_spec_t spec = {"weft_osu_allreduce",
                         "Latency of weft_allreduce and of MPI_Allreduce in the same run "
                         "(interleaved, median over rounds).",
                         NULL, NULL, NULL};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    rc = bench_apply_algo(&b, &o, WEFT_COLL_ALLREDUCE);
    if (rc != 0) return bench_finalize(&b, rc);

    state_t s = {.b = &b, .dt = o.dtype, .mdt = bench_mpi_dtype(o.dtype)};
    const size_t esz = weft_datatype_size(o.dtype);
    const int have_mpi = s.mdt != MPI_DATATYPE_NULL;
    size_t maxcount = o.max_bytes / esz;
    if (maxcount > (size_t)INT32_MAX) {
        if (b.rank == 0) fprintf(stderr, "error: -m MAX too large for MPI's int count\n");
        return bench_finalize(&b, 2);
    }
    s.wsend = bench_alloc(maxcount * esz);
    s.wrecv = bench_alloc(maxcount * esz);
    s.msend = bench_alloc(maxcount * esz);
    s.mrecv = bench_alloc(maxcount * esz);
    int ok = s.wsend && s.wrecv && s.msend && s.mrecv, all_ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS || !all_ok) {
        bench_error(&b, "cannot allocate 4 buffers of %zu bytes", maxcount * esz);
        rc = 1;
        goto out_free;
    }
    bench_fill(s.wsend, maxcount, o.dtype, b.rank);
    bench_fill(s.msend, maxcount, o.dtype, b.rank);

    bench_csv_t csv;
    if (bench_csv_open(&b, &csv, o.csv_path, "size_bytes,weft_us,mpi_us,ratio,algorithm") != 0) {
        rc = 1;
        goto out_free;
    }
    bench_print_header(&b, &o, "Weft allreduce latency test (weft_osu_allreduce)",
                       "WEFT_ALLREDUCE_ALGO");
    if (!have_mpi)
        bench_printf(&b, "# MPI has no %s datatype: no MPI baseline\n",
                     weft_datatype_name(o.dtype));
    bench_printf(&b, "%-10s%18s%18s%12s  %s\n", "# Size", "Avg Latency(us)", "MPI Latency(us)",
                 "Weft/MPI", "Algorithm");

    rc = 0;
    BENCH_FOR_SIZES(&o, bytes) {
        if (bytes >= esz) {
            s.count = bytes / esz;
            weft_algo_t algo = WEFT_ALGO_AUTO;
            weft_status_t st =
                weft_query_algo(b.comm, WEFT_COLL_ALLREDUCE, s.count, o.dtype, &algo);
            const char *aname = st == WEFT_SUCCESS && weft_algo_name(algo) ? weft_algo_name(algo)
                                                                           : "?";
            bench_variant_t v[2] = {{"weft", run_weft, &s}, {"mpi", run_mpi, &s}};
            bench_result_t r[2];
            bench_timing_t tm = bench_timing_for(&o, bytes);
            if (bench_run_interleaved(&b, &tm, v, have_mpi ? 2 : 1, r) != 0) {
                bench_error(&b, "size %zu failed", bytes);
                rc = 1;
                break;
            }
            double wus = r[0].median_us;
            double mus = have_mpi ? r[1].median_us : NAN;
            double ratio = have_mpi && mus > 0 ? wus / mus : NAN;
            if (have_mpi) {
                bench_printf(&b, "%-10zu%18.2f%18.2f%12.2f  %s\n", bytes, wus, mus, ratio, aname);
                bench_csv_row(&csv, "%zu,%.3f,%.3f,%.4f,%s", bytes, wus, mus, ratio, aname);
            } else {
                bench_printf(&b, "%-10zu%18.2f%18s%12s  %s\n", bytes, wus, "n/a", "n/a", aname);
                bench_csv_row(&csv, "%zu,%.3f,,,%s", bytes, wus, aname);
            }
            bench_progress(&b, "weft_osu_allreduce: %zu bytes done", bytes);
        }
    }
    if (bench_csv_close(&csv) != 0) rc = 1;

out_free:
    free(s.wsend);
    free(s.wrecv);
    free(s.msend);
    free(s.mrecv);
    return bench_finalize(&b, rc);
}
