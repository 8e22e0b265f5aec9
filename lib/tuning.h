/*
 * tuning.h - the tuning file (WEFT_TUNING_FILE; format in doc/tuning.md):
 * its parser, its rules and its alpha/beta/gamma (lib/tuning.c).
 *
 * Thread contract: weft__tuning_parse replaces the process-wide rules; it
 * runs on the caller thread of weft_init (or a tool's main thread) while no
 * collective is being selected. The other functions read them from any
 * thread.
 */
#ifndef WEFT_TUNING_H
#define WEFT_TUNING_H

#include <stddef.h>

#include "comm.h"
#include "weft.h"

/** At most this many rules in a file. */
#define WEFT__TUNING_MAX_RULES 1024

/** Parse the file at path into the process-wide rules and cost (replacing
 * those of an earlier parse). On an error (logged as path:line) no rule and
 * no cost is kept and WEFT_ERR_TUNING_FILE is returned. */
weft_status_t weft__tuning_parse(const char *path);
/** Forget the rules and the cost (weft_init without a tuning file). */
void weft__tuning_clear(void);
/**
 * The first rule, in file order, for (coll, p ranks, bytes) whose algorithm
 * can serve dtype: its index (0-based) with *algo set, or -1 (and *algo
 * untouched) if none matches.
 */
int weft__tuning_lookup(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dtype,
                        weft_algo_t *algo);
/** Rule i's line in the file (1-based), or 0 if there is no rule i. */
int weft__tuning_rule_line(int i);
/** How many rules are loaded. */
int weft__tuning_nrules(void);
/** The file's alpha/beta/gamma into *cost and 1 when it has all three, else
 * 0; alpha_node/beta_node too when it has both (else they are 0). */
int weft__tuning_cost(weft__cost_t *cost);

#endif /* WEFT_TUNING_H */
