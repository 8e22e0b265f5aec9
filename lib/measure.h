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

/** The process-wide parameters, if known (tuning file or an earlier
 * measurement): true and *out set. Caller thread of communicator creation. */
bool weft__select_cost_known(weft__cost_t *out);
/** Remember cost process-wide unless already known (later comms reuse it).
 * Caller thread of communicator creation (the only writer). */
void weft__select_cost_remember(const weft__cost_t *cost);
/** The built-in defaults (shared-memory-like values). Any thread. */
const weft__cost_t *weft__select_cost_default(void);

#endif /* WEFT_MEASURE_H */
