/*
 * weft_osu_coll - OSU-style latency of one Weft collective, with MPI's own
 * (on its own dup of MPI_COMM_WORLD) timed in the same run, interleaved.
 *
 *   mpiexec -n 4 weft_osu_coll --coll NAME [-m MIN:MAX] [-i ITERS] [-x WARMUP]
 *                              [-T TYPE] [-a ALGO] [--root R] [--csv FILE]
 *
 * NAME: reduce_scatter, allgather, bcast, reduce, alltoall, gather, scatter,
 * barrier, allgatherv, alltoallv, gatherv, scatterv (the vector forms with
 * every block of the same length at displacement rank x block, as OSU's
 * osu_allgatherv, osu_alltoallv, osu_gatherv and osu_scatterv run them). The thin programs weft_osu_<NAME> are this program with NAME
 * built in (-DBENCH_COLL=...). Sizes are bytes per rank's block (the result
 * block of reduce_scatter, the contribution of allgather/gather/alltoall
 * blocks/scatter blocks) and the whole buffer for bcast/reduce; barrier
 * prints one row with size 0.
 *
 * Output per size, as weft_osu_allreduce: Weft median, MPI median, ratio,
 * the algorithm Weft chose; CSV columns size_bytes,weft_us,mpi_us,ratio,algorithm.
 * --floor adds the memory floor of the call (bench_common.h), timed in the
 * same rounds: reduce_scatter and reduce add two vectors of the call's input
 * (reduce_scatter: all p blocks), allgather, bcast and alltoall copy the
 * call's output (allgather, alltoall: p blocks); gather, scatter and barrier
 * have none (a usage error).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "weft_cli.h"

typedef struct coll_desc {
    const char *name;
    weft_coll_t coll;
    const char *env;   /* WEFT_<COLL>_ALGO */
    int send_blocks;   /* send buffer blocks (p = size) */
    int recv_blocks;
    const char *osu;   /* OSU OMB 7's title of its benchmark of this collective */
    bench_floor_kind_t floor; /* --floor: ADD over the input, COPY of the output, NONE */
    int floor_blocks;  /* the blocks of `count` elements the floor covers (ONE or P) */
} coll_desc_t;

enum { ONE = 1, P = -1 };
static const coll_desc_t colls[] = {
    {"reduce_scatter", WEFT_COLL_REDUCE_SCATTER, "WEFT_REDUCE_SCATTER_ALGO", P, ONE,
     "OSU MPI Reduce_scatter Latency Test", BENCH_FLOOR_ADD, P},
    {"allgather", WEFT_COLL_ALLGATHER, "WEFT_ALLGATHER_ALGO", ONE, P, "OSU MPI Allgather Latency Test",
     BENCH_FLOOR_COPY, P},
    {"bcast", WEFT_COLL_BCAST, "WEFT_BCAST_ALGO", ONE, ONE, "OSU MPI Broadcast Latency Test",
     BENCH_FLOOR_COPY, ONE},
    {"reduce", WEFT_COLL_REDUCE, "WEFT_REDUCE_ALGO", ONE, ONE, "OSU MPI Reduce Latency Test",
     BENCH_FLOOR_ADD, ONE},
    {"alltoall", WEFT_COLL_ALLTOALL, "WEFT_ALLTOALL_ALGO", P, P,
     "OSU MPI All-to-All Personalized Exchange Latency Test", BENCH_FLOOR_COPY, P},
    {"gather", WEFT_COLL_GATHER, "WEFT_GATHER_ALGO", ONE, P, "OSU MPI Gather Latency Test",
     BENCH_FLOOR_NONE, ONE},
    {"scatter", WEFT_COLL_SCATTER, "WEFT_SCATTER_ALGO", P, ONE, "OSU MPI Scatter Latency Test",
     BENCH_FLOOR_NONE, ONE},
    {"barrier", WEFT_COLL_BARRIER, "WEFT_BARRIER_ALGO", ONE, ONE, "OSU MPI Barrier Latency Test",
     BENCH_FLOOR_NONE, ONE},
    {"allgatherv", WEFT_COLL_ALLGATHERV, "WEFT_ALLGATHERV_ALGO", ONE, P,
     "OSU MPI Allgatherv Latency Test", BENCH_FLOOR_COPY, P},
    {"alltoallv", WEFT_COLL_ALLTOALLV, "WEFT_ALLTOALLV_ALGO", P, P,
     "OSU MPI All-to-Allv Personalized Exchange Latency Test", BENCH_FLOOR_COPY, P},
    {"gatherv", WEFT_COLL_GATHERV, "WEFT_GATHERV_ALGO", ONE, P, "OSU MPI Gatherv Latency Test",
     BENCH_FLOOR_NONE, ONE},
    {"scatterv", WEFT_COLL_SCATTERV, "WEFT_SCATTERV_ALGO", P, ONE, "OSU MPI Scatterv Latency Test",
     BENCH_FLOOR_NONE, ONE},
};
#define NCOLLS (sizeof colls / sizeof colls[0])

