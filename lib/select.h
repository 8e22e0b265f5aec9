/*
 * select.h - choosing the algorithm of a call (lib/select.c): the one place
 * that decides, for host and device buffers alike, and explains its choice.
 */
#ifndef WEFT_SELECT_H
#define WEFT_SELECT_H

#include "algo.h"
#include "device.h"

/* ---- the registry (lib/coll/algos.c) ------------------------------------------ */
/** Implementation of (coll, algo) or NULL if that algorithm does not serve coll
 * (lib/coll/algos.c holds the registry). Any thread. */
const weft__algo_impl_t *weft__algo_impl(weft_coll_t coll, weft_algo_t algo);
/** The algorithms that serve coll, in registry order; *n gets their number
 * (NULL-terminated array; NULL and *n = 0 for an unknown coll). Any thread. */
const weft__algo_impl_t *const *weft__algo_list(weft_coll_t coll, int *n);
/** Does (coll, algo) serve device buffers only (a row WEFT__ALGO_DEVICE of
 * the table: NCCL)? Such an algorithm is never run on host buffers. Any thread. */
bool weft__algo_device_only(weft_coll_t coll, weft_algo_t algo);
/** The names of the algorithms that serve coll in table order, "auto" first,
 * separated by sep (e.g. "|" for WEFT_<COLL>_ALGO's doc text, ", " for
 * messages): written into out (always terminated, cut at cap); returns the
 * length the whole list needs (as snprintf). Any thread. */
size_t weft__algo_names(weft_coll_t coll, const char *sep, char *out, size_t cap);

/* ---- selection (lib/select.c) -------------------------------------------------- */
/** What selection needs to know of a communicator (a real one: weft__select
 * fills it; a described one: weft-info, the fuzzers). */
typedef struct weft__select_comm {
    int size;                 /* ranks */
    weft__cost_t cost;        /* the cost model's alpha/beta/gamma */
    weft_algo_t forced;       /* weft_comm_set_algo for the call's coll (AUTO: none) */
    /** The NCCL backend when a NCCL communicator is open for it (bound to a
     * CUDA stream, NCCL on every rank); NULL otherwise. */
    const weft__nccl_backend_t *nccl;
} weft__select_comm_t;

/** Which step of the precedence decided (doc/tuning.md). */
typedef enum weft__select_source {
    WEFT__SELECT_COMM = 0,    /* weft_comm_set_algo on the communicator */
    WEFT__SELECT_ENV,         /* WEFT_<COLL>_ALGO */
    WEFT__SELECT_RULE,        /* a rule of the tuning file (rule, rule_line) */
    WEFT__SELECT_MODEL,       /* the alpha-beta-gamma cost model */
    WEFT__SELECT_DEVICE,      /* the device-buffer rule: NCCL from WEFT_NCCL_MIN_BYTES on */
} weft__select_source_t;

/** "comm", "env", "rule", "model", "device". */
const char *weft__select_source_name(weft__select_source_t s);

#define WEFT__SELECT_MAX_CAND 16

/** Why an algorithm was chosen (weft__select_explain). */
typedef struct weft__select_explain {
    weft_algo_t algo;             /* what the call runs */
    weft__select_source_t source; /* which step decided */
    int rule;                     /* RULE: the rule's index (0-based, file order), else -1 */
    int rule_line;                /* RULE: its line in the tuning file, else 0 */
    /** The algorithm the source (forced setting or rule) named, when the
     * call cannot run it and algo is the cost model's choice instead (NCCL
     * on host buffers, or an algorithm whose cost is INFINITY on this
     * communicator); WEFT_ALGO_AUTO when nothing was replaced. */
    weft_algo_t replaced;
    /** The cost model's choice for this call and its predicted seconds,
     * whether or not the model decided (INFINITY: no candidate). */
    weft_algo_t model;
    double model_cost;
    /** Every algorithm of the collective in registry order, with its
     * predicted seconds: NAN when the model does not consider it (no cost
     * function: explicit only; or it cannot serve the datatype). */
    int ncand;
    struct {
        weft_algo_t algo;
        double cost;
    } cand[WEFT__SELECT_MAX_CAND];
} weft__select_explain_t;

/**
 * The selection: the algorithm for a call of coll with bytes per rank of
 * dtype (reducing with rop; WEFT_SUM when asked without an op) on buffers of
 * memory kind mem, on a communicator described by sc. Precedence: sc->forced >
 * WEFT_<COLL>_ALGO > tuning rule > cost model, then, for allreduce on device
 * buffers with sc->nccl able to reduce (dtype, rop): NCCL when it was
 * forced or chosen, or when nothing is forced and bytes >= WEFT_NCCL_MIN_BYTES
 * (the device rule). A NCCL choice on buffers it cannot serve becomes the cost
 * model's algorithm, except that NCCL forced with weft_comm_set_algo on
 * device buffers stays NCCL (the call then fails: WEFT_ERR_UNSUPPORTED).
 * If ex is not NULL it gets the explanation. Every rank gets the same answer
 * for the same inputs. Any thread.
 */
weft_algo_t weft__select_explain(const weft__select_comm_t *sc, weft_coll_t coll, size_t bytes,
                                 weft_datatype_t dtype, weft_op_t rop, weft__memkind_t mem,
                                 weft__select_explain_t *ex);
/** weft__select_explain for a call on comm (no explanation). Caller thread of the call. */
weft_algo_t weft__select(weft__comm_t *comm, weft_coll_t coll, size_t bytes, weft_datatype_t dtype,
                         weft_op_t rop, weft__memkind_t mem);
/** What selection sees of comm for coll (into *sc). Any thread. */
void weft__select_comm_of(weft__comm_t *comm, weft_coll_t coll, weft__select_comm_t *sc);
/** The cost model's choice for (coll, p, bytes); *best_cost its predicted time. */
weft_algo_t weft__select_model(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dtype,
                               const weft__cost_t *cost, double *best_cost);
/** "allreduce", ... */
const char *weft__coll_name(weft_coll_t coll);
/** Load the tuning file if WEFT_TUNING_FILE is set (weft_init). */
weft_status_t weft__select_load(void);
/** Measure/agree on alpha, beta, gamma for this comm's selection (collective). */
weft_status_t weft__select_init(weft__comm_t *comm);

#endif /* WEFT_SELECT_H */
