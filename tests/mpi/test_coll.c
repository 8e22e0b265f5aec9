/*
 * test_coll.c - every collective other than allreduce, compared with MPI's
 * own on MPI_COMM_WORLD: reduce_scatter, allgather, bcast, reduce, alltoall,
 * gather, scatter (blocking, nonblocking and in place), each with every
 * algorithm that serves it (the library's table, found and forced with
 * weft_comm_set_algo) and with the
 * automatic choice, for several counts, datatypes, ops and roots; several
 * nonblocking collectives in flight at once; a barrier that must hold back
 * every rank until the slowest arrives; and bad arguments refused with the
 * documented status. Runs under mpiexec -n 1..4.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"

static const size_t counts[] = {0, 1, 5, 33, 1000, 20011};
#define NCOUNTS (sizeof counts / sizeof counts[0])

typedef struct {
    weft_datatype_t dt;
    weft_op_t op;
} dtop_t;
static const dtop_t dtops[] = {
    {WEFT_INT32, WEFT_SUM}, {WEFT_FLOAT32, WEFT_SUM}, {WEFT_FLOAT64, WEFT_MAX},
    {WEFT_INT64, WEFT_MIN}, {WEFT_FLOAT32, WEFT_AVG}, {WEFT_UINT8, WEFT_BXOR},
};
#define NDTOPS (sizeof dtops / sizeof dtops[0])

/* Algorithms to force per collective, AUTO (the selection's choice) first:
 * every algorithm the library's table has for the collective, found through
 * the public API (weft_comm_set_algo accepts exactly those; find_algos). */
static struct {
    weft_algo_t a[WEFT_ALGO_COUNT];
    size_t n;
} algos[WEFT_COLL_COUNT];

/* The i-th algorithm of coll's list, wrapping (gather and scatter share a loop). */
static weft_algo_t algo_at(weft_coll_t coll, size_t i) { return algos[coll].a[i % algos[coll].n]; }

static void find_algos(mt_ctx_t *t)
{
    const int hier = mt_hier_runs(t); /* collective: every rank, once */
    const int shm = mt_shm_runs(t);
    for (int c = 0; c < WEFT_COLL_COUNT; c++) {
        algos[c].a[0] = WEFT_ALGO_AUTO;
        algos[c].n = 1;
        for (int a = WEFT_ALGO_AUTO + 1; a < WEFT_ALGO_COUNT; a++) {
            weft_status_t st = weft_comm_set_algo(t->comm, (weft_coll_t)c, (weft_algo_t)a);
            if (st == WEFT_SUCCESS) algos[c].a[algos[c].n++] = (weft_algo_t)a;
            else MT_STATUS(t, st, WEFT_ERR_ALGORITHM, "weft_comm_set_algo of an algorithm not for it");
            /* A hierarchical algorithm runs where the comm spans uniform
             * nodes (mt_hier_runs), and gives way to the cost model elsewhere. */
            weft_algo_t q = WEFT_ALGO_AUTO;
            if (st == WEFT_SUCCESS && a == WEFT_ALGO_HIERARCHICAL &&
                MT_STATUS(t, weft_query_algo(t->comm, (weft_coll_t)c, 1 << 16, WEFT_FLOAT32, &q),
                          WEFT_SUCCESS, "weft_query_algo"))
                MT_CHECK(t, (q == WEFT_ALGO_HIERARCHICAL) == (hier != 0),
                         "collective %d forced hierarchical: query gives %s (runs: %d)", c,
                         weft_algo_name(q), hier);
            /* so does the shared-memory path, where every rank shares one node */
            if (st == WEFT_SUCCESS && a == WEFT_ALGO_SHM &&
                MT_STATUS(t, weft_query_algo(t->comm, (weft_coll_t)c, 1 << 16, WEFT_FLOAT32, &q),
                          WEFT_SUCCESS, "weft_query_algo"))
                MT_CHECK(t, (q == WEFT_ALGO_SHM) == (shm != 0),
                         "collective %d forced shm: query gives %s (runs: %d)", c,
                         weft_algo_name(q), shm);
        }
        MT_STATUS(t, weft_comm_set_algo(t->comm, (weft_coll_t)c, WEFT_ALGO_AUTO), WEFT_SUCCESS,
                  "weft_comm_set_algo(auto)");
        MT_CHECK(t, algos[c].n >= 2, "collective %d: no algorithm accepted", c);
    }
}



