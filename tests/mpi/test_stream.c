/*
 * test_stream.c - the stream-ordering rules of stream-bound communicators,
 * on host streams (doc/streams.md):
 *
 *  1. a blocking collective on a stream-bound comm returns at once (the host
 *     is never blocked), starts after the tasks enqueued before it (their
 *     writes are in its input), and tasks enqueued after it see its output;
 *  2. a pipeline of compute -> allreduce -> compute with no host sync between;
 *  3. many communicators on many streams, interleaved, and two comms on one;
 *  4. nonblocking: weft_wait returns without waiting (the stream waits),
 *     weft_test tells the host when the collective finished;
 *  5. an error returned by a stream task reaches weft_stream_synchronize, later
 *     user tasks are skipped until then, and collectives still run;
 *  6. weft_stream_query, and another collective (bcast) on a stream comm.
 *
 * References are computed independently: closed forms, or MPI_Allreduce on
 * MPI_COMM_WORLD. A gate task (a task that waits for the host to open it,
 * with a 20 s limit) proves the host returned while the stream was held.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"
#include "weft_stream.h"

#define GATE_LIMIT_S 20.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- tasks ---------------------------------------------------------------- */
typedef struct gate {
    atomic_int open;
    atomic_int passed;
} gate_t;

/* Holds the stream until the host opens the gate. */
static weft_status_t gate_task(void *arg)
{
    gate_t *g = arg;
    double t0 = now_s();
    while (!atomic_load(&g->open)) {
        if (now_s() - t0 > GATE_LIMIT_S) return WEFT_ERR_TIMEOUT; /* the host never came back */
        sleep_ms(1);
    }
    atomic_store(&g->passed, 1);
    return WEFT_SUCCESS;
}

/* buf[i] = value(rank, iter, i): the "compute" before a collective. */
typedef struct fill {
    int32_t *buf;
    size_t n;
    int rank, iter;
    int delay_ms;
} fill_t;

static int32_t value(int rank, int iter, size_t i)
{
    return (int32_t)((rank + 1) * 1000 + iter * 7 + (int)(i % 101));
}

/* sum over ranks of value(r, iter, i), independent of the library */
static int32_t ref_sum(int size, int iter, size_t i)
{
    int64_t s = 0;
    for (int r = 0; r < size; r++) s += value(r, iter, i);
    return (int32_t)s;
}

static weft_status_t fill_task(void *arg)
{
    fill_t *f = arg;
    if (f->delay_ms) sleep_ms(f->delay_ms);
    for (size_t i = 0; i < f->n; i++) f->buf[i] = value(f->rank, f->iter, i);
    return WEFT_SUCCESS;
}

/* The "compute" after: checks the collective's output, counts mismatches. */
typedef struct check {
    const int32_t *buf;
    size_t n;
    int size, iter;
    atomic_long *bad;
    atomic_int *ran;
} check_t;

static weft_status_t check_task(void *arg)
{
    check_t *c = arg;
    long bad = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->buf[i] != ref_sum(c->size, c->iter, i)) bad++;
    atomic_fetch_add(c->bad, bad);
    if (c->ran) atomic_fetch_add(c->ran, 1);
    return WEFT_SUCCESS;
}

static weft_status_t count_task(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
    return WEFT_SUCCESS;
}

static weft_status_t fail_task(void *arg)
{
    (void)arg;
    return WEFT_ERR_INVALID_ARG;
}

/* A host stream and a communicator of every rank bound to it; false (and
 * nothing left open) if either fails. */
static bool open_stream_comm(mt_ctx_t *t, weft_stream_t *s, weft_comm_t *c)
{
    if (!MT_STATUS(t, weft_stream_create_host(s), WEFT_SUCCESS, "stream create")) return false;
    if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, *s, c), WEFT_SUCCESS, "comm create")) {
        weft_stream_destroy(*s);
        return false;
    }
    return true;
}

