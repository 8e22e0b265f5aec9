/*
 * wait_cost.c - what the program's thread pays around a nonblocking
 * collective that finished while it computed, split by call: Weft's issue
 * (weft_ibcast) and its wait on the finished request, right after a
 * device-style compute (the thread sleeps) and back to back (a second call
 * right after the first, caches warm); and MPICH's generalized request, as
 * libweft-mpi.so hands one out for every served call (MPIX_Grequest_start,
 * MPI_Grequest_complete, MPI_Wait of the completed request) after the same
 * sleep. The figures behind doc/mpi_interposition.md's "MPICH's side of a
 * generalized request" and its 64 KiB overlap rows
 * (doc/notes/mpi_interposition_measurements.md).
 *
 *   mpiexec -n 2 -bind-to core build/benchmarks/lab/wait_cost [-m 64K] [-s 80]
 *
 * Medians over iterations on rank 0, one line per round. Every rank sleeps
 * after a barrier, so the bcast moves while the ranks sleep, as in OSU's
 * overlap method. Lab program (not installed); MPICH only (MPIX_ generalized
 * requests). Thread contract: main thread only (Weft's engine runs beside).
 * Exit 0, 1 on a failed call, 2 on a usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench_common.h"
#include "weft.h"
#include "weft_cli.h"
#include "weft_mpi.h"

#define PROG "wait_cost"

typedef struct opts {
    size_t bytes;
    long iters, rounds, sleep_us;
} opts_t;

static void nap(long us) { bench_sleep(1e-6 * (double)us); }

/* The generalized request's functions: as the interposer's, minus the Weft side. */
static int g_query(void *extra, MPI_Status *st)
{
    (void)extra;
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    int rc = MPI_Status_set_elements(st, MPI_BYTE, 0);
    return rc == MPI_SUCCESS ? MPI_Status_set_cancelled(st, 0) : rc;
}
static int g_free(void *extra) { (void)extra; return MPI_SUCCESS; }
static int g_cancel(void *extra, int complete) { (void)extra; (void)complete; return MPI_SUCCESS; }
static int g_poll(void *extra, MPI_Status *st) { (void)extra; (void)st; return MPI_SUCCESS; }
static int g_wait(int n, void **extra, double timeout, MPI_Status *st)
{
    (void)n; (void)extra; (void)timeout; (void)st;
    return MPI_SUCCESS;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: mpiexec -n N " PROG " [options]\n"
            "The program thread's cost around a nonblocking collective that finished while it\n"
            "slept: weft_ibcast and weft_wait after the sleep and back to back, and MPICH's\n"
            "generalized request (start, complete, MPI_Wait) after the sleep. Medians, us.\n"
            "  -m BYTES        bcast size (default 64K)\n"
            "  -s US           the sleep, as a device-style compute (default 80)\n"
            "  -i ITERS        iterations per round (default 400)\n"
            "  -r ROUNDS       rounds, a line each (default 2)\n"
            "  -h, --help      this text\n"
            "  -V, --version   version and build options\n");
}

/* 0 to run, 2 on a usage error; *done when --help or --version answered. */
static int parse(int argc, char **argv, opts_t *o, int *done)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
    *o = (opts_t){.bytes = 64 << 10, .iters = 400, .rounds = 2, .sleep_us = 80};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:s:i:r:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (weft_cli_parse_size(optarg, &o->bytes) != 0 || o->bytes == 0 ||
                o->bytes > (1ul << 30))
                return weft_cli_usage_error(PROG, "bad -m '%s' (1 .. 1G bytes)", optarg);
            break;
        case 's':
            if (weft_cli_parse_long(optarg, 0, 10000000, &o->sleep_us) != 0)
                return weft_cli_usage_error(PROG, "bad -s '%s' (0 .. 10000000 us)", optarg);
            break;
        case 'i':
            if (weft_cli_parse_long(optarg, 1, 10000000, &o->iters) != 0)
                return weft_cli_usage_error(PROG, "bad -i '%s' (1 .. 10000000)", optarg);
            break;
        case 'r':
            if (weft_cli_parse_long(optarg, 1, 1000, &o->rounds) != 0)
                return weft_cli_usage_error(PROG, "bad -r '%s' (1 .. 1000)", optarg);
            break;
        case 'h': usage(stdout); *done = 1; return 0;
        case 'V': weft_cli_version(stdout, PROG); *done = 1; return 0;
        default: return weft_cli_getopt_error(PROG, c, argv, longopts);
        }
    }
    if (optind < argc) return weft_cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    return 0;
}

