/*
 * test_inflight.c - many nonblocking allreduces in flight at once, from two
 * threads, on several communicators, completed by weft_waitall, weft_test
 * polling and weft_wait in reverse order; then weft_finalize with operations
 * still in flight (mpiexec -n 2 and -n 4).
 *
 * Layout: the main thread creates four Weft communicators (collective, same
 * order on every rank): two dups of MPI_COMM_WORLD for thread A, one dup and
 * one split (rank % 2) for thread B, and computes every reference beforehand
 * with MPI_Allreduce on matching MPI communicators. Each thread issues only
 * on its own communicators, so within a communicator one thread issues, in
 * the same order on every rank. Sizes go from 4 B to 1 MiB; algorithms are
 * mixed with weft_comm_set_algo before each issue (auto, ring, recursive
 * doubling, Rabenseifner, tree, MPI); datatypes and ops are mixed too.
 *
 * Finally the main thread issues allreduces on the communicators that are
 * still alive and calls weft_finalize without waiting: it must return
 * (WEFT_SUCCESS, or WEFT_ERR_FINALIZING if it had to fail some), leave the
 * completed results correct, and weft_wait / weft_test on those handles then
 * return WEFT_ERR_NOT_INITIALIZED.
 *
 * Before that, one request raced by two threads: the main thread's weft_wait
 * against another thread's weft_test loop; exactly one of them may complete
 * it, the other gets WEFT_ERR_INVALID_REQUEST (never both, never a crash).
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"

#define OPS_PER_THREAD 32 /* per batch; two batches per thread */
#define NCOMM 4
#define FINAL_OPS 8

typedef struct op_desc {
    int comm;            /* index into the comm table */
    weft_datatype_t dt;
    weft_op_t op;
    weft_algo_t algo;    /* forced on the comm just before the issue */
    size_t count;
    int in_place;
    void *in, *out, *ref;
    weft_request_t req;
    int done;
} op_desc_t;

typedef struct comm_entry {
    weft_comm_t w;
    MPI_Comm m;          /* the MPI communicator with the same ranks (for references) */
    int size;
} comm_entry_t;

static comm_entry_t comms[NCOMM];

typedef struct thread_arg {
    const char *name;
    int rank;
    op_desc_t *ops;      /* 2 * OPS_PER_THREAD */
    atomic_long errors;
} thread_arg_t;

static const size_t sizes_bytes[] = {4, 32, 256, 2048, 16384, 131072, 1048576};
#define NSIZES ((int)(sizeof sizes_bytes / sizeof sizes_bytes[0]))
static const weft_algo_t algos[] = {WEFT_ALGO_AUTO, WEFT_ALGO_RING, WEFT_ALGO_RECURSIVE_DOUBLING,
                                    WEFT_ALGO_RABENSEIFNER, WEFT_ALGO_TREE, WEFT_ALGO_MPI};
