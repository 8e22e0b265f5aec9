/*
 * mpi_overlap.c - OSU's overlap method for MPI's nonblocking collectives, in
 * a plain MPI program (no Weft header): run it as it is for MPI's figure, and
 * under LD_PRELOAD=libweft-mpi.so for Weft's (doc/mpi_interposition.md).
 *
 *   mpiexec -n 2 mpi_overlap [-m MIN:MAX] [-i ITERS] [-x WARMUP]
 *                            [--ops LIST] [--compute device|busy|both]
 *                            [--entry mpi|pmpi|both] [-f] [--csv | --osu]
 *
 * Each operation is timed through its MPI_ name (Weft's under the preload)
 * and, with --entry both (the default), through its PMPI_ name too (always
 * the MPI library's), in the same run. For each size, as OSU's nonblocking
 * benchmarks do:
 *   Pure Comm. - issue, then wait, nothing in between;
 *   Overall    - issue, compute for as long as the pure communication took,
 *                then wait; Compute is the compute time measured in that loop;
 *   Overlap(%) = max(0, 100 - 100 * (Overall - Compute) / Pure Comm.).
 * Every iteration is timed on its own, with a barrier outside the timed part.
 * Times are averaged over iterations on each rank (--median: their median,
 * robust against a loaded machine's descheduling; Overall - Compute as the
 * median of each iteration's difference, see measure()), then over ranks (OSU);
 * -f adds the minimum and maximum over ranks of Overall.
 * --osu prints OSU OMB 7's tables instead (osu_ialltoall's and its siblings':
 * title, "# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait", datatype
 * and column lines; with -f also Coll. Init, MPI_Test, MPI_Wait, Min and Max
 * Comm.), one per operation, compute mode and entry, sizes doubling.
 * Compute: device - the thread sleeps (clock_nanosleep), as a host thread
 * does while a GPU computes; busy - a CPU loop calling no MPI.
 * Size: bytes per block for ialltoall/iallgather (each rank's contribution),
 * the whole vector for ibcast, ireduce, iallreduce and ireduce_scatter
 * (floats; each rank gets size/ranks), ignored for ibarrier.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#define VERSION "0.1.0"
#define EXIT_USAGE 2

enum op { O_IALLTOALL, O_IALLGATHER, O_IBCAST, O_IREDUCE_SCATTER, O_IREDUCE, O_IBARRIER,
          O_IALLREDUCE, O_COUNT };
static const char *const op_names[O_COUNT] = {"ialltoall", "iallgather", "ibcast",
                                              "ireduce_scatter", "ireduce", "ibarrier",
                                              "iallreduce"};

typedef struct opts {
    size_t min, max;
    int iters, warmup, full, csv, median;
    int osu;               /* --osu: OSU OMB 7's non-blocking tables, sizes doubling */
    unsigned ops;          /* bit per enum op */
    int device, busy;      /* compute modes */
    int mpi, pmpi;         /* entries */
} opts_t;

static int rank, size;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void compute_device(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {}
}

