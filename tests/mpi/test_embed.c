/*
 * test_embed.c - the C ABI for embedders (no MPI handle needed): the world
 * communicator, creation from a Fortran handle, split, groups made by their
 * members alone, completion
 * callbacks on requests and on a communicator's operations, and completion
 * records written to a pipe. Results are checked against MPI's own collectives.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "weft_stream.h"

/* Sum of v over the ranks of MPI comm `mc`, by MPI (the reference). */
static long mpi_sum(MPI_Comm mc, long v)
{
    long s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, mc);
    return s;
}

/* An allreduce of (rank+1) on comm; checked against MPI on mc. */
static void check_allreduce(mt_ctx_t *t, weft_comm_t comm, MPI_Comm mc, int wrank, const char *what)
{
    long x = wrank + 1;
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, comm), WEFT_SUCCESS, what);
    long want = mpi_sum(mc, wrank + 1);
    MT_CHECK(t, x == want, "%s: allreduce %ld, MPI says %ld", what, x, want);
}

static void test_world(mt_ctx_t *t)
{
    weft_comm_t w = NULL;
    if (!MT_STATUS(t, weft_comm_world(NULL, NULL, &w), WEFT_SUCCESS, "weft_comm_world")) return;
    int r = -1, n = -1;
    weft_comm_rank(w, &r);
    weft_comm_size(w, &n);
    MT_CHECK(t, r == t->rank && n == t->size, "world rank/size %d/%d, MPI %d/%d", r, n, t->rank,
             t->size);
    check_allreduce(t, w, MPI_COMM_WORLD, t->rank, "world");
    MT_STATUS(t, weft_comm_destroy(w), WEFT_SUCCESS, "destroy world");

    /* From a Fortran handle, with params. */
    weft_comm_params_t p = WEFT_COMM_PARAMS_INITIALIZER;
    weft_comm_t f = NULL;
    if (MT_STATUS(t, weft_comm_create_f((int)MPI_Comm_c2f(MPI_COMM_WORLD), NULL, &p, &f),
                  WEFT_SUCCESS, "weft_comm_create_f")) {
        check_allreduce(t, f, MPI_COMM_WORLD, t->rank, "create_f");
        MT_STATUS(t, weft_comm_destroy(f), WEFT_SUCCESS, "destroy create_f");
    }
    MT_STATUS(t, weft_comm_world(NULL, NULL, NULL), WEFT_ERR_INVALID_ARG, "world out NULL");
}

static void test_split(mt_ctx_t *t)
{
    /* Two colors (even/odd), keys reversing the order; rank 0 stays out when
     * there are 3 or more ranks. */
    const int out = t->size >= 3 && t->rank == 0;
    const int color = out ? WEFT_UNDEFINED : t->rank % 2;
    weft_comm_t s = (weft_comm_t)(intptr_t)1; /* must be overwritten */
    if (!MT_STATUS(t, weft_comm_split(t->comm, color, t->size - t->rank, NULL, &s), WEFT_SUCCESS,
                   "weft_comm_split"))
        return;
    MPI_Comm ref;
    MPI_Comm_split(MPI_COMM_WORLD, out ? MPI_UNDEFINED : color, t->size - t->rank, &ref);
    if (out) {
        MT_CHECK(t, s == NULL, "WEFT_UNDEFINED: newcomm %p, want NULL", (void *)s);
    } else {
        int r = -1, n = -1, rr = -2, rn = -2;
        weft_comm_rank(s, &r);
        weft_comm_size(s, &n);
        MPI_Comm_rank(ref, &rr);
        MPI_Comm_size(ref, &rn);
        MT_CHECK(t, r == rr && n == rn, "split rank/size %d/%d, MPI_Comm_split %d/%d", r, n, rr, rn);
        weft_transport_t a = WEFT_TRANSPORT_DEFAULT, b = WEFT_TRANSPORT_DEFAULT;
        weft_comm_get_transport(s, &a);
        weft_comm_get_transport(t->comm, &b);
        MT_CHECK(t, a == b, "split transport %d, parent %d", (int)a, (int)b);
        check_allreduce(t, s, ref, t->rank, "split");
        MT_STATUS(t, weft_comm_destroy(s), WEFT_SUCCESS, "destroy split");
        MPI_Comm_free(&ref);
    }
    /* A bad color on one rank: every rank refuses, and comm keeps working. */
    weft_comm_t bad = NULL;
    const int c2 = t->rank == t->size - 1 ? -7 : 0;
    MT_STATUS(t, weft_comm_split(t->comm, c2, 0, NULL, &bad), WEFT_ERR_INVALID_ARG,
              "split with a bad color on one rank");
    MT_CHECK(t, bad == NULL, "refused split wrote newcomm");
    check_allreduce(t, t->comm, MPI_COMM_WORLD, t->rank, "after refused split");
}

