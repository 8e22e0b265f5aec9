/*
 * weft_osu_p2p - OSU-style point-to-point latency (osu_latency) and
 * bandwidth (osu_bw) of Weft's weft_send/weft_recv/weft_isend/weft_irecv,
 * with plain MPI_Send/MPI_Recv/MPI_Isend/MPI_Irecv timed in the same run,
 * interleaved (median over rounds). The transport under Weft is the one
 * WEFT_TRANSPORT selects (printed in the header).
 *
 *   mpiexec -n 2 weft_osu_p2p [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-r ROUNDS]
 *                             [--mode lat|bw|both] [--window W] [--csv FILE]
 *
 * Latency: ping-pong between ranks 0 and 1, half the round-trip time.
 * Bandwidth: rank 0 posts W nonblocking sends, rank 1 W receives, then rank 1
 * answers with a 4-byte acknowledgement (as osu_bw); MB/s = W*size/time.
 * Ranks above 1 only take part in the timing barriers.
 * --mpi-thread adds, on every rank, an application thread that polls MPI
 * (MPI_Iprobe on a private communicator, then sched_yield) for the whole run:
 * the situation of a training code that uses MPI from another thread while
 * Weft communicates, where MPI's internal lock is contended.
 * Sizes double from MIN; with MIN = 1 the latency test also measures 0 bytes
 * first (as osu_latency). Default -m 1:4M.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define TAG_DATA 1
#define TAG_ACK 2
#define MAX_WINDOW 1024

typedef struct state {
    bench_ctx_t *b;
    size_t bytes;
    int window;
    char *sbuf[2], *rbuf[2];    /* [0] Weft's, [1] MPI's */
    char ack[4];
    weft_request_t *wreq;       /* window entries each */
    MPI_Request *mreq;
    MPI_Status *mstat;          /* (MPI_STATUSES_IGNORE trips a GCC 12 false warning) */
    int lib;                    /* --osu: the buffers -c checks, 0 Weft's, 1 MPI's */
    int lat;                    /* --osu: 1 latency, 0 bandwidth */
} state_t;

static int weft_fail(state_t *s, const char *what, weft_status_t st)
{
    bench_error(s->b, "%s(%zu bytes): %s (%s)", what, s->bytes, weft_status_name(st),
                weft_strerror(st));
    return 1;
}

static int mpi_fail(state_t *s, const char *what, int rc)
{
    bench_error(s->b, "%s(%zu bytes) failed (MPI code %d)", what, s->bytes, rc);
    return 1;
}

/* ---- latency: ping-pong ------------------------------------------------------ */
static int step_weft(void *ud, int send, int peer)
{
    state_t *s = ud;
    return bench_weft_step(s->b, s->b->comm, s->sbuf[0], s->rbuf[0], s->bytes, send, peer);
}

static int step_mpi(void *ud, int send, int peer)
{
    state_t *s = ud;
    return bench_mpi_step(s->b, s->sbuf[1], s->rbuf[1], s->bytes, send, peer);
}

static int lat_weft(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    return bench_pingpong(s->b, iters, step_weft, s);
}

static int lat_mpi(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    return bench_pingpong(s->b, iters, step_mpi, s);
}

/* ---- bandwidth: window of nonblocking sends + ack ---------------------------- */
static int bw_weft(void *ud, long iters, int round)
{
    state_t *s = ud;
    weft_comm_t c = s->b->comm;
    weft_status_t st;
    (void)round;
    if (s->b->rank > 1) return 0;
    for (long i = 0; i < iters; i++) {
        if (s->b->rank == 0) {
            for (int w = 0; w < s->window; w++)
                if ((st = weft_isend(s->sbuf[0], s->bytes, WEFT_UINT8, 1, TAG_DATA, c, &s->wreq[w])) !=
                    WEFT_SUCCESS) {
                    (void)weft_waitall((size_t)w, s->wreq);
                    return weft_fail(s, "weft_isend", st);
                }
            if ((st = weft_waitall((size_t)s->window, s->wreq)) != WEFT_SUCCESS)
                return weft_fail(s, "weft_waitall", st);
            if ((st = weft_recv(s->ack, sizeof(s->ack), WEFT_UINT8, 1, TAG_ACK, c)) != WEFT_SUCCESS)
                return weft_fail(s, "weft_recv(ack)", st);
        } else {
            for (int w = 0; w < s->window; w++)
                if ((st = weft_irecv(s->rbuf[0], s->bytes, WEFT_UINT8, 0, TAG_DATA, c, &s->wreq[w])) !=
                    WEFT_SUCCESS) {
                    (void)weft_waitall((size_t)w, s->wreq);
                    return weft_fail(s, "weft_irecv", st);
                }
            if ((st = weft_waitall((size_t)s->window, s->wreq)) != WEFT_SUCCESS)
                return weft_fail(s, "weft_waitall", st);
            if ((st = weft_send(s->ack, sizeof(s->ack), WEFT_UINT8, 0, TAG_ACK, c)) != WEFT_SUCCESS)
                return weft_fail(s, "weft_send(ack)", st);
        }
    }
    return 0;
}