typedef struct state {
    bench_ctx_t *b;
    const coll_desc_t *c;
    int root;
    weft_datatype_t dt;
    MPI_Datatype mdt;
    size_t count;
    void *wsend, *wrecv, *msend, *mrecv;
    int osu_mpi;       /* --osu=mpi: -c checks MPI's buffers, else Weft's */
    /* the vector forms' counts and displacements (p each), for v_count */
    size_t *wcounts, *wdispls, v_count;
    int *mcounts, *mdispls;
} state_t;

/* The vector forms' arrays for blocks of s->count elements (redone only
 * when the count changed, so not in the timed loop's steady state). */
static void v_layout(state_t *s)
{
    if (s->v_count == s->count) return;
    for (int r = 0; r < s->b->size; r++) {
        s->wcounts[r] = s->count;
        s->wdispls[r] = (size_t)r * s->count;
        s->mcounts[r] = (int)s->count;
        s->mdispls[r] = r * (int)s->count;
    }
    s->v_count = s->count;
}

typedef struct extra {
    const coll_desc_t *c;
    int root;
} extra_t;

static int extra_opt(void *ud, const char *name, const char *value)
{
    extra_t *e = ud;
    if (strcmp(name, "coll") == 0) {
        if (!value) return BENCH_OPT_NEEDS_VALUE;
        for (size_t i = 0; i < NCOLLS; i++)
            if (strcmp(value, colls[i].name) == 0) {
                e->c = &colls[i];
                return BENCH_OPT_OK;
            }
        return BENCH_OPT_BAD_VALUE;
    }
    if (strcmp(name, "root") == 0 || strcmp(name, "root-rank") == 0) { /* OSU: -k, --root-rank */
        long r;
        if (!value) return BENCH_OPT_NEEDS_VALUE;
        if (bench_parse_long(value, 0, &r) != 0 || r > 1 << 20) return BENCH_OPT_BAD_VALUE;
        e->root = (int)r;
        return BENCH_OPT_OK;
    }
    return BENCH_OPT_UNKNOWN;
}

static weft_status_t weft_call(state_t *s)
{
    weft_comm_t comm = s->b->comm;
    size_t n = s->count;
    v_layout(s);
    switch (s->c->coll) {
    case WEFT_COLL_REDUCE_SCATTER: return weft_reduce_scatter(s->wsend, s->wrecv, n, s->dt, WEFT_SUM, comm);
    case WEFT_COLL_ALLGATHER: return weft_allgather(s->wsend, s->wrecv, n, s->dt, comm);
    case WEFT_COLL_BCAST: return weft_bcast(s->wsend, n, s->dt, s->root, comm);
    case WEFT_COLL_REDUCE: return weft_reduce(s->wsend, s->wrecv, n, s->dt, WEFT_SUM, s->root, comm);
    case WEFT_COLL_ALLTOALL: return weft_alltoall(s->wsend, s->wrecv, n, s->dt, comm);
    case WEFT_COLL_GATHER: return weft_gather(s->wsend, s->wrecv, n, s->dt, s->root, comm);
    case WEFT_COLL_SCATTER: return weft_scatter(s->wsend, s->wrecv, n, s->dt, s->root, comm);
    case WEFT_COLL_BARRIER: return weft_barrier(comm);
    case WEFT_COLL_ALLGATHERV:
        return weft_allgatherv(s->wsend, n, s->wrecv, s->wcounts, s->wdispls, s->dt, comm);
    case WEFT_COLL_ALLTOALLV:
        return weft_alltoallv(s->wsend, s->wcounts, s->wdispls, s->wrecv, s->wcounts, s->wdispls,
                              s->dt, comm);
    case WEFT_COLL_GATHERV:
        return weft_gatherv(s->wsend, n, s->wrecv, s->wcounts, s->wdispls, s->dt, s->root, comm);
    case WEFT_COLL_SCATTERV:
        return weft_scatterv(s->wsend, s->wcounts, s->wdispls, s->wrecv, n, s->dt, s->root, comm);
    default: return WEFT_ERR_INVALID_ARG;
    }
}

