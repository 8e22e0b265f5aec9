/*
 * test_errors.c - bad input returns the documented status and the process
 * goes on (mpiexec -n 2).
 *
 * Checks, on every rank: NULL buffers, unknown datatypes and ops, bitwise ops
 * on floating types, counts whose byte size overflows, NULL communicators,
 * stale / made-up request handles, waiting on WEFT_REQUEST_NULL, forcing an
 * algorithm that does not serve allreduce, the status strings for every int
 * in -200..200, a valid allreduce after all of that (compared with
 * MPI_Allreduce), and WEFT_ERR_NOT_INITIALIZED from every call after
 * weft_finalize. The test initialises MPI itself (mt_init) so that it can go
 * on using MPI after weft_finalize; it then sums the error counts on rank 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#define N 1000

static void check_strings(mt_ctx_t *t)
{
    for (int v = -200; v <= 200; v++) {
        const char *s = weft_strerror((weft_status_t)v);
        const char *n = weft_status_name((weft_status_t)v);
        MT_CHECK(t, s != NULL && s[0] != '\0', "weft_strerror(%d) is NULL or empty", v);
        MT_CHECK(t, n != NULL && n[0] != '\0', "weft_status_name(%d) is NULL or empty", v);
    }
    static const struct {
        weft_status_t st;
        const char *name;
    } names[] = {
        {WEFT_SUCCESS, "WEFT_SUCCESS"},
        {WEFT_INPROGRESS, "WEFT_INPROGRESS"},
        {WEFT_ERR_INVALID_ARG, "WEFT_ERR_INVALID_ARG"},
        {WEFT_ERR_DATATYPE, "WEFT_ERR_DATATYPE"},
        {WEFT_ERR_OP, "WEFT_ERR_OP"},
        {WEFT_ERR_COUNT_OVERFLOW, "WEFT_ERR_COUNT_OVERFLOW"},
        {WEFT_ERR_NOT_INITIALIZED, "WEFT_ERR_NOT_INITIALIZED"},
        {WEFT_ERR_INVALID_REQUEST, "WEFT_ERR_INVALID_REQUEST"},
        {WEFT_ERR_INVALID_COMM, "WEFT_ERR_INVALID_COMM"},
        {WEFT_ERR_TIMEOUT, "WEFT_ERR_TIMEOUT"},
        {WEFT_ERR_ALGORITHM, "WEFT_ERR_ALGORITHM"},
        {WEFT_ERR_FINALIZING, "WEFT_ERR_FINALIZING"},
        {WEFT_ERR_INTERNAL, "WEFT_ERR_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *n = weft_status_name(names[i].st);
        MT_CHECK(t, n && strcmp(n, names[i].name) == 0, "weft_status_name(%d) = '%s', want '%s'",
                 (int)names[i].st, n ? n : "(null)", names[i].name);
    }
    /* Distinct errors have distinct descriptions. */
    const char *a = weft_strerror(WEFT_ERR_DATATYPE), *b = weft_strerror(WEFT_ERR_OP);
    MT_CHECK(t, a && b && strcmp(a, b) != 0, "WEFT_ERR_DATATYPE and WEFT_ERR_OP share a text");
}

/* A valid float32 SUM allreduce on comm compared with MPI_Allreduce. */
static void valid_allreduce(mt_ctx_t *t, weft_comm_t comm, MPI_Comm ref_comm, const char *when)
{
    float *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out),
          *ref = malloc(N * sizeof *ref);
    if (!in || !out || !ref) {
        mt_error(t, "%s: out of memory", when);
        free(in), free(out), free(ref);
        return;
    }
    mt_fill(in, N, WEFT_FLOAT32, WEFT_SUM, t->rank, 7);
    memset(out, 0xff, N * sizeof *out);
    int rc = MPI_Allreduce(in, ref, N, MPI_FLOAT, MPI_SUM, ref_comm);
    MT_CHECK(t, rc == MPI_SUCCESS, "%s: MPI_Allreduce failed (%d)", when, rc);
    weft_status_t st = weft_allreduce(in, out, N, WEFT_FLOAT32, WEFT_SUM, comm);
    if (MT_STATUS(t, st, WEFT_SUCCESS, "weft_allreduce (valid)"))
        mt_compare(t, out, ref, N, WEFT_FLOAT32, 0.0, when);
    /* The nonblocking form too. */
    weft_request_t req = WEFT_REQUEST_NULL;
    memset(out, 0xff, N * sizeof *out);
    st = weft_iallreduce(in, out, N, WEFT_FLOAT32, WEFT_SUM, comm, &req);
    if (MT_STATUS(t, st, WEFT_SUCCESS, "weft_iallreduce (valid)")) {
        st = weft_wait(&req);
        if (MT_STATUS(t, st, WEFT_SUCCESS, "weft_wait (valid)"))
            mt_compare(t, out, ref, N, WEFT_FLOAT32, 0.0, when);
        MT_CHECK(t, req == WEFT_REQUEST_NULL, "%s: weft_wait left the handle set", when);
    }
    free(in);
    free(out);
    free(ref);
}