static int bw_mpi(void *ud, long iters, int round)
{
    state_t *s = ud;
    MPI_Comm c = s->b->mpi_comm;
    int rc, n = (int)s->bytes;
    (void)round;
    if (s->b->rank > 1) return 0;
    for (long i = 0; i < iters; i++) {
        if (s->b->rank == 0) {
            for (int w = 0; w < s->window; w++)
                if ((rc = MPI_Isend(s->sbuf[1], n, MPI_BYTE, 1, TAG_DATA, c, &s->mreq[w])) !=
                    MPI_SUCCESS)
                    return mpi_fail(s, "MPI_Isend", rc);
            if ((rc = MPI_Waitall(s->window, s->mreq, s->mstat)) != MPI_SUCCESS)
                return mpi_fail(s, "MPI_Waitall", rc);
            if ((rc = MPI_Recv(s->ack, 4, MPI_BYTE, 1, TAG_ACK, c, MPI_STATUS_IGNORE)) !=
                MPI_SUCCESS)
                return mpi_fail(s, "MPI_Recv(ack)", rc);
        } else {
            for (int w = 0; w < s->window; w++)
                if ((rc = MPI_Irecv(s->rbuf[1], n, MPI_BYTE, 0, TAG_DATA, c, &s->mreq[w])) !=
                    MPI_SUCCESS)
                    return mpi_fail(s, "MPI_Irecv", rc);
            if ((rc = MPI_Waitall(s->window, s->mreq, s->mstat)) != MPI_SUCCESS)
                return mpi_fail(s, "MPI_Waitall", rc);
            if ((rc = MPI_Send(s->ack, 4, MPI_BYTE, 0, TAG_ACK, c)) != MPI_SUCCESS)
                return mpi_fail(s, "MPI_Send(ack)", rc);
        }
    }
    return 0;
}

/* ---- options -------------------------------------------------------------------- */
typedef struct extra {
    int mode;   /* 1 latency, 2 bandwidth, 3 both */
    long window;
    int mpi_thread;
} extra_t;

/* --mpi-thread: an application thread polling MPI until told to stop. */
typedef struct noise {
    MPI_Comm comm;
    atomic_int stop;
    long polls;
} noise_t;

static void *noise_main(void *p)
{
    noise_t *n = p;
    while (!atomic_load_explicit(&n->stop, memory_order_relaxed)) {
        int flag = 0;
        if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, n->comm, &flag, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            break;
        n->polls++;
        sched_yield();
    }
    return NULL;
}

static int parse_extra(void *ud, const char *name, const char *value)
{
    extra_t *e = ud;
    if (strcmp(name, "mode") == 0) {
        if (value == NULL) return BENCH_OPT_NEEDS_VALUE;
        if (strcmp(value, "lat") == 0 || strcmp(value, "latency") == 0) e->mode = 1;
        else if (strcmp(value, "bw") == 0 || strcmp(value, "bandwidth") == 0) e->mode = 2;
        else if (strcmp(value, "both") == 0) e->mode = 3;
        else return BENCH_OPT_BAD_VALUE;
        return BENCH_OPT_OK;
    }
    if (strcmp(name, "mpi-thread") == 0) {
        if (value != NULL) return BENCH_OPT_BAD_VALUE;
        e->mpi_thread = 1;
        return BENCH_OPT_OK;
    }
    if (strcmp(name, "window") == 0 || strcmp(name, "window-size") == 0) { /* OSU: -W */
        if (value == NULL) return BENCH_OPT_NEEDS_VALUE;
        if (bench_parse_long(value, 1, &e->window) != 0 || e->window > MAX_WINDOW)
            return BENCH_OPT_BAD_VALUE;
        return BENCH_OPT_OK;
    }
    return BENCH_OPT_UNKNOWN;
}

static size_t next_size(size_t bytes) { return bytes == 0 ? 1 : bytes * 2; }

/* ---- --osu ------------------------------------------------------------------------ */
/* -c: iteration `iter`'s message in the send buffer of the library timed,
 * its receive buffer cleared. */
static int osu_prepare(void *ud, long iter)
{
    state_t *s = ud;
    bench_fill_seed(s->sbuf[s->lib], s->bytes, WEFT_UINT8, bench_seed(s->b->rank, iter));
    memset(s->rbuf[s->lib], 0, s->bytes);
    return 0;
}

/* -c: the bytes received that are not the peer's message: both sides of a
 * round trip (latency), the receiver of the window (bandwidth). */