/* ---- 1. blocking collective: ordering both ways, host not blocked ------------ */
static void test_blocking(mt_ctx_t *t, size_t n)
{
    weft_stream_t s;
    weft_comm_t c;
    if (!open_stream_comm(t, &s, &c)) return;
    weft_stream_t got = NULL;
    MT_STATUS(t, weft_comm_stream(c, &got), WEFT_SUCCESS, "weft_comm_stream");
    MT_CHECK(t, got == s, "weft_comm_stream returned another stream");

    int32_t *in = calloc(n, sizeof *in), *out = calloc(n, sizeof *out);
    gate_t gate = {0, 0};
    atomic_long bad = 0;
    atomic_int ran = 0;
    fill_t f = {in, n, t->rank, 1, 5};
    check_t ck = {out, n, t->size, 1, &bad, &ran};

    MT_STATUS(t, weft_stream_enqueue(s, gate_task, &gate), WEFT_SUCCESS, "enqueue gate");
    MT_STATUS(t, weft_stream_enqueue(s, fill_task, &f), WEFT_SUCCESS, "enqueue fill");
    MT_STATUS(t, weft_allreduce(in, out, n, WEFT_INT32, WEFT_SUM, c), WEFT_SUCCESS,
              "weft_allreduce on a stream comm");
    MT_STATUS(t, weft_stream_enqueue(s, check_task, &ck), WEFT_SUCCESS, "enqueue check");
    /* The call returned while the gate still holds the stream: not blocked. */
    MT_CHECK(t, atomic_load(&gate.passed) == 0, "weft_allreduce waited for the stream");
    MT_CHECK(t, weft_stream_query(s) == WEFT_INPROGRESS, "query while the gate holds: %d",
             (int)weft_stream_query(s));
    atomic_store(&gate.open, 1);
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
    MT_STATUS(t, weft_stream_query(s), WEFT_SUCCESS, "query when idle");
    MT_CHECK(t, atomic_load(&ran) == 1, "check task ran %d times", atomic_load(&ran));
    MT_CHECK(t, atomic_load(&bad) == 0, "blocking: %ld elements wrong as seen by the next task",
             atomic_load(&bad));
    /* The host sees the same result after synchronising. */
    long hb = 0;
    for (size_t i = 0; i < n; i++) hb += out[i] != ref_sum(t->size, 1, i);
    MT_CHECK(t, hb == 0, "blocking: %ld elements wrong on the host", hb);

    /* In place, AVG on float64 against MPI_Allreduce as the reference. */
    double *d = malloc(n * sizeof *d), *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) d[i] = (double)(t->rank * 3 + (int)(i % 17)) * 0.5;
    MPI_Allreduce(d, ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) ref[i] /= t->size;
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, d, n, WEFT_FLOAT64, WEFT_AVG, c), WEFT_SUCCESS,
              "in-place avg");
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize avg");
    mt_compare(t, d, ref, n, WEFT_FLOAT64, 1e-12, "stream avg float64");

    free(d);
    free(ref);
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "stream destroy");
    free(in);
    free(out);
}

/* ---- 2. pipeline: compute -> allreduce -> check, K times, one sync ------------ */
static void test_pipeline(mt_ctx_t *t, size_t n, int iters)
{
    weft_stream_t s;
    weft_comm_t c;
    if (!open_stream_comm(t, &s, &c)) return;
    /* One buffer reused by every iteration: each fill must wait for the
     * previous check, each allreduce for its fill. */
    int32_t *buf = calloc(n, sizeof *buf);
    fill_t *f = calloc((size_t)iters, sizeof *f);
    check_t *ck = calloc((size_t)iters, sizeof *ck);
    atomic_long bad = 0;
    atomic_int ran = 0;
    for (int k = 0; k < iters; k++) {
        f[k] = (fill_t){buf, n, t->rank, k, (k % 4 == 0) ? 2 : 0};
        ck[k] = (check_t){buf, n, t->size, k, &bad, &ran};
        MT_STATUS(t, weft_stream_enqueue(s, fill_task, &f[k]), WEFT_SUCCESS, "enqueue fill");
        MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, buf, n, WEFT_INT32, WEFT_SUM, c), WEFT_SUCCESS,
                  "pipeline allreduce");
        MT_STATUS(t, weft_stream_enqueue(s, check_task, &ck[k]), WEFT_SUCCESS, "enqueue check");
    }
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
    MT_CHECK(t, atomic_load(&ran) == iters, "checks ran %d of %d", atomic_load(&ran), iters);
    MT_CHECK(t, atomic_load(&bad) == 0, "pipeline: %ld elements wrong", atomic_load(&bad));
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "stream destroy");
    free(buf);
    free(f);
    free(ck);
}