static double rtol_of(weft_datatype_t dt) { return mt_dtype_is_float(dt) ? 1e-5 : 0.0; }

/* ref[i] = ref[i] / p for AVG (integer: truncation, as the library documents). */
static void avg_ref(void *ref, size_t n, weft_datatype_t dt, int p)
{
    for (size_t i = 0; i < n; i++) {
        double v = mt_get(ref, i, dt) / p;
        if (!mt_dtype_is_float(dt)) v = (double)(long long)v;
        mt_set(ref, i, dt, v);
    }
}

static void test_reduce_scatter(mt_ctx_t *t)
{
    int p = t->size;
    for (size_t a = 0; a < algos[WEFT_COLL_REDUCE_SCATTER].n; a++) {
        MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_REDUCE_SCATTER, algo_at(WEFT_COLL_REDUCE_SCATTER, a)),
                  WEFT_SUCCESS, "set_algo reduce_scatter");
        for (size_t d = 0; d < NDTOPS; d++)
            for (size_t ci = 0; ci < NCOUNTS; ci++)
                for (int mode = 0; mode < 3; mode++) { /* 0 blocking, 1 nonblocking, 2 in place */
                    weft_datatype_t dt = dtops[d].dt;
                    weft_op_t op = dtops[d].op;
                    size_t n = counts[ci], es = mt_dtype_size(dt);
                    char what[128];
                    snprintf(what, sizeof what, "reduce_scatter %s %s n=%zu algo=%s mode=%d",
                             weft_datatype_name(dt), weft_op_name(op), n,
                             weft_algo_name(algo_at(WEFT_COLL_REDUCE_SCATTER, a)), mode);
                    char *in = mt_xmalloc(t, n * p * es), *out = mt_xmalloc(t, n * p * es),
                         *ref = mt_xmalloc(t, n * es);
                    mt_fill(in, n * p, dt, op, t->rank, 11 + ci);
                    MPI_Reduce_scatter_block(in, ref, (int)n, mt_mpi_dtype(dt), mt_mpi_op(op),
                                             MPI_COMM_WORLD);
                    if (op == WEFT_AVG) avg_ref(ref, n, dt, p);
                    weft_request_t req = WEFT_REQUEST_NULL;
                    weft_status_t st;
                    if (mode == 2) {
                        memcpy(out, in, n * p * es);
                        st = weft_reduce_scatter(WEFT_IN_PLACE, out, n, dt, op, t->comm);
                    } else if (mode == 1) {
                        st = weft_ireduce_scatter(in, out, n, dt, op, t->comm, &req);
                    } else {
                        st = weft_reduce_scatter(in, out, n, dt, op, t->comm);
                    }
                    if (mt_call_done(t, st, mode == 1, &req, what)) mt_compare(t, out, ref, n, dt, rtol_of(dt), what);
                    free(in), free(out), free(ref);
                }
    }
    weft_comm_set_algo(t->comm, WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_AUTO);
}