static void check_arguments(mt_ctx_t *t, weft_comm_t comm)
{
    float a[4] = {1, 2, 3, 4}, b[4];
    weft_request_t req;
    weft_status_t st;

    /* NULL buffers with a nonzero count. */
    MT_STATUS(t, weft_allreduce(NULL, b, 4, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG,
              "allreduce(sendbuf NULL)");
    MT_STATUS(t, weft_allreduce(a, NULL, 4, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_ERR_INVALID_ARG,
              "allreduce(recvbuf NULL)");
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, NULL, 4, WEFT_FLOAT32, WEFT_SUM, comm),
              WEFT_ERR_INVALID_ARG, "allreduce(in place, recvbuf NULL)");
    req = (weft_request_t)12345;
    st = weft_iallreduce(a, NULL, 4, WEFT_FLOAT32, WEFT_SUM, comm, &req);
    MT_STATUS(t, st, WEFT_ERR_INVALID_ARG, "iallreduce(recvbuf NULL)");
    MT_CHECK(t, req == WEFT_REQUEST_NULL, "failed iallreduce left *req = %llu",
             (unsigned long long)req);
    MT_STATUS(t, weft_iallreduce(a, b, 4, WEFT_FLOAT32, WEFT_SUM, comm, NULL), WEFT_ERR_INVALID_ARG,
              "iallreduce(req NULL)");
    /* NULL buffers with count 0 are fine (collective: every rank calls it). */
    MT_STATUS(t, weft_allreduce(NULL, NULL, 0, WEFT_FLOAT32, WEFT_SUM, comm), WEFT_SUCCESS,
              "allreduce(NULL, NULL, count 0)");

    /* Unknown datatypes. */
    const int bad_types[] = {WEFT_DATATYPE_COUNT, 99, -1, 1 << 20};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        MT_STATUS(t, weft_allreduce(a, b, 4, (weft_datatype_t)bad_types[i], WEFT_SUM, comm),
                  WEFT_ERR_DATATYPE, "allreduce(unknown datatype)");
        st = weft_iallreduce(a, b, 4, (weft_datatype_t)bad_types[i], WEFT_SUM, comm, &req);
        MT_STATUS(t, st, WEFT_ERR_DATATYPE, "iallreduce(unknown datatype)");
        MT_CHECK(t, weft_datatype_size((weft_datatype_t)bad_types[i]) == 0,
                 "weft_datatype_size(%d) != 0", bad_types[i]);
    }

    /* Unknown ops. */
    const int bad_ops[] = {WEFT_OP_COUNT, 42, -1};
    for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; i++) {
        MT_STATUS(t, weft_allreduce(a, b, 4, WEFT_FLOAT32, (weft_op_t)bad_ops[i], comm),
                  WEFT_ERR_OP, "allreduce(unknown op)");
        MT_STATUS(t, weft_allreduce(a, b, 4, WEFT_INT32, (weft_op_t)bad_ops[i], comm), WEFT_ERR_OP,
                  "allreduce(int32, unknown op)");
    }

    /* Bitwise ops on floating types. */
    const weft_datatype_t floats[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32, WEFT_FLOAT64};
    const weft_op_t bitwise[] = {WEFT_BAND, WEFT_BOR, WEFT_BXOR};
    double d[4] = {0};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++) {
            char what[96];
            snprintf(what, sizeof what, "allreduce(%s, %s)", weft_datatype_name(floats[i]),
                     weft_op_name(bitwise[j]));
            MT_STATUS(t, weft_allreduce(d, d + 2, 1, floats[i], bitwise[j], comm),
                      WEFT_ERR_DATATYPE, what);
        }

    /* count * element size overflows. */
    const struct {
        weft_datatype_t dt;
        size_t count;
    } over[] = {
        {WEFT_FLOAT32, SIZE_MAX / 4 + 1},
        {WEFT_FLOAT64, SIZE_MAX / 8 + 1},
        {WEFT_INT64, SIZE_MAX},
        {WEFT_FLOAT16, SIZE_MAX / 2 + 1},
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "allreduce(%s, count %zu)", weft_datatype_name(over[i].dt),
                 over[i].count);
        MT_STATUS(t, weft_allreduce(d, d + 2, over[i].count, over[i].dt, WEFT_SUM, comm),
                  WEFT_ERR_COUNT_OVERFLOW, what);
        st = weft_iallreduce(d, d + 2, over[i].count, over[i].dt, WEFT_SUM, comm, &req);
        MT_STATUS(t, st, WEFT_ERR_COUNT_OVERFLOW, what);
    }

    /* NULL communicator. */
    int r = -1;
    MT_STATUS(t, weft_allreduce(a, b, 4, WEFT_FLOAT32, WEFT_SUM, NULL), WEFT_ERR_INVALID_COMM,
              "allreduce(comm NULL)");
    MT_STATUS(t, weft_iallreduce(a, b, 4, WEFT_FLOAT32, WEFT_SUM, NULL, &req),
              WEFT_ERR_INVALID_COMM, "iallreduce(comm NULL)");
    MT_STATUS(t, weft_comm_rank(NULL, &r), WEFT_ERR_INVALID_COMM, "comm_rank(NULL)");
    MT_STATUS(t, weft_comm_size(NULL, &r), WEFT_ERR_INVALID_COMM, "comm_size(NULL)");
    MT_STATUS(t, weft_comm_set_algo(NULL, WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING),
              WEFT_ERR_INVALID_COMM, "comm_set_algo(NULL)");
    weft_algo_t algo;
    MT_STATUS(t, weft_query_algo(NULL, WEFT_COLL_ALLREDUCE, 4, WEFT_FLOAT32, &algo),
              WEFT_ERR_INVALID_COMM, "query_algo(NULL)");
    MT_STATUS(t, weft_comm_destroy(NULL), WEFT_ERR_INVALID_COMM, "comm_destroy(NULL)");
    MT_STATUS(t, weft_barrier(NULL), WEFT_ERR_INVALID_COMM, "barrier(NULL)");

    /* Algorithms: not serving allreduce, unknown, and names. */
    MT_STATUS(t, weft_comm_set_algo(comm, WEFT_COLL_ALLREDUCE, WEFT_ALGO_PAIRWISE),
              WEFT_ERR_ALGORITHM, "comm_set_algo(allreduce, pairwise)");
    MT_STATUS(t, weft_comm_set_algo(comm, WEFT_COLL_ALLREDUCE, WEFT_ALGO_DISSEMINATION),
              WEFT_ERR_ALGORITHM, "comm_set_algo(allreduce, dissemination)");
    MT_STATUS(t, weft_comm_set_algo(comm, WEFT_COLL_ALLREDUCE, (weft_algo_t)999),
              WEFT_ERR_ALGORITHM, "comm_set_algo(allreduce, 999)");
    MT_CHECK(t, weft_algo_name((weft_algo_t)999) == NULL, "weft_algo_name(999) not NULL");
    MT_STATUS(t, weft_algo_from_name("no_such_algorithm", &algo), WEFT_ERR_ALGORITHM,
              "algo_from_name(no_such_algorithm)");
    MT_CHECK(t, weft_algo_from_name(NULL, &algo) < 0, "algo_from_name(NULL) did not fail");
    MT_CHECK(t, weft_algo_from_name("ring", &algo) == WEFT_SUCCESS && algo == WEFT_ALGO_RING,
             "algo_from_name(ring)");
    /* A refused forcing leaves the communicator in auto mode. */
    st = weft_query_algo(comm, WEFT_COLL_ALLREDUCE, 4, WEFT_FLOAT32, &algo);
    if (MT_STATUS(t, st, WEFT_SUCCESS, "query_algo after refused forcing"))
        MT_CHECK(t, algo != WEFT_ALGO_PAIRWISE && algo != WEFT_ALGO_AUTO &&
                        weft_algo_name(algo) != NULL,
                 "query_algo says %d after a refused forcing", (int)algo);
    MT_CHECK(t, weft_query_algo(comm, WEFT_COLL_ALLREDUCE, 4, WEFT_FLOAT32, NULL) < 0,
             "query_algo(algo NULL) did not fail");

    /* Requests: wait twice (a copy of the handle), made-up handles, NULL. */
    float x[8], y[8];
    for (int i = 0; i < 8; i++) x[i] = (float)(t->rank + i);
    req = WEFT_REQUEST_NULL;
    st = weft_iallreduce(x, y, 8, WEFT_FLOAT32, WEFT_SUM, comm, &req);
    if (MT_STATUS(t, st, WEFT_SUCCESS, "iallreduce (for the double wait)")) {
        weft_request_t copy = req;
        MT_CHECK(t, req != WEFT_REQUEST_NULL, "iallreduce returned WEFT_REQUEST_NULL");
        MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "first wait");
        MT_CHECK(t, req == WEFT_REQUEST_NULL, "wait did not reset the handle");
        MT_STATUS(t, weft_wait(&copy), WEFT_ERR_INVALID_REQUEST, "second wait on a copy");
        int done = -1;
        MT_STATUS(t, weft_test(&copy, &done), WEFT_ERR_INVALID_REQUEST, "test on a stale copy");
        for (int i = 0; i < 8; i++) {
            float want = (float)(t->size * (t->size - 1) / 2 + t->size * i);
            MT_CHECK(t, y[i] == want, "y[%d] = %g, want %g", i, (double)y[i], (double)want);
        }
    }
    const weft_request_t bogus[] = {(weft_request_t)0xdeadbeef12345678ull, (weft_request_t)1,
                                    ((weft_request_t)1 << 32) | 100000u, UINT64_MAX};
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        weft_request_t h = bogus[i];
        int done = -1;
        MT_STATUS(t, weft_wait(&h), WEFT_ERR_INVALID_REQUEST, "wait on a made-up handle");
        h = bogus[i];
        MT_STATUS(t, weft_test(&h, &done), WEFT_ERR_INVALID_REQUEST, "test on a made-up handle");
    }
    req = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "wait on WEFT_REQUEST_NULL");
    MT_CHECK(t, weft_wait(NULL) < 0, "weft_wait(NULL) did not fail");

    /* waitall with a made-up handle between two valid ones: the first error is
     * returned and the valid ones still complete and are released. */
    float p[4], q[4], u[4], v[4];
    for (int i = 0; i < 4; i++) p[i] = u[i] = (float)(i + 1);
    weft_request_t reqs[3] = {WEFT_REQUEST_NULL, bogus[0], WEFT_REQUEST_NULL};
    int ok0 = MT_STATUS(t, weft_iallreduce(p, q, 4, WEFT_FLOAT32, WEFT_SUM, comm, &reqs[0]),
                        WEFT_SUCCESS, "iallreduce (waitall 0)");
    int ok2 = MT_STATUS(t, weft_iallreduce(u, v, 4, WEFT_FLOAT32, WEFT_MAX, comm, &reqs[2]),
                        WEFT_SUCCESS, "iallreduce (waitall 2)");
    if (ok0 && ok2) {
        MT_STATUS(t, weft_waitall(3, reqs), WEFT_ERR_INVALID_REQUEST, "waitall with a bad handle");
        MT_CHECK(t, reqs[0] == WEFT_REQUEST_NULL && reqs[2] == WEFT_REQUEST_NULL,
                 "waitall did not release the valid requests");
        for (int i = 0; i < 4; i++) {
            MT_CHECK(t, q[i] == (float)(t->size * (i + 1)), "waitall sum q[%d] = %g", i,
                     (double)q[i]);
            MT_CHECK(t, v[i] == (float)(i + 1), "waitall max v[%d] = %g", i, (double)v[i]);
        }
    }
    MT_STATUS(t, weft_waitall(0, NULL), WEFT_SUCCESS, "waitall(0, NULL)");

    /* Argument errors are not asynchronous errors: the comm is not broken. */
    MT_STATUS(t, weft_comm_get_error(comm), WEFT_SUCCESS, "comm_get_error after bad calls");
}