static volatile double sink;
static void compute_busy(double s)
{
    double end = now() + s, x = 1.0;
    while (now() < end)
        for (int i = 0; i < 64; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

typedef struct bufs {
    char *s, *r;
    size_t bytes;
} bufs_t;

/* Issue op through the MPI_ (entry 0) or PMPI_ (entry 1) name. */
static int issue(int op, int pmpi, bufs_t *b, MPI_Request *q)
{
    int n = (int)b->bytes, nf = (int)(b->bytes / sizeof(float));
    switch (op) {
    case O_IALLTOALL:
        return pmpi ? PMPI_Ialltoall(b->s, n, MPI_CHAR, b->r, n, MPI_CHAR, MPI_COMM_WORLD, q)
                    : MPI_Ialltoall(b->s, n, MPI_CHAR, b->r, n, MPI_CHAR, MPI_COMM_WORLD, q);
    case O_IALLGATHER:
        return pmpi ? PMPI_Iallgather(b->s, n, MPI_CHAR, b->r, n, MPI_CHAR, MPI_COMM_WORLD, q)
                    : MPI_Iallgather(b->s, n, MPI_CHAR, b->r, n, MPI_CHAR, MPI_COMM_WORLD, q);
    case O_IBCAST:
        return pmpi ? PMPI_Ibcast(b->r, n, MPI_CHAR, 0, MPI_COMM_WORLD, q)
                    : MPI_Ibcast(b->r, n, MPI_CHAR, 0, MPI_COMM_WORLD, q);
    case O_IREDUCE_SCATTER: {
        int per = nf / size;
        return pmpi ? PMPI_Ireduce_scatter_block(b->s, b->r, per, MPI_FLOAT, MPI_SUM,
                                                 MPI_COMM_WORLD, q)
                    : MPI_Ireduce_scatter_block(b->s, b->r, per, MPI_FLOAT, MPI_SUM,
                                                MPI_COMM_WORLD, q);
    }
    case O_IREDUCE:
        return pmpi ? PMPI_Ireduce(b->s, b->r, nf, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, q)
                    : MPI_Ireduce(b->s, b->r, nf, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, q);
    case O_IBARRIER:
        return pmpi ? PMPI_Ibarrier(MPI_COMM_WORLD, q) : MPI_Ibarrier(MPI_COMM_WORLD, q);
    case O_IALLREDUCE:
        return pmpi ? PMPI_Iallreduce(b->s, b->r, nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, q)
                    : MPI_Iallreduce(b->s, b->r, nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, q);
    }
    return MPI_ERR_ARG;
}

/* One timed iteration; compute_s < 0: no compute (pure). t[0] the whole
 * iteration, t[1] the compute, t[2] the issuing call, t[3] the wait (OSU's
 * Coll. Init and MPI_Wait). Returns 0 on success. */
static int iteration(int op, int pmpi, bufs_t *b, int busy, double compute_s, double t[4])
{
    MPI_Request q;
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) return 1;
    double t0 = now();
    if (issue(op, pmpi, b, &q) != MPI_SUCCESS) return 1;
    double t1 = now();
    if (compute_s >= 0.0) {
        if (busy) compute_busy(compute_s);
        else compute_device(compute_s);
    }
    double w0 = now(), c = compute_s >= 0.0 ? w0 - t1 : 0.0; /* from the issue's return to the wait */
    if (MPI_Wait(&q, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 1;
    double end = now();
    t[0] = end - t0;
    t[1] = c;
    t[2] = t1 - t0;
    t[3] = end - w0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean, or median (sorts v). */
static double stat(double *v, int n, int median)
{
    if (median) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return s / n;
}

typedef struct result {
    double overall, compute, pure, overlap, omin, omax;
    double init, wait, pmin, pmax; /* --osu -f: Coll. Init, MPI_Wait, Min/Max Comm. */
} result_t;

/* samples: 5 arrays of o->iters doubles */
static int measure(const opts_t *o, int op, int pmpi, int busy, bufs_t *b, double *samples,
                   result_t *res)
{
    double *tp = samples, *to = samples + o->iters, *tc = samples + 2 * o->iters;
    double *ti = samples + 3 * o->iters, *tw = samples + 4 * o->iters, t[4];
    for (int i = 0; i < o->warmup; i++)
        if (iteration(op, pmpi, b, busy, -1.0, t)) return 1;
    for (int i = 0; i < o->iters; i++) {
        if (iteration(op, pmpi, b, busy, -1.0, t)) return 1;
        tp[i] = t[0];
    }
    double pure = stat(tp, o->iters, o->median);
    /* every rank computes as long as the ranks' average pure time (OSU) */
    double pure_avg = 0.0;
    if (PMPI_Allreduce(&pure, &pure_avg, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return 1;
    pure_avg /= size;
    for (int i = 0; i < o->warmup; i++)
        if (iteration(op, pmpi, b, busy, pure_avg, t)) return 1;
    for (int i = 0; i < o->iters; i++) {
        if (iteration(op, pmpi, b, busy, pure_avg, t)) return 1;
        to[i] = t[0];
        tc[i] = t[1];
        ti[i] = t[2];
        tw[i] = t[3];
    }
    /* The mean of Overall - Compute is the mean of each iteration's
     * difference. --median takes the median of that difference too (the
     * issue and the wait of one iteration), not of Overall and Compute
     * apart: both contain the same sleep, whose overshoot varies by
     * microseconds from call to call and would otherwise decide their
     * difference. Overall is then Compute's median plus that median. */
    double overall, comp;
    if (o->median) {
        for (int i = 0; i < o->iters; i++) to[i] -= tc[i];
        comp = stat(tc, o->iters, 1);
        overall = comp + stat(to, o->iters, 1);
    } else {
        overall = stat(to, o->iters, 0);
        comp = stat(tc, o->iters, 0);
    }
    double mine[5] = {overall, comp, pure, stat(ti, o->iters, o->median), stat(tw, o->iters, o->median)};
    double sum[5];
    if (PMPI_Allreduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS ||
        PMPI_Allreduce(&overall, &res->omin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS ||
        PMPI_Allreduce(&overall, &res->omax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS ||
        PMPI_Allreduce(&pure, &res->pmin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS ||
        PMPI_Allreduce(&pure, &res->pmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return 1;
    res->overall = sum[0] / size;
    res->compute = sum[1] / size;
    res->pure = sum[2] / size;
    res->init = sum[3] / size;
    res->wait = sum[4] / size;
    double ov = 100.0 - 100.0 * (res->overall - res->compute) / res->pure;
    res->overlap = ov < 0.0 ? 0.0 : ov > 100.0 ? 100.0 : ov;
    return 0;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: mpiexec -n N %s [options]\n"
            "OSU's overlap method for MPI's nonblocking collectives, through MPI_ and PMPI_.\n"
            "  -m, --message-size MIN:MAX  sizes in bytes (K, M suffixes; default 64K:4M, x4)\n"
            "  -i, --iterations N          timed iterations per measurement (default 20)\n"
            "  -x, --warmup N              untimed iterations first (default 3)\n"
            "  --ops LIST                  comma list of %s,%s,%s,%s,%s,%s,%s\n"
            "                              (default: all but iallreduce)\n"
            "  --compute device|busy|both  sleep (as while a GPU computes) or CPU loop (default both)\n"
            "  --entry mpi|pmpi|both       time MPI_ names, PMPI_ names or both (default both)\n"
            "  -f, --full                  add min and max over ranks of Overall (--osu: OSU's\n"
            "                              full listing)\n"
            "  --csv                       comma-separated rows instead of the table\n"
            "  --osu                       OSU OMB 7's tables (osu_ialltoall, ...): one per\n"
            "                              operation, entry and compute mode; sizes doubling\n"
            "  --median                    per-rank median over iterations instead of the mean\n"
            "                              (Overall: median Compute + median of each\n"
            "                              iteration's Overall - Compute)\n"
            "                              (a shared, loaded machine's descheduling outliers)\n"
            "  -h, --help, -v, --version\n",
            prog, op_names[0], op_names[1], op_names[2], op_names[3], op_names[4], op_names[5],
            op_names[6]);
}

static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || s[0] == '-') return 1;
    if (*end == 'K' || *end == 'k') { v <<= 10; end++; }
    else if (*end == 'M' || *end == 'm') { v <<= 20; end++; }
    if (*end != '\0' || v > (1ull << 30)) return 1;
    *out = (size_t)v;
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return 1;
    *out = (int)v;
    return 0;
}

/* 0 ok, 1 exit 0 (help/version printed), 2 usage error (printed). */
static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.min = 64u << 10, .max = 4u << 20, .iters = 20, .warmup = 3,
                  .ops = (1u << O_IALLREDUCE) - 1, .device = 1, .busy = 1, .mpi = 1, .pmpi = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { if (rank == 0) usage(stdout, argv[0]); return 1; }
        if (!strcmp(a, "-v") || !strcmp(a, "--version")) { if (rank == 0) printf("mpi_overlap %s\n", VERSION); return 1; }
        if (!strcmp(a, "-f") || !strcmp(a, "--full")) { o->full = 1; continue; }
        if (!strcmp(a, "--csv")) { o->csv = 1; continue; }
        if (!strcmp(a, "--median")) { o->median = 1; continue; }
        if (!strcmp(a, "--osu")) { o->osu = 1; continue; }
        static const char *const valued[] = {"-m", "--message-size", "-i", "--iterations", "-x",
                                             "--warmup", "--ops", "--compute", "--entry"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
        if (!known) {
            if (rank == 0) fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
            if (rank == 0) usage(stderr, argv[0]);
            return 2;
        }
        int bad = v == NULL;
        if (!bad && (!strcmp(a, "-m") || !strcmp(a, "--message-size"))) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            char *colon = strchr(buf, ':');
            if (colon) *colon = '\0';
            bad = parse_size(buf, &o->min) || parse_size(colon ? colon + 1 : buf, &o->max) ||
                  o->min > o->max || o->min == 0;
        } else if (!bad && (!strcmp(a, "-i") || !strcmp(a, "--iterations"))) {
            bad = parse_int(v, 1, 1000000, &o->iters);
        } else if (!bad && (!strcmp(a, "-x") || !strcmp(a, "--warmup"))) {
            bad = parse_int(v, 0, 1000000, &o->warmup);
        } else if (!bad && !strcmp(a, "--ops")) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            o->ops = 0;
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t && !bad; t = strtok_r(NULL, ",", &save)) {
                int k = 0;
                while (k < O_COUNT && strcmp(t, op_names[k])) k++;
                if (k == O_COUNT) bad = 1;
                else o->ops |= 1u << k;
            }
            bad = bad || o->ops == 0;
        } else if (!bad && !strcmp(a, "--compute")) {
            o->device = !strcmp(v, "device") || !strcmp(v, "both");
            o->busy = !strcmp(v, "busy") || !strcmp(v, "both");
            bad = !o->device && !o->busy;
        } else if (!bad && !strcmp(a, "--entry")) {
            o->mpi = !strcmp(v, "mpi") || !strcmp(v, "both");
            o->pmpi = !strcmp(v, "pmpi") || !strcmp(v, "both");
            bad = !o->mpi && !o->pmpi;
        }
        if (bad) {
            if (rank == 0) fprintf(stderr, "%s: bad or missing value for option '%s'\n", argv[0], a);
            return 2;
        }
        i++;
    }
    if (o->osu && o->csv) {
        if (rank == 0) fprintf(stderr, "%s: option '--osu' prints tables: not with '--csv'\n", argv[0]);
        return 2;
    }
    return 0;
}

/* ---- --osu: OSU OMB 7's non-blocking collective tables -------------------------- */
static const char *const osu_titles[O_COUNT] = {
    "OSU MPI Non-blocking All-to-All Latency Test", "OSU MPI Non-blocking Allgather Latency Test",
    "OSU MPI Non-blocking Broadcast Latency Test", "OSU MPI Non-blocking Reduce_scatter Latency Test",
    "OSU MPI Non-blocking Reduce Latency Test", "OSU MPI Non-blocking Barrier Latency Test",
    "OSU MPI Non-blocking Allreduce Latency Test"};
#define OSU_VERSION "7.4"
#define OSU_FIELD 20

/* OSU's preamble, a comment line of ours, the datatype and column lines
 * (print_preamble_nbc and print_only_header_nbc's layout): the barrier has no
 * size column. Rank 0. */
static void osu_header(const opts_t *o, int op, int pmpi, int busy)
{
    const int sized = op != O_IBARRIER;
    printf("\n# %s v%s\n# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n", osu_titles[op],
           OSU_VERSION);
    printf("# mpi_overlap %s: %s entry (%s), %s compute, %d ranks, %s over iterations, in OSU OMB "
           "%s's layout\n", VERSION, pmpi ? "PMPI_" : "MPI_",
           pmpi ? "the MPI library's own" : "as the program calls it: the interposer's when preloaded",
           busy ? "busy (CPU loop)" : "device-style (sleep)", size, o->median ? "median" : "mean",
           OSU_VERSION);
    if (sized)
        printf("# Datatype: %s.\n", op == O_IALLTOALL || op == O_IALLGATHER || op == O_IBCAST
                                      ? "MPI_CHAR" : "MPI_FLOAT");
    if (sized) printf("%-*s%*s", 10, "# Size", OSU_FIELD, "Overall(us)");
    else printf("# Overall(us)");
    if (o->full)
        printf("%*s%*s%*s%*s%*s%*s%*s%*s", OSU_FIELD, "Compute(us)", OSU_FIELD, "Coll. Init(us)",
               OSU_FIELD, "MPI_Test(us)", OSU_FIELD, "MPI_Wait(us)", OSU_FIELD, "Pure Comm.(us)",
               OSU_FIELD, "Min Comm.(us)", OSU_FIELD, "Max Comm.(us)", OSU_FIELD, "Overlap(%)");
    else
        printf("%*s%*s%*s", OSU_FIELD, "Compute(us)", OSU_FIELD, "Pure Comm.(us)", OSU_FIELD,
               "Overlap(%)");
    printf("\n");
}

/* One row (print_stats_nbc's layout): no MPI_Test calls during the compute,
 * so MPI_Test(us) is 0 and OSU's overlap is this program's. Rank 0. */
static void osu_row(const opts_t *o, int op, size_t s, const result_t *r)
{
    if (op != O_IBARRIER) printf("%-*zu%*.2f", 10, s, OSU_FIELD, r->overall * 1e6);
    else printf("%*.2f", 13, r->overall * 1e6);
    if (o->full)
        printf("%*.2f%*.2f%*.2f%*.2f%*.2f%*.2f%*.2f%*.2f", OSU_FIELD, r->compute * 1e6, OSU_FIELD,
               r->init * 1e6, OSU_FIELD, 0.0, OSU_FIELD, r->wait * 1e6, OSU_FIELD, r->pure * 1e6,
               OSU_FIELD, r->pmin * 1e6, OSU_FIELD, r->pmax * 1e6, OSU_FIELD, r->overlap);
    else
        printf("%*.2f%*.2f%*.2f", OSU_FIELD, r->compute * 1e6, OSU_FIELD, r->pure * 1e6, OSU_FIELD,
               r->overlap);
    printf("\n");
}

int main(int argc, char **argv)
{
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    opts_t o;
    int p = parse(argc, argv, &o);
    if (p != 0) {
        MPI_Finalize();
        return p == 1 ? 0 : EXIT_USAGE;
    }
    size_t maxb = o.max * (size_t)size;
    bufs_t b = {malloc(maxb), malloc(maxb), 0};
    double *samples = malloc(5 * sizeof(double) * (size_t)o.iters);
    int ok = b.s != NULL && b.r != NULL && samples != NULL, all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (!ok) fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank, maxb);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < maxb; i++) { b.s[i] = (char)(i * 7 + (size_t)rank); b.r[i] = 0; }
    if (rank == 0 && !o.osu) {
        if (o.csv) {
            printf("operation,entry,compute,size_bytes,overall_us,compute_us,pure_us,overlap_pct%s\n",
                   o.full ? ",overall_min_us,overall_max_us" : "");
        } else {
            printf("# mpi_overlap %s: OSU overlap of nonblocking collectives, %d ranks, %d "
                   "iterations (+%d warm-up), %s over iterations, mean over ranks\n# entry MPI_: the call as the program makes it "
                   "(the interposer's, when preloaded); PMPI_: the MPI library's own\n",
                   VERSION, size, o.iters, o.warmup, o.median ? "median" : "mean");
        }
    }
    int rc = 0;
    /* --osu: a table per operation, compute mode and entry, OSU's sizes (doubling) */
    for (int op = 0; op < O_COUNT && rc == 0 && o.osu; op++) {
        if (!(o.ops & (1u << op))) continue;
        for (int busy = 0; busy < 2 && rc == 0; busy++) {
            if ((busy && !o.busy) || (!busy && !o.device)) continue;
            for (int e = 0; e < 2 && rc == 0; e++) {
                if ((e == 0 && !o.mpi) || (e == 1 && !o.pmpi)) continue;
                if (rank == 0) osu_header(&o, op, e, busy);
                for (size_t s = o.min; s <= o.max; s *= 2) {
                    b.bytes = s;
                    result_t r;
                    if (measure(&o, op, e, busy, &b, samples, &r)) {
                        fprintf(stderr, "rank %d: %s failed\n", rank, op_names[op]);
                        rc = 1;
                        break;
                    }
                    if (rank == 0) osu_row(&o, op, s, &r);
                    if (op == O_IBARRIER || s > o.max / 2) break;
                }
                fflush(stdout);
            }
        }
    }
    for (int op = 0; op < O_COUNT && rc == 0 && !o.osu; op++) {
        if (!(o.ops & (1u << op))) continue;
        for (int busy = 0; busy < 2 && rc == 0; busy++) {
            if ((busy && !o.busy) || (!busy && !o.device)) continue;
            if (rank == 0 && !o.csv)
                printf("\n# %s, %s compute\n# %-8s %-6s %12s %12s %15s %11s%s\n", op_names[op],
                       busy ? "busy (CPU loop)" : "device-style (sleep)", "Size", "Entry",
                       "Overall(us)", "Compute(us)", "Pure Comm.(us)", "Overlap(%)",
                       o.full ? "     Min(us)     Max(us)" : "");
            for (size_t s = o.min; s <= o.max && rc == 0; s *= 4) {
                b.bytes = s;
                for (int e = 0; e < 2 && rc == 0; e++) {
                    if ((e == 0 && !o.mpi) || (e == 1 && !o.pmpi)) continue;
                    result_t r;
                    if (measure(&o, op, e, busy, &b, samples, &r)) {
                        fprintf(stderr, "rank %d: %s failed\n", rank, op_names[op]);
                        rc = 1;
                        break;
                    }
                    if (rank != 0) continue;
                    if (o.csv)
                        printf("%s,%s,%s,%zu,%.2f,%.2f,%.2f,%.2f", op_names[op], e ? "PMPI_" : "MPI_",
                               busy ? "busy" : "device", op == O_IBARRIER ? 0 : s, r.overall * 1e6,
                               r.compute * 1e6, r.pure * 1e6, r.overlap);
                    else
                        printf("%-10zu %-6s %12.2f %12.2f %15.2f %11.2f", op == O_IBARRIER ? 0 : s,
                               e ? "PMPI_" : "MPI_", r.overall * 1e6, r.compute * 1e6,
                               r.pure * 1e6, r.overlap);
                    if (o.full) printf(o.csv ? ",%.2f,%.2f" : " %11.2f %11.2f", r.omin * 1e6, r.omax * 1e6);
                    printf("\n");
                }
                if (op == O_IBARRIER) break;
            }
            fflush(stdout);
        }
    }
    free(samples);
    free(b.s);
    free(b.r);
    MPI_Finalize();
    return rc;
}
