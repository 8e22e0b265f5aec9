/*
 * test_handles.c - misused handles at every public entry point: NULL,
 * destroyed, never created (made up), and from before a weft_finalize +
 * weft_init. Each call must return its documented status (doc/api.md,
 * "Bad handles") and the library must keep working afterwards.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mpitest.h"
#include "weft_halo.h"
#include "weft_stream.h"

/* A completion callback that must never run (registered on bad handles only). */
static void never_called(void *arg, weft_status_t st)
{
    (void)st;
    ++*(int *)arg;
}

static weft_status_t make_plan(mt_ctx_t *t, weft_comm_t comm, weft_halo_plan_t *plan)
{
    weft_halo_params_t hp = WEFT_HALO_PARAMS_INITIALIZER;
    hp.ndims = 1;
    hp.grid[0] = t->size;
    hp.local[0] = 4;
    hp.width_lo[0] = hp.width_hi[0] = 1;
    hp.dtype = WEFT_FLOAT32;
    return weft_halo_plan_create(comm, &hp, plan);
}

/* Every entry point that takes a communicator, with otherwise valid
 * arguments; each must return `want`. */
static void comm_calls(mt_ctx_t *t, weft_comm_t bad, weft_status_t want, const char *kind)
{
    char what[160];
    float buf[16] = {0}, out[64] = {0};
    int i = 0;
    weft_transport_t tp;
    weft_stream_t st;
    MPI_Comm mc;
    weft_algo_t algo;
    weft_request_t r = (weft_request_t)42;
    weft_comm_t nc = (weft_comm_t)(uintptr_t)7;
    weft_halo_plan_t plan = NULL;
#define CALL(expr)                                                                 \
    do {                                                                           \
        snprintf(what, sizeof what, "%s on a %s communicator", #expr, kind);       \
        MT_STATUS(t, (expr), want, what);                                          \
    } while (0)
    CALL(weft_comm_rank(bad, &i));
    CALL(weft_comm_size(bad, &i));
    CALL(weft_comm_get_transport(bad, &tp));
    CALL(weft_comm_stream(bad, &st));
    CALL(weft_comm_get_error(bad));
    CALL(weft_comm_get_mpi(bad, &mc));
    CALL(weft_comm_set_algo(bad, WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING));
    CALL(weft_query_algo(bad, WEFT_COLL_ALLREDUCE, 4, WEFT_FLOAT32, &algo));
    CALL(weft_allreduce(buf, out, 4, WEFT_FLOAT32, WEFT_SUM, bad));
    CALL(weft_iallreduce(buf, out, 4, WEFT_FLOAT32, WEFT_SUM, bad, &r));
    CALL(weft_reduce_scatter(buf, out, 1, WEFT_FLOAT32, WEFT_SUM, bad));
    CALL(weft_ireduce_scatter(buf, out, 1, WEFT_FLOAT32, WEFT_SUM, bad, &r));
    CALL(weft_allgather(buf, out, 1, WEFT_FLOAT32, bad));
    CALL(weft_iallgather(buf, out, 1, WEFT_FLOAT32, bad, &r));
    CALL(weft_bcast(buf, 4, WEFT_FLOAT32, 0, bad));
    CALL(weft_ibcast(buf, 4, WEFT_FLOAT32, 0, bad, &r));
    CALL(weft_reduce(buf, out, 4, WEFT_FLOAT32, WEFT_SUM, 0, bad));
    CALL(weft_ireduce(buf, out, 4, WEFT_FLOAT32, WEFT_SUM, 0, bad, &r));
    CALL(weft_alltoall(buf, out, 1, WEFT_FLOAT32, bad));
    CALL(weft_ialltoall(buf, out, 1, WEFT_FLOAT32, bad, &r));
    CALL(weft_gather(buf, out, 1, WEFT_FLOAT32, 0, bad));
    CALL(weft_igather(buf, out, 1, WEFT_FLOAT32, 0, bad, &r));
    CALL(weft_scatter(buf, out, 1, WEFT_FLOAT32, 0, bad));
    CALL(weft_iscatter(buf, out, 1, WEFT_FLOAT32, 0, bad, &r));
    CALL(weft_barrier(bad));
    CALL(weft_ibarrier(bad, &r));
    CALL(weft_send(buf, 1, WEFT_FLOAT32, 0, 1, bad));
    CALL(weft_isend(buf, 1, WEFT_FLOAT32, 0, 1, bad, &r));
    CALL(weft_recv(out, 1, WEFT_FLOAT32, 0, 1, bad));
    CALL(weft_irecv(out, 1, WEFT_FLOAT32, 0, 1, bad, &r));
    CALL(weft_sendrecv(buf, 1, 0, 1, out, 1, 0, 1, WEFT_FLOAT32, bad));
    CALL(weft_comm_split(bad, 0, 0, NULL, &nc));
    CALL(make_plan(t, bad, &plan));
    CALL(weft_comm_destroy(bad));
#undef CALL
    /* Nonblocking calls that fail leave WEFT_REQUEST_NULL in *req (so a
     * later weft_wait on it is harmless); other outputs are untouched. */
    MT_CHECK(t, r == WEFT_REQUEST_NULL, "failed nonblocking call left request %llx",
             (unsigned long long)r);
    MT_CHECK(t, nc == (weft_comm_t)(uintptr_t)7 && plan == NULL, "failed call wrote an output");
}

/* The library still works: an allreduce on comm checked against MPI. */
static void still_works(mt_ctx_t *t, weft_comm_t comm, const char *after)
{
    long x = t->rank + 1, want = (long)t->size * (t->size + 1) / 2;
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, comm), WEFT_SUCCESS, after);
    MT_CHECK(t, x == want, "after %s: allreduce %ld, want %ld", after, x, want);
}

