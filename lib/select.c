/*
 * select.c - per-call algorithm selection: the one place that decides which
 * algorithm a call runs, for host and device buffers, and says why
 * (weft__select_explain; lib/stream.c only stages what this chose).
 *
 * Order of precedence for a call on communicator c:
 *   1. weft_comm_set_algo(c, coll, algo)        (per communicator, at run time)
 *   2. WEFT_<COLL>_ALGO                         (environment, read at init)
 *   3. a rule of the tuning file (WEFT_TUNING_FILE, lib/tuning.c) matching
 *      (coll, p, bytes)
 *   4. the alpha-beta-gamma cost model: the cheapest algorithm for (p, bytes),
 *      with alpha, beta, gamma from the tuning file, or measured when the
 *      first communicator is created (WEFT_MEASURE=1), or built-in defaults.
 * then, on device buffers, the device rule (NCCL, see select.h).
 * Every rank must pick the same algorithm for the same call: the inputs to
 * 3 and 4 are identical on all ranks (the measurement is broadcast from the
 * communicator's rank 0).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "tuning.h"
#include "weft_internal.h"

static struct {
    int have_cost;         /* alpha/beta/gamma known process-wide */
    weft__cost_t cost;
    int file_cost;         /* they came from the tuning file */
} S;

/* Built-in defaults, used when nothing is measured: shared-memory-like values. */
static const weft__cost_t default_cost = {1.5e-6, 2.0e-10, 2.5e-10};

static const char *const coll_names[WEFT_COLL_COUNT] = {
    "allreduce", "reduce_scatter", "allgather", "bcast", "reduce",
    "alltoall", "gather", "scatter", "barrier",
};

const char *weft__coll_name(weft_coll_t coll)
{
    return (unsigned)coll < WEFT_COLL_COUNT ? coll_names[coll] : NULL;
}

/* weft_init's caller thread. */
weft_status_t weft__select_load(void)
{
    weft__tuning_clear();
    S.have_cost = S.file_cost = 0;
    if (weft__cfg.tuning_file[0] == '\0') return WEFT_SUCCESS;
    WEFT__CHECK(weft__tuning_parse(weft__cfg.tuning_file));
    if (weft__tuning_cost(&S.cost)) S.have_cost = S.file_cost = 1;
    return WEFT_SUCCESS;
}

/* ---- measurement ------------------------------------------------------------------ */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Ping-pong between ranks 0 and 1 of c: fastest one-way time for `bytes`.
 * The minimum, not the median: on a loaded node the median measures the
 * load, while the minimum measures what the hardware does. */
static weft_status_t pingpong(weft__comm_t *c, void *buf, int bytes, int iters, double *one_way)
{
    double t[32];
    if (iters > 32) iters = 32;
    for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        if (c->rank == 0) {
            WEFT__MPI_CHECK(MPI_Send(buf, bytes, MPI_BYTE, 1, 0, c->mpi));
            WEFT__MPI_CHECK(MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, c->mpi, MPI_STATUS_IGNORE));
        } else if (c->rank == 1) {
            WEFT__MPI_CHECK(MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, c->mpi, MPI_STATUS_IGNORE));
            WEFT__MPI_CHECK(MPI_Send(buf, bytes, MPI_BYTE, 0, 0, c->mpi));
        }
        t[i] = (MPI_Wtime() - t0) / 2;
    }
    qsort(t, (size_t)iters, sizeof t[0], cmp_double);
    *one_way = t[0];
    return WEFT_SUCCESS;
}

/*
 * alpha, beta: ping-pongs of 8 B, 64 KiB and 1 MiB. Beta is the slope
 * between the two large sizes; alpha is that line's intercept (at least the
 * 8 B time). The intercept, not the 8 B latency: the algorithms' messages
 * that matter for a choice are large enough to use the transport's
 * rendezvous protocol, whose handshake costs several small-message
 * latencies. gamma: the float32 sum kernel on 256 Ki elements.
 */
