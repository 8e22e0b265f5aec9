/*
 * weft-tune - measure this machine and write a tuning file (doc/tuning.md).
 *
 *   mpiexec -n P weft-tune [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-r ROUNDS]
 *                          [-c COLL[,COLL...]] [--margin PCT] [--any-size]
 *                          [-o FILE] [-q]
 *
 * 1. alpha and beta from a ping-pong between ranks 0 and 1 (one-way time of
 *    8 B, and of 1 MiB minus that, per byte; each the smallest of 5 batch
 *    medians), gamma from a float32 sum of 1 MiB (per byte, median of 7);
 *    rank 0's values are used by everyone. On a communicator that spans
 *    nodes, alpha and beta between the first ranks of nodes 0 and 1, and
 *    alpha_node and beta_node between two ranks of one node (measure_cost).
 * 2. Every algorithm of every collective asked for (default: all), forced
 *    with weft_comm_set_algo, at every power-of-two size from MIN to MAX
 *    bytes (float32, sum): ROUNDS rounds, each timing ITERS calls of every
 *    algorithm in turn (interleaved, rotating the order), the slowest rank's
 *    mean per round, the median over rounds.
 * 3. The choice per size: the measured winner, unless the cost model's
 *    choice (weft__select_model with the measured alpha/beta/gamma) is within
 *    the margin (default 5%) of it, in which case the model's choice stays.
 *    That keeps re-runs from flipping sizes where two algorithms tie. Sizes
 *    with the same choice merge into one rule; a measured size s covers
 *    (previous measured size, s]; sizes above MAX are left to the cost model.
 * 4. Writes FILE (rank 0) and prints the table and the crossover sizes.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft_cli.h"
#include "weft_internal.h"
#include "mpi_interop.h"
#include "weft_mpi.h"

#define MAX_SIZES 64

typedef struct opts {
    size_t lo, hi;
    int iters, warmup, rounds, quiet, any_size;
    double margin;
    const char *out;
    int colls[WEFT_COLL_COUNT]; /* 1 = tune it */
} opts_t;

static int rank_, size_;

static void usage(FILE *f)
{
    fprintf(f, "Usage: mpiexec -n P weft-tune [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-r ROUNDS]\n"
               "                 [-c COLL[,COLL...]] [--margin PCT] [--any-size] [-o FILE] [-q]\n"
               "Measures this machine and every algorithm, writes a tuning file (doc/tuning.md).\n"
               "  -m MIN:MAX      message sizes in bytes, powers of two (suffix K, M, G;\n"
               "                  default 4:4M, at least 4, at most 4G)\n"
               "  -i ITERS        calls per timing (default 50; fewer for large sizes)\n"
               "  -x WARMUP       untimed calls per algorithm and size (default 3)\n"
               "  -r, --rounds R  interleaved rounds; the median is used (default 5)\n"
               "  -c, --coll LIST collectives to tune, comma-separated (default: all)\n"
               "  --margin PCT    keep the cost model's choice when it is within PCT%% of the\n"
               "                  measured winner (default 5)\n"
               "  --any-size      write rules for any communicator size ('*') instead of P\n"
               "  -o, --output FILE  write the tuning file (default: print only)\n"
               "  -q, --quiet     print only the crossovers\n"
               "  -h, --help      this text\n"
               "  -V, --version   version and build options\n");
}

/* 0 parsed, 1 --help or --version printed (exit 0), 2 usage error printed.
 * Messages on rank 0 only (every rank parses the same argv). */