/* Members of comm's ranks `list` (n of them, in that order) create their
 * group with Weft and with MPI; each is checked against the other. */
static void check_group(mt_ctx_t *t, const int *list, int n, const char *what)
{
    weft_comm_t g = (weft_comm_t)(intptr_t)1; /* must be overwritten */
    if (!MT_STATUS(t, weft_comm_create_group(t->comm, list, n, NULL, &g), WEFT_SUCCESS, what))
        return;
    MPI_Group wg, sg;
    MPI_Comm ref;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, n, list, &sg);
    MPI_Comm_create_group(MPI_COMM_WORLD, sg, 5, &ref);
    int r = -1, sz = -1, rr = -2, rn = -2;
    weft_comm_rank(g, &r);
    weft_comm_size(g, &sz);
    MPI_Comm_rank(ref, &rr);
    MPI_Comm_size(ref, &rn);
    MT_CHECK(t, r == rr && sz == rn && sz == n, "%s: rank/size %d/%d, MPI %d/%d, list of %d", what,
             r, sz, rr, rn, n);
    /* Weft's rank order is the list's: gather the world ranks. */
    int mine = t->rank, got[4] = {-1, -1, -1, -1};
    MT_STATUS(t, weft_allgather(&mine, got, 1, WEFT_INT32, g), WEFT_SUCCESS, "group allgather");
    for (int i = 0; i < n && i < 4; i++)
        MT_CHECK(t, got[i] == list[i], "%s: group rank %d is world rank %d, want %d", what, i,
                 got[i], list[i]);
    check_allreduce(t, g, ref, t->rank, what);
    MT_STATUS(t, weft_comm_destroy(g), WEFT_SUCCESS, "destroy group");
    MPI_Comm_free(&ref);
    MPI_Group_free(&sg);
    MPI_Group_free(&wg);
}

static void test_create_group(mt_ctx_t *t)
{
    /* The even ranks in reverse order and the odd ranks in order, created at
     * the same time by their members only: neither group's creation needs a
     * rank of the other. */
    int even[2], odd[2], ne = 0, no = 0;
    for (int q = t->size - 1; q >= 0; q--)
        if (q % 2 == 0 && ne < 2) even[ne++] = q;
    for (int q = 1; q < t->size && no < 2; q += 2) odd[no++] = q;
    if (t->rank % 2 == 0) check_group(t, even, ne, "even group");
    else check_group(t, odd, no, "odd group");
    /* The world communicator is unaffected and in step on every rank. */
    check_allreduce(t, t->comm, MPI_COMM_WORLD, t->rank, "after groups");

    /* A group of one rank, made while the others do nothing. */
    if (t->rank == t->size - 1) {
        int me = t->rank;
        check_group(t, &me, 1, "group of one");
    }

    /* Bad lists: refused on the calling rank, before any MPI call. */
    weft_comm_t g = NULL;
    int self2[2] = {t->rank, t->rank}, far[2] = {t->rank, t->size}, neg[1] = {-1};
    int other[1] = {(t->rank + 1) % t->size};
    MT_STATUS(t, weft_comm_create_group(t->comm, self2, 2, NULL, &g), WEFT_ERR_INVALID_ARG,
              "create_group: a rank twice");
    MT_STATUS(t, weft_comm_create_group(t->comm, far, 2, NULL, &g), WEFT_ERR_INVALID_ARG,
              "create_group: rank out of range");
    MT_STATUS(t, weft_comm_create_group(t->comm, neg, 1, NULL, &g), WEFT_ERR_INVALID_ARG,
              "create_group: negative rank");
    MT_STATUS(t, weft_comm_create_group(t->comm, self2, 0, NULL, &g), WEFT_ERR_INVALID_ARG,
              "create_group: no rank");
    MT_STATUS(t, weft_comm_create_group(t->comm, NULL, 1, NULL, &g), WEFT_ERR_INVALID_ARG,
              "create_group: ranks NULL");
    MT_STATUS(t, weft_comm_create_group(t->comm, self2, 1, NULL, NULL), WEFT_ERR_INVALID_ARG,
              "create_group: newcomm NULL");
    if (t->size > 1)
        MT_STATUS(t, weft_comm_create_group(t->comm, other, 1, NULL, &g), WEFT_ERR_INVALID_ARG,
                  "create_group: calling rank not listed");
    MT_CHECK(t, g == NULL, "refused create_group wrote newcomm");

    check_allreduce(t, t->comm, MPI_COMM_WORLD, t->rank, "after refused groups");
}