/* ---- 3. many comms on many streams, and two comms on one stream ---------------- */
#define NS 3
static void test_many(mt_ctx_t *t, size_t n, int iters)
{
    weft_stream_t s[NS];
    weft_comm_t c[NS + 1];
    int32_t *buf[NS + 1];
    fill_t *f[NS + 1];
    check_t *ck[NS + 1];
    atomic_long bad = 0;
    atomic_int ran = 0;
    for (int j = 0; j < NS; j++)
        if (!MT_STATUS(t, weft_stream_create_host(&s[j]), WEFT_SUCCESS, "stream create")) return;
    /* comms 0..NS-1 on streams 0..NS-1; comm NS shares stream 0 */
    for (int j = 0; j <= NS; j++) {
        MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, s[j % NS], &c[j]), WEFT_SUCCESS, "comm create");
        buf[j] = calloc(n, sizeof(int32_t));
        f[j] = calloc((size_t)iters, sizeof(fill_t));
        ck[j] = calloc((size_t)iters, sizeof(check_t));
    }
    for (int k = 0; k < iters; k++) {
        /* Ranks issue in different orders across streams: even ranks forward,
         * odd ranks backward. Comms that share a stream are serialised by it,
         * so they keep one order everywhere (comm NS right after comm 0), as
         * collectives on one CUDA stream must. */
        static const int fwd[NS + 1] = {0, NS, 1, 2}, bwd[NS + 1] = {2, 1, 0, NS};
        for (int jj = 0; jj <= NS; jj++) {
            int j = (t->rank % 2 == 0) ? fwd[jj] : bwd[jj];
            weft_stream_t sj = s[j % NS];
            f[j][k] = (fill_t){buf[j], n, t->rank, k * 10 + j, (j == 1 && k == 0) ? 10 : 0};
            ck[j][k] = (check_t){buf[j], n, t->size, k * 10 + j, &bad, &ran};
            MT_STATUS(t, weft_stream_enqueue(sj, fill_task, &f[j][k]), WEFT_SUCCESS, "fill");
            MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, buf[j], n, WEFT_INT32, WEFT_SUM, c[j]),
                      WEFT_SUCCESS, "allreduce on comm j");
            MT_STATUS(t, weft_stream_enqueue(sj, check_task, &ck[j][k]), WEFT_SUCCESS, "check");
        }
    }
    for (int j = 0; j < NS; j++)
        MT_STATUS(t, weft_stream_synchronize(s[j]), WEFT_SUCCESS, "synchronize");
    MT_CHECK(t, atomic_load(&ran) == iters * (NS + 1), "checks ran %d of %d", atomic_load(&ran),
             iters * (NS + 1));
    MT_CHECK(t, atomic_load(&bad) == 0, "many streams: %ld elements wrong", atomic_load(&bad));
    for (int j = 0; j <= NS; j++) {
        MT_STATUS(t, weft_comm_destroy(c[j]), WEFT_SUCCESS, "comm destroy");
        free(buf[j]);
        free(f[j]);
        free(ck[j]);
    }
    for (int j = 0; j < NS; j++) MT_STATUS(t, weft_stream_destroy(s[j]), WEFT_SUCCESS, "destroy");
}