#define CHECK_MPI(call)                                                                  \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != MPI_SUCCESS) {                                                        \
            fprintf(stderr, PROG ": %s failed (%d)\n", #call, rc_);                      \
            return 1;                                                                    \
        }                                                                                \
    } while (0)
#define CHECK_WEFT(call)                                                                 \
    do {                                                                                 \
        weft_status_t st_ = (call);                                                      \
        if (st_ != WEFT_SUCCESS) {                                                       \
            fprintf(stderr, PROG ": %s: %s\n", #call, weft_strerror(st_));               \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

enum { T_ISSUE, T_WAIT, T_ISSUE_WARM, T_WAIT_WARM, T_START, T_COMPLETE, T_MPI_WAIT, NT };

/* One round: NT medians into med[]. */
static int round_once(const opts_t *o, weft_comm_t comm, char *a, char *b, double *t[NT],
                      double med[NT])
{
    for (long i = 0; i < o->iters; i++) { /* Weft: after the sleep, then back to back */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        weft_request_t r1, r2;
        double t0 = bench_now();
        CHECK_WEFT(weft_ibcast(a, o->bytes, WEFT_UINT8, 0, comm, &r1));
        double t1 = bench_now();
        CHECK_WEFT(weft_ibcast(b, o->bytes, WEFT_UINT8, 0, comm, &r2));
        double t2 = bench_now();
        nap(o->sleep_us);
        double t3 = bench_now();
        CHECK_WEFT(weft_wait(&r1));
        double t4 = bench_now();
        CHECK_WEFT(weft_wait(&r2));
        double t5 = bench_now();
        t[T_ISSUE][i] = t1 - t0;
        t[T_ISSUE_WARM][i] = t2 - t1;
        t[T_WAIT][i] = t4 - t3;
        t[T_WAIT_WARM][i] = t5 - t4;
    }
    for (long i = 0; i < o->iters; i++) { /* MPICH's generalized request alone */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        MPI_Request q;
        nap(o->sleep_us);
        double t0 = bench_now();
        CHECK_MPI(MPIX_Grequest_start(g_query, g_free, g_cancel, g_poll, g_wait, NULL, &q));
        double t1 = bench_now();
        nap(o->sleep_us);
        double t2 = bench_now();
        CHECK_MPI(MPI_Grequest_complete(q));
        double t3 = bench_now();
        CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        double t4 = bench_now();
        t[T_START][i] = t1 - t0;
        t[T_COMPLETE][i] = t3 - t2;
        t[T_MPI_WAIT][i] = t4 - t3;
    }
    for (int k = 0; k < NT; k++) med[k] = 1e6 * bench_median(t[k], (int)o->iters);
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    int done = 0, rc = parse(argc, argv, &o, &done);
    if (rc != 0 || done) return rc;
    int provided = 0, rank = 0, size = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, PROG ": MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    weft_comm_t comm = NULL;
    weft_status_t st = weft_init(NULL);
    if (st == WEFT_SUCCESS) st = weft_comm_create(MPI_COMM_WORLD, NULL, &comm);
    char *a = malloc(o.bytes), *b = malloc(o.bytes);
    double *t[NT] = {0};
    int ok = st == WEFT_SUCCESS && a != NULL && b != NULL;
    for (int k = 0; k < NT && ok; k++) ok = (t[k] = malloc(sizeof(double) * (size_t)o.iters)) != NULL;
    if (!ok) {
        fprintf(stderr, PROG ": setup failed: %s\n",
                st != WEFT_SUCCESS ? weft_strerror(st) : "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(a, rank, o.bytes);
    memset(b, rank, o.bytes);
    if (rank == 0) {
        printf("# " PROG ": %d ranks, bcast of %zu bytes, sleep %ld us, %ld iterations, medians "
               "on rank 0 (us)\n", size, o.bytes, o.sleep_us, o.iters);
        printf("# %-5s %10s %10s %10s %10s %10s %10s %10s\n", "round", "issue", "wait",
               "issue_warm", "wait_warm", "greq_start", "greq_done", "mpi_wait");
    }
    for (long r = 0; r < o.rounds && rc == 0; r++) {
        double med[NT];
        rc = round_once(&o, comm, a, b, t, med);
        if (rc == 0 && rank == 0) {
            printf("  %-5ld", r + 1);
            for (int k = 0; k < NT; k++) printf(" %10.3f", med[k]);
            printf("\n");
            fflush(stdout);
        }
    }
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int k = 0; k < NT; k++) free(t[k]);
    free(a);
    free(b);
    st = weft_comm_destroy(comm);
    if (st == WEFT_SUCCESS) st = weft_finalize();
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, PROG ": teardown: %s\n", weft_strerror(st));
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