static int mpi_call(state_t *s)
{
    MPI_Comm comm = s->b->mpi_comm;
    int n = (int)s->count;
    v_layout(s);
    switch (s->c->coll) {
    case WEFT_COLL_REDUCE_SCATTER: return MPI_Reduce_scatter_block(s->msend, s->mrecv, n, s->mdt, MPI_SUM, comm);
    case WEFT_COLL_ALLGATHER: return MPI_Allgather(s->msend, n, s->mdt, s->mrecv, n, s->mdt, comm);
    case WEFT_COLL_BCAST: return MPI_Bcast(s->msend, n, s->mdt, s->root, comm);
    case WEFT_COLL_REDUCE: return MPI_Reduce(s->msend, s->mrecv, n, s->mdt, MPI_SUM, s->root, comm);
    case WEFT_COLL_ALLTOALL: return MPI_Alltoall(s->msend, n, s->mdt, s->mrecv, n, s->mdt, comm);
    case WEFT_COLL_GATHER: return MPI_Gather(s->msend, n, s->mdt, s->mrecv, n, s->mdt, s->root, comm);
    case WEFT_COLL_SCATTER: return MPI_Scatter(s->msend, n, s->mdt, s->mrecv, n, s->mdt, s->root, comm);
    case WEFT_COLL_BARRIER: return MPI_Barrier(comm);
    case WEFT_COLL_ALLGATHERV:
        return MPI_Allgatherv(s->msend, n, s->mdt, s->mrecv, s->mcounts, s->mdispls, s->mdt, comm);
    case WEFT_COLL_ALLTOALLV:
        return MPI_Alltoallv(s->msend, s->mcounts, s->mdispls, s->mdt, s->mrecv, s->mcounts,
                             s->mdispls, s->mdt, comm);
    case WEFT_COLL_GATHERV:
        return MPI_Gatherv(s->msend, n, s->mdt, s->mrecv, s->mcounts, s->mdispls, s->mdt, s->root,
                           comm);
    case WEFT_COLL_SCATTERV:
        return MPI_Scatterv(s->msend, s->mcounts, s->mdispls, s->mdt, s->mrecv, n, s->mdt, s->root,
                            comm);
    default: return MPI_ERR_OTHER;
    }
}