/* ---- 4. nonblocking: weft_wait makes the stream wait; weft_test informs ------ */
static void test_nonblocking(mt_ctx_t *t, size_t n)
{
    weft_stream_t s;
    weft_comm_t c;
    if (!open_stream_comm(t, &s, &c)) return;
    int32_t *in = calloc(n, sizeof *in), *out = calloc(n, sizeof *out);
    gate_t gate = {0, 0};
    atomic_long bad = 0;
    atomic_int ran = 0, side = 0;
    fill_t f = {in, n, t->rank, 3, 0};
    check_t ck = {out, n, t->size, 3, &bad, &ran};

    /* (a) weft_wait returns while the stream is held before the collective. */
    weft_request_t req = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_stream_enqueue(s, gate_task, &gate), WEFT_SUCCESS, "gate");
    MT_STATUS(t, weft_stream_enqueue(s, fill_task, &f), WEFT_SUCCESS, "fill");
    MT_STATUS(t, weft_iallreduce(in, out, n, WEFT_INT32, WEFT_SUM, c, &req), WEFT_SUCCESS,
              "iallreduce");
    /* work between issue and wait: runs on the stream while the collective may run */
    MT_STATUS(t, weft_stream_enqueue(s, count_task, &side), WEFT_SUCCESS, "side task");
    int done = 1;
    MT_STATUS(t, weft_test(&req, &done), WEFT_SUCCESS, "test while held");
    MT_CHECK(t, done == 0, "weft_test says done although the stream holds the collective back");
    MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "weft_wait on a stream comm");
    MT_CHECK(t, req == WEFT_REQUEST_NULL, "request not released by weft_wait");
    MT_CHECK(t, atomic_load(&gate.passed) == 0, "weft_wait blocked the host");
    MT_STATUS(t, weft_stream_enqueue(s, check_task, &ck), WEFT_SUCCESS, "check");
    atomic_store(&gate.open, 1);
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
    MT_CHECK(t, atomic_load(&ran) == 1 && atomic_load(&side) == 1, "tasks ran %d/%d",
             atomic_load(&ran), atomic_load(&side));
    MT_CHECK(t, atomic_load(&bad) == 0, "nonblocking wait: %ld elements wrong", atomic_load(&bad));

    /* (b) weft_test polls until done: then the host may read the result once
     * the stream took it (synchronize). */
    memset(out, 0, n * sizeof *out);
    f.iter = 4;
    ck.iter = 4;
    MT_STATUS(t, weft_stream_enqueue(s, fill_task, &f), WEFT_SUCCESS, "fill");
    MT_STATUS(t, weft_iallreduce(in, out, n, WEFT_INT32, WEFT_SUM, c, &req), WEFT_SUCCESS,
              "iallreduce 2");
    done = 0;
    double t0 = now_s();
    while (!done && now_s() - t0 < 30) {
        if (!MT_STATUS(t, weft_test(&req, &done), WEFT_SUCCESS, "weft_test")) break;
        if (!done) sleep_ms(1);
    }
    MT_CHECK(t, done == 1 && req == WEFT_REQUEST_NULL, "weft_test never reported completion");
    MT_STATUS(t, weft_stream_enqueue(s, check_task, &ck), WEFT_SUCCESS, "check 2");
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize 2");
    MT_CHECK(t, atomic_load(&bad) == 0, "nonblocking test: %ld elements wrong", atomic_load(&bad));

    /* (c) several in flight, waited in reverse order */
    enum { NR = 4 };
    weft_request_t reqs[NR];
    int32_t *bufs[NR];
    for (int k = 0; k < NR; k++) {
        bufs[k] = malloc(n * sizeof(int32_t));
        for (size_t i = 0; i < n; i++) bufs[k][i] = value(t->rank, 20 + k, i);
        MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, bufs[k], n, WEFT_INT32, WEFT_SUM, c, &reqs[k]),
                  WEFT_SUCCESS, "iallreduce k");
    }
    for (int k = NR - 1; k >= 0; k--) MT_STATUS(t, weft_wait(&reqs[k]), WEFT_SUCCESS, "wait k");
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize 3");
    for (int k = 0; k < NR; k++) {
        long b = 0;
        for (size_t i = 0; i < n; i++) b += bufs[k][i] != ref_sum(t->size, 20 + k, i);
        MT_CHECK(t, b == 0, "in flight %d: %ld elements wrong", k, b);
        free(bufs[k]);
    }
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "stream destroy");
    free(in);
    free(out);
}

