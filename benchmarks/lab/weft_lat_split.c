/*
 * weft_lat_split - where one message of a Weft ping-pong spends its time,
 * over the MPI transport and over UCX, in the same two processes. Needs the
 * UCX probe preloaded (it reads the probe's time stamps; doc/notes/ucx_measurements.md):
 *
 *   mpiexec -n 2 -env LD_PRELOAD build/benchmarks/lab/libucx_progress_probe.so \
 *       build/benchmarks/lab/weft_lat_split [-m BYTES] [-i ITERS] [-r ROUNDS]
 *
 * Ranks 0 and 1 ping-pong BYTES (default 4096) with weft_send/weft_recv on a
 * communicator over each transport, in ROUNDS (default 10) alternating blocks
 * of ITERS (default 2000) round trips. For every message, in each direction,
 * it takes five intervals from the clocks of both processes (the probe's
 * clock: the time-stamp counter, common to the cores of one node):
 *
 *   send->post     sender: weft_send called -> ucp_tag_send_nbx entered (Weft
 *                  over UCX calls it itself; over MPI, MPI_Isend does)
 *   post call      the ucp_tag_send_nbx call (UCX copies the message out)
 *   in flight      its return -> the receiver's delivering ucp_worker_progress
 *                  call starts (negative when the receiver was already polling)
 *   delivery       that call (UCX copies the message into the buffer)
 *   ->return       its end -> the receiver's weft_recv returns
 *
 * and prints the median of each, and of their sum, per transport and
 * direction, in ns; then the mean, 90th, 99th and 99.9th percentile of the
 * sum and how many messages took over 10 us (the tail that a mean over a
 * block of round trips, OSU's figure, includes).
 * Ranks above 1 wait. Exit 77 without the probe, without UCX, or on 1 rank.
 */
#include <dlfcn.h>
#include <getopt.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft_mpi.h>

#include "weft_cli.h"

#define PROG "weft_lat_split"

enum { NSPLIT = 6, TAG = 5, REC = 6 };
static const char *const split_name[NSPLIT] = {"send->post", "post call", "in flight",
                                               "delivery", "->return", "sum"};

typedef struct probe {
    _Atomic uint64_t *stamp;
    uint64_t (*ticks)(void);
    double (*ns_per_tick)(void);
} probe_t;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t stamp(const probe_t *p, int i)
{
    return atomic_load_explicit(&p->stamp[i], memory_order_relaxed);
}

/* An MPI call that failed: message, rc = 1 (MPI_ERRORS_ARE_FATAL usually
 * aborts first; this covers a program run with MPI_ERRORS_RETURN). */