static long osu_check(void *ud, long iter)
{
    state_t *s = ud;
    const int me = s->b->rank;
    if (me > 1 || (!s->lat && me != 1)) return 0;
    long bad = 0;
    for (size_t i = 0; i < s->bytes; i++)
        bad += bench_get(s->rbuf[s->lib], i, WEFT_UINT8) != bench_value(i, bench_seed(1 - me, iter), WEFT_UINT8);
    return bad;
}

/* OSU OMB 7's osu_latency and osu_bw: per test its title, column and
 * datatype lines (in osu_latency's order), one row per size, rank 0's
 * figure (half its mean round trip; window bytes over its mean window
 * time). OSU has no -f for these: the columns stay. CSV
 * test,size_bytes,value,unit,iterations,errors. Returns 0, or 1. */
static int run_osu_mode(bench_ctx_t *b, const bench_opts_t *o, const extra_t *e, state_t *s,
                        bench_csv_t *csv)
{
    s->lib = o->osu == BENCH_OSU_MPI;
    for (int pass = 1; pass <= 2; pass++) {
        if (!(e->mode & pass)) continue;
        s->lat = pass == 1;
        bench_osu_preamble(b, o, s->lat ? "OSU MPI Latency Test" : "OSU MPI Bandwidth Test");
        bench_osu_p2p_header(b, o, s->lat ? "Latency (us)" : "Bandwidth (MB/s)");
        bench_osu_datatype(b, MPI_BYTE, WEFT_UINT8);
        bench_variant_t v = {"", NULL, s, NULL};
        v.run = s->lat ? (s->lib ? lat_mpi : lat_weft) : (s->lib ? bw_mpi : bw_weft);
        bench_osu_check_t chk = {osu_prepare, osu_check, s};
        for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 2) {
            s->bytes = bytes;
            bench_osu_result_t r;
            if (bench_run_osu(b, o, s->lat ? bytes : bytes * (size_t)s->window, &v, &chk, 1, &r) != 0) {
                bench_error(b, "%s, size %zu failed", s->lat ? "latency" : "bandwidth", bytes);
                return 1;
            }
            double value = s->lat ? r.rank0_us / 2
                                  : r.rank0_us > 0 ? (double)bytes * s->window / r.rank0_us : NAN;
            bench_osu_p2p_row(b, o, bytes, value, r.errors);
            bench_csv_row(csv, "%s,%zu,%.3f,%s,%ld,%ld", s->lat ? "latency" : "bandwidth", bytes,
                          value, s->lat ? "us" : "MB/s", r.iters, r.errors);
            if (r.errors > 0) {
                bench_osu_validation_failed(b, bytes);
                return 1;
            }
            bench_progress(b, "weft_osu_p2p --osu: %s %zu bytes done", s->lat ? "latency" : "bw", bytes);
            if (bytes > o->max_bytes / 2) break;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    extra_t e = {.mode = 3, .window = 64};
    static const bench_short_t shorts[] = {{'W', "window-size"}, {0, NULL}};
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    bench_spec_t spec = {.prog = "weft_osu_p2p",
                         .what = "Point-to-point latency (ping-pong) and bandwidth (window) of Weft's "
                                 "send/recv and of MPI's, interleaved in the same run.",
                         .extra_usage = "  --mode lat|bw|both   what to measure (default both)\n"
                                        "  --window W, --window-size W, -W W\n"
                                        "                       sends in flight for bandwidth (default 64, "
                                        "at most 1024)\n"
                                        "  --mpi-thread         an extra thread polls MPI (MPI_Iprobe) all along\n"
                                        "  (MIN = 1 also times 0-byte latency; -T is not used: messages "
                                        "are bytes)\n",
                         .extra = parse_extra,
                         .extra_ud = &e,
                         .min_bytes = 1, /* default -m: osu_latency's range */
                         .max_bytes = 4u << 20,
                         .bytes_only = 1,
                         .osu = 1,
                         .shorts = shorts};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    if (b.size < 2) {
        if (b.rank == 0) fprintf(stderr, "weft_osu_p2p: needs at least 2 ranks\n");
        return bench_finalize(&b, 2);
    }

    state_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return bench_finalize(&b, 1);
    s->b = &b;
    s->window = (int)e.window;
    s->wreq = calloc((size_t)s->window, sizeof(*s->wreq));
    s->mreq = calloc((size_t)s->window, sizeof(*s->mreq));
    s->mstat = calloc((size_t)s->window, sizeof(*s->mstat));
    const int ok = s->wreq && s->mreq && s->mstat;
    if (!ok) bench_error(&b, "cannot allocate the request window (%d)", s->window);
    if (!bench_all_ok(&b, ok) || bench_alloc_pairs(&b, s->sbuf, s->rbuf, 2, o.max_bytes) != 0) {
        rc = 1;
        goto out_free;
    }
    for (int k = 0; k < 2; k++) bench_fill(s->sbuf[k], o.max_bytes, WEFT_UINT8, b.rank);

    bench_csv_t csv;
    if (bench_csv_open(&b, &csv, o.csv_path,
                       o.osu ? "test,size_bytes,value,unit,iterations,errors"
                             : "test,size_bytes,weft,mpi,weft_over_mpi,unit") != 0) {
        rc = 1;
        goto out_free;
    }
    if (!o.osu) {
        bench_print_header(&b, &o, "Weft point-to-point test (weft_osu_p2p)", NULL);
        bench_printf(&b, "# Ranks 0 and 1 communicate; MPI baseline on its own dup of "
                         "MPI_COMM_WORLD\n");
    }

    noise_t noise = {.comm = MPI_COMM_NULL};
    pthread_t noise_th;
    int noise_on = 0;
    if (e.mpi_thread) {
        if (MPI_Comm_dup(MPI_COMM_WORLD, &noise.comm) != MPI_SUCCESS) {
            bench_error(&b, "MPI_Comm_dup for --mpi-thread failed");
            rc = 1;
            goto out_csv;
        }
        atomic_init(&noise.stop, 0);
        noise_on = pthread_create(&noise_th, NULL, noise_main, &noise) == 0;
        int all_on = 0;
        if (MPI_Allreduce(&noise_on, &all_on, 1, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS || !all_on) {
            bench_error(&b, "cannot start the --mpi-thread thread");
            rc = 1;
            goto out_noise;
        }
        bench_printf(&b, "# --mpi-thread: another thread of every rank polls MPI_Iprobe all along\n");
    }
    if (o.osu) {
        rc = run_osu_mode(&b, &o, &e, s, &csv);
        goto out_noise;
    }

    rc = 0;
    for (int pass = 1; pass <= 2 && rc == 0; pass++) {
        if (!(e.mode & pass)) continue;
        const int lat = pass == 1;
        if (lat)
            bench_printf(&b, "# Latency (half round trip)\n%-10s%18s%18s%12s\n", "# Size",
                         "Weft Latency(us)", "MPI Latency(us)", "Weft/MPI");
        else
            bench_printf(&b, "# Bandwidth (window %d)\n%-10s%18s%18s%12s\n", s->window, "# Size",
                         "Weft BW(MB/s)", "MPI BW(MB/s)", "Weft/MPI");
        size_t first = lat && o.min_bytes == 1 ? 0 : o.min_bytes;
        for (size_t bytes = first; bytes <= o.max_bytes; bytes = next_size(bytes)) {
            s->bytes = bytes;
            bench_variant_t v[2] = {{"weft", lat ? lat_weft : bw_weft, s, NULL},
                                    {"mpi", lat ? lat_mpi : bw_mpi, s, NULL}};
            bench_result_t r[2];
            bench_timing_t tm = bench_timing_for(&o, lat ? bytes : bytes * (size_t)s->window);
            if (bench_run_interleaved(&b, &tm, v, 2, r) != 0) {
                bench_error(&b, "%s, size %zu failed", lat ? "latency" : "bandwidth", bytes);
                rc = 1;
                break;
            }
            double wv, mv;
            if (lat) {
                wv = r[0].median_us / 2;
                mv = r[1].median_us / 2;
            } else { /* bytes per microsecond = MB/s (10^6 bytes) */
                wv = r[0].median_us > 0 ? (double)bytes * s->window / r[0].median_us : NAN;
                mv = r[1].median_us > 0 ? (double)bytes * s->window / r[1].median_us : NAN;
            }
            double ratio = mv > 0 ? wv / mv : NAN;
            bench_printf(&b, "%-10zu%18.2f%18.2f%12.2f\n", bytes, wv, mv, ratio);
            bench_csv_row(&csv, "%s,%zu,%.3f,%.3f,%.4f,%s", lat ? "latency" : "bandwidth", bytes,
                          wv, mv, ratio, lat ? "us" : "MB/s");
            bench_progress(&b, "weft_osu_p2p: %s %zu bytes done", lat ? "latency" : "bw", bytes);
            if (bytes > o.max_bytes / 2) break;
        }
    }
out_noise:
    if (noise_on) {
        atomic_store_explicit(&noise.stop, 1, memory_order_relaxed);
        pthread_join(noise_th, NULL);
    }
    if (noise.comm != MPI_COMM_NULL) MPI_Comm_free(&noise.comm);
out_csv:
    if (bench_csv_close(&csv) != 0) rc = 1;

out_free:
    for (int k = 0; k < 2; k++) {
        free(s->sbuf[k]);
        free(s->rbuf[k]);
    }
    free(s->wreq);
    free(s->mreq);
    free(s->mstat);
    free(s);
    return bench_finalize(&b, rc);
}