static void test_comms(mt_ctx_t *t)
{
    comm_calls(t, NULL, WEFT_ERR_INVALID_COMM, "NULL");
    comm_calls(t, (weft_comm_t)(uintptr_t)0x12345, WEFT_ERR_INVALID_COMM, "made-up");
    comm_calls(t, (weft_comm_t)(uintptr_t)((7ull << 32) | 3ull), WEFT_ERR_INVALID_COMM, "made-up");
    weft_comm_t d = NULL;
    if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &d), WEFT_SUCCESS, "create")) return;
    still_works(t, d, "create");
    MT_STATUS(t, weft_comm_destroy(d), WEFT_SUCCESS, "destroy");
    comm_calls(t, d, WEFT_ERR_INVALID_COMM, "destroyed");
    still_works(t, t->comm, "calls on a destroyed communicator");
    /* A new communicator may take the destroyed one's place inside Weft: the
     * old handle must still be refused and must not name the new one. */
    weft_comm_t n = NULL;
    if (MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &n), WEFT_SUCCESS, "create again")) {
        MT_CHECK(t, n != d, "a new communicator got the destroyed one's handle");
        int r = -1;
        MT_STATUS(t, weft_comm_rank(d, &r), WEFT_ERR_INVALID_COMM, "rank of the old handle");
        still_works(t, n, "create again");
        MT_STATUS(t, weft_comm_destroy(n), WEFT_SUCCESS, "destroy again");
    }
}