#define NALGOS ((int)(sizeof algos / sizeof algos[0]))
static const struct {
    weft_datatype_t dt;
    weft_op_t op;
} kinds[] = {
    {WEFT_INT32, WEFT_SUM}, {WEFT_FLOAT64, WEFT_SUM}, {WEFT_FLOAT32, WEFT_MAX},
    {WEFT_INT64, WEFT_BXOR}, {WEFT_FLOAT32, WEFT_SUM}, {WEFT_UINT32, WEFT_MIN},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static void terr(thread_arg_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void terr(thread_arg_t *a, const char *fmt, ...)
{
    va_list ap;
    atomic_fetch_add_explicit(&a->errors, 1, memory_order_relaxed);
    fprintf(stderr, "[rank %d, thread %s] ERROR: ", a->rank, a->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* Element-wise comparison (ints bit-exact, floats within a small tolerance). */
static size_t compare(const void *got, const void *ref, size_t count, weft_datatype_t dt,
                      double rtol, size_t *first)
{
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double g = mt_get(got, i, dt), r = mt_get(ref, i, dt);
        int same;
        if (mt_dtype_is_int(dt)) {
            size_t es = mt_dtype_size(dt);
            same = memcmp((const char *)got + i * es, (const char *)ref + i * es, es) == 0;
        } else {
            double ar = r < 0 ? -r : r;
            double d = g - r;
            if (d < 0) d = -d;
            same = d <= rtol * (ar > 1 ? ar : 1);
        }
        if (!same && bad++ == 0) *first = i;
    }
    return bad;
}

static int issue(thread_arg_t *a, op_desc_t *d, int idx)
{
    weft_comm_t c = comms[d->comm].w;
    weft_status_t st = weft_comm_set_algo(c, WEFT_COLL_ALLREDUCE, d->algo);
    if (st != WEFT_SUCCESS) {
        terr(a, "op %d: weft_comm_set_algo(%s): %s", idx, weft_algo_name(d->algo),
             weft_status_name(st));
        return -1;
    }
    const void *src = d->in_place ? WEFT_IN_PLACE : d->in;
    if (d->in_place) memcpy(d->out, d->in, d->count * mt_dtype_size(d->dt));
    st = weft_iallreduce(src, d->out, d->count, d->dt, d->op, c, &d->req);
    if (st != WEFT_SUCCESS) {
        terr(a, "op %d: weft_iallreduce(%s, %s, count %zu, %s): %s", idx,
             weft_datatype_name(d->dt), weft_op_name(d->op), d->count, weft_algo_name(d->algo),
             weft_status_name(st));
        d->req = WEFT_REQUEST_NULL;
        d->done = -1;
        return -1;
    }
    return 0;
}

static void verify(thread_arg_t *a, op_desc_t *d, int idx)
{
    if (d->done != 1) return;
    size_t first = 0;
    double rtol = mt_dtype_is_int(d->dt) ? 0 : 8.0 * mt_eps(d->dt) * comms[d->comm].size;
    size_t bad = compare(d->out, d->ref, d->count, d->dt, rtol, &first);
    if (bad)
        terr(a, "op %d (comm %d, %s %s, count %zu, algo %s%s): %zu wrong elements, first [%zu] "
                "= %g, want %g",
             idx, d->comm, weft_datatype_name(d->dt), weft_op_name(d->op), d->count,
             weft_algo_name(d->algo), d->in_place ? ", in place" : "", bad, first,
             mt_get(d->out, first, d->dt), mt_get(d->ref, first, d->dt));
}

static void *thread_main(void *p)
{
    thread_arg_t *a = p;
    op_desc_t *ops = a->ops;

    /* Batch 1: issue all, then even ones by weft_waitall, odd ones by weft_test polling. */
    for (int i = 0; i < OPS_PER_THREAD; i++) issue(a, &ops[i], i);
    {
        int pending = 0;
        for (int i = 1; i < OPS_PER_THREAD; i += 2) pending += ops[i].done == 0;
        double t0 = MPI_Wtime();
        while (pending > 0) {
            for (int i = 1; i < OPS_PER_THREAD; i += 2) {
                if (ops[i].done != 0) continue;
                int done = 0;
                weft_status_t st = weft_test(&ops[i].req, &done);
                if (st != WEFT_SUCCESS) {
                    terr(a, "op %d: weft_test: %s", i, weft_status_name(st));
                    ops[i].done = -1;
                    pending--;
                } else if (done) {
                    if (ops[i].req != WEFT_REQUEST_NULL)
                        terr(a, "op %d: weft_test done but the handle was not reset", i);
                    ops[i].done = 1;
                    pending--;
                }
            }
            if (pending > 0) {
                if (MPI_Wtime() - t0 > 90) {
                    terr(a, "%d ops still not done after 90 s of weft_test polling", pending);
                    break;
                }
                nap_us(50);
            }
        }
        weft_request_t reqs[OPS_PER_THREAD / 2];
        int n = 0;
        for (int i = 0; i < OPS_PER_THREAD; i += 2) reqs[n++] = ops[i].req;
        weft_status_t st = weft_waitall((size_t)n, reqs);
        if (st != WEFT_SUCCESS) terr(a, "weft_waitall: %s", weft_status_name(st));
        for (int k = 0; k < n; k++) {
            if (reqs[k] != WEFT_REQUEST_NULL) terr(a, "weft_waitall left handle %d set", k);
            if (ops[2 * k].done == 0) ops[2 * k].done = st == WEFT_SUCCESS ? 1 : -1;
        }
    }
    for (int i = 0; i < OPS_PER_THREAD; i++) verify(a, &ops[i], i);

    /* Batch 2: issue all, then weft_wait in reverse issue order. */
    op_desc_t *ops2 = ops + OPS_PER_THREAD;
    for (int i = 0; i < OPS_PER_THREAD; i++) issue(a, &ops2[i], OPS_PER_THREAD + i);
    for (int i = OPS_PER_THREAD - 1; i >= 0; i--) {
        if (ops2[i].done != 0) continue;
        weft_status_t st = weft_wait(&ops2[i].req);
        if (st != WEFT_SUCCESS) {
            terr(a, "op %d: weft_wait: %s", OPS_PER_THREAD + i, weft_status_name(st));
            ops2[i].done = -1;
        } else {
            ops2[i].done = 1;
        }
    }
    for (int i = 0; i < OPS_PER_THREAD; i++) verify(a, &ops2[i], OPS_PER_THREAD + i);

    /* Leave the comms in auto mode. */
    for (int c = 0; c < NCOMM; c++)
        for (int i = 0; i < 2 * OPS_PER_THREAD; i++)
            if (ops[i].comm == c) {
                weft_comm_set_algo(comms[c].w, WEFT_COLL_ALLREDUCE, WEFT_ALGO_AUTO);
                break;
            }
    return NULL;
}

/* Allocate and fill one op; compute its reference with MPI on the main thread. */
static int make_op(mt_ctx_t *t, op_desc_t *d, int comm, int seq, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->comm = comm;
    d->dt = kinds[seq % NKINDS].dt;
    d->op = kinds[seq % NKINDS].op;
    d->algo = algos[(seq / 2) % NALGOS];
    size_t bytes = sizes_bytes[(seq * 3 + comm) % NSIZES];
    size_t es = mt_dtype_size(d->dt);
    d->count = bytes / es ? bytes / es : 1;
    d->in_place = seq % 5 == 4;
    d->in = malloc(d->count * es);
    d->out = malloc(d->count * es);
    d->ref = malloc(d->count * es);
    if (!d->in || !d->out || !d->ref) {
        mt_error(t, "out of memory");
        return -1;
    }
    mt_fill(d->in, d->count, d->dt, d->op, t->rank, seed);
    memset(d->out, 0xa5, d->count * es);
    int rc = MPI_Allreduce(d->in, d->ref, (int)d->count, mt_mpi_dtype(d->dt), mt_mpi_op(d->op),
                           comms[comm].m);
    if (rc != MPI_SUCCESS) {
        mt_error(t, "MPI_Allreduce (reference) failed: %d", rc);
        return -1;
    }
    return 0;
}

static void free_op(op_desc_t *d)
{
    free(d->in);
    free(d->out);
    free(d->ref);
}

/* The weft_test side of the race: poll until done or told the handle is gone. */
typedef struct race {
    weft_request_t req; /* a copy of the handle the main thread waits on */
    weft_status_t st;
    int got;            /* 1: this thread completed the request */
    _Atomic int ready;  /* the thread runs: the wait starts only then, so they race */
} race_t;

static void *race_test(void *arg)
{
    race_t *r = arg;
    atomic_store(&r->ready, 1);
    for (;;) {
        int done = 0;
        r->st = weft_test(&r->req, &done);
        if (r->st == WEFT_ERR_INVALID_REQUEST) return NULL;
        if (r->st < 0 || done) {
            r->got = 1;
            return NULL;
        }
        sched_yield();
    }
}

static void race_once(mt_ctx_t *t, weft_comm_t comm, int round)
{
    int32_t in = t->rank + round, out = -1;
    weft_request_t req = WEFT_REQUEST_NULL;
    if (!MT_STATUS(t, weft_iallreduce(&in, &out, 1, WEFT_INT32, WEFT_SUM, comm, &req),
                   WEFT_SUCCESS, "weft_iallreduce (race)"))
        return;
    race_t r = {.req = req, .st = WEFT_SUCCESS, .got = 0, .ready = 0};
    pthread_t th;
    int started = pthread_create(&th, NULL, race_test, &r) == 0;
    while (started && !atomic_load(&r.ready)) sched_yield();
    weft_status_t st = weft_wait(&req);
    if (started) pthread_join(th, NULL);
    else r.st = WEFT_ERR_INVALID_REQUEST; /* no rival: the wait alone must complete it */
    const int got_wait = st != WEFT_ERR_INVALID_REQUEST;
    MT_CHECK(t, got_wait + r.got == 1, "round %d: wait %s, test %s: %d completions", round,
             weft_status_name(st), weft_status_name(r.st), got_wait + r.got);
    MT_CHECK(t, (got_wait ? st : r.st) == WEFT_SUCCESS, "round %d: the completion returned %s",
             round, weft_status_name(got_wait ? st : r.st));
    const int32_t want = t->size * (t->size - 1) / 2 + t->size * round;
    MT_CHECK(t, out == want, "round %d: allreduce %d, expected %d", round, (int)out, (int)want);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;

    /* MPI communicators with the ranks of each Weft one: 0, 1, 2 are dups of
     * the world, 3 is the split by rank parity. */
    MPI_Comm mworld = MPI_COMM_NULL, msplit = MPI_COMM_NULL;
    int fail = MPI_Comm_dup(MPI_COMM_WORLD, &mworld) != MPI_SUCCESS;
    fail |= MPI_Comm_split(MPI_COMM_WORLD, t.rank % 2, t.rank, &msplit) != MPI_SUCCESS;
    if (fail) {
        mt_error(&t, "MPI_Comm_dup/split failed");
        return mt_finish(&t);
    }
    for (int c = 0; c < NCOMM; c++) {
        comms[c].m = c == 3 ? msplit : mworld;
        if (MPI_Comm_size(comms[c].m, &comms[c].size) != MPI_SUCCESS) {
            mt_error(&t, "MPI_Comm_size failed");
            fail = 1;
        }
        weft_status_t st = weft_comm_create(comms[c].m, NULL, &comms[c].w);
        if (!MT_STATUS(&t, st, WEFT_SUCCESS, "weft_comm_create")) {
            comms[c].w = NULL;
            fail = 1;
        }
    }
    int anyfail = 0;
    if (MPI_Allreduce(&fail, &anyfail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        anyfail = 1;
    if (anyfail) {
        mt_error(&t, "communicator setup failed");
        goto finish_plain;
    }

    /* Two threads: A on comms 0 and 1, B on comms 2 and 3. */
    static op_desc_t ops[2][2 * OPS_PER_THREAD];
    thread_arg_t ta[2] = {{.name = "A", .rank = t.rank, .ops = ops[0]},
                          {.name = "B", .rank = t.rank, .ops = ops[1]}};
    int made = 1;
    for (int th = 0; th < 2 && made; th++)
        for (int i = 0; i < 2 * OPS_PER_THREAD; i++)
            if (make_op(&t, &ops[th][i], 2 * th + (i % 2), i + 100 * th,
                        (uint64_t)(1000 * th + i)) != 0) {
                made = 0;
                break;
            }
    int allmade = 0;
    if (MPI_Allreduce(&made, &allmade, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        allmade = 0;
    if (!allmade) {
        mt_error(&t, "setting up the operations failed");
        goto free_ops;
    }
    mt_info(&t, "issuing %d allreduces from 2 threads on %d communicators", 4 * OPS_PER_THREAD,
            NCOMM);
    pthread_t tid[2];
    int started[2] = {0, 0};
    for (int th = 0; th < 2; th++) {
        if (pthread_create(&tid[th], NULL, thread_main, &ta[th]) != 0)
            mt_error(&t, "pthread_create failed");
        else
            started[th] = 1;
    }
    if (!started[0] || !started[1]) {
        /* The other ranks would wait forever on our missing thread's comms. */
        fprintf(stderr, "[rank %d] cannot start the test threads\n", t.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int th = 0; th < 2; th++) {
        pthread_join(tid[th], NULL);
        t.errors += atomic_load(&ta[th].errors);
    }
    mt_info(&t, "threads done (%.2f s)", mt_elapsed(&t));

    /* All four communicators are still usable after the storm. */
    for (int c = 0; c < NCOMM; c++)
        MT_STATUS(&t, weft_comm_get_error(comms[c].w), WEFT_SUCCESS, "comm_get_error");

    /* One request, two threads (see the top). */
    for (int round = 0; round < 50; round++) race_once(&t, comms[0].w, round);

    /* Finalize with operations in flight: destroy comm 1 and 2 first
     * (collective, same order everywhere), keep 0, 3 and the world comm alive
     * for weft_finalize to clean up. */
    MT_STATUS(&t, weft_comm_destroy(comms[1].w), WEFT_SUCCESS, "comm_destroy(1)");
    MT_STATUS(&t, weft_comm_destroy(comms[2].w), WEFT_SUCCESS, "comm_destroy(2)");
    comms[1].w = comms[2].w = NULL;
    {
        op_desc_t fin[FINAL_OPS];
        int ok = 1;
        for (int i = 0; i < FINAL_OPS; i++) {
            int c = (i % 3 == 0) ? 0 : (i % 3 == 1 ? 3 : -1); /* -1: the world comm of mt_init */
            int ci = c < 0 ? 0 : c;
            if (make_op(&t, &fin[i], ci, 7 * i + 1, (uint64_t)(5000 + i)) != 0) ok = 0;
            fin[i].algo = WEFT_ALGO_AUTO;
            fin[i].in_place = 0;
            fin[i].comm = c; /* remembered for the issue below */
        }
        int allok = 0;
        if (MPI_Allreduce(&ok, &allok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
            allok = 0;
        if (!allok) {
            mt_error(&t, "setting up the final operations failed");
            for (int i = 0; i < FINAL_OPS; i++) free_op(&fin[i]);
            goto free_ops;
        }
        int issued[FINAL_OPS];
        for (int i = 0; i < FINAL_OPS; i++) {
            weft_comm_t c = fin[i].comm < 0 ? t.comm : comms[fin[i].comm].w;
            weft_status_t st =
                weft_iallreduce(fin[i].in, fin[i].out, fin[i].count, fin[i].dt, fin[i].op, c,
                                &fin[i].req);
            issued[i] = MT_STATUS(&t, st, WEFT_SUCCESS, "iallreduce before finalize");
        }
        double t0 = MPI_Wtime();
        weft_status_t st = weft_finalize();
        double dt = MPI_Wtime() - t0;
        t.comm = NULL;
        comms[0].w = comms[3].w = NULL;
        MT_CHECK(&t, st == WEFT_SUCCESS || st == WEFT_ERR_FINALIZING,
                 "weft_finalize with ops in flight returned %s", weft_status_name(st));
        mt_info(&t, "weft_finalize with %d ops in flight took %.3f s: %s", FINAL_OPS, dt,
                weft_status_name(st));
        MT_CHECK(&t, weft_initialized() == 0, "still initialised after weft_finalize");
        for (int i = 0; i < FINAL_OPS; i++) {
            if (!issued[i]) continue;
            if (st == WEFT_SUCCESS) {
                /* Finalize says it completed them: the results must be there. */
                thread_arg_t me = {.name = "main", .rank = t.rank};
                fin[i].done = 1;
                if (fin[i].comm < 0) fin[i].comm = 0; /* same ranks as comm 0 */
                verify(&me, &fin[i], 1000 + i);
                t.errors += atomic_load(&me.errors);
            }
            weft_request_t h = fin[i].req;
            MT_STATUS(&t, weft_wait(&fin[i].req), WEFT_ERR_NOT_INITIALIZED,
                      "weft_wait after finalize");
            int done = 0;
            MT_STATUS(&t, weft_test(&h, &done), WEFT_ERR_NOT_INITIALIZED,
                      "weft_test after finalize");
        }
        for (int i = 0; i < FINAL_OPS; i++) free_op(&fin[i]);
    }

free_ops:
    for (int th = 0; th < 2; th++)
        for (int i = 0; i < 2 * OPS_PER_THREAD; i++) free_op(&ops[th][i]);

finish_plain:
    /* Weft may or may not be finalised here (error paths): finish it. */
    if (weft_initialized()) {
        for (int c = 0; c < NCOMM; c++)
            if (comms[c].w) weft_comm_destroy(comms[c].w);
        if (t.comm) weft_comm_destroy(t.comm);
        t.comm = NULL;
        weft_finalize();
    }
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
    if (mworld != MPI_COMM_NULL) MPI_Comm_free(&mworld);
    if (msplit != MPI_COMM_NULL) MPI_Comm_free(&msplit);
    MPI_Finalize();
    return total ? 1 : 0;
}