typedef struct {
    _Atomic int calls;
    _Atomic int status;
    _Atomic int saw_done; /* weft_test on the request said done inside the callback */
    weft_request_t req;   /* set before registering when the callback tests it */
    long *buf;            /* the allreduce's output, read inside the callback */
    _Atomic long seen;
} cb_t;

static void on_done(void *arg, weft_status_t st)
{
    cb_t *c = arg;
    atomic_store(&c->status, (int)st);
    if (c->buf) atomic_store(&c->seen, *c->buf);
    atomic_fetch_add(&c->calls, 1);
}

static void wait_calls(cb_t *c, int n)
{
    for (int i = 0; i < 100000000 && atomic_load(&c->calls) < n; i++) sched_yield();
}

static void test_callbacks(mt_ctx_t *t)
{
    const long want = mpi_sum(MPI_COMM_WORLD, t->rank + 1);
    for (int round = 0; round < 50; round++) {
        /* Registered while running (most rounds), then waited on: exactly
         * once, after the output is in place. */
        cb_t c = {0};
        long x = t->rank + 1;
        c.buf = &x;
        weft_request_t r = WEFT_REQUEST_NULL;
        MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, t->comm, &r),
                  WEFT_SUCCESS, "iallreduce");
        MT_STATUS(t, weft_request_on_complete(r, on_done, &c), WEFT_SUCCESS, "on_complete");
        MT_STATUS(t, weft_request_on_complete(r, on_done, &c), WEFT_ERR_INVALID_ARG,
                  "second on_complete");
        MT_STATUS(t, weft_wait(&r), WEFT_SUCCESS, "wait");
        wait_calls(&c, 1);
        MT_CHECK(t, atomic_load(&c.calls) == 1, "round %d: callback ran %d times", round,
                 atomic_load(&c.calls));
        MT_CHECK(t, atomic_load(&c.status) == WEFT_SUCCESS, "callback status %d",
                 atomic_load(&c.status));
        MT_CHECK(t, atomic_load(&c.seen) == want, "callback saw %ld, want %ld", atomic_load(&c.seen),
                 want);
        MT_STATUS(t, weft_request_on_complete(r, on_done, &c), WEFT_ERR_INVALID_REQUEST,
                  "on_complete after wait");
    }

    /* Registered after completion: runs at once on this thread. */
    cb_t c = {0};
    long x = 1;
    weft_request_t r = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, t->comm, &r),
              WEFT_SUCCESS, "iallreduce");
    int done = 0;
    weft_request_t copy = r;
    /* Let it complete without releasing it (weft_test would release it):
     * a second op's wait keeps the engine busy until both have usually
     * finished; registering on a running op is covered above either way. */
    weft_request_t r2 = WEFT_REQUEST_NULL;
    long y = 1;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &y, 1, WEFT_INT64, WEFT_SUM, t->comm, &r2),
              WEFT_SUCCESS, "iallreduce 2");
    MT_STATUS(t, weft_wait(&r2), WEFT_SUCCESS, "wait 2"); /* ops on one comm complete in order */
    MT_STATUS(t, weft_request_on_complete(r, on_done, &c), WEFT_SUCCESS, "on_complete late");
    wait_calls(&c, 1);
    MT_CHECK(t, atomic_load(&c.calls) == 1, "late registration: callback ran %d times (want 1)",
             atomic_load(&c.calls));
    MT_STATUS(t, weft_test(&copy, &done), WEFT_SUCCESS, "test after callback");
    MT_CHECK(t, done == 1 && x == t->size, "test done %d, x %ld (want %d)", done, x, t->size);

    /* Never waited on: the callback alone completes it (a future-style use),
     * the request is released afterwards with weft_test. */
    cb_t c3 = {0};
    long z = t->rank;
    c3.buf = &z;
    weft_request_t r3 = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &z, 1, WEFT_INT64, WEFT_MAX, t->comm, &r3),
              WEFT_SUCCESS, "iallreduce 3");
    MT_STATUS(t, weft_request_on_complete(r3, on_done, &c3), WEFT_SUCCESS, "on_complete 3");
    wait_calls(&c3, 1);
    MT_CHECK(t, atomic_load(&c3.calls) == 1 && atomic_load(&c3.seen) == t->size - 1,
             "engine-completed callback: %d calls, saw %ld", atomic_load(&c3.calls),
             atomic_load(&c3.seen));
    MT_STATUS(t, weft_test(&r3, &done), WEFT_SUCCESS, "test 3");
    MT_CHECK(t, done == 1, "request not done after its callback ran");

    /* Bad arguments. */
    MT_STATUS(t, weft_request_on_complete(WEFT_REQUEST_NULL, on_done, &c), WEFT_ERR_INVALID_REQUEST,
              "on_complete(NULL request)");
    MT_STATUS(t, weft_request_on_complete((weft_request_t)0x7777000012345ULL, on_done, &c),
              WEFT_ERR_INVALID_REQUEST, "on_complete(never issued)");
    weft_request_t r4 = WEFT_REQUEST_NULL;
    long w = 0;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &w, 1, WEFT_INT64, WEFT_SUM, t->comm, &r4),
              WEFT_SUCCESS, "iallreduce 4");
    MT_STATUS(t, weft_request_on_complete(r4, NULL, NULL), WEFT_ERR_INVALID_ARG, "on_complete(fn NULL)");
    MT_STATUS(t, weft_wait(&r4), WEFT_SUCCESS, "wait 4");

    /* A stream-bound request: completion belongs to the stream. */
    weft_stream_t hs = NULL;
    if (MT_STATUS(t, weft_stream_create_host(&hs), WEFT_SUCCESS, "host stream")) {
        weft_comm_t sc = NULL;
        if (MT_STATUS(t, weft_comm_world(hs, NULL, &sc), WEFT_SUCCESS, "stream comm")) {
            long v = 1;
            weft_request_t rs = WEFT_REQUEST_NULL;
            MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &v, 1, WEFT_INT64, WEFT_SUM, sc, &rs),
                      WEFT_SUCCESS, "stream iallreduce");
            MT_STATUS(t, weft_request_on_complete(rs, on_done, &c), WEFT_ERR_UNSUPPORTED,
                      "on_complete on a stream-bound request");
            MT_STATUS(t, weft_wait(&rs), WEFT_SUCCESS, "stream wait");
            MT_STATUS(t, weft_stream_synchronize(hs), WEFT_SUCCESS, "stream sync");
            MT_CHECK(t, v == t->size, "stream allreduce %ld, want %d", v, t->size);
            MT_STATUS(t, weft_comm_destroy(sc), WEFT_SUCCESS, "destroy stream comm");
        }
        MT_STATUS(t, weft_stream_destroy(hs), WEFT_SUCCESS, "destroy host stream");
    }
}