/* ---- 5. errors in stream tasks ------------------------------------------------- */
static void test_errors(mt_ctx_t *t, size_t n)
{
    weft_stream_t s;
    weft_comm_t c;
    if (!open_stream_comm(t, &s, &c)) return;
    atomic_int after = 0;
    /* A failing task: synchronize returns its error, the next user task is
     * skipped, and the error is cleared afterwards. */
    MT_STATUS(t, weft_stream_enqueue(s, fail_task, NULL), WEFT_SUCCESS, "enqueue failing task");
    MT_STATUS(t, weft_stream_enqueue(s, count_task, &after), WEFT_SUCCESS, "enqueue after");
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_ERR_INVALID_ARG, "synchronize after a failed task");
    MT_CHECK(t, atomic_load(&after) == 0, "a task after a failure ran");
    MT_STATUS(t, weft_stream_query(s), WEFT_SUCCESS, "query after the error was returned");
    MT_STATUS(t, weft_stream_enqueue(s, count_task, &after), WEFT_SUCCESS, "enqueue again");
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize again");
    MT_CHECK(t, atomic_load(&after) == 1, "the stream did not recover after synchronize");

    /* A failure on rank 0's stream before a collective: the collective still
     * runs on every rank (no hang), rank 0's stream reports the error. */
    int32_t *buf = malloc(n * sizeof *buf);
    for (size_t i = 0; i < n; i++) buf[i] = value(t->rank, 9, i);
    if (t->rank == 0)
        MT_STATUS(t, weft_stream_enqueue(s, fail_task, NULL), WEFT_SUCCESS, "enqueue failing");
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, buf, n, WEFT_INT32, WEFT_SUM, c), WEFT_SUCCESS,
              "allreduce after a failed task");
    MT_STATUS(t, weft_stream_synchronize(s), t->rank == 0 ? WEFT_ERR_INVALID_ARG : WEFT_SUCCESS,
              "synchronize with rank 0 failed");
    long b = 0;
    for (size_t i = 0; i < n; i++) b += buf[i] != ref_sum(t->size, 9, i);
    MT_CHECK(t, b == 0, "allreduce after a failed task: %ld wrong", b);

    /* Invalid arguments are reported at once, not through the stream. */
    MT_STATUS(t, weft_stream_enqueue(s, NULL, NULL), WEFT_ERR_INVALID_ARG, "enqueue NULL fn");
    MT_STATUS(t, weft_stream_enqueue(NULL, count_task, &after), WEFT_ERR_INVALID_ARG, "NULL stream");
    MT_STATUS(t, weft_stream_create_host(NULL), WEFT_ERR_INVALID_ARG, "create NULL");
    MT_STATUS(t, weft_allreduce(buf, buf, n, WEFT_INT32, WEFT_BAND + 100, c), WEFT_ERR_OP, "bad op");
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "stream destroy");
    free(buf);
}

/* ---- 6. bcast on a stream comm ---------------------------------------------------- */
static void test_bcast(mt_ctx_t *t, size_t n)
{
    weft_stream_t s;
    weft_comm_t c;
    if (!open_stream_comm(t, &s, &c)) return;
    int root = t->size - 1;
    int32_t *buf = calloc(n, sizeof *buf);
    fill_t f = {buf, n, root, 5, 3};
    if (t->rank == root) MT_STATUS(t, weft_stream_enqueue(s, fill_task, &f), WEFT_SUCCESS, "fill");
    MT_STATUS(t, weft_bcast(buf, n, WEFT_INT32, root, c), WEFT_SUCCESS, "bcast on a stream comm");
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
    long b = 0;
    for (size_t i = 0; i < n; i++) b += buf[i] != value(root, 5, i);
    MT_CHECK(t, b == 0, "bcast on a stream comm: %ld elements wrong", b);
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "stream destroy");
    free(buf);
}

/* ---- 7. allgather (and in place), reduce_scatter, alltoall on a stream comm -------
 * The input is written by a stream task after a delay (the compute before);
 * the result is compared after synchronize with MPI's collective on the same
 * values. With WEFT_STREAM_STAGE=1 this is the path device buffers take
 * (staging copies in stream order, the in-place form on the staging). */
enum {
    C_ALLGATHER,
    C_ALLGATHER_IN_PLACE,
    C_REDUCE_SCATTER,
    C_REDUCE_SCATTER_IN_PLACE,
    C_ALLTOALL,
    C_COUNT
};
static const char *const coll_name[C_COUNT] = {"allgather", "allgather in place",
                                               "reduce_scatter", "reduce_scatter in place",
                                               "alltoall"};

static weft_status_t issue_other(int kind, const int32_t *in, int32_t *out, size_t n,
                                 weft_comm_t c, weft_request_t *req)
{
    switch (kind) {
    case C_ALLGATHER:
    case C_ALLGATHER_IN_PLACE: {
        const void *src = kind == C_ALLGATHER ? (const void *)in : WEFT_IN_PLACE;
        return req ? weft_iallgather(src, out, n, WEFT_INT32, c, req)
                   : weft_allgather(src, out, n, WEFT_INT32, c);
    }
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_IN_PLACE: {
        const void *src = kind == C_REDUCE_SCATTER ? (const void *)in : WEFT_IN_PLACE;
        return req ? weft_ireduce_scatter(src, out, n, WEFT_INT32, WEFT_SUM, c, req)
                   : weft_reduce_scatter(src, out, n, WEFT_INT32, WEFT_SUM, c);
    }
    default:
        return req ? weft_ialltoall(in, out, n, WEFT_INT32, c, req)
                   : weft_alltoall(in, out, n, WEFT_INT32, c);
    }
}