#define MPI_OK(call, rc)                                                                  \
    do {                                                                                  \
        int mpi_rc_ = (call);                                                             \
        if (mpi_rc_ != MPI_SUCCESS) {                                                     \
            fprintf(stderr, "weft_lat_split: %s failed (MPI code %d)\n", #call, mpi_rc_); \
            (rc) = 1;                                                                     \
        }                                                                                 \
    } while (0)

static int fail(const char *what, weft_status_t st)
{
    fprintf(stderr, "weft_lat_split: %s: %s (%s)\n", what, weft_status_name(st), weft_strerror(st));
    return 1;
}

/* One block of iters round trips on comm. Per round trip each of ranks 0
 * and 1 records 6 values: for the message it sent, weft_send called and the
 * post call's start and end; for the message it received, the delivering
 * progress call's start and end and weft_recv's return. */
static int block(const probe_t *p, weft_comm_t comm, int me, char *sbuf, char *rbuf, size_t bytes,
                 long iters, uint64_t *rec)
{
    const int peer = 1 - me;
    for (long i = 0; i < iters; i++) {
        uint64_t *r = rec + REC * i;
        for (int step = 0; step < 2; step++) {
            weft_status_t st;
            if ((step == 0) == (me == 0)) { /* rank 0 sends first */
                r[0] = p->ticks();
                if ((st = weft_send(sbuf, bytes, WEFT_UINT8, peer, TAG, comm)) != WEFT_SUCCESS)
                    return fail("weft_send", st);
                r[1] = stamp(p, 2);
                r[2] = stamp(p, 3);
            } else {
                if ((st = weft_recv(rbuf, bytes, WEFT_UINT8, peer, TAG, comm)) != WEFT_SUCCESS)
                    return fail("weft_recv", st);
                r[5] = p->ticks();
                r[3] = stamp(p, 0);
                r[4] = stamp(p, 1);
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int provided, me, np, rc = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &me), rc);
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &np), rc);
    if (rc != 0) return 1;
    long bytes = 4096, iters = 2000, rounds = 10;
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    opterr = 0;
    int c, usage_rc = -1; /* -1: run; 0: --help/--version done; 2: usage error */
    while (usage_rc < 0 && (c = getopt_long(argc, argv, ":m:i:r:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': {
            size_t sz = 0;
            if (weft_cli_parse_size(optarg, &sz) != 0 || sz > (1u << 30))
                usage_rc = me == 0 ? weft_cli_usage_error(PROG, "bad -m '%s' (bytes, 0 .. 1G)", optarg)
                                   : WEFT_CLI_USAGE;
            bytes = (long)sz;
            break;
        }
        case 'i':
        case 'r':
            if (weft_cli_parse_long(optarg, 1, 1000000, c == 'i' ? &iters : &rounds) != 0)
                usage_rc = me == 0 ? weft_cli_usage_error(PROG, "bad -%c '%s' (1 .. 1000000)", c, optarg)
                                   : WEFT_CLI_USAGE;
            break;
        case 'h':
            if (me == 0)
                printf("usage: mpiexec -n 2 -env LD_PRELOAD .../libucx_progress_probe.so %s\n"
                       "           [-m BYTES] [-i ITERS] [-r ROUNDS]\n"
                       "One message of a Weft ping-pong split into five intervals, per transport\n"
                       "(doc/notes/ucx_measurements.md). Exit 77 without the probe, UCX or 2 ranks.\n"
                       "  -m BYTES   message size (default 4096; suffixes K, M, G)\n"
                       "  -i ITERS   round trips per block (default 2000)\n"
                       "  -r ROUNDS  alternating blocks per transport (default 10)\n"
                       "  -h, --help; -V, --version\n",
                       PROG);
            usage_rc = 0;
            break;
        case 'V':
            if (me == 0) weft_cli_version(stdout, PROG);
            usage_rc = 0;
            break;
        default:
            usage_rc = me == 0 ? weft_cli_getopt_error(PROG, c, argv, longopts) : WEFT_CLI_USAGE;
            break;
        }
    }
    if (usage_rc < 0 && optind < argc)
        usage_rc = me == 0 ? weft_cli_usage_error(PROG, "unexpected argument '%s'", argv[optind])
                           : WEFT_CLI_USAGE;
    if (usage_rc >= 0) {
        MPI_Finalize();
        return usage_rc;
    }
    probe_t p = {dlsym(RTLD_DEFAULT, "ucx_probe_stamp"), dlsym(RTLD_DEFAULT, "ucx_probe_ticks"),
                 dlsym(RTLD_DEFAULT, "ucx_probe_ns_per_tick")};
    if (p.stamp == NULL || p.ticks == NULL || p.ns_per_tick == NULL || np < 2) {
        if (me == 0)
            fprintf(stderr, "weft_lat_split: %s (skipped)\n",
                    np < 2 ? "needs 2 ranks" : "the UCX probe is not preloaded (LD_PRELOAD=.../"
                                                "libucx_progress_probe.so)");
        MPI_Finalize();
        return 77;
    }
    weft_status_t st = weft_init(NULL);
    if (st != WEFT_SUCCESS) {
        fail("weft_init", st);
        MPI_Finalize();
        return 1;
    }

    const weft_transport_t tp[2] = {WEFT_TRANSPORT_MPI, WEFT_TRANSPORT_UCX};
    weft_comm_t comm[2] = {NULL, NULL};
    uint64_t *rec[2] = {NULL, NULL}, *peer = NULL;
    int64_t *v = NULL;
    char *sbuf = malloc((size_t)bytes + 1), *rbuf = malloc((size_t)bytes + 1);
    const size_t n = (size_t)iters * (size_t)rounds;
    if (REC * n > (size_t)INT32_MAX) {
        if (me == 0) fprintf(stderr, "weft_lat_split: -i x -r too large\n");
        rc = 2;
    }
    for (int k = 0; k < 2 && rc == 0; k++) {
        weft_comm_params_t prm = WEFT_COMM_PARAMS_INITIALIZER;
        prm.transport = tp[k];
        st = weft_comm_create_ex(MPI_COMM_WORLD, NULL, &prm, &comm[k]);
        if (st == WEFT_ERR_UNSUPPORTED) {
            if (me == 0) fprintf(stderr, "weft_lat_split: no UCX transport in this build (skipped)\n");
            rc = 77;
        } else if (st != WEFT_SUCCESS) {
            rc = fail("weft_comm_create_ex", st);
        }
        rec[k] = calloc(REC * n, sizeof(uint64_t));
    }
    peer = calloc(REC * n, sizeof(uint64_t));
    v = calloc(n, sizeof(int64_t));
    if (rc == 0 && (!sbuf || !rbuf || !rec[0] || !rec[1] || !peer || !v)) {
        fprintf(stderr, "weft_lat_split: out of memory\n");
        rc = 1;
    }
    int all = rc;
    MPI_OK(MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), all);
    rc = all;
    if (rc == 0) {
        memset(sbuf, 0x3c, (size_t)bytes + 1);
        for (long r = 0; r < rounds && rc == 0; r++)
            for (int k = 0; k < 2 && rc == 0; k++) {
                MPI_OK(MPI_Barrier(MPI_COMM_WORLD), rc);
                if (rc == 0 && me <= 1)
                    rc = block(&p, comm[k], me, sbuf, rbuf, (size_t)bytes, iters,
                               rec[k] + REC * (size_t)r * (size_t)iters);
            }
        all = rc;
        MPI_OK(MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), all);
        rc = all;
    }
    if (rc == 0 && me == 0) {
        printf("# weft_lat_split: %ld bytes, %ld rounds x %ld round trips per transport, "
               "medians over the messages of each direction, ns\n"
               "%-10s", bytes, rounds, iters, "# tp dir");
        for (int j = 0; j < NSPLIT; j++) printf("%12s", split_name[j]);
        printf("%12s%12s%12s%12s%10s\n", "sum mean", "sum p90", "sum p99", "sum p99.9", ">10 us");
    }
    const double ns = p.ns_per_tick();
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (me == 1) MPI_OK(MPI_Send(rec[k], (int)(REC * n), MPI_UINT64_T, 0, 0, MPI_COMM_WORLD), rc);
        if (me != 0) continue;
        MPI_OK(MPI_Recv(peer, (int)(REC * n), MPI_UINT64_T, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
               rc);
        if (rc != 0) break;
        for (int dir = 0; dir < 2; dir++) {
            /* dir 0: rank 0 -> rank 1; dir 1: rank 1 -> rank 0 */
            const uint64_t *snd = dir == 0 ? rec[k] : peer, *rcv = dir == 0 ? peer : rec[k];
            printf("%-4s %-5s", weft_transport_name(tp[k]), dir == 0 ? "0->1" : "1->0");
            for (int j = 0; j < NSPLIT; j++) {
                for (size_t i = 0; i < n; i++) {
                    const uint64_t *a = snd + REC * i, *b = rcv + REC * i;
                    /* send called, post start, post end, delivery start, end, return */
                    const int64_t t[6] = {(int64_t)a[0], (int64_t)a[1], (int64_t)a[2],
                                          (int64_t)b[3], (int64_t)b[4], (int64_t)b[5]};
                    v[i] = j < 5 ? t[j + 1] - t[j] : t[5] - t[0];
                }
                qsort(v, n, sizeof *v, cmp_i64);
                printf("%12.1f", (double)v[n / 2] * ns);
            }
            /* v holds the sums, sorted: the tail that a mean (OSU's figure) sees */
            double mean = 0;
            size_t slow = 0;
            for (size_t i = 0; i < n; i++) {
                mean += (double)v[i];
                slow += (double)v[i] * ns > 1e4;
            }
            printf("%12.1f%12.1f%12.1f%12.1f%10zu\n", mean / (double)n * ns,
                   (double)v[n * 9 / 10] * ns, (double)v[n * 99 / 100] * ns,
                   (double)v[n * 999 / 1000] * ns, slow);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (comm[k] != NULL && (st = weft_comm_destroy(comm[k])) != WEFT_SUCCESS)
            rc = fail("weft_comm_destroy", st);
        free(rec[k]);
    }
    free(peer);
    free(v);
    free(sbuf);
    free(rbuf);
    if ((st = weft_finalize()) != WEFT_SUCCESS) rc = fail("weft_finalize", st);
    MPI_Finalize();
    return rc;
}