static int parse_args(int argc, char **argv, opts_t *o)
{
    static const char *const prog = "weft-tune";
    enum { OPT_MARGIN = 256, OPT_ANY_SIZE };
    static const struct option longopts[] = {
        {"rounds", required_argument, NULL, 'r'},        {"coll", required_argument, NULL, 'c'},
        {"margin", required_argument, NULL, OPT_MARGIN}, {"any-size", no_argument, NULL, OPT_ANY_SIZE},
        {"output", required_argument, NULL, 'o'},        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},                {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *o = (opts_t){.lo = 4, .hi = 4u << 20, .iters = 50, .warmup = 3, .rounds = 5, .margin = 5};
    for (int c = 0; c < WEFT_COLL_COUNT; c++) o->colls[c] = 1;
    opterr = 0;
    int opt;
    long l;
    size_t lo, hi;
#define TUNE_USAGE(...) return rank_ == 0 ? weft_cli_usage_error(prog, __VA_ARGS__) : 2
    while ((opt = getopt_long(argc, argv, ":m:i:x:r:c:o:qhV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            if (rank_ == 0) usage(stdout);
            return 1;
        case 'V':
            if (rank_ == 0) weft_cli_version(stdout, prog);
            return 1;
        case 'q': o->quiet = 1; break;
        case OPT_ANY_SIZE: o->any_size = 1; break;
        case 'm':
            lo = o->lo;
            if (weft_cli_parse_range(optarg, &lo, &hi) != 0 || lo < 4 || hi > ((size_t)1 << 32))
                TUNE_USAGE("bad -m '%s' (MIN:MAX in bytes, 4 <= MIN <= MAX <= 4G)", optarg);
            o->lo = lo;
            o->hi = hi;
            break;
        case 'i':
            if (weft_cli_parse_long(optarg, 1, 1000000, &l) != 0)
                TUNE_USAGE("bad -i '%s' (1..1000000)", optarg);
            o->iters = (int)l;
            break;
        case 'x':
            if (weft_cli_parse_long(optarg, 0, 1000000, &l) != 0)
                TUNE_USAGE("bad -x '%s' (0..1000000)", optarg);
            o->warmup = (int)l;
            break;
        case 'r':
            if (weft_cli_parse_long(optarg, 1, 1000, &l) != 0)
                TUNE_USAGE("bad -r '%s' (1..1000)", optarg);
            o->rounds = (int)l;
            break;
        case OPT_MARGIN:
            if (weft_cli_parse_double(optarg, 0, 100, &o->margin) != 0)
                TUNE_USAGE("bad --margin '%s' (a percentage, 0..100)", optarg);
            break;
        case 'o': o->out = optarg; break;
        case 'c': {
            char buf[256], names[256] = "";
            snprintf(buf, sizeof buf, "%s", optarg);
            for (int c = 0; c < WEFT_COLL_COUNT; c++) {
                o->colls[c] = 0;
                strncat(names, c ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, weft__coll_name((weft_coll_t)c), sizeof names - strlen(names) - 1);
            }
            for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
                int found = 0;
                for (int c = 0; c < WEFT_COLL_COUNT; c++)
                    if (!strcmp(tok, weft__coll_name((weft_coll_t)c))) o->colls[c] = found = 1;
                if (!found) TUNE_USAGE("unknown collective '%s' (one of: %s)", tok, names);
            }
            break;
        }
        default:
            return rank_ == 0 ? weft_cli_getopt_error(prog, opt, argv, longopts) : 2;
        }
    }
    if (optind < argc) TUNE_USAGE("unexpected argument '%s'", argv[optind]);
#undef TUNE_USAGE
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- alpha, beta, gamma ------------------------------------------------------------- */
/* Ping-pong between ranks a and b of c (the others return at once): the
 * median one-way time of `bytes` over iters, valid on a and b. */
static int pingpong(MPI_Comm c, int a, int b, char *buf, int bytes, int iters, double *one_way)
{
    double t[64];
    if (rank_ != a && rank_ != b) return 0;
    if (iters > 64) iters = 64;
    for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        int rc = MPI_SUCCESS;
        if (rank_ == a) {
            rc = MPI_Send(buf, bytes, MPI_BYTE, b, 7, c);
            if (rc == MPI_SUCCESS) rc = MPI_Recv(buf, bytes, MPI_BYTE, b, 7, c, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Recv(buf, bytes, MPI_BYTE, a, 7, c, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = MPI_Send(buf, bytes, MPI_BYTE, a, 7, c);
        }
        if (rc != MPI_SUCCESS) return weft__mpi_error(rc, "ping-pong", __FILE__, __LINE__);
        t[i] = (MPI_Wtime() - t0) / 2;
    }
    *one_way = median(t, iters);
    return 0;
}

/* alpha and beta of the link between ranks a and b into v[0], v[1] on a and
 * b (one-way time of 8 B; per byte of 1 MiB beyond that). The smallest of 5
 * batch medians: robust to a batch that ran while the node was busy with
 * something else (a median alone is not, when the other rank is descheduled
 * for a whole batch). 0 on success (on every rank). */
static int measure_pair(MPI_Comm c, int a, int b, char *buf, double v[2])
{
    enum { BIG = 1 << 20, SMALL = 8 };
    double ts = INFINITY, tb = INFINITY, x;
    int ok = pingpong(c, a, b, buf, SMALL, 5, &x) == 0 && pingpong(c, a, b, buf, BIG, 2, &x) == 0;
    for (int i = 0; ok && i < 5; i++) {
        ok = pingpong(c, a, b, buf, SMALL, 21, &x) == 0;
        if (ok && (rank_ == a || rank_ == b) && x < ts) ts = x;
        ok = ok && pingpong(c, a, b, buf, BIG, 5, &x) == 0;
        if (ok && (rank_ == a || rank_ == b) && x < tb) tb = x;
    }
    if (rank_ == a || rank_ == b) {
        v[0] = ts;
        /* 1 MiB no slower than 8 B: the node was busy during the small
         * batches (4 ranks on 2 cores); the large message's own time per
         * byte then bounds beta from above, and beta stays positive */
        v[1] = tb > ts ? (tb - ts) / (BIG - SMALL) : tb / BIG;
    }
    return ok ? 0 : 1;
}

/*
 * alpha, beta (and on a communicator that spans nodes alpha_node,
 * beta_node) and gamma. The pairs are the ones lib/measure.c measures:
 * ranks 0 and 1 on one node; on several, the first ranks of nodes 0 and 1
 * (alpha, beta: across nodes) and the first two ranks of the first node that
 * has two (alpha_node, beta_node; none when every node has one rank). Each
 * figure is its pair's first rank's; gamma (the float32 sum, per byte,
 * median of 7) is rank 0's. Collective over c.
 */
static int measure_cost(MPI_Comm c, const weft__comm_t *wc, weft__cost_t *cost)
{
    enum { BIG = 1 << 20 };
    char *buf = calloc(2, BIG);
    int ok = buf != NULL, all = 0;
    if (MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c) != MPI_SUCCESS || !ok) {
        free(buf);
        return 1;
    }
    int xa = 0, xb = 1, na = -1, nb = -1; /* across nodes (or the one node); inside one */
    if (wc != NULL && wc->nnodes >= 2) {
        xa = wc->by_node[wc->node_first[0]];
        xb = wc->by_node[wc->node_first[1]];
        for (int n = 0; n < wc->nnodes && na < 0; n++)
            if (wc->node_first[n + 1] - wc->node_first[n] >= 2) {
                na = wc->by_node[wc->node_first[n]];
                nb = wc->by_node[wc->node_first[n] + 1];
            }
    }
    /* v: alpha, beta, gamma; vn: alpha_node, beta_node */
    double v[3] = {0, 0, 0}, vn[2] = {0, 0};
    ok = measure_pair(c, xa, xb, buf, v) == 0;
    if (ok && na >= 0) ok = measure_pair(c, na, nb, buf, vn) == 0;
    if (ok && rank_ == 0) {
        double g[7];
        for (int i = 0; i < 7; i++) {
            double t0 = weft__now();
            weft__reduce(buf, buf + BIG, BIG / 4, WEFT_FLOAT32, WEFT_SUM);
            g[i] = (weft__now() - t0) / BIG;
        }
        v[2] = median(g, 7);
    }
    free(buf);
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c) != MPI_SUCCESS || !all) return 1;
    if (MPI_Bcast(v, 2, MPI_DOUBLE, xa, c) != MPI_SUCCESS ||
        MPI_Bcast(&v[2], 1, MPI_DOUBLE, 0, c) != MPI_SUCCESS ||
        (na >= 0 && MPI_Bcast(vn, 2, MPI_DOUBLE, na, c) != MPI_SUCCESS))
        return 1;
    *cost = (weft__cost_t){.alpha = v[0], .beta = v[1], .gamma = v[2],
                           .alpha_node = vn[0], .beta_node = vn[1]};
    return 0;
}

