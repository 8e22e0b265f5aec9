/*
 * weft_osu_allreduce - OSU-style latency of weft_allreduce, with MPI_Allreduce
 * (on its own dup of MPI_COMM_WORLD) timed in the same run, interleaved.
 *
 *   mpiexec -n 2 weft_osu_allreduce [-m MIN:MAX] [-i ITERS] [-x WARMUP]
 *                                   [-T TYPE] [-a ALGO] [--csv FILE]
 *
 * Per size: median over rounds of the per-iteration average (max over ranks)
 * for Weft and for MPI, their ratio, and the algorithm weft_query_algo says
 * Weft used. --floor adds a third variant in the same rounds, the memory
 * floor of the call (bench_common.h): every rank computes c[i] = a[i] + b[i]
 * in the datatype over the n-byte vector; columns Floor(us), Weft/Floor.
 *
 * -d DEVICE (or --device=DEVICE) says where Weft's side runs:
 *   host         host buffers, a communicator without a stream (default);
 *   host-stream  host buffers, the communicator bound to a host stream: each
 *                iteration enqueues weft_allreduce and synchronises the stream
 *                (the latency a CPU program using the stream model sees);
 *   cuda         device buffers (cudaMalloc), the communicator bound to a CUDA
 *                stream: each iteration enqueues weft_allreduce (NCCL or host
 *                transfer, per size) and synchronises the stream. Needs a build
 *                with the CUDA backend and a GPU (exit 77 without one).
 * The MPI baseline always uses host buffers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "bench_common.h"
#include "weft_cli.h"
#include "weft_stream.h"
#ifdef WEFT_BENCH_CUDA
#include "weft_cuda.h"
#endif

/* ---- -d: where Weft's side runs ------------------------------------------------ */
typedef enum bench_device { DEV_HOST = 0, DEV_HOST_STREAM, DEV_CUDA } bench_device_t;

/* Take -d X / -dX / --device=X / --device X out of argv (bench_parse does not
 * know it). Returns 0, or 2 after printing a usage error on rank 0. */
static int take_device_opt(int *argc, char **argv, bench_device_t *dev, int rank)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "-d") == 0 || strcmp(argv[i], "--device") == 0) {
            if (i + 1 >= *argc) {
                if (rank == 0)
                    fprintf(stderr, "weft_osu_allreduce: error: option '%s' needs a value (one of: "
                                    "host, host-stream, cuda)\nTry 'weft_osu_allreduce --help'.\n",
                            argv[i]);
                return 2;
            }
            v = argv[++i];
        } else if (strncmp(argv[i], "--device=", 9) == 0) {
            v = argv[i] + 9;
        } else if (strncmp(argv[i], "-d", 2) == 0) {
            v = argv[i] + 2;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (strcmp(v, "host") == 0) *dev = DEV_HOST;
        else if (strcmp(v, "host-stream") == 0) *dev = DEV_HOST_STREAM;
        else if (strcmp(v, "cuda") == 0) *dev = DEV_CUDA;
        else {
            if (rank == 0)
                fprintf(stderr, "weft_osu_allreduce: error: bad device '%s' (one of: host, "
                                "host-stream, cuda)\nTry 'weft_osu_allreduce --help'.\n", v);
            return 2;
        }
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}

typedef struct state {
    bench_ctx_t *b;
    weft_datatype_t dt;
    MPI_Datatype mdt;
    size_t count;
    void *wsend, *wrecv; /* Weft's buffers */
    void *msend, *mrecv; /* MPI's buffers */
    bench_device_t dev;
    weft_comm_t wcomm;   /* the communicator Weft's side uses */
    weft_stream_t stream; /* -d host-stream / cuda: the stream wcomm is bound to */
    int osu_mpi;          /* --osu=mpi: -c checks MPI's buffers, else Weft's */
} state_t;