static void test_requests(mt_ctx_t *t)
{
    int done = 0;
    weft_request_t r = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_wait(&r), WEFT_SUCCESS, "wait(WEFT_REQUEST_NULL)");
    MT_STATUS(t, weft_test(&r, &done), WEFT_SUCCESS, "test(WEFT_REQUEST_NULL)");
    MT_CHECK(t, done == 1, "test(WEFT_REQUEST_NULL) not done");
    MT_STATUS(t, weft_wait(NULL), WEFT_ERR_INVALID_ARG, "wait(NULL)");
    MT_STATUS(t, weft_test(NULL, &done), WEFT_ERR_INVALID_ARG, "test(NULL)");
    weft_request_t made_up = (weft_request_t)0x500000003ull;
    MT_STATUS(t, weft_wait(&made_up), WEFT_ERR_INVALID_REQUEST, "wait(made up)");
    made_up = (weft_request_t)0x500000003ull;
    MT_STATUS(t, weft_test(&made_up, &done), WEFT_ERR_INVALID_REQUEST, "test(made up)");
    long x = 1;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, t->comm, &r),
              WEFT_SUCCESS, "iallreduce");
    weft_request_t copy = r;
    MT_STATUS(t, weft_wait(&r), WEFT_SUCCESS, "wait");
    MT_STATUS(t, weft_wait(&copy), WEFT_ERR_INVALID_REQUEST, "wait on a released request");
    const weft_request_t released = copy; /* the refused wait left it as it was */
    MT_CHECK(t, released != WEFT_REQUEST_NULL, "a refused wait cleared the handle");
    copy = r;
    weft_request_t reqs[2] = {made_up, WEFT_REQUEST_NULL};
    MT_STATUS(t, weft_waitall(2, reqs), WEFT_ERR_INVALID_REQUEST, "waitall(made up)");
    MT_STATUS(t, weft_waitall(2, NULL), WEFT_ERR_INVALID_ARG, "waitall(NULL)");
    int calls = 0;
    MT_STATUS(t, weft_request_on_complete(made_up, never_called, &calls), WEFT_ERR_INVALID_REQUEST,
              "on_complete(made up)");
    MT_STATUS(t, weft_request_on_complete(WEFT_REQUEST_NULL, never_called, &calls),
              WEFT_ERR_INVALID_REQUEST, "on_complete(WEFT_REQUEST_NULL)");
    MT_STATUS(t, weft_request_on_complete(released, never_called, &calls), WEFT_ERR_INVALID_REQUEST,
              "on_complete on a released request");
    MT_STATUS(t, weft_request_notify_fd(made_up, 1, 7), WEFT_ERR_INVALID_REQUEST,
              "notify_fd(made up)");
    MT_STATUS(t, weft_request_notify_fd(WEFT_REQUEST_NULL, 1, 7), WEFT_ERR_INVALID_REQUEST,
              "notify_fd(WEFT_REQUEST_NULL)");
    MT_STATUS(t, weft_request_notify_fd(released, 1, 7), WEFT_ERR_INVALID_REQUEST,
              "notify_fd on a released request");
    MT_CHECK(t, calls == 0, "a callback on a bad handle ran %d times", calls);
    still_works(t, t->comm, "request misuse");
}

static void plan_calls(mt_ctx_t *t, weft_halo_plan_t bad, const char *kind)
{
    char what[160];
    float buf[16];
    size_t n = 0;
    int co[WEFT_HALO_MAX_DIMS], done = 0;
#define CALL(expr)                                                                 \
    do {                                                                           \
        snprintf(what, sizeof what, "%s on a %s plan", #expr, kind);               \
        MT_STATUS(t, (expr), WEFT_ERR_INVALID_ARG, what);                          \
    } while (0)
    CALL(weft_halo_buffer_count(bad, &n));
    CALL(weft_halo_coords(bad, co));
    CALL(weft_halo_start(bad, buf));
    CALL(weft_halo_start_accumulate(bad, buf));
    CALL(weft_halo_wait(bad));
    CALL(weft_halo_test(bad, &done));
    CALL(weft_halo_exchange(bad, buf));
    CALL(weft_halo_accumulate(bad, buf));
    if (bad != NULL) CALL(weft_halo_plan_destroy(bad));
#undef CALL
}


static void test_plans(mt_ctx_t *t)
{
    plan_calls(t, NULL, "NULL");
    MT_STATUS(t, weft_halo_plan_destroy(NULL), WEFT_SUCCESS, "destroy(NULL plan)");
    plan_calls(t, (weft_halo_plan_t)(uintptr_t)0x777, "made-up");
    weft_halo_plan_t p = NULL;
    if (!MT_STATUS(t, make_plan(t, t->comm, &p), WEFT_SUCCESS, "halo plan")) return;
    float buf[6] = {0};
    MT_STATUS(t, weft_halo_exchange(p, buf), WEFT_SUCCESS, "halo exchange");
    MT_STATUS(t, weft_halo_plan_destroy(p), WEFT_SUCCESS, "plan destroy");
    plan_calls(t, p, "destroyed");

    /* A plan whose communicator was destroyed first refuses to exchange. */
    weft_comm_t c = NULL;
    if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &c), WEFT_SUCCESS, "create")) return;
    if (MT_STATUS(t, make_plan(t, c, &p), WEFT_SUCCESS, "plan on c")) {
        MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "destroy c");
        MT_STATUS(t, weft_halo_exchange(p, buf), WEFT_ERR_INVALID_COMM, "exchange, comm destroyed");
        MT_STATUS(t, weft_halo_plan_destroy(p), WEFT_SUCCESS, "destroy plan of a dead comm");
    }

    /* On a stream-bound communicator: refused on every rank, and nothing of
     * the plan's agreement is left running (it ran to completion, not on
     * the stream, before the call returned). */
    weft_stream_t hs = NULL;
    if (!MT_STATUS(t, weft_stream_create_host(&hs), WEFT_SUCCESS, "host stream")) return;
    weft_comm_t sc = NULL;
    if (MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, hs, &sc), WEFT_SUCCESS, "stream comm")) {
        weft_halo_plan_t sp = NULL;
        /* (ASan sees the old defect: the queued agreement read a dead
         * stack variable and wrote into freed memory.) */
        for (int k = 0; k < 3; k++) {
            MT_STATUS(t, make_plan(t, sc, &sp), WEFT_ERR_UNSUPPORTED, "plan on a stream comm");
            MT_CHECK(t, sp == NULL, "refused plan written");
        }
        MT_STATUS(t, weft_stream_synchronize(hs), WEFT_SUCCESS, "stream sync");
        long v = 1;
        MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_INT64, WEFT_SUM, sc), WEFT_SUCCESS,
                  "stream allreduce");
        MT_STATUS(t, weft_stream_synchronize(hs), WEFT_SUCCESS, "stream sync 2");
        MT_CHECK(t, v == t->size, "stream allreduce %ld, want %d", v, t->size);
        MT_STATUS(t, weft_comm_destroy(sc), WEFT_SUCCESS, "destroy stream comm");
    }
    MT_STATUS(t, weft_stream_destroy(hs), WEFT_SUCCESS, "destroy stream");
}

