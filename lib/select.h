/*
 * select.h - choosing the algorithm of a call (lib/select.c).
 */
#ifndef WEFT_SELECT_H
#define WEFT_SELECT_H

#include "algo.h"

/* ---- selection (lib/select.c) ----------------------------------------------- */
/** Pick the algorithm for a call (forced > environment > tuning table > cost model). */
weft_algo_t weft__select(weft__comm_t *comm, weft_coll_t coll, size_t bytes, weft_datatype_t dtype);
/** Implementation of (coll, algo) or NULL if that algorithm does not serve coll
 * (lib/coll/algos.c holds the registry). Any thread. */
const weft__algo_impl_t *weft__algo_impl(weft_coll_t coll, weft_algo_t algo);
/** The algorithms that serve coll, in registry order; *n gets their number
 * (NULL-terminated array; NULL and *n = 0 for an unknown coll). Any thread. */
const weft__algo_impl_t *const *weft__algo_list(weft_coll_t coll, int *n);
/** Does (coll, algo) serve device buffers only (a row WEFT__ALGO_DEVICE of
 * the table: NCCL)? Any thread. */
bool weft__algo_device_only(weft_coll_t coll, weft_algo_t algo);
/** The names of the algorithms that serve coll, "auto" first, separated by
 * ", " (for WEFT_<COLL>_ALGO's doc text and messages): written into out
 * (always terminated, cut at cap); returns the length the whole list needs
 * (as snprintf). Any thread. */
size_t weft__algo_names(weft_coll_t coll, char *out, size_t cap);
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
