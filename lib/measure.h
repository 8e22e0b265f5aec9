/*
 * measure.h - the alpha-beta-gamma cost parameters of the selection's cost
 * model: lib/select.c keeps the process-wide values (from the tuning file or
 * the first measurement), lib/measure.c measures and agrees on them when a
 * communicator is created (weft__select_init, declared in select.h).
 */
#ifndef WEFT_MEASURE_H
#define WEFT_MEASURE_H

#include <stdbool.h>

#include "comm.h"

/** The process-wide parameters for communicators on one node (multinode
 * false: alpha/beta inside a node) or spanning several (true: alpha/beta
 * across nodes, alpha_node/beta_node inside one), if known (tuning file or an
 * earlier measurement on such a comm): true and *out set. The two sets are
 * kept apart. Caller thread of communicator creation. */
bool weft__select_cost_known(bool multinode, weft__cost_t *out);
/** Remember cost process-wide for its kind of comm (cost->nnodes >= 2:
 * multi-node) unless already known; a multi-node cost's node figures also
 * become the one-node set's alpha/beta if that is unknown. Caller thread of
 * communicator creation (the only writer). */
void weft__select_cost_remember(const weft__cost_t *cost);
/** The built-in defaults (shared-memory-like values). Any thread. */
const weft__cost_t *weft__select_cost_default(void);

#endif /* WEFT_MEASURE_H */