static weft_status_t measure(weft__comm_t *c, weft__cost_t *out)
{
    enum { BIG = 1 << 20, MID = 64 << 10, SMALL = 8 };
    weft_status_t st = WEFT_SUCCESS;
    char *buf = calloc(2, BIG);
    if (buf == NULL) return WEFT_ERR_NO_MEMORY;
    double t_small = 0, t_mid = 0, t_big = 0;
    if (c->rank <= 1) {
        WEFT__CHECK_GOTO(pingpong(c, buf, SMALL, 2, &t_small), st, out); /* warm up */
        WEFT__CHECK_GOTO(pingpong(c, buf, SMALL, 31, &t_small), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, MID, 2, &t_mid), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, MID, 15, &t_mid), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, BIG, 1, &t_big), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, BIG, 7, &t_big), st, out);
    }
    /* gamma: float32 sum of 256 Ki elements, fastest of 5 */
    double g[5];
    for (int i = 0; i < 5; i++) {
        double t0 = weft__now();
        weft__reduce(buf, buf + BIG, BIG / 4, WEFT_FLOAT32, WEFT_SUM);
        g[i] = (weft__now() - t0) / BIG;
    }
    qsort(g, 5, sizeof g[0], cmp_double);
    out->beta = t_big > t_mid ? (t_big - t_mid) / (BIG - MID) : default_cost.beta;
    double intercept = t_mid - MID * out->beta;
    out->alpha = intercept > t_small ? intercept : t_small > 0 ? t_small : default_cost.alpha;
    out->gamma = g[0] > 0 ? g[0] : default_cost.gamma;
out:
    free(buf);
    return st;
}

/* Collective over c: agree on the cost parameters (rank 0's view wins). */
weft_status_t weft__select_init(weft__comm_t *c)
{
    double v[4] = {S.have_cost, S.cost.alpha, S.cost.beta, S.cost.gamma};
    WEFT__MPI_CHECK(PMPI_Bcast(v, 4, MPI_DOUBLE, 0, c->mpi));
    if (v[0] == 0 && weft__cfg.measure && c->size > 1) {
        weft__cost_t m = default_cost;
        weft_status_t st = measure(c, &m);
        int ok = st == WEFT_SUCCESS, all = 0;
        WEFT__MPI_CHECK(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->mpi));
        if (!all) return st != WEFT_SUCCESS ? st : WEFT_ERR_COMM_BROKEN;
        v[0] = 1;
        v[1] = m.alpha;
        v[2] = m.beta;
        v[3] = m.gamma;
        WEFT__MPI_CHECK(PMPI_Bcast(v, 4, MPI_DOUBLE, 0, c->mpi));
        WEFT__INFO("measured alpha %.3g s, beta %.3g s/B, gamma %.3g s/B", v[1], v[2], v[3]);
    }
    if (v[0] != 0) {
        c->cost = (weft__cost_t){v[1], v[2], v[3]};
        /* Remember process-wide (same machine): later comms reuse it. Only the
         * caller thread of comm creation writes S here. */
        if (!S.have_cost) {
            S.cost = c->cost;
            S.have_cost = 1;
        }
    } else {
        c->cost = default_cost;
    }
    return WEFT_SUCCESS;
}

/* ---- the choice ---------------------------------------------------------------------- */
static bool usable(const weft__algo_impl_t *impl, weft_datatype_t dtype)
{
    return impl != NULL && (impl->supports == NULL || impl->supports(dtype, WEFT_SUM));
}

/* The cost model; with ex, every candidate's cost too. Any thread. */
static weft_algo_t model(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dtype,
                         const weft__cost_t *cost, double *best_cost, weft__select_explain_t *ex)
{
    int n = 0;
    const weft__algo_impl_t *const *list = weft__algo_list(coll, &n);
    weft_algo_t best = WEFT_ALGO_AUTO;
    double bc = INFINITY;
    if (ex) ex->ncand = 0;
    for (int i = 0; i < n; i++) {
        double t = NAN;
        if (list[i]->cost != NULL && usable(list[i], dtype)) {
            t = list[i]->cost(p, bytes, cost);
            if (t < bc) { /* strict: the earlier entry wins ties */
                bc = t;
                best = list[i]->id;
            }
        }
        if (ex && ex->ncand < WEFT__SELECT_MAX_CAND) {
            ex->cand[ex->ncand].algo = list[i]->id;
            ex->cand[ex->ncand].cost = t;
            ex->ncand++;
        }
    }
    if (best_cost) *best_cost = bc;
    return best;
}

weft_algo_t weft__select_model(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dtype,
                               const weft__cost_t *cost, double *best_cost)
{
    return model(coll, p, bytes, dtype, cost, best_cost, NULL);
}

static const char *const source_names[] = {
    [WEFT__SELECT_COMM] = "comm", [WEFT__SELECT_ENV] = "env", [WEFT__SELECT_RULE] = "rule",
    [WEFT__SELECT_MODEL] = "model", [WEFT__SELECT_DEVICE] = "device",
};

const char *weft__select_source_name(weft__select_source_t s)
{
    return (unsigned)s < sizeof source_names / sizeof source_names[0] ? source_names[s] : "?";
}