/* A communicator's callback (weft_comm_set_on_complete): one call per
 * nonblocking operation, naming the variable its request was stored in. */
#define CC_OPS 6
typedef struct {
    weft_request_t req;
    long x;                 /* the operation's buffer, read by the callback */
    _Atomic int calls, status, released;
    _Atomic long seen;
} cc_op_t;

typedef struct {
    cc_op_t ops[CC_OPS];
    int release;            /* the callback releases the request itself */
    _Atomic int stray;      /* calls naming no variable of ours */
} cc_t;

static void on_comm_done(void *arg, weft_request_t *req, weft_status_t st)
{
    cc_t *cc = arg;
    cc_op_t *o = NULL;
    for (int i = 0; i < CC_OPS; i++)
        if (&cc->ops[i].req == req) o = &cc->ops[i];
    if (o == NULL) {
        atomic_fetch_add(&cc->stray, 1);
        return;
    }
    atomic_store(&o->status, (int)st);
    atomic_store(&o->seen, o->x);
    if (cc->release) atomic_store(&o->released, weft_wait(req) == WEFT_SUCCESS ? 1 : -1);
    atomic_fetch_add(&o->calls, 1);
}

/* The operations cc_issue makes, in order: collectives and a message to the
 * next rank (received from the previous one). */
enum { CC_ALLREDUCE, CC_BCAST, CC_RECV, CC_SEND };
static const int cc_kind[CC_OPS] = {CC_ALLREDUCE, CC_BCAST, CC_RECV, CC_SEND, CC_ALLREDUCE, CC_BCAST};