static int run_weft(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    for (long i = 0; i < iters; i++) {
        weft_status_t st =
            weft_allreduce(s->wsend, s->wrecv, s->count, s->dt, WEFT_SUM, s->wcomm);
        /* stream-bound: the call only enqueues; the result is there once the
         * stream has run it */
        if (st == WEFT_SUCCESS && s->stream) st = weft_stream_synchronize(s->stream);
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

/* -d host-stream / cuda: a stream, a communicator bound to it (collective over
 * MPI_COMM_WORLD), and for cuda the device buffers. Returns 0, 1 on failure,
 * 77 when -d cuda cannot run here (same on every rank). */
static int device_setup(state_t *s, const bench_opts_t *o, size_t bytes)
{
    weft_status_t st = WEFT_SUCCESS;
    int ok = 1, all = 0;
    if (s->dev == DEV_HOST) return 0;
    if (s->dev == DEV_HOST_STREAM) {
        st = weft_stream_create_host(&s->stream);
    } else {
#ifdef WEFT_BENCH_CUDA
        int n = 0, have = cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && weft_cuda_available();
        int allhave = 0;
        MPI_Allreduce(&have, &allhave, 1, MPI_INT, MPI_MIN, s->b->ctl);
        if (!allhave) {
            bench_printf(s->b, "# -d cuda: no GPU or no CUDA device layer here: skipped\n");
            return 77;
        }
        cudaSetDevice(s->b->rank % n);
        if (cudaMalloc(&s->wsend, bytes ? bytes : 1) != cudaSuccess ||
            cudaMalloc(&s->wrecv, bytes ? bytes : 1) != cudaSuccess)
            st = WEFT_ERR_CUDA;
        if (st == WEFT_SUCCESS) st = weft_stream_create_cuda(&s->stream);
#else
        (void)bytes;
        bench_printf(s->b, "# -d cuda: this build has no CUDA backend: skipped\n");
        return 77;
#endif
    }
    if (st == WEFT_SUCCESS) st = weft_comm_create(MPI_COMM_WORLD, s->stream, &s->wcomm);
    if (st == WEFT_SUCCESS && o->algo_given)
        st = weft_comm_set_algo(s->wcomm, WEFT_COLL_ALLREDUCE, o->algo);
    ok = st == WEFT_SUCCESS;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, s->b->ctl);
    if (!all) {
        bench_error(s->b, "-d: cannot set up the stream and its communicator: %s",
                    weft_strerror(st));
        return 1;
    }
    return 0;
}

/* -d cuda: copy the host-filled input to the device buffer. */
static int device_fill(state_t *s, size_t count, weft_datatype_t dt)
{
#ifdef WEFT_BENCH_CUDA
    if (s->dev != DEV_CUDA) return 0;
    size_t bytes = count * weft_datatype_size(dt);
    void *h = bench_alloc(bytes ? bytes : 1);
    int rc = h == NULL;
    if (h) {
        bench_fill(h, count, dt, s->b->rank);
        rc = cudaMemcpy(s->wsend, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
        free(h);
    }
    if (rc) bench_error(s->b, "-d cuda: cannot fill the device buffer");
    return rc;
#else
    (void)s;
    (void)count;
    (void)dt;
    return 0;
#endif
}

static void device_teardown(state_t *s)
{
    if (s->wcomm && s->wcomm != s->b->comm) weft_comm_destroy(s->wcomm);
    if (s->stream) weft_stream_destroy(s->stream);
#ifdef WEFT_BENCH_CUDA
    if (s->dev == DEV_CUDA) {
        cudaFree(s->wsend);
        cudaFree(s->wrecv);
    }
#endif
}

/* ---- --osu ---------------------------------------------------------------------- */
/* -c: iteration `iter`'s input in the send buffer of the library timed, its
 * receive buffer cleared (host buffers: -d cuda has no -c). */
static int osu_prepare(void *ud, long iter)
{
    state_t *s = ud;
    const size_t esz = weft_datatype_size(s->dt);
    bench_fill_seed(s->osu_mpi ? s->msend : s->wsend, s->count, s->dt, bench_seed(s->b->rank, iter));
    memset(s->osu_mpi ? s->mrecv : s->wrecv, 0, s->count * esz);
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
        if (bench_get(r, i, s->dt) != want) bad++;
    }
    return bad;
}

/* OSU OMB 7's osu_allreduce: its title, datatype and column lines, one row
 * per size; CSV size_bytes,avg_us,min_us,max_us,iterations,errors,algbw_GBps,
 * busbw_GBps. Returns 0, or 1 (a failed run or a failed validation). */
static int run_osu_mode(bench_ctx_t *b, const bench_opts_t *o, state_t *s, bench_csv_t *csv)
{
    const size_t esz = weft_datatype_size(o->dtype);
    bench_osu_preamble(b, o, "OSU MPI Allreduce Latency Test");
    bench_osu_datatype(b, s->mdt, o->dtype);
    bench_osu_lat_header(b, o, 1);
    s->osu_mpi = o->osu == BENCH_OSU_MPI;
    bench_variant_t v = {s->osu_mpi ? "mpi" : "weft", s->osu_mpi ? run_mpi : run_weft, s, NULL};
    bench_osu_check_t chk = {osu_prepare, osu_check, s};
    BENCH_FOR_SIZES(o, bytes) {
        if (bytes < esz) continue;
        s->count = bytes / esz;
        bench_osu_result_t r;
        if (bench_run_osu(b, o, bytes, &v, &chk, 0, &r) != 0) {
            bench_error(b, "size %zu failed", bytes);
            return 1;
        }
        bench_osu_lat_row(b, o, 1, bytes, &r);
        double algbw, busbw;
        bench_busbw(WEFT_COLL_ALLREDUCE, bytes, b->size, r.avg_us, &algbw, &busbw);
        bench_csv_row(csv, "%zu,%.3f,%.3f,%.3f,%ld,%ld,%.6g,%.6g", bytes, r.avg_us, r.min_us,
                      r.max_us, r.iters, r.errors, algbw, busbw);
        if (r.errors > 0) {
            bench_osu_validation_failed(b, bytes);
            return 1;
        }
        bench_progress(b, "weft_osu_allreduce --osu: %zu bytes done", bytes);
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    bench_device_t device = DEV_HOST;
    rc = take_device_opt(&argc, argv, &device, b.rank);
    if (rc != 0) return bench_finalize(&b, rc);
    bench_spec_t spec = {.prog = "weft_osu_allreduce",
                         .what = "Latency of weft_allreduce and of MPI_Allreduce in the same run "
                                 "(interleaved, median over rounds).",
                         .extra_usage = "  -d, --device=DEV     host (default): host buffers, no stream;\n"
                                        "                       host-stream: comm bound to a host stream;\n"
                                        "                       cuda: device buffers, comm bound to a CUDA stream\n",
                         .osu = 1,
                         .floor = "                       c[i] = a[i] + b[i] in the datatype (-T) over the\n"
                                  "                       n-byte vector, a plain loop the compiler vectorises;\n"
                                  "                       float16/bfloat16: a byte copy of the n bytes instead\n"};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    rc = bench_apply_algo(&b, &o, WEFT_COLL_ALLREDUCE);
    if (rc != 0) return bench_finalize(&b, rc);
    if ((o.validate && device == DEV_CUDA) ||
        (o.osu == BENCH_OSU_MPI && bench_mpi_dtype(o.dtype) == MPI_DATATYPE_NULL)) {
        if (b.rank == 0)
            weft_cli_usage_error(spec.prog, "%s", o.validate && device == DEV_CUDA
                                 ? "-c checks host buffers: not with -d cuda"
                                 : "--osu=mpi: MPI has no such datatype (-T)");
        return bench_finalize(&b, BENCH_PARSE_USAGE);
    }

    state_t s = {.b = &b, .dt = o.dtype, .mdt = bench_mpi_dtype(o.dtype), .dev = device,
                 .wcomm = b.comm};
    bench_floor_t fl = {0};
    const size_t esz = weft_datatype_size(o.dtype);
    const int have_mpi = s.mdt != MPI_DATATYPE_NULL;
    size_t maxcount = o.max_bytes / esz;
    if (maxcount > (size_t)INT32_MAX) {
        if (b.rank == 0) fprintf(stderr, "error: -m MAX too large for MPI's int count\n");
        return bench_finalize(&b, 2);
    }
    rc = device_setup(&s, &o, maxcount * esz);
    if (rc != 0) goto out_free;
    if (device != DEV_CUDA) {
        s.wsend = bench_alloc(maxcount * esz);
        s.wrecv = bench_alloc(maxcount * esz);
    }
    s.msend = bench_alloc(maxcount * esz);
    s.mrecv = bench_alloc(maxcount * esz);
    int ok = s.wsend && s.wrecv && s.msend && s.mrecv, all_ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS || !all_ok) {
        bench_error(&b, "cannot allocate 4 buffers of %zu bytes", maxcount * esz);
        rc = 1;
        goto out_free;
    }
    if (device != DEV_CUDA) bench_fill(s.wsend, maxcount, o.dtype, b.rank);
    bench_fill(s.msend, maxcount, o.dtype, b.rank);
    if (device_fill(&s, maxcount, o.dtype) != 0) {
        rc = 1;
        goto out_free;
    }

    /* --floor: its buffers (the n-byte vector at the largest size) */
    if (o.floor && bench_floor_init(&b, &fl, BENCH_FLOOR_ADD, o.dtype, maxcount * esz) != 0) {
        rc = 1;
        goto out_free;
    }

    bench_csv_t csv;
    if (bench_csv_open(&b, &csv, o.csv_path,
                       o.osu ? "size_bytes,avg_us,min_us,max_us,iterations,errors,algbw_GBps,busbw_GBps"
                       : o.floor ? "size_bytes,weft_us,mpi_us,ratio,algorithm,weft_algbw_GBps,"
                                   "weft_busbw_GBps,mpi_algbw_GBps,mpi_busbw_GBps,floor_us,"
                                   "weft_floor_ratio"
                                 : "size_bytes,weft_us,mpi_us,ratio,algorithm,weft_algbw_GBps,"
                                   "weft_busbw_GBps,mpi_algbw_GBps,mpi_busbw_GBps") != 0) {
        rc = 1;
        goto out_free;
    }
    if (o.osu) {
        rc = run_osu_mode(&b, &o, &s, &csv);
        if (bench_csv_close(&csv) != 0) rc = 1;
        goto out_free;
    }
    bench_print_header(&b, &o, "Weft allreduce latency test (weft_osu_allreduce)",
                       "WEFT_ALLREDUCE_ALGO");
    if (!have_mpi)
        bench_printf(&b, "# MPI has no %s datatype: no MPI baseline\n",
                     weft_datatype_name(o.dtype));
    bench_printf(&b, "# Device: %s\n",
                 device == DEV_HOST ? "host (host buffers, no stream)"
                 : device == DEV_HOST_STREAM
                     ? "host-stream (host buffers; comm bound to a host stream; enqueue + "
                       "synchronize per iteration)"
                     : "cuda (device buffers; comm bound to a CUDA stream; enqueue + synchronize "
                       "per iteration; MPI on host buffers)");
    if (o.floor) {
        bench_floor_header(&b, &fl, "the call's input, the n-byte vector (n = Size)");
        bench_printf(&b, "%-10s%18s%18s%12s%18s%12s  %s\n", "# Size", "Avg Latency(us)",
                     "MPI Latency(us)", "Weft/MPI", "Floor(us)", "Weft/Floor", "Algorithm");
    } else {
        bench_printf(&b, "%-10s%18s%18s%12s  %s\n", "# Size", "Avg Latency(us)",
                     "MPI Latency(us)", "Weft/MPI", "Algorithm");
    }

    rc = 0;
    BENCH_FOR_SIZES(&o, bytes) {
        if (bytes >= esz) {
            s.count = bytes / esz;
            weft_algo_t algo = WEFT_ALGO_AUTO;
            weft_status_t st =
                weft_query_algo(s.wcomm, WEFT_COLL_ALLREDUCE, s.count, o.dtype, &algo);
            const char *aname = st == WEFT_SUCCESS && weft_algo_name(algo) ? weft_algo_name(algo)
                                                                           : "?";
            bench_variant_t v[3] = {{"weft", run_weft, &s, NULL}, {"mpi", run_mpi, &s, NULL}};
            bench_result_t r[3];
            int nv = have_mpi ? 2 : 1;
            const int ifl = nv; /* --floor: its result's index */
            if (o.floor) {
                fl.bytes = bytes;
                v[nv++] = (bench_variant_t){"floor", bench_floor_run, &fl, NULL};
            }
            bench_timing_t tm = bench_timing_for(&o, bytes);
            if (bench_run_interleaved(&b, &tm, v, nv, r) != 0) {
                bench_error(&b, "size %zu failed", bytes);
                rc = 1;
                break;
            }
            double wus = r[0].median_us;
            double mus = have_mpi ? r[1].median_us : NAN;
            double ratio = have_mpi && mus > 0 ? wus / mus : NAN;
            double walg, wbus, malg, mbus;
            bench_busbw(WEFT_COLL_ALLREDUCE, bytes, b.size, wus, &walg, &wbus);
            bench_busbw(WEFT_COLL_ALLREDUCE, bytes, b.size, mus, &malg, &mbus);
            /* --floor: two more columns before the algorithm, two at the CSV's end */
            char ftab[40] = "", fcsv[48] = "";
            if (o.floor) {
                double fus = r[ifl].median_us, fratio = fus > 0 ? wus / fus : NAN;
                snprintf(ftab, sizeof ftab, "%18.2f%12.2f", fus, fratio);
                snprintf(fcsv, sizeof fcsv, ",%.3f,%.4f", fus, fratio);
            }
            if (have_mpi) {
                bench_printf(&b, "%-10zu%18.2f%18.2f%12.2f%s  %s\n", bytes, wus, mus, ratio, ftab,
                             aname);
                bench_csv_row(&csv, "%zu,%.3f,%.3f,%.4f,%s,%.6g,%.6g,%.6g,%.6g%s", bytes, wus, mus,
                              ratio, aname, walg, wbus, malg, mbus, fcsv);
            } else {
                bench_printf(&b, "%-10zu%18.2f%18s%12s%s  %s\n", bytes, wus, "n/a", "n/a", ftab,
                             aname);
                bench_csv_row(&csv, "%zu,%.3f,,,%s,%.6g,%.6g,,%s", bytes, wus, aname, walg, wbus,
                              fcsv);
            }
            bench_progress(&b, "weft_osu_allreduce: %zu bytes done", bytes);
        }
    }
    if (bench_csv_close(&csv) != 0) rc = 1;

out_free:
    if (device != DEV_CUDA) {
        free(s.wsend);
        free(s.wrecv);
    }
    device_teardown(&s);
    free(s.msend);
    free(s.mrecv);
    bench_floor_free(&fl);
    return bench_finalize(&b, rc);
}