static void test_allgather(mt_ctx_t *t)
{
    int p = t->size;
    for (size_t a = 0; a < algos[WEFT_COLL_ALLGATHER].n; a++) {
        MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_ALLGATHER, algo_at(WEFT_COLL_ALLGATHER, a)),
                  WEFT_SUCCESS, "set_algo allgather");
        for (size_t ci = 0; ci < NCOUNTS; ci++)
            for (int mode = 0; mode < 3; mode++) {
                weft_datatype_t dt = ci % 2 ? WEFT_FLOAT64 : WEFT_INT32;
                size_t n = counts[ci], es = mt_dtype_size(dt);
                char what[128];
                snprintf(what, sizeof what, "allgather %s n=%zu algo=%s mode=%d", weft_datatype_name(dt),
                         n, weft_algo_name(algo_at(WEFT_COLL_ALLGATHER, a)), mode);
                char *in = mt_xmalloc(t, n * es), *out = mt_xmalloc(t, n * p * es), *ref = mt_xmalloc(t, n * p * es);
                mt_fill(in, n, dt, WEFT_MAX, t->rank, 3 + ci);
                MPI_Allgather(in, (int)n, mt_mpi_dtype(dt), ref, (int)n, mt_mpi_dtype(dt), MPI_COMM_WORLD);
                weft_request_t req = WEFT_REQUEST_NULL;
                weft_status_t st;
                if (mode == 2) {
                    memcpy(out + (size_t)t->rank * n * es, in, n * es);
                    st = weft_allgather(WEFT_IN_PLACE, out, n, dt, t->comm);
                } else if (mode == 1) {
                    st = weft_iallgather(in, out, n, dt, t->comm, &req);
                } else {
                    st = weft_allgather(in, out, n, dt, t->comm);
                }
                if (mt_call_done(t, st, mode == 1, &req, what)) mt_compare(t, out, ref, n * p, dt, 0.0, what);
                free(in), free(out), free(ref);
            }
    }
    weft_comm_set_algo(t->comm, WEFT_COLL_ALLGATHER, WEFT_ALGO_AUTO);
}

static void test_bcast(mt_ctx_t *t)
{
    for (size_t a = 0; a < algos[WEFT_COLL_BCAST].n; a++) {
        MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_BCAST, algo_at(WEFT_COLL_BCAST, a)),
                  WEFT_SUCCESS, "set_algo bcast");
        for (size_t ci = 0; ci < NCOUNTS; ci++)
            for (int ri = 0; ri < (t->size > 1 ? 2 : 1); ri++)
                for (int nb = 0; nb < 2; nb++) {
                    int root = ri ? t->size - 1 : 0;
                    weft_datatype_t dt = ci % 2 ? WEFT_FLOAT32 : WEFT_UINT8;
                    size_t n = counts[ci] + (size_t)root, es = mt_dtype_size(dt);
                    char what[128];
                    snprintf(what, sizeof what, "bcast %s n=%zu root=%d algo=%s nb=%d",
                             weft_datatype_name(dt), n, root, weft_algo_name(algo_at(WEFT_COLL_BCAST, a)), nb);
                    char *buf = mt_xmalloc(t, n * es), *ref = mt_xmalloc(t, n * es);
                    mt_fill(buf, n, dt, WEFT_BXOR, t->rank, 5 + ci);
                    memcpy(ref, buf, n * es);
                    MPI_Bcast(ref, (int)n, mt_mpi_dtype(dt), root, MPI_COMM_WORLD);
                    weft_request_t req = WEFT_REQUEST_NULL;
                    weft_status_t st = nb ? weft_ibcast(buf, n, dt, root, t->comm, &req)
                                          : weft_bcast(buf, n, dt, root, t->comm);
                    if (mt_call_done(t, st, nb, &req, what)) mt_compare(t, buf, ref, n, dt, 0.0, what);
                    free(buf), free(ref);
                }
    }
    weft_comm_set_algo(t->comm, WEFT_COLL_BCAST, WEFT_ALGO_AUTO);
}