/* ---- one call of a collective ----------------------------------------------------------- */
/* The vector collectives' counts and displacements (size_ each, set in
 * main): uniform blocks of `count` elements, as allgather and alltoall. */
static size_t *v_counts, *v_displs;

static weft_status_t call(weft_coll_t coll, char *send, char *recv, size_t count, weft_comm_t comm)
{
    const weft_datatype_t f = WEFT_FLOAT32;
    if (coll == WEFT_COLL_ALLGATHERV || coll == WEFT_COLL_ALLTOALLV ||
        coll == WEFT_COLL_GATHERV || coll == WEFT_COLL_SCATTERV ||
        coll == WEFT_COLL_REDUCE_SCATTERV)
        for (int r = 0; r < size_; r++) v_counts[r] = count, v_displs[r] = (size_t)r * count;
    switch (coll) {
    case WEFT_COLL_ALLREDUCE: return weft_allreduce(send, recv, count, f, WEFT_SUM, comm);
    case WEFT_COLL_REDUCE_SCATTER: return weft_reduce_scatter(send, recv, count, f, WEFT_SUM, comm);
    case WEFT_COLL_ALLGATHER: return weft_allgather(send, recv, count, f, comm);
    case WEFT_COLL_BCAST: return weft_bcast(recv, count, f, 0, comm);
    case WEFT_COLL_REDUCE: return weft_reduce(send, recv, count, f, WEFT_SUM, 0, comm);
    case WEFT_COLL_ALLTOALL: return weft_alltoall(send, recv, count, f, comm);
    case WEFT_COLL_GATHER: return weft_gather(send, recv, count, f, 0, comm);
    case WEFT_COLL_SCATTER: return weft_scatter(send, recv, count, f, 0, comm);
    case WEFT_COLL_BARRIER: return weft_barrier(comm);
    case WEFT_COLL_ALLGATHERV:
        return weft_allgatherv(send, count, recv, v_counts, v_displs, f, comm);
    case WEFT_COLL_ALLTOALLV:
        return weft_alltoallv(send, v_counts, v_displs, recv, v_counts, v_displs, f, comm);
    case WEFT_COLL_GATHERV:
        return weft_gatherv(send, count, recv, v_counts, v_displs, f, 0, comm);
    case WEFT_COLL_SCATTERV:
        return weft_scatterv(send, v_counts, v_displs, recv, count, f, 0, comm);
    case WEFT_COLL_REDUCE_SCATTERV:
        return weft_reduce_scatterv(send, recv, v_counts, f, WEFT_SUM, comm);
    default: return WEFT_ERR_INVALID_ARG;
    }
}