static void test_other_colls(mt_ctx_t *t, size_t n)
{
    weft_stream_t s;
    weft_comm_t c;
    if (!open_stream_comm(t, &s, &c)) return;
    const size_t p = (size_t)t->size, r = (size_t)t->rank;
    for (int kind = 0; kind < C_COUNT; kind++) {
        for (int nb = 0; nb < 2; nb++) {
            const size_t nin = kind == C_ALLGATHER ? n : n * p;
            const size_t nout = kind == C_REDUCE_SCATTER ? n : n * p;
            int32_t *in = malloc(nin * sizeof *in), *out = malloc(nout * sizeof *out);
            int32_t *ref = malloc(nout * sizeof *ref), *vals = malloc(nin * sizeof *vals);
            if (!in || !out || !ref || !vals) {
                mt_error(t, "out of memory");
                free(in), free(out), free(ref), free(vals);
                break;
            }
            for (size_t i = 0; i < nin; i++) vals[i] = value(t->rank, kind + 10 * nb, i);
            for (size_t i = 0; i < nout; i++) out[i] = -1;
            /* the input, written in stream order after 20 ms */
            fill_t f = {in, nin, t->rank, kind + 10 * nb, 20};
            int32_t *own = out + r * n; /* in place: own block written into the output */
            fill_t fo = {own, n, t->rank, kind + 10 * nb, 20};
            fill_t fr = {out, n * p, t->rank, kind + 10 * nb, 20}; /* the whole input */
            if (kind == C_REDUCE_SCATTER_IN_PLACE) {
                MT_STATUS(t, weft_stream_enqueue(s, fill_task, &fr), WEFT_SUCCESS, "fill out");
            } else if (kind == C_ALLGATHER_IN_PLACE) {
                /* value(rank, iter, i) over the own block, as vals[r*n + i] */
                for (size_t i = 0; i < n; i++) vals[r * n + i] = value(t->rank, kind + 10 * nb, i);
                MT_STATUS(t, weft_stream_enqueue(s, fill_task, &fo), WEFT_SUCCESS, "fill own");
            } else {
                MT_STATUS(t, weft_stream_enqueue(s, fill_task, &f), WEFT_SUCCESS, "fill");
            }
            switch (kind) {
            case C_ALLGATHER:
                MPI_Allgather(vals, (int)n, MPI_INT32_T, ref, (int)n, MPI_INT32_T, MPI_COMM_WORLD);
                break;
            case C_ALLGATHER_IN_PLACE:
                MPI_Allgather(vals + r * n, (int)n, MPI_INT32_T, ref, (int)n, MPI_INT32_T,
                              MPI_COMM_WORLD);
                break;
            case C_REDUCE_SCATTER:
            case C_REDUCE_SCATTER_IN_PLACE:
                MPI_Reduce_scatter_block(vals, ref, (int)n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
                break;
            default:
                MPI_Alltoall(vals, (int)n, MPI_INT32_T, ref, (int)n, MPI_INT32_T, MPI_COMM_WORLD);
            }
            char what[64];
            snprintf(what, sizeof what, "%s%s on a stream comm", coll_name[kind],
                     nb ? " (nonblocking)" : "");
            if (nb) {
                weft_request_t req;
                MT_STATUS(t, issue_other(kind, in, out, n, c, &req), WEFT_SUCCESS, what);
                MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "weft_wait (the stream waits)");
            } else {
                MT_STATUS(t, issue_other(kind, in, out, n, c, NULL), WEFT_SUCCESS, what);
            }
            MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
            /* reduce_scatter in place: only the block at the start is the result */
            const size_t ncmp = kind == C_REDUCE_SCATTER_IN_PLACE ? n : nout;
            long bad = 0;
            for (size_t i = 0; i < ncmp; i++) bad += out[i] != ref[i];
            MT_CHECK(t, bad == 0, "%s, %zu elements: %ld wrong", what, n, bad);
            free(in), free(out), free(ref), free(vals);
        }
    }
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "stream destroy");
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    size_t sizes[] = {1, 1000, 70000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        mt_info(&t, "count %zu", n);
        test_blocking(&t, n);
        test_pipeline(&t, n, 12);
        test_many(&t, n, 4);
        test_nonblocking(&t, n);
    }
    test_errors(&t, 100);
    test_bcast(&t, 3000);
    test_other_colls(&t, 1);
    test_other_colls(&t, 7000);
    return mt_finish(&t);
}