static void test_reduce(mt_ctx_t *t)
{
    for (size_t a = 0; a < algos[WEFT_COLL_REDUCE].n; a++) {
        MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_REDUCE, algo_at(WEFT_COLL_REDUCE, a)),
                  WEFT_SUCCESS, "set_algo reduce");
        for (size_t d = 0; d < NDTOPS; d++)
            for (size_t ci = 0; ci < NCOUNTS; ci++)
                for (int mode = 0; mode < 3; mode++) {
                    int root = (int)((d + ci) % (size_t)t->size);
                    weft_datatype_t dt = dtops[d].dt;
                    weft_op_t op = dtops[d].op;
                    size_t n = counts[ci], es = mt_dtype_size(dt);
                    char what[128];
                    snprintf(what, sizeof what, "reduce %s %s n=%zu root=%d algo=%s mode=%d",
                             weft_datatype_name(dt), weft_op_name(op), n, root,
                             weft_algo_name(algo_at(WEFT_COLL_REDUCE, a)), mode);
                    char *in = mt_xmalloc(t, n * es), *out = mt_xmalloc(t, n * es), *ref = mt_xmalloc(t, n * es);
                    mt_fill(in, n, dt, op, t->rank, 17 + ci);
                    MPI_Reduce(in, ref, (int)n, mt_mpi_dtype(dt), mt_mpi_op(op), root, MPI_COMM_WORLD);
                    if (op == WEFT_AVG && t->rank == root) avg_ref(ref, n, dt, t->size);
                    weft_request_t req = WEFT_REQUEST_NULL;
                    weft_status_t st;
                    if (mode == 2 && t->rank == root) {
                        memcpy(out, in, n * es);
                        st = weft_reduce(WEFT_IN_PLACE, out, n, dt, op, root, t->comm);
                    } else if (mode == 1) {
                        st = weft_ireduce(in, out, n, dt, op, root, t->comm, &req);
                    } else {
                        st = weft_reduce(in, t->rank == root ? out : NULL, n, dt, op, root, t->comm);
                    }
                    if (mt_call_done(t, st, mode == 1, &req, what) && t->rank == root)
                        mt_compare(t, out, ref, n, dt, rtol_of(dt), what);
                    free(in), free(out), free(ref);
                }
    }
    weft_comm_set_algo(t->comm, WEFT_COLL_REDUCE, WEFT_ALGO_AUTO);
}

static void test_alltoall(mt_ctx_t *t)
{
    int p = t->size;
    for (size_t a = 0; a < algos[WEFT_COLL_ALLTOALL].n; a++) {
        weft_comm_set_algo(t->comm, WEFT_COLL_ALLTOALL, algo_at(WEFT_COLL_ALLTOALL, a));
        for (size_t ci = 0; ci < NCOUNTS; ci++)
            for (int mode = 0; mode < 3; mode++) {
                weft_datatype_t dt = WEFT_INT64;
                size_t n = counts[ci], es = mt_dtype_size(dt);
                char what[128];
                snprintf(what, sizeof what, "alltoall n=%zu algo=%s mode=%d", n,
                         weft_algo_name(algo_at(WEFT_COLL_ALLTOALL, a)), mode);
                char *in = mt_xmalloc(t, n * p * es), *out = mt_xmalloc(t, n * p * es), *ref = mt_xmalloc(t, n * p * es);
                mt_fill(in, n * p, dt, WEFT_MAX, t->rank, 23 + ci);
                MPI_Alltoall(in, (int)n, MPI_INT64_T, ref, (int)n, MPI_INT64_T, MPI_COMM_WORLD);
                weft_request_t req = WEFT_REQUEST_NULL;
                weft_status_t st;
                if (mode == 2) {
                    memcpy(out, in, n * p * es);
                    st = weft_alltoall(WEFT_IN_PLACE, out, n, dt, t->comm);
                } else if (mode == 1) {
                    st = weft_ialltoall(in, out, n, dt, t->comm, &req);
                } else {
                    st = weft_alltoall(in, out, n, dt, t->comm);
                }
                if (mt_call_done(t, st, mode == 1, &req, what)) mt_compare(t, out, ref, n * p, dt, 0.0, what);
                free(in), free(out), free(ref);
            }
    }
    weft_comm_set_algo(t->comm, WEFT_COLL_ALLTOALL, WEFT_ALGO_AUTO);
}