typedef struct tuned {
    int nsizes, nalgo;
    size_t size[MAX_SIZES];
    weft_algo_t algo[WEFT_ALGO_COUNT];
    double t[MAX_SIZES][WEFT_ALGO_COUNT]; /* median seconds, INFINITY if it failed */
    weft_algo_t winner[MAX_SIZES], model[MAX_SIZES], choice[MAX_SIZES];
} tuned_t;

/* Time every algorithm of coll at every size. Collective over world. */
static int tune_coll(weft_coll_t coll, const opts_t *o, weft_comm_t *comm, MPI_Comm mc,
                     char *send, char *recv, const weft__cost_t *cost, tuned_t *r)
{
    int n = 0;
    const weft__algo_impl_t *const *list = weft__algo_list(coll, &n);
    memset(r, 0, sizeof *r);
    for (int i = 0; i < n; i++) {
        /* host buffers only: NCCL serves device buffers and is not timed here */
        if (list[i]->id == WEFT_ALGO_NCCL ||
            (list[i]->supports != NULL && !list[i]->supports(WEFT_FLOAT32, WEFT_SUM)))
            continue;
        /* nor an algorithm that cannot run on this communicator (hierarchical
         * on one node): forced, it would run and time the model's choice */
        weft_algo_t q = WEFT_ALGO_AUTO;
        weft_status_t st = weft_comm_set_algo(*comm, coll, list[i]->id);
        if (st == WEFT_SUCCESS) st = weft_query_algo(*comm, coll, 1024, WEFT_FLOAT32, &q);
        weft_comm_set_algo(*comm, coll, WEFT_ALGO_AUTO);
        if (st != WEFT_SUCCESS || q != list[i]->id) continue;
        r->algo[r->nalgo++] = list[i]->id;
    }
    if (r->nalgo == 0) return 0;
    if (coll == WEFT_COLL_BARRIER) {
        r->size[r->nsizes++] = 0;
    } else {
        for (size_t s = 4; s <= o->hi && r->nsizes < MAX_SIZES; s *= 2)
            if (s >= o->lo) r->size[r->nsizes++] = s;
    }
    double *rt = malloc(sizeof(double) * (size_t)o->rounds * WEFT_ALGO_COUNT);
    if (rt == NULL) return 1;
    for (int si = 0; si < r->nsizes; si++) {
        size_t s = r->size[si], count = s / 4;
        int iters = o->iters;
        /* fewer calls for large messages: about 256 MiB moved per timing at most */
        if (s > 0) {
            size_t cap = ((size_t)256 << 20) / (s * (size_t)size_);
            if ((size_t)iters > cap) iters = cap > 2 ? (int)cap : 2;
        }
        int failed[WEFT_ALGO_COUNT] = {0};
        for (int round = -1; round < o->rounds; round++) {
            for (int k = 0; k < r->nalgo; k++) {
                int ai = (k + (round > 0 ? round : 0)) % r->nalgo; /* rotate the order */
                double t = 0;
                int bad = failed[ai];
                if (!bad && weft_comm_set_algo(*comm, coll, r->algo[ai]) != WEFT_SUCCESS) bad = 1;
                if (MPI_Barrier(mc) != MPI_SUCCESS) { free(rt); return 1; }
                double t0 = MPI_Wtime();
                int reps = round < 0 ? o->warmup : iters;
                for (int it = 0; it < reps && !bad; it++)
                    if (call(coll, send, recv, count, *comm) != WEFT_SUCCESS) bad = 1;
                t = reps > 0 ? (MPI_Wtime() - t0) / reps : 0;
                double v[2] = {t, bad}, m[2];
                if (MPI_Allreduce(v, m, 2, MPI_DOUBLE, MPI_MAX, mc) != MPI_SUCCESS) { free(rt); return 1; }
                if (m[1] != 0 && !failed[ai]) {
                    failed[ai] = 1;
                    if (rank_ == 0)
                        fprintf(stderr, "weft-tune: %s/%s failed at %zu bytes; left out there\n",
                                weft__coll_name(coll), weft_algo_name(r->algo[ai]), s);
                    /* A failure on the engine is sticky: start over on a fresh communicator. */
                    int broken = weft_comm_get_error(*comm) != WEFT_SUCCESS, any = 0;
                    if (MPI_Allreduce(&broken, &any, 1, MPI_INT, MPI_MAX, mc) != MPI_SUCCESS) { free(rt); return 1; }
                    if (any) {
                        weft_comm_destroy(*comm);
                        *comm = NULL;
                        if (weft_comm_create(MPI_COMM_WORLD, NULL, comm) != WEFT_SUCCESS) { free(rt); return 1; }
                    }
                }
                if (round >= 0) rt[round * WEFT_ALGO_COUNT + ai] = m[0];
            }
        }
        double best = INFINITY, spread[WEFT_ALGO_COUNT] = {0};
        r->winner[si] = WEFT_ALGO_AUTO;
        int bi = -1;
        for (int a = 0; a < r->nalgo; a++) {
            double *col = malloc(sizeof(double) * (size_t)o->rounds);
            if (col == NULL) { free(rt); return 1; }
            for (int k = 0; k < o->rounds; k++) col[k] = rt[k * WEFT_ALGO_COUNT + a];
            r->t[si][a] = failed[a] ? INFINITY : median(col, o->rounds); /* sorts col */
            /* the spread of the middle half of the rounds: the noise of this machine */
            spread[a] = col[(3 * o->rounds) / 4 < o->rounds ? (3 * o->rounds) / 4 : o->rounds - 1] -
                        col[o->rounds / 4];
            free(col);
            if (r->t[si][a] < best) {
                best = r->t[si][a];
                bi = a;
                r->winner[si] = r->algo[a];
            }
        }
        r->model[si] = weft__select_model(coll, size_, s, WEFT_FLOAT32, cost, NULL);
        /* The tie set: algorithms within the margin of the winner, or within the
         * winner's own round-to-round spread. The choice among them, in order:
         * the cost model's choice, the previous size's choice (no flapping),
         * the first in registry order. Only a clear win overrides the model. */
        double limit = isfinite(best) ? best * (1.0 + o->margin / 100.0) + (bi >= 0 ? spread[bi] : 0)
                                      : INFINITY;
        int tied[WEFT_ALGO_COUNT] = {0}, first = -1, model_tied = 0, prev_tied = 0;
        for (int a = 0; a < r->nalgo; a++) {
            tied[a] = isfinite(r->t[si][a]) && r->t[si][a] <= limit;
            if (!tied[a]) continue;
            if (first < 0) first = a;
            if (r->algo[a] == r->model[si]) model_tied = 1;
            if (si > 0 && r->algo[a] == r->choice[si - 1]) prev_tied = 1;
        }
        if (model_tied) r->choice[si] = r->model[si];
        else if (prev_tied) r->choice[si] = r->choice[si - 1];
        else r->choice[si] = first >= 0 ? r->algo[first] : r->winner[si];
    }
    free(rt);
    weft_comm_set_algo(*comm, coll, WEFT_ALGO_AUTO);
    return 0;
}