/* Issue the CC_OPS operations on w into cc's variables. */
static void cc_issue(mt_ctx_t *t, weft_comm_t w, cc_t *cc)
{
    const int to = (t->rank + 1) % t->size, from = (t->rank + t->size - 1) % t->size;
    for (int i = 0; i < CC_OPS; i++) {
        cc_op_t *o = &cc->ops[i];
        weft_status_t st = WEFT_ERR_INTERNAL;
        switch (cc_kind[i]) {
        case CC_ALLREDUCE:
            o->x = t->rank + 1 + i;
            st = weft_iallreduce(WEFT_IN_PLACE, &o->x, 1, WEFT_INT64, WEFT_SUM, w, &o->req);
            break;
        case CC_BCAST:
            o->x = t->rank + 1 + i;
            st = weft_ibcast(&o->x, 1, WEFT_INT64, 0, w, &o->req);
            break;
        case CC_RECV:
            o->x = -1;
            st = weft_irecv(&o->x, 1, WEFT_INT64, from, 7, w, &o->req);
            break;
        case CC_SEND:
            o->x = t->rank + 100;
            st = weft_isend(&o->x, 1, WEFT_INT64, to, 7, w, &o->req);
            break;
        }
        MT_STATUS(t, st, WEFT_SUCCESS, "issue on a communicator with a callback");
    }
}

/* What op i of cc_issue holds once complete (MPI computes the sums). */
static long cc_want(mt_ctx_t *t, int i)
{
    switch (cc_kind[i]) {
    case CC_ALLREDUCE: return mpi_sum(MPI_COMM_WORLD, t->rank + 1 + i);
    case CC_BCAST: return 1 + i; /* root 0's value */
    case CC_RECV: return (t->rank + t->size - 1) % t->size + 100;
    default: return t->rank + 100;
    }
}

static void test_comm_callback(mt_ctx_t *t)
{
    weft_comm_t w = NULL;
    if (!MT_STATUS(t, weft_comm_world(NULL, NULL, &w), WEFT_SUCCESS, "comm for callbacks")) return;
    long want[CC_OPS];
    for (int i = 0; i < CC_OPS; i++) want[i] = cc_want(t, i);
    for (int release = 0; release < 2; release++) {
        cc_t *cc = calloc(1, sizeof *cc);
        if (cc == NULL) {
            MT_CHECK(t, cc != NULL, "out of memory");
            break;
        }
        cc->release = release;
        MT_STATUS(t, weft_comm_set_on_complete(w, on_comm_done, cc), WEFT_SUCCESS, "set callback");
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < CC_OPS; i++) {
                atomic_store(&cc->ops[i].calls, 0);
                atomic_store(&cc->ops[i].released, 0);
            }
            cc_issue(t, w, cc);
            if (!release) {
                /* One callback per request: no second one. */
                MT_STATUS(t, weft_request_on_complete(cc->ops[0].req, on_done, NULL),
                          WEFT_ERR_INVALID_ARG, "on_complete on a request with the comm's callback");
                for (int i = 0; i < CC_OPS; i++)
                    MT_STATUS(t, weft_wait(&cc->ops[i].req), WEFT_SUCCESS, "wait");
            }
            for (int i = 0; i < CC_OPS; i++) {
                cc_op_t *o = &cc->ops[i];
                const double give_up = MPI_Wtime() + 20.0; /* a missing call fails, late */
                while (atomic_load(&o->calls) < 1 && MPI_Wtime() < give_up) sched_yield();
                MT_CHECK(t, atomic_load(&o->calls) == 1, "release %d round %d op %d: %d calls",
                         release, round, i, atomic_load(&o->calls));
                MT_CHECK(t, atomic_load(&o->status) == WEFT_SUCCESS, "op %d status %d", i,
                         atomic_load(&o->status));
                MT_CHECK(t, atomic_load(&o->seen) == want[i], "op %d: callback saw %ld, want %ld", i,
                         atomic_load(&o->seen), want[i]);
                if (release)
                    MT_CHECK(t, atomic_load(&o->released) == 1 && o->req == WEFT_REQUEST_NULL,
                             "op %d: released %d by its callback, request %s", i,
                             atomic_load(&o->released),
                             o->req == WEFT_REQUEST_NULL ? "null" : "still set");
            }
        }
        /* Blocking calls have no request: no callback. */
        long b = 1;
        MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, &b, 1, WEFT_INT64, WEFT_SUM, w), WEFT_SUCCESS,
                  "blocking allreduce");
        /* Removed: later operations have none. */
        MT_STATUS(t, weft_comm_set_on_complete(w, NULL, NULL), WEFT_SUCCESS, "remove callback");
        for (int i = 0; i < CC_OPS; i++) atomic_store(&cc->ops[i].calls, 0);
        cc_issue(t, w, cc);
        for (int i = 0; i < CC_OPS; i++) {
            MT_STATUS(t, weft_wait(&cc->ops[i].req), WEFT_SUCCESS, "wait after removal");
            MT_CHECK(t, cc->ops[i].x == want[i], "op %d after removal: %ld, want %ld", i,
                     cc->ops[i].x, want[i]);
        }
        MT_STATUS(t, weft_comm_destroy(w), WEFT_SUCCESS, "destroy"); /* drains: callbacks ran */
        w = NULL;
        int late = 0;
        for (int i = 0; i < CC_OPS; i++) late += atomic_load(&cc->ops[i].calls);
        MT_CHECK(t, late == 0 && atomic_load(&cc->stray) == 0,
                 "after removal: %d callbacks, %d naming other variables", late,
                 atomic_load(&cc->stray));
        free(cc);
        if (release == 0 &&
            !MT_STATUS(t, weft_comm_world(NULL, NULL, &w), WEFT_SUCCESS, "comm for callbacks"))
            return;
    }

    /* Bad arguments. */
    MT_STATUS(t, weft_comm_set_on_complete(NULL, on_comm_done, NULL), WEFT_ERR_INVALID_COMM,
              "set_on_complete(NULL comm)");
    weft_stream_t hs = NULL;
    if (MT_STATUS(t, weft_stream_create_host(&hs), WEFT_SUCCESS, "host stream")) {
        weft_comm_t sc = NULL;
        if (MT_STATUS(t, weft_comm_world(hs, NULL, &sc), WEFT_SUCCESS, "stream comm")) {
            MT_STATUS(t, weft_comm_set_on_complete(sc, on_comm_done, NULL), WEFT_ERR_UNSUPPORTED,
                      "set_on_complete on a stream-bound communicator");
            MT_STATUS(t, weft_comm_destroy(sc), WEFT_SUCCESS, "destroy stream comm");
        }
        MT_STATUS(t, weft_stream_destroy(hs), WEFT_SUCCESS, "destroy host stream");
    }
}