static void test_gather_scatter(mt_ctx_t *t)
{
    int p = t->size;
    size_t ngs = algos[WEFT_COLL_GATHER].n > algos[WEFT_COLL_SCATTER].n ? algos[WEFT_COLL_GATHER].n
                                                                       : algos[WEFT_COLL_SCATTER].n;
    for (size_t a = 0; a < ngs; a++) {
        weft_comm_set_algo(t->comm, WEFT_COLL_GATHER, algo_at(WEFT_COLL_GATHER, a));
        weft_comm_set_algo(t->comm, WEFT_COLL_SCATTER, algo_at(WEFT_COLL_SCATTER, a));
        for (size_t ci = 0; ci < NCOUNTS; ci++)
            for (int mode = 0; mode < 3; mode++) {
                int root = (int)(ci % (size_t)p);
                weft_datatype_t dt = WEFT_FLOAT32;
                size_t n = counts[ci], es = mt_dtype_size(dt);
                int me_root = t->rank == root;
                char what[128];
                char *in = mt_xmalloc(t, n * p * es), *out = mt_xmalloc(t, n * p * es), *ref = mt_xmalloc(t, n * p * es);
                weft_request_t req = WEFT_REQUEST_NULL;
                weft_status_t st;

                /* gather */
                snprintf(what, sizeof what, "gather n=%zu root=%d algo=%s mode=%d", n, root,
                         weft_algo_name(algo_at(WEFT_COLL_GATHER, a)), mode);
                mt_fill(in, n, dt, WEFT_SUM, t->rank, 29 + ci);
                MPI_Gather(in, (int)n, MPI_FLOAT, ref, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD);
                if (mode == 2 && me_root) {
                    memcpy(out + (size_t)root * n * es, in, n * es);
                    st = weft_gather(WEFT_IN_PLACE, out, n, dt, root, t->comm);
                } else if (mode == 1) {
                    st = weft_igather(in, out, n, dt, root, t->comm, &req);
                } else {
                    st = weft_gather(in, me_root ? out : NULL, n, dt, root, t->comm);
                }
                if (mt_call_done(t, st, mode == 1, &req, what) && me_root)
                    mt_compare(t, out, ref, n * p, dt, 0.0, what);

                /* scatter */
                snprintf(what, sizeof what, "scatter n=%zu root=%d algo=%s mode=%d", n, root,
                         weft_algo_name(algo_at(WEFT_COLL_SCATTER, a)), mode);
                mt_fill(in, n * p, dt, WEFT_SUM, t->rank, 31 + ci);
                MPI_Scatter(in, (int)n, MPI_FLOAT, ref, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD);
                if (mode == 2 && me_root) {
                    st = weft_scatter(in, (void *)WEFT_IN_PLACE, n, dt, root, t->comm);
                    if (mt_call_done(t, st, 0, &req, what))
                        mt_compare(t, in + (size_t)root * n * es, ref, n, dt, 0.0, what);
                } else {
                    st = mode == 1 ? weft_iscatter(me_root ? in : NULL, out, n, dt, root, t->comm, &req)
                                   : weft_scatter(me_root ? in : NULL, out, n, dt, root, t->comm);
                    if (mt_call_done(t, st, mode == 1, &req, what)) mt_compare(t, out, ref, n, dt, 0.0, what);
                }
                free(in), free(out), free(ref);
            }
    }
    weft_comm_set_algo(t->comm, WEFT_COLL_GATHER, WEFT_ALGO_AUTO);
    weft_comm_set_algo(t->comm, WEFT_COLL_SCATTER, WEFT_ALGO_AUTO);
}