static void print_coll(weft_coll_t coll, const tuned_t *r, const opts_t *o)
{
    if (!o->quiet) {
        printf("\n# %s on %d ranks: median latency (us); chosen: the winner unless it ties (within "
               "%.1f%% + the winner's spread over rounds) with the model's choice or the previous "
               "size's ('~')\n# %12s", weft__coll_name(coll), size_, o->margin, "size_bytes");
        for (int a = 0; a < r->nalgo; a++) printf(" %18s", weft_algo_name(r->algo[a]));
        printf("  %-18s %-18s %s\n", "winner", "model", "chosen");
        for (int si = 0; si < r->nsizes; si++) {
            printf("  %12zu", r->size[si]);
            for (int a = 0; a < r->nalgo; a++) {
                if (isfinite(r->t[si][a])) printf(" %18.2f", 1e6 * r->t[si][a]);
                else printf(" %18s", "failed");
            }
            const char *m = weft_algo_name(r->model[si]);
            printf("  %-18s %-18s %s%s\n", weft_algo_name(r->winner[si]), m ? m : "none",
                   weft_algo_name(r->choice[si]),
                   r->choice[si] != r->winner[si] ? " ~" : "");
        }
    }
    int nx = 0;
    for (int si = 1; si < r->nsizes; si++)
        if (r->choice[si] != r->choice[si - 1]) {
            printf("crossover %s: %s -> %s between %zu and %zu bytes\n", weft__coll_name(coll),
                   weft_algo_name(r->choice[si - 1]), weft_algo_name(r->choice[si]),
                   r->size[si - 1], r->size[si]);
            nx++;
        }
    if (nx == 0 && r->nsizes > 0 && r->choice[0] != WEFT_ALGO_AUTO)
        printf("crossover %s: none (%s throughout)\n", weft__coll_name(coll),
               weft_algo_name(r->choice[0]));
}