/* A callback that issues the next op (a chain, as a framework's future
 * continuation does): nonblocking calls are allowed inside a callback. */
typedef struct {
    weft_comm_t comm;
    long v[8];
    weft_request_t reqs[8];
    _Atomic int next, fired;
    _Atomic int err;
} chain_t;

static void chain_cb(void *arg, weft_status_t st)
{
    chain_t *ch = arg;
    if (st != WEFT_SUCCESS) atomic_store(&ch->err, (int)st);
    int k = atomic_fetch_add(&ch->next, 1) + 1;
    if (k < 8) {
        weft_status_t s = weft_iallreduce(WEFT_IN_PLACE, &ch->v[k], 1, WEFT_INT64, WEFT_SUM,
                                          ch->comm, &ch->reqs[k]);
        if (s == WEFT_SUCCESS) s = weft_request_on_complete(ch->reqs[k], chain_cb, ch);
        if (s != WEFT_SUCCESS) atomic_store(&ch->err, (int)s);
    }
    atomic_fetch_add(&ch->fired, 1);
}

static void test_chain(mt_ctx_t *t)
{
    chain_t ch = {.comm = t->comm};
    for (int i = 0; i < 8; i++) ch.v[i] = i + t->rank;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &ch.v[0], 1, WEFT_INT64, WEFT_SUM, t->comm,
                                 &ch.reqs[0]), WEFT_SUCCESS, "chain start");
    MT_STATUS(t, weft_request_on_complete(ch.reqs[0], chain_cb, &ch), WEFT_SUCCESS, "chain cb");
    for (int i = 0; i < 100000000 && atomic_load(&ch.fired) < 8; i++) sched_yield();
    MT_CHECK(t, atomic_load(&ch.fired) == 8 && atomic_load(&ch.err) == 0,
             "chain: %d of 8 callbacks, error %d", atomic_load(&ch.fired), atomic_load(&ch.err));
    for (int i = 0; i < 8; i++) {
        MT_STATUS(t, weft_wait(&ch.reqs[i]), WEFT_SUCCESS, "chain wait");
        long want = mpi_sum(MPI_COMM_WORLD, i + t->rank);
        MT_CHECK(t, ch.v[i] == want, "chain op %d: %ld, want %ld", i, ch.v[i], want);
    }
}