static int run_weft(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    for (long i = 0; i < iters; i++) {
        weft_status_t st = weft_call(s);
        if (st != WEFT_SUCCESS) {
            bench_error(s->b, "weft_%s(count=%zu): %s (%s)", s->c->name, s->count, weft_status_name(st),
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
        int rc = mpi_call(s);
        if (rc != MPI_SUCCESS) {
            bench_error(s->b, "MPI %s(count=%zu) failed (code %d)", s->c->name, s->count, rc);
            return 1;
        }
    }
    return 0;
}

/* ---- --osu ---------------------------------------------------------------------- */
/* The elements of a block of `n` of this collective per side. */
static size_t blocks(int kind, int p) { return kind == P ? (size_t)p : 1; }

/* -c: iteration `iter`'s inputs written (every rank's send blocks; bcast:
 * the root's buffer, the others' cleared) and the outputs cleared. */
static int osu_prepare(void *ud, long iter)
{
    state_t *s = ud;
    const int me = s->b->rank, p = s->b->size;
    const size_t esz = weft_datatype_size(s->dt);
    void *snd = s->osu_mpi ? s->msend : s->wsend, *rcv = s->osu_mpi ? s->mrecv : s->wrecv;
    const size_t ns = s->count * blocks(s->c->send_blocks, p);
    const size_t nr = s->count * blocks(s->c->recv_blocks, p);
    if (s->c->coll == WEFT_COLL_BCAST && me != s->root) memset(snd, 0, ns * esz);
    else bench_fill_seed(snd, ns, s->dt, bench_seed(s->c->coll == WEFT_COLL_BCAST ? s->root : me, iter));
    memset(rcv, 0, nr * esz);
    return 0;
}

/* Sum over ranks of element i of their inputs. */
static double sum_over_ranks(const state_t *s, size_t i, long iter)
{
    double v = 0;
    for (int k = 0; k < s->b->size; k++) v += bench_value(i, bench_seed(k, iter), s->dt);
    return v;
}

/* -c: the elements of this rank's result that differ from what every
 * rank's inputs make them (computed here, from bench_value). */
static long osu_check(void *ud, long iter)
{
    state_t *s = ud;
    const int me = s->b->rank, p = s->b->size, root = s->root;
    const size_t n = s->count;
    const void *snd = s->osu_mpi ? s->msend : s->wsend, *rcv = s->osu_mpi ? s->mrecv : s->wrecv;
    long bad = 0;
    switch (s->c->coll) {
    case WEFT_COLL_REDUCE_SCATTER: /* my block of the sum */
        for (size_t i = 0; i < n; i++)
            bad += bench_get(rcv, i, s->dt) != sum_over_ranks(s, (size_t)me * n + i, iter);
        break;
    case WEFT_COLL_REDUCE:
        for (size_t i = 0; me == root && i < n; i++)
            bad += bench_get(rcv, i, s->dt) != sum_over_ranks(s, i, iter);
        break;
    case WEFT_COLL_BCAST:
        for (size_t i = 0; i < n; i++)
            bad += bench_get(snd, i, s->dt) != bench_value(i, bench_seed(root, iter), s->dt);
        break;
    case WEFT_COLL_ALLGATHER:
    case WEFT_COLL_ALLGATHERV:
    case WEFT_COLL_GATHER:
    case WEFT_COLL_GATHERV: /* block r: rank r's input */
        if ((s->c->coll == WEFT_COLL_GATHER || s->c->coll == WEFT_COLL_GATHERV) && me != root) break;
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < n; i++)
                bad += bench_get(rcv, (size_t)r * n + i, s->dt) != bench_value(i, bench_seed(r, iter), s->dt);
        break;
    case WEFT_COLL_ALLTOALL:
    case WEFT_COLL_ALLTOALLV: /* block r: block `me` of rank r's input */
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < n; i++)
                bad += bench_get(rcv, (size_t)r * n + i, s->dt) !=
                       bench_value((size_t)me * n + i, bench_seed(r, iter), s->dt);
        break;
    case WEFT_COLL_SCATTER:
    case WEFT_COLL_SCATTERV: /* block `me` of the root's input */
        for (size_t i = 0; i < n; i++)
            bad += bench_get(rcv, i, s->dt) != bench_value((size_t)me * n + i, bench_seed(root, iter), s->dt);
        break;
    default:
        break;
    }
    return bad;
}

/* The bytes nccl-tests' bandwidths count for a message of `bytes` (the -m
 * size): every rank's block for the collectives whose size is a block. */
static size_t total_bytes(const coll_desc_t *c, size_t bytes, int p, int osu)
{
    switch (c->coll) {
    case WEFT_COLL_REDUCE_SCATTER: return osu ? bytes : bytes * (size_t)p;
    case WEFT_COLL_ALLGATHER: case WEFT_COLL_ALLTOALL: case WEFT_COLL_GATHER:
    case WEFT_COLL_SCATTER: case WEFT_COLL_ALLGATHERV: case WEFT_COLL_ALLTOALLV:
    case WEFT_COLL_GATHERV: case WEFT_COLL_SCATTERV:
        return bytes * (size_t)p;
    default: return bytes;
    }
}

/* A bandwidth for the CSV: empty where there is none (the barrier). */
static const char *bw_text(char *buf, size_t cap, double v)
{
    if (isnan(v)) buf[0] = '\0';
    else snprintf(buf, cap, "%.6g", v);
    return buf;
}