/* Any thread (see select.h). */
weft_algo_t weft__select_explain(const weft__select_comm_t *sc, weft_coll_t coll, size_t bytes,
                                 weft_datatype_t dtype, weft_op_t rop, weft__memkind_t mem,
                                 weft__select_explain_t *ex)
{
    weft__select_source_t src;
    weft_algo_t a = sc->forced;
    int rule = -1;
    if (a != WEFT_ALGO_AUTO) {
        src = WEFT__SELECT_COMM;
    } else if (weft__cfg.force_algo[coll] != WEFT_ALGO_AUTO) {
        a = weft__cfg.force_algo[coll];
        src = WEFT__SELECT_ENV;
    } else if ((rule = weft__tuning_lookup(coll, sc->size, bytes, dtype, &a)) >= 0) {
        src = WEFT__SELECT_RULE;
    } else {
        src = WEFT__SELECT_MODEL;
        a = WEFT_ALGO_AUTO; /* computed below */
    }
    weft_algo_t replaced = WEFT_ALGO_AUTO;
    /* Device buffers: the device algorithm (NCCL) when it was named, or when
     * nothing is forced and the call is large enough, and it can serve. */
    const bool nccl_runs = coll == WEFT_COLL_ALLREDUCE && mem == WEFT__MEM_DEVICE &&
                           sc->nccl != NULL && sc->nccl->supports(dtype, rop);
    if (nccl_runs) {
        bool forced = src == WEFT__SELECT_COMM || src == WEFT__SELECT_ENV;
        if (a == WEFT_ALGO_NCCL || (!forced && bytes >= weft__cfg.nccl_min_bytes)) {
            if (a != WEFT_ALGO_NCCL) src = WEFT__SELECT_DEVICE;
            a = WEFT_ALGO_NCCL;
        }
    }
    /* A device-only algorithm that cannot run here gives way to the cost
     * model, unless forced on the communicator for device buffers: the call
     * then fails (lib/stream.c), as asked. */
    if (a != WEFT_ALGO_AUTO && !nccl_runs && weft__algo_device_only(coll, a) &&
        !(mem == WEFT__MEM_DEVICE && src == WEFT__SELECT_COMM)) {
        replaced = a;
        a = WEFT_ALGO_AUTO; /* the cost model's; src still says who asked */
    }
    if (ex != NULL) {
        double mc = INFINITY;
        ex->model = model(coll, sc->size, bytes, dtype, &sc->cost, &mc, ex);
        ex->model_cost = mc;
        if (a == WEFT_ALGO_AUTO) a = ex->model;
        ex->algo = a;
        ex->source = src;
        ex->rule = src == WEFT__SELECT_RULE ? rule : -1;
        ex->rule_line = src == WEFT__SELECT_RULE ? weft__tuning_rule_line(rule) : 0;
        ex->replaced = replaced;
    } else if (a == WEFT_ALGO_AUTO) {
        a = model(coll, sc->size, bytes, dtype, &sc->cost, NULL, NULL);
    }
    return a;
}

/* Any thread. */
void weft__select_comm_of(weft__comm_t *c, weft_coll_t coll, weft__select_comm_t *sc)
{
    sc->size = c->size;
    sc->cost = c->cost;
    sc->forced = (weft_algo_t)atomic_load_explicit(&c->force_algo[coll], memory_order_relaxed);
    sc->nccl = weft__stream_has_nccl(c) ? weft__nccl_backend() : NULL;
}

weft_algo_t weft__select(weft__comm_t *c, weft_coll_t coll, size_t bytes, weft_datatype_t dtype,
                         weft_op_t rop, weft__memkind_t mem)
{
    weft__select_comm_t sc;
    weft__select_comm_of(c, coll, &sc);
    return weft__select_explain(&sc, coll, bytes, dtype, rop, mem, NULL);
}

/* Any thread. On a communicator bound to a device stream the answer is for
 * device buffers (what the call would run with them). */
weft_status_t weft_query_algo(weft_comm_t comm, weft_coll_t coll, size_t count,
                              weft_datatype_t dtype, weft_algo_t *algo)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (algo == NULL || (unsigned)coll >= WEFT_COLL_COUNT) return WEFT_ERR_INVALID_ARG;
    size_t es = weft__dtype_size(dtype);
    if (es == 0) return WEFT_ERR_DATATYPE;
    if (count > SIZE_MAX / es) return WEFT_ERR_COUNT_OVERFLOW;
    *algo = weft__select(c, coll, count * es, dtype, WEFT_SUM, weft__stream_default_memkind(c));
    return WEFT_SUCCESS;
}