static void write_rules(FILE *f, weft_coll_t coll, const tuned_t *r, const opts_t *o)
{
    char who[16];
    if (o->any_size) snprintf(who, sizeof who, "*");
    else snprintf(who, sizeof who, "%d", size_);
    if (coll == WEFT_COLL_BARRIER) {
        if (r->nsizes && r->choice[0] != WEFT_ALGO_AUTO)
            fprintf(f, "rule barrier %s 0 inf %s\n", who, weft_algo_name(r->choice[0]));
        return;
    }
    int start = 0;
    for (int si = 0; si < r->nsizes; si++) {
        int last = si + 1 == r->nsizes || r->choice[si + 1] != r->choice[si];
        if (!last) continue;
        if (r->choice[si] != WEFT_ALGO_AUTO) {
            size_t lo = start == 0 ? 0 : r->size[start - 1] + 1;
            fprintf(f, "rule %s %s %zu %zu %s\n", weft__coll_name(coll), who, lo, r->size[si],
                    weft_algo_name(r->choice[si]));
        }
        start = si + 1;
    }
}

int main(int argc, char **argv)
{
    weft_init_params_t params = WEFT_INIT_PARAMS_INITIALIZER;
    params.argc = &argc;
    params.argv = &argv;
    weft_status_t st = weft_init(&params);
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "weft-tune: weft_init failed: %s\n", weft_strerror(st));
        return 1;
    }
    rank_ = weft__g.world_rank;
    size_ = weft__g.world_size;
    opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc == 1) { /* --help or --version */
        weft_finalize();
        return 0;
    }
    if (rc == 0 && size_ < 2) {
        if (rank_ == 0) fprintf(stderr, "weft-tune: run it under mpiexec with 2 or more ranks\n");
        rc = 2;
    }
    if (rc) {
        weft_finalize();
        return rc;
    }
    MPI_Comm mc = MPI_COMM_NULL;
    weft_comm_t comm = NULL;
    char *send = NULL, *recv = NULL;
    tuned_t *res = NULL;
    FILE *f = NULL;
    rc = 1;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &mc) != MPI_SUCCESS ||
        MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
        fprintf(stderr, "weft-tune: MPI_Comm_dup failed\n");
        goto out;
    }
    if ((st = weft_comm_create(MPI_COMM_WORLD, NULL, &comm)) != WEFT_SUCCESS) {
        fprintf(stderr, "weft-tune: weft_comm_create failed: %s\n", weft_strerror(st));
        goto out;
    }
    size_t bytes = o.hi * (size_t)size_;
    send = malloc(bytes);
    recv = malloc(bytes);
    res = calloc(WEFT_COLL_COUNT, sizeof *res);
    v_counts = malloc(sizeof(size_t) * (size_t)size_);
    v_displs = malloc(sizeof(size_t) * (size_t)size_);
    int ok = send && recv && res && v_counts && v_displs, all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, mc) != MPI_SUCCESS || !all) {
        if (rank_ == 0) fprintf(stderr, "weft-tune: cannot allocate 2 x %zu bytes\n", bytes);
        goto out;
    }
    for (size_t i = 0; i < bytes / 4; i++) ((float *)send)[i] = 1.0f + (float)(i % 7);
    memset(recv, 0, bytes);

    /* The machine the model reasons about: the comm's nodes */
    weft__comm_t *wc = NULL;
    if (weft__comm_get(comm, &wc) != WEFT_SUCCESS) wc = NULL;
    weft__cost_t cost;
    if (measure_cost(mc, wc, &cost) != 0) {
        if (rank_ == 0) fprintf(stderr, "weft-tune: measuring alpha/beta/gamma failed\n");
        goto out;
    }
    if (wc != NULL) {
        cost.nnodes = wc->cost.nnodes;
        cost.ppn = wc->cost.ppn;
        cost.alpha_shm = wc->cost.alpha_shm; /* the comm's shared-memory path, as it opened */
        cost.beta_shm = wc->cost.beta_shm;
    }
    if (rank_ == 0)
        printf("# weft-tune: %d ranks; alpha %.4g s, beta %.4g s/B (%.2f GB/s), gamma %.4g s/B\n"
               "# sizes %zu..%zu B, %d rounds x %d calls (median of rounds), margin %.1f%%\n",
               size_, cost.alpha, cost.beta, cost.beta > 0 ? 1e-9 / cost.beta : 0.0, cost.gamma,
               o.lo, o.hi, o.rounds, o.iters, o.margin);
    if (rank_ == 0 && cost.nnodes >= 2)
        printf("# %d nodes: alpha/beta above across nodes; inside a node alpha_node %.4g s, "
               "beta_node %.4g s/B%s\n", cost.nnodes, cost.alpha_node, cost.beta_node,
               cost.alpha_node > 0 ? "" : " (no node has two ranks: not measured)");
    for (int c = 0; c < WEFT_COLL_COUNT; c++) {
        if (!o.colls[c]) continue;
        if (tune_coll((weft_coll_t)c, &o, &comm, mc, send, recv, &cost, &res[c]) != 0) {
            if (rank_ == 0) fprintf(stderr, "weft-tune: tuning %s failed\n", weft__coll_name((weft_coll_t)c));
            goto out;
        }
        if (rank_ == 0) print_coll((weft_coll_t)c, &res[c], &o);
    }
    rc = 0;
    if (rank_ == 0 && o.out) {
        f = fopen(o.out, "w");
        if (f == NULL) {
            fprintf(stderr, "weft-tune: cannot write %s: %s\n", o.out, strerror(errno));
            rc = 1;
        } else {
            time_t now = time(NULL);
            char when[64];
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
            fprintf(f, "weft-tuning 1\n# written by weft-tune (Weft %s) on %s: %d ranks, sizes "
                       "%zu..%zu bytes,\n# %d rounds x %d calls, margin %.1f%%. Format: doc/tuning.md\n",
                    weft_version_string(), when, size_, o.lo, o.hi, o.rounds, o.iters, o.margin);
            fprintf(f, "alpha %.6e\nbeta %.6e\ngamma %.6e\n", cost.alpha, cost.beta, cost.gamma);
            if (cost.alpha_node > 0 && cost.beta_node > 0) /* inside a node (several nodes) */
                fprintf(f, "alpha_node %.6e\nbeta_node %.6e\n", cost.alpha_node, cost.beta_node);
            if (cost.alpha_shm > 0) /* the node's shared-memory path (this comm had it) */
                fprintf(f, "alpha_shm %.6e\nbeta_shm %.6e\n", cost.alpha_shm, cost.beta_shm);
            for (int c = 0; c < WEFT_COLL_COUNT; c++)
                if (o.colls[c]) write_rules(f, (weft_coll_t)c, &res[c], &o);
            if (ferror(f) | (fclose(f) != 0)) {
                fprintf(stderr, "weft-tune: writing %s failed\n", o.out);
                rc = 1;
            } else {
                printf("# wrote %s (use it with WEFT_TUNING_FILE=%s)\n", o.out, o.out);
            }
        }
    }
    if (MPI_Bcast(&rc, 1, MPI_INT, 0, mc) != MPI_SUCCESS) rc = 1;
out:
    fflush(stdout);
    if (comm) weft_comm_destroy(comm);
    if (mc != MPI_COMM_NULL) MPI_Comm_free(&mc);
    free(send);
    free(recv);
    free(res);
    free(v_counts);
    free(v_displs);
    st = weft_finalize();
    if (st != WEFT_SUCCESS && rc == 0) rc = 1;
    return rc;
}