/* OSU OMB 7's osu_<collective>: its title, datatype and column lines (the
 * barrier's rows have no size, as osu_barrier's), one row per size. Sizes are
 * OSU's: the whole vector for reduce_scatter (each rank's block is
 * size/ranks), else as in the default mode. CSV
 * size_bytes,avg_us,min_us,max_us,iterations,errors,algbw_GBps,busbw_GBps.
 * Returns 0, or 1 (a failed run or a failed validation). */
static int run_osu_mode(bench_ctx_t *b, const bench_opts_t *o, state_t *s, bench_csv_t *csv)
{
    const size_t esz = weft_datatype_size(o->dtype);
    const int is_barrier = s->c->coll == WEFT_COLL_BARRIER;
    const int rs = s->c->coll == WEFT_COLL_REDUCE_SCATTER;
    bench_osu_preamble(b, o, s->c->osu);
    if (!is_barrier) bench_osu_datatype(b, s->mdt, o->dtype);
    bench_osu_lat_header(b, o, !is_barrier);
    s->osu_mpi = o->osu == BENCH_OSU_MPI;
    bench_variant_t v = {s->osu_mpi ? "mpi" : "weft", s->osu_mpi ? run_mpi : run_weft, s, NULL};
    bench_osu_check_t chk = {osu_prepare, osu_check, s};
    for (size_t bytes = is_barrier ? 0 : o->min_bytes; is_barrier || bytes <= o->max_bytes; bytes *= 2) {
        s->count = is_barrier ? 0 : rs ? bytes / esz / (size_t)b->size : bytes / esz;
        if (is_barrier || s->count > 0) {
            bench_osu_result_t r;
            if (bench_run_osu(b, o, bytes ? bytes : 1, &v, &chk, 0, &r) != 0) {
                bench_error(b, "size %zu failed", bytes);
                return 1;
            }
            bench_osu_lat_row(b, o, !is_barrier, bytes, &r);
            double algbw, busbw;
            char a[32], u[32];
            bench_busbw(s->c->coll, total_bytes(s->c, bytes, b->size, 1), b->size, r.avg_us, &algbw,
                        &busbw);
            bench_csv_row(csv, "%zu,%.3f,%.3f,%.3f,%ld,%ld,%s,%s", bytes, r.avg_us, r.min_us, r.max_us,
                          r.iters, r.errors, bw_text(a, sizeof a, algbw), bw_text(u, sizeof u, busbw));
            if (r.errors > 0) {
                bench_osu_validation_failed(b, bytes);
                return 1;
            }
            bench_progress(b, "%s --osu: %zu bytes done", b->prog, bytes);
        }
        if (is_barrier || bytes > o->max_bytes / 2) break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    extra_t e = {NULL, 0};
    static const bench_short_t shorts[] = {{'k', "root-rank"}, {0, NULL}};
#ifdef BENCH_COLL
    for (size_t i = 0; i < NCOLLS; i++)
        if (strcmp(colls[i].name, BENCH_COLL) == 0) e.c = &colls[i];
#endif
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
#ifdef BENCH_COLL
    bench_spec_t spec = {.prog = "weft_osu_" BENCH_COLL,
#else
    bench_spec_t spec = {.prog = "weft_osu_coll",
#endif
                         .what = "Latency of a Weft collective and of MPI's own in the same run "
                                 "(interleaved, median over rounds).",
                         .extra_usage = "  --coll NAME   reduce_scatter, allgather, bcast, reduce, alltoall, gather,\n"
                                        "                scatter, barrier, allgatherv, alltoallv, gatherv or\n"
                                        "                scatterv\n"
                                        "  --root R, --root-rank R, -k R\n"
                                        "                root of bcast/reduce/gather/scatter/gatherv/scatterv\n"
                                        "                (default 0)\n",
                         .extra = extra_opt,
                         .extra_ud = &e,
                         .osu = 1,
                         .shorts = shorts,
                         .floor = "                       reduce_scatter: c[i] = a[i] + b[i] in the datatype (-T)\n"
                                  "                       over the call's input, p blocks (p x Size bytes);\n"
                                  "                       reduce: the same over the Size-byte vector; a plain\n"
                                  "                       loop the compiler vectorises (float16/bfloat16: a\n"
                                  "                       byte copy of those bytes instead);\n"
                                  "                       allgather, alltoall: memcpy of the call's output, p\n"
                                  "                       blocks (p x Size bytes); bcast: memcpy of Size bytes;\n"
                                  "                       gather, scatter, barrier: none (usage error)\n"};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    if (e.c == NULL || e.root >= b.size) {
        if (b.rank == 0)
            fprintf(stderr, "%s: error: %s\n", spec.prog,
                    e.c ? "--root must be < the number of ranks" : "--coll NAME is required");
        bench_usage(&b, &spec, stderr);
        return bench_finalize(&b, BENCH_PARSE_USAGE);
    }
    if (bench_apply_algo(&b, &o, e.c->coll) != 0) return bench_finalize(&b, BENCH_PARSE_USAGE);
    if (o.floor && e.c->floor == BENCH_FLOOR_NONE) {
        if (b.rank == 0)
            weft_cli_usage_error(spec.prog, "--floor: %s has no memory floor (reduce_scatter, "
                                 "reduce, allgather, bcast and alltoall have one)", e.c->name);
        return bench_finalize(&b, BENCH_PARSE_USAGE);
    }
    if ((o.validate && e.c->coll == WEFT_COLL_BARRIER) ||
        (o.osu == BENCH_OSU_MPI && bench_mpi_dtype(o.dtype) == MPI_DATATYPE_NULL)) {
        if (b.rank == 0)
            weft_cli_usage_error(spec.prog, "%s", o.validate && e.c->coll == WEFT_COLL_BARRIER
                                 ? "-c: a barrier has no data to check (OSU's osu_barrier has no -c)"
                                 : "--osu=mpi: MPI has no such datatype (-T)");
        return bench_finalize(&b, BENCH_PARSE_USAGE);
    }

    state_t s = {.b = &b, .c = e.c, .root = e.root, .dt = o.dtype, .mdt = bench_mpi_dtype(o.dtype)};
    bench_floor_t fl = {0};
    const size_t esz = weft_datatype_size(o.dtype);
    const int have_mpi = s.mdt != MPI_DATATYPE_NULL;
    int is_barrier = e.c->coll == WEFT_COLL_BARRIER;
    size_t maxcount = is_barrier ? 1 : o.max_bytes / esz;
    if (maxcount > (size_t)INT32_MAX) {
        if (b.rank == 0) fprintf(stderr, "error: -m MAX too large for MPI's int count\n");
        return bench_finalize(&b, 2);
    }
    size_t sb = maxcount * esz * (size_t)(e.c->send_blocks == P ? b.size : 1);
    size_t rb = maxcount * esz * (size_t)(e.c->recv_blocks == P ? b.size : 1);
    s.wsend = bench_alloc(sb);
    s.wrecv = bench_alloc(rb);
    s.msend = bench_alloc(sb);
    s.mrecv = bench_alloc(rb);
    s.wcounts = malloc(sizeof(size_t) * (size_t)b.size);
    s.wdispls = malloc(sizeof(size_t) * (size_t)b.size);
    s.mcounts = malloc(sizeof(int) * (size_t)b.size);
    s.mdispls = malloc(sizeof(int) * (size_t)b.size);
    s.v_count = SIZE_MAX; /* none yet */
    int ok = s.wsend && s.wrecv && s.msend && s.mrecv && s.wcounts && s.wdispls && s.mcounts &&
             s.mdispls, all_ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS || !all_ok) {
        bench_error(&b, "cannot allocate buffers of %zu and %zu bytes", sb, rb);
        rc = 1;
        goto out_free;
    }
    bench_fill(s.wsend, sb / esz, o.dtype, b.rank);
    bench_fill(s.msend, sb / esz, o.dtype, b.rank);
    /* --floor: its buffers, for the floor's bytes at the largest size */
    const size_t fblocks = blocks(e.c->floor_blocks, b.size);
    if (o.floor && bench_floor_init(&b, &fl, e.c->floor, o.dtype, maxcount * esz * fblocks) != 0) {
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
    char title[128];
    snprintf(title, sizeof title, "Weft %s latency test (weft_osu_%s)", e.c->name, e.c->name);
    bench_print_header(&b, &o, title, e.c->env);
    if (!have_mpi)
        bench_printf(&b, "# MPI has no %s datatype: no MPI baseline\n", weft_datatype_name(o.dtype));
    if (o.floor) {
        bench_floor_header(&b, &fl,
                           e.c->floor == BENCH_FLOOR_ADD
                               ? (e.c->floor_blocks == P ? "the call's input, p blocks (p x Size bytes)"
                                              : "the call's input, the Size-byte vector")
                               : (e.c->floor_blocks == P ? "the call's output, p blocks (p x Size bytes)"
                                              : "the call's output, Size bytes"));
        bench_printf(&b, "%-10s%18s%18s%12s%18s%12s  %s\n", "# Size", "Avg Latency(us)",
                     "MPI Latency(us)", "Weft/MPI", "Floor(us)", "Weft/Floor", "Algorithm");
    } else {
        bench_printf(&b, "%-10s%18s%18s%12s  %s\n", "# Size", "Avg Latency(us)",
                     "MPI Latency(us)", "Weft/MPI", "Algorithm");
    }

    rc = 0;
    for (size_t bytes = is_barrier ? 0 : o.min_bytes; is_barrier || bytes <= o.max_bytes; bytes *= 2) {
        if (is_barrier || bytes >= esz) {
            s.count = bytes / esz;
            weft_algo_t algo = WEFT_ALGO_AUTO;
            weft_status_t st = weft_query_algo(b.comm, e.c->coll, s.count, o.dtype, &algo);
            const char *aname = st == WEFT_SUCCESS && weft_algo_name(algo) ? weft_algo_name(algo) : "?";
            bench_variant_t v[3] = {{"weft", run_weft, &s, NULL}, {"mpi", run_mpi, &s, NULL}};
            bench_result_t r[3];
            int nv = have_mpi ? 2 : 1;
            const int ifl = nv; /* --floor: its result's index */
            if (o.floor) {
                fl.bytes = bytes * fblocks;
                v[nv++] = (bench_variant_t){"floor", bench_floor_run, &fl, NULL};
            }
            bench_timing_t tm = bench_timing_for(&o, bytes ? bytes : 1);
            if (bench_run_interleaved(&b, &tm, v, nv, r) != 0) {
                bench_error(&b, "size %zu failed", bytes);
                rc = 1;
                break;
            }
            double wus = r[0].median_us, mus = have_mpi ? r[1].median_us : NAN;
            double ratio = have_mpi && mus > 0 ? wus / mus : NAN;
            double walg, wbus, malg, mbus;
            char t[4][32];
            size_t total = total_bytes(e.c, bytes, b.size, 0);
            bench_busbw(e.c->coll, total, b.size, wus, &walg, &wbus);
            bench_busbw(e.c->coll, total, b.size, mus, &malg, &mbus);
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
                bench_csv_row(&csv, "%zu,%.3f,%.3f,%.4f,%s,%s,%s,%s,%s%s", bytes, wus, mus, ratio,
                              aname, bw_text(t[0], 32, walg), bw_text(t[1], 32, wbus),
                              bw_text(t[2], 32, malg), bw_text(t[3], 32, mbus), fcsv);
            } else {
                bench_printf(&b, "%-10zu%18.2f%18s%12s%s  %s\n", bytes, wus, "n/a", "n/a", ftab,
                             aname);
                bench_csv_row(&csv, "%zu,%.3f,,,%s,%s,%s,,%s", bytes, wus, aname,
                              bw_text(t[0], 32, walg), bw_text(t[1], 32, wbus), fcsv);
            }
            bench_progress(&b, "weft_osu_%s: %zu bytes done", e.c->name, bytes);
        }
        if (is_barrier || bytes > o.max_bytes / 2) break;
    }
    if (bench_csv_close(&csv) != 0) rc = 1;

out_free:
    free(s.wsend);
    free(s.wrecv);
    free(s.msend);
    free(s.mrecv);
    free(s.wcounts);
    free(s.wdispls);
    free(s.mcounts);
    free(s.mdispls);
    bench_floor_free(&fl);
    return bench_finalize(&b, rc);
}