/* Several different nonblocking collectives in flight at once. */
static void test_many_inflight(mt_ctx_t *t)
{
    int p = t->size;
    enum { N = 4099 };
    int *bc = mt_xmalloc(t, N * sizeof(int)), *bc_ref = mt_xmalloc(t, N * sizeof(int));
    float *rs_in = mt_xmalloc(t, (size_t)N * p * sizeof(float)), *rs_out = mt_xmalloc(t, N * sizeof(float)),
          *rs_ref = mt_xmalloc(t, N * sizeof(float));
    double *ag_in = mt_xmalloc(t, N * sizeof(double)), *ag_out = mt_xmalloc(t, (size_t)N * p * sizeof(double)),
           *ag_ref = mt_xmalloc(t, (size_t)N * p * sizeof(double));
    mt_fill(bc, N, WEFT_INT32, WEFT_SUM, t->rank, 41);
    memcpy(bc_ref, bc, N * sizeof(int));
    mt_fill(rs_in, (size_t)N * p, WEFT_FLOAT32, WEFT_SUM, t->rank, 42);
    mt_fill(ag_in, N, WEFT_FLOAT64, WEFT_SUM, t->rank, 43);
    MPI_Bcast(bc_ref, N, MPI_INT, p - 1, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(rs_in, rs_ref, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allgather(ag_in, N, MPI_DOUBLE, ag_ref, N, MPI_DOUBLE, MPI_COMM_WORLD);
    weft_request_t reqs[4];
    MT_STATUS(t, weft_ibcast(bc, N, WEFT_INT32, p - 1, t->comm, &reqs[0]), WEFT_SUCCESS, "ibcast");
    MT_STATUS(t, weft_ireduce_scatter(rs_in, rs_out, N, WEFT_FLOAT32, WEFT_SUM, t->comm, &reqs[1]),
              WEFT_SUCCESS, "ireduce_scatter");
    MT_STATUS(t, weft_iallgather(ag_in, ag_out, N, WEFT_FLOAT64, t->comm, &reqs[2]), WEFT_SUCCESS,
              "iallgather");
    MT_STATUS(t, weft_ibarrier(t->comm, &reqs[3]), WEFT_SUCCESS, "ibarrier");
    if (MT_STATUS(t, weft_waitall(4, reqs), WEFT_SUCCESS, "waitall")) {
        mt_compare(t, bc, bc_ref, N, WEFT_INT32, 0.0, "inflight bcast");
        mt_compare(t, rs_out, rs_ref, N, WEFT_FLOAT32, 1e-6, "inflight reduce_scatter");
        mt_compare(t, ag_out, ag_ref, (size_t)N * p, WEFT_FLOAT64, 0.0, "inflight allgather");
    }
    free(bc), free(bc_ref), free(rs_in), free(rs_out), free(rs_ref), free(ag_in), free(ag_out), free(ag_ref);
}

/* The last rank arrives 200 ms late: nobody may leave the barrier before it
 * arrived (checked with 100 ms of slack for when the ranks left MPI_Barrier). */
static void test_barrier(mt_ctx_t *t)
{
    for (int i = 0; i < 2 * (int)algos[WEFT_COLL_BARRIER].n; i++) {
        const int nb = i % 2;
        weft_algo_t a = algo_at(WEFT_COLL_BARRIER, (size_t)i / 2);
        MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_BARRIER, a), WEFT_SUCCESS,
                  "set_algo barrier");
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (t->rank == t->size - 1) {
            struct timespec ts = {0, 200 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        weft_request_t req = WEFT_REQUEST_NULL;
        weft_status_t st = nb ? weft_ibarrier(t->comm, &req) : weft_barrier(t->comm);
        if (mt_call_done(t, st, nb, &req, nb ? "ibarrier" : "barrier") && t->size > 1)
            MT_CHECK(t, MPI_Wtime() - t0 >= 0.1, "left the %s (%s) after %.3f s, before the late rank",
                     nb ? "ibarrier" : "barrier", weft_algo_name(a), MPI_Wtime() - t0);
    }
    weft_comm_set_algo(t->comm, WEFT_COLL_BARRIER, WEFT_ALGO_AUTO);
}

static void test_errors(mt_ctx_t *t)
{
    int x[4] = {0}, y[64] = {0};
    weft_request_t req;
    int p = t->size;
    MT_STATUS(t, weft_bcast(NULL, 4, WEFT_INT32, 0, t->comm), WEFT_ERR_INVALID_ARG, "bcast NULL");
    MT_STATUS(t, weft_bcast(x, 4, WEFT_INT32, p, t->comm), WEFT_ERR_INVALID_ARG, "bcast root=p");
    MT_STATUS(t, weft_bcast(x, 4, WEFT_INT32, -1, t->comm), WEFT_ERR_INVALID_ARG, "bcast root=-1");
    MT_STATUS(t, weft_bcast(x, 4, (weft_datatype_t)99, 0, t->comm), WEFT_ERR_DATATYPE, "bcast dtype");
    MT_STATUS(t, weft_bcast(x, 4, WEFT_INT32, 0, NULL), WEFT_ERR_INVALID_COMM, "bcast NULL comm");
    MT_STATUS(t, weft_reduce(x, y, 4, WEFT_INT32, (weft_op_t)42, 0, t->comm), WEFT_ERR_OP, "reduce op");
    MT_STATUS(t, weft_reduce(x, y, 4, WEFT_FLOAT32, WEFT_BAND, 0, t->comm), WEFT_ERR_DATATYPE,
              "reduce band float");
    MT_STATUS(t, weft_reduce_scatter(x, y, 1, WEFT_INT32, (weft_op_t)-3, t->comm), WEFT_ERR_OP,
              "reduce_scatter op");
    MT_STATUS(t, weft_reduce_scatter(x, NULL, 1, WEFT_INT32, WEFT_SUM, t->comm), WEFT_ERR_INVALID_ARG,
              "reduce_scatter NULL");
    MT_STATUS(t, weft_allgather(x, y, SIZE_MAX / 2, WEFT_INT32, t->comm), WEFT_ERR_COUNT_OVERFLOW,
              "allgather overflow");
    MT_STATUS(t, weft_alltoall(x, y, SIZE_MAX / 16 / (size_t)p + 1, WEFT_INT64, t->comm),
              WEFT_ERR_COUNT_OVERFLOW, "alltoall overflow");
    MT_STATUS(t, weft_gather(x, y, 1, WEFT_INT32, p + 3, t->comm), WEFT_ERR_INVALID_ARG, "gather root");
    MT_STATUS(t, weft_scatter(x, y, 1, WEFT_INT32, -2, t->comm), WEFT_ERR_INVALID_ARG, "scatter root");
    MT_STATUS(t, weft_ialltoall(x, y, 1, WEFT_INT32, t->comm, NULL), WEFT_ERR_INVALID_ARG,
              "ialltoall NULL req");
    MT_STATUS(t, weft_ibarrier(NULL, &req), WEFT_ERR_INVALID_COMM, "ibarrier NULL comm");
    if (p > 1) {
        int root = (t->rank + 1) % p; /* never this rank */
        MT_STATUS(t, weft_reduce(WEFT_IN_PLACE, y, 1, WEFT_INT32, WEFT_SUM, root, t->comm),
                  WEFT_ERR_INVALID_ARG, "reduce in place off root");
        MT_STATUS(t, weft_gather(WEFT_IN_PLACE, y, 1, WEFT_INT32, root, t->comm), WEFT_ERR_INVALID_ARG,
                  "gather in place off root");
    }
    /* An algorithm that does not serve the collective is refused when forced. */
    MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_BCAST, WEFT_ALGO_PAIRWISE), WEFT_ERR_ALGORITHM,
              "force pairwise bcast");
    /* After the refusals the communicator still works. */
    int v = t->rank == 0 ? 1234 : 0;
    if (MT_STATUS(t, weft_bcast(&v, 1, WEFT_INT32, 0, t->comm), WEFT_SUCCESS, "bcast after errors"))
        MT_CHECK(t, v == 1234, "bcast after errors gave %d", v);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    find_algos(&t);
    test_errors(&t);
    test_reduce_scatter(&t);
    test_allgather(&t);
    test_bcast(&t);
    test_reduce(&t);
    test_alltoall(&t);
    test_gather_scatter(&t);
    test_many_inflight(&t);
    test_barrier(&t);
    mt_info(&t, "test_coll: %.2f s", mt_elapsed(&t));
    return mt_finish(&t);
}