/* Handles from before weft_finalize + weft_init. */
static void test_reinit(mt_ctx_t *t)
{
    weft_comm_t old = t->comm;
    long x = t->rank;
    weft_request_t r_old = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, old, &r_old),
              WEFT_SUCCESS, "iallreduce before finalize");
    weft_halo_plan_t p_old = NULL;
    MT_STATUS(t, make_plan(t, old, &p_old), WEFT_SUCCESS, "plan before finalize");
    MT_STATUS(t, weft_finalize(), WEFT_SUCCESS, "finalize");
    t->comm = NULL;
    int r = 0;
    MT_STATUS(t, weft_comm_rank(old, &r), WEFT_ERR_NOT_INITIALIZED, "rank after finalize");
    MT_STATUS(t, weft_request_notify_fd(r_old, 1, 7), WEFT_ERR_NOT_INITIALIZED,
              "notify_fd after finalize");
    int calls = 0;
    MT_STATUS(t, weft_request_on_complete(r_old, never_called, &calls), WEFT_ERR_NOT_INITIALIZED,
              "on_complete after finalize");
    if (!MT_STATUS(t, weft_init(NULL), WEFT_SUCCESS, "init again")) return;
    weft_comm_t c = NULL;
    if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &c), WEFT_SUCCESS, "create after init"))
        return;
    t->comm = c; /* mt_finish destroys it */
    comm_calls(t, old, WEFT_ERR_INVALID_COMM, "pre-finalize");
    plan_calls(t, p_old, "pre-finalize");
    long y = t->rank + 1;
    weft_request_t r_new = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &y, 1, WEFT_INT64, WEFT_SUM, c, &r_new),
              WEFT_SUCCESS, "iallreduce after init");
    MT_CHECK(t, r_new != r_old, "request handle %llx repeated across finalize + init",
             (unsigned long long)r_new);
    weft_request_t stale = r_old;
    MT_STATUS(t, weft_wait(&stale), WEFT_ERR_INVALID_REQUEST, "wait on a pre-finalize request");
    MT_STATUS(t, weft_wait(&r_new), WEFT_SUCCESS, "wait on the new request");
    long want = (long)t->size * (t->size + 1) / 2;
    MT_CHECK(t, y == want, "new allreduce %ld, want %ld", y, want);
    still_works(t, c, "re-init");
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    test_comms(&t);
    test_requests(&t);
    test_plans(&t);
    test_reinit(&t);
    return mt_finish(&t);
}
