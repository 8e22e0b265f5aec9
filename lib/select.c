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
#include "measure.h"
#include "tuning.h"
#include "weft_internal.h"

/* The process-wide cost parameters, one set per kind of communicator: [0]
 * for those on one node (alpha/beta: the transport inside the node), [1] for
 * those that span nodes (alpha/beta across nodes, alpha_node/beta_node
 * inside one). A one-node comm's figures never stand for a multi-node comm's
 * cross-node links, nor the other way round. */
static struct {
    int have_cost[2];      /* known process-wide */
    weft__cost_t cost[2];
    int file_cost;         /* they came from the tuning file */
} S;

/* Built-in defaults, used when nothing is measured: shared-memory-like values. */
static const weft__cost_t default_cost = {.alpha = 1.5e-6, .beta = 2.0e-10, .gamma = 2.5e-10};

static const char *const coll_names[WEFT_COLL_COUNT] = {
    "allreduce", "reduce_scatter", "allgather", "bcast", "reduce",
    "alltoall", "gather", "scatter", "barrier", "allgatherv", "alltoallv",
    "gatherv", "scatterv", "reduce_scatterv",
};

const char *weft__coll_name(weft_coll_t coll)
{
    return (unsigned)coll < WEFT_COLL_COUNT ? coll_names[coll] : NULL;
}

/* weft_init's caller thread. */
weft_status_t weft__select_load(void)
{
    weft__tuning_clear();
    S.have_cost[0] = S.have_cost[1] = S.file_cost = 0;
    if (weft__cfg.tuning_file[0] == '\0') return WEFT_SUCCESS;
    WEFT__CHECK(weft__tuning_parse(weft__cfg.tuning_file));
    weft__cost_t fc;
    if (weft__tuning_cost(&fc)) {
        /* multi-node comms: the file as it is; one-node comms: the node
         * figures, when the file has them, are their alpha/beta */
        S.cost[1] = fc;
        S.cost[0] = fc;
        if (fc.alpha_node > 0 || fc.beta_node > 0) {
            S.cost[0].alpha = fc.alpha_node;
            S.cost[0].beta = fc.beta_node;
        }
        S.cost[0].alpha_node = S.cost[0].beta_node = 0;
        S.have_cost[0] = S.have_cost[1] = S.file_cost = 1;
    }
    return WEFT_SUCCESS;
}

/* ---- the process-wide cost parameters (lib/measure.c measures them) ------------- */
bool weft__select_cost_known(bool multinode, weft__cost_t *out)
{
    const int k = multinode ? 1 : 0;
    if (S.have_cost[k]) *out = S.cost[k];
    return S.have_cost[k] != 0;
}

void weft__select_cost_remember(const weft__cost_t *cost)
{
    const int k = cost->nnodes >= 2 ? 1 : 0;
    if (!S.have_cost[k]) {
        S.cost[k] = *cost;
        S.have_cost[k] = 1;
    }
    /* A multi-node comm's node figures are what a one-node comm's transport
     * does: they stand for its alpha/beta until one is measured. */
    if (k == 1 && !S.have_cost[0] && cost->alpha_node > 0 && cost->beta_node > 0) {
        S.cost[0] = (weft__cost_t){.alpha = cost->alpha_node, .beta = cost->beta_node,
                                   .gamma = cost->gamma};
        S.have_cost[0] = 1;
    }
}

const weft__cost_t *weft__select_cost_default(void) { return &default_cost; }

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
    const bool nccl_coll = coll == WEFT_COLL_ALLREDUCE || coll == WEFT_COLL_REDUCE_SCATTER ||
                           coll == WEFT_COLL_ALLGATHER || coll == WEFT_COLL_BCAST;
    const bool nccl_runs = nccl_coll && mem == WEFT__MEM_DEVICE && sc->nccl != NULL &&
                           sc->nccl->supports(dtype, rop);
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
    /* An algorithm that cannot run on this communicator (its cost is
     * INFINITY: the shared-memory path across nodes, a hierarchical algorithm
     * on one node) gives way to the cost model's choice, however it was asked
     * for. */
    if (a != WEFT_ALGO_AUTO && replaced == WEFT_ALGO_AUTO) {
        const weft__algo_impl_t *impl = weft__algo_impl(coll, a);
        if (impl != NULL && impl->cost != NULL && isinf(impl->cost(sc->size, bytes, &sc->cost))) {
            replaced = a;
            a = WEFT_ALGO_AUTO;
        }
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

/* The last choice per collective on a communicator, in one word read and
 * written atomically (so any thread sees a key with its own answer):
 * bytes (40 bits) | dtype (5) | op (4) | memory kind (2) | the algorithm
 * forced on the communicator (5) | the choice (5) | 1 (a word is set).
 * Everything else the choice depends on is fixed once the communicator is
 * created (its cost figures, node path and stream; the tuning file and the
 * environment, read at init), so a call with the same key gets the same
 * answer, on every rank alike. It saves the selection's work on every call
 * of a repeated size (a training step's buckets, a benchmark's loop):
 * measured about 130 cycles back to back and 300 - 400 right after a sleep
 * (doc/design.md, "Selection"). Calls of 1 TiB or more are not kept. */
#define SEL_BYTES_BITS 40
#define SEL_VALID (1ull << 63)
_Static_assert(WEFT_DATATYPE_COUNT <= 32 && WEFT_OP_COUNT <= 16 && WEFT_ALGO_COUNT <= 32,
               "the selection cache's word has 5 bits for datatypes and algorithms, 4 for ops");

static bool sel_key(size_t bytes, weft_datatype_t dtype, weft_op_t rop, weft__memkind_t mem,
                    weft_algo_t forced, uint64_t *key)
{
    if ((uint64_t)bytes >> SEL_BYTES_BITS || (unsigned)dtype >= 32 || (unsigned)rop >= 16 ||
        (unsigned)mem >= 4 || (unsigned)forced >= 32)
        return false;
    *key = (uint64_t)bytes | (uint64_t)dtype << 40 | (uint64_t)rop << 45 | (uint64_t)mem << 49 |
           (uint64_t)forced << 51 | SEL_VALID;
    return true;
}
#define SEL_ALGO_SHIFT 56
#define SEL_KEY_MASK (~(31ull << SEL_ALGO_SHIFT))

/* Caller thread (any). */
weft_algo_t weft__select(weft__comm_t *c, weft_coll_t coll, size_t bytes, weft_datatype_t dtype,
                         weft_op_t rop, weft__memkind_t mem)
{
    const weft_algo_t forced =
        (weft_algo_t)atomic_load_explicit(&c->force_algo[coll], memory_order_relaxed);
    uint64_t key = 0;
    const bool keep = c->sel_cache_on && sel_key(bytes, dtype, rop, mem, forced, &key);
    if (keep) {
        const uint64_t v = atomic_load_explicit(&c->sel_last[coll], memory_order_relaxed);
        if ((v & SEL_KEY_MASK) == key) return (weft_algo_t)(v >> SEL_ALGO_SHIFT & 31);
    }
    weft__select_comm_t sc;
    weft__select_comm_of(c, coll, &sc);
    sc.forced = forced; /* the one the key holds */
    const weft_algo_t a = weft__select_explain(&sc, coll, bytes, dtype, rop, mem, NULL);
    if (keep && (unsigned)a < 32)
        atomic_store_explicit(&c->sel_last[coll], key | (uint64_t)a << SEL_ALGO_SHIFT,
                              memory_order_relaxed);
    return a;
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