static void check_after_finalize(mt_ctx_t *t, weft_comm_t stale)
{
    float a[4] = {1, 2, 3, 4}, b[4];
    weft_request_t req = (weft_request_t)0xdeadbeef12345678ull;
    weft_comm_t c = NULL;
    int r = 0, done = 0;
    weft_algo_t algo;
    const weft_status_t NI = WEFT_ERR_NOT_INITIALIZED;

    MT_CHECK(t, weft_initialized() == 0, "weft_initialized() after weft_finalize");
    MT_STATUS(t, weft_allreduce(a, b, 4, WEFT_FLOAT32, WEFT_SUM, stale), NI,
              "allreduce (stale comm)");
    MT_STATUS(t, weft_allreduce(a, b, 4, WEFT_FLOAT32, WEFT_SUM, NULL), NI,
              "allreduce (NULL comm)");
    weft_request_t nreq = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_iallreduce(a, b, 4, WEFT_FLOAT32, WEFT_SUM, stale, &nreq), NI,
              "iallreduce (stale comm)");
    MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &c), NI, "comm_create");
    MT_STATUS(t, weft_comm_rank(NULL, &r), NI, "comm_rank");
    MT_STATUS(t, weft_comm_size(NULL, &r), NI, "comm_size");
    MT_STATUS(t, weft_comm_destroy(NULL), NI, "comm_destroy");
    MT_STATUS(t, weft_comm_set_algo(NULL, WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING), NI,
              "comm_set_algo");
    MT_STATUS(t, weft_query_algo(NULL, WEFT_COLL_ALLREDUCE, 4, WEFT_FLOAT32, &algo), NI,
              "query_algo");
    MT_STATUS(t, weft_wait(&req), NI, "wait");
    req = (weft_request_t)0xdeadbeef12345678ull;
    MT_STATUS(t, weft_test(&req, &done), NI, "test");
    req = (weft_request_t)0xdeadbeef12345678ull;
    MT_STATUS(t, weft_waitall(1, &req), NI, "waitall");
    MT_STATUS(t, weft_barrier(NULL), NI, "barrier");
    MT_STATUS(t, weft_bcast(a, 4, WEFT_FLOAT32, 0, NULL), NI, "bcast");
    MT_STATUS(t, weft_finalize(), NI, "second weft_finalize");
    /* The "any time" functions still answer. */
    MT_CHECK(t, weft_strerror(NI) != NULL, "weft_strerror after finalize");
    MT_CHECK(t, weft_status_name(NI) != NULL, "weft_status_name after finalize");
    MT_CHECK(t, weft_version() == WEFT_VERSION_HEX, "weft_version %#x", weft_version());
    MT_CHECK(t, weft_datatype_size(WEFT_FLOAT64) == 8, "weft_datatype_size after finalize");
    /* MPI was initialised by the test, so Weft must have left it running. */
    int fin = 1;
    MT_CHECK(t, MPI_Finalized(&fin) == MPI_SUCCESS && fin == 0,
             "MPI finalised by weft_finalize although the test initialised it");
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;

    MPI_Comm ref = MPI_COMM_NULL;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &ref) != MPI_SUCCESS) {
        mt_error(&t, "MPI_Comm_dup failed");
        ref = MPI_COMM_WORLD;
    }

    check_strings(&t);
    valid_allreduce(&t, t.comm, ref, "allreduce before the bad calls");
    check_arguments(&t, t.comm);
    valid_allreduce(&t, t.comm, ref, "allreduce after the bad calls");
    /* And on a fresh communicator. */
    weft_comm_t c2 = NULL;
    if (MT_STATUS(&t, weft_comm_create(MPI_COMM_WORLD, NULL, &c2), WEFT_SUCCESS, "comm_create")) {
        valid_allreduce(&t, c2, ref, "allreduce on a second communicator");
        MT_STATUS(&t, weft_comm_destroy(c2), WEFT_SUCCESS, "comm_destroy");
    }

    /* weft_finalize, then every call must say WEFT_ERR_NOT_INITIALIZED. The
     * world comm is left alive on purpose: finalize frees it. */
    weft_comm_t stale = t.comm;
    t.comm = NULL;
    MT_STATUS(&t, weft_finalize(), WEFT_SUCCESS, "weft_finalize");
    check_after_finalize(&t, stale);
    mt_info(&t, "after-finalize checks done");

    /* Sum the error counts on rank 0 with MPI, which is still running. */
    long total = 0;
    if (MPI_Reduce(&t.errors, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Bcast(&total, 1, MPI_LONG, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "%s: rank %d: MPI error while summing errors\n", t.name, t.rank);
        total = t.errors + 1;
    }
    if (t.rank == 0) {
        if (total) printf("%s: Found %ld errors (%d ranks)\n", t.name, total, t.size);
        else printf("%s: No Errors (%d ranks, %.2f s)\n", t.name, t.size, mt_elapsed(&t));
        fflush(stdout);
    }
    if (ref != MPI_COMM_WORLD && ref != MPI_COMM_NULL) MPI_Comm_free(&ref);
    MPI_Finalize();
    return total ? 1 : 0;
}