/* weft_request_notify_fd: 16 in-flight allreduces notify one pipe; every
 * token arrives exactly once with its status, the output is in place when
 * its record is read, and a request completed already writes at once. */
static void test_notify_fd(mt_ctx_t *t)
{
    enum { N = 16 };
    int p[2];
    MT_CHECK(t, pipe(p) == 0, "pipe failed");
    long v[N];
    weft_request_t r[N];
    for (int i = 0; i < N; i++) {
        v[i] = i * 100 + t->rank;
        MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &v[i], 1, WEFT_INT64, WEFT_SUM, t->comm, &r[i]),
                  WEFT_SUCCESS, "notify: iallreduce");
        MT_STATUS(t, weft_request_notify_fd(r[i], p[1], 1000u + (uint64_t)i), WEFT_SUCCESS,
                  "notify: register");
    }
    int seen[N] = {0};
    for (int k = 0; k < N; k++) {
        weft_completion_record_t rec;
        ssize_t got = read(p[0], &rec, sizeof rec); /* blocks until a record comes */
        MT_CHECK(t, got == (ssize_t)sizeof rec, "notify: read %zd bytes", got);
        if (got != (ssize_t)sizeof rec) break;
        const uint64_t i = rec.token - 1000u;
        MT_CHECK(t, rec.token >= 1000u && i < N, "notify: unknown token %llu",
                 (unsigned long long)rec.token);
        if (i >= N) continue;
        MT_CHECK(t, rec.status == WEFT_SUCCESS && rec.reserved == 0, "notify: status %d",
                 (int)rec.status);
        seen[i]++;
        int done = 0;
        MT_STATUS(t, weft_test(&r[i], &done), WEFT_SUCCESS, "notify: test");
        MT_CHECK(t, done == 1, "notify: record of %llu read, request not done",
                 (unsigned long long)i);
        /* closed form: records arrive in a different order on each rank, so
         * no collective reference inside this loop */
        const long want = (long)t->size * (long)i * 100 + (long)t->size * (t->size - 1) / 2;
        MT_CHECK(t, v[i] == want, "notify: op %llu gave %ld, want %ld", (unsigned long long)i,
                 v[i], want);
    }
    for (int i = 0; i < N; i++) MT_CHECK(t, seen[i] == 1, "notify: token %d seen %d times", i, seen[i]);
    /* registered late (the op may have completed already: then the record
     * is written at once); a bad fd is refused without registering */
    long x = t->rank;
    weft_request_t q;
    MT_STATUS(t, weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, t->comm, &q),
              WEFT_SUCCESS, "notify: late iallreduce");
    MT_STATUS(t, weft_request_notify_fd(q, -1, 0), WEFT_ERR_INVALID_ARG, "notify: fd -1");
    MT_STATUS(t, weft_request_notify_fd(q, p[1], 77), WEFT_SUCCESS, "notify: late register");
    MT_STATUS(t, weft_request_notify_fd(q, p[1], 78), WEFT_ERR_INVALID_ARG, "notify: second");
    MT_STATUS(t, weft_wait(&q), WEFT_SUCCESS, "notify: late wait");
    weft_completion_record_t rec = {0};
    MT_CHECK(t, read(p[0], &rec, sizeof rec) == (ssize_t)sizeof rec && rec.token == 77,
             "notify: late record token %llu", (unsigned long long)rec.token);
    MT_STATUS(t, weft_request_notify_fd(q, p[1], 79), WEFT_ERR_INVALID_REQUEST,
              "notify: released request");
    /* nothing more was written */
    MT_CHECK(t, fcntl(p[0], F_SETFL, O_NONBLOCK) == 0, "fcntl");
    MT_CHECK(t, read(p[0], &rec, sizeof rec) < 0, "notify: an extra record in the pipe");
    close(p[0]);
    close(p[1]);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    test_world(&t);
    test_split(&t);
    test_create_group(&t);
    test_callbacks(&t);
    test_comm_callback(&t);
    test_chain(&t);
    test_notify_fd(&t);
    return mt_finish(&t);
}
