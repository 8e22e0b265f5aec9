/*
 * select.c - per-call algorithm selection.
 *
 * Order of precedence for a call on communicator c:
 *   1. weft_comm_set_algo(c, coll, algo)        (per communicator, at run time)
 *   2. WEFT_<COLL>_ALGO                         (environment, read at init)
 *   3. a rule of the tuning file (WEFT_TUNING_FILE) matching (coll, p, bytes)
 *   4. the alpha-beta-gamma cost model: the cheapest algorithm for (p, bytes),
 *      with alpha, beta, gamma from the tuning file, or measured when the
 *      first communicator is created (WEFT_MEASURE=1), or built-in defaults.
 * Every rank must pick the same algorithm for the same call: the inputs to
 * 3 and 4 are identical on all ranks (the measurement is broadcast from the
 * communicator's rank 0).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "measure.h"
#include "weft_internal.h"

typedef struct rule {
    weft_coll_t coll;
    int comm_size;         /* 0 = any */
    size_t min_bytes, max_bytes;
    weft_algo_t algo;
} rule_t;

#define MAX_RULES 1024
static struct {
    rule_t rules[MAX_RULES];
    int nrules;
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

static int coll_from_name(const char *s, weft_coll_t *out)
{
    for (int i = 0; i < WEFT_COLL_COUNT; i++)
        if (strcmp(s, coll_names[i]) == 0) {
            *out = (weft_coll_t)i;
            return 1;
        }
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    if (strcmp(s, "inf") == 0 || strcmp(s, "max") == 0) {
        *out = SIZE_MAX;
        return 1;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return 0;
    *out = (size_t)v;
    return 1;
}

static size_t longest_word(const char *s)
{
    size_t best = 0;
    while (*s) {
        s += strspn(s, " \t\n\v\f\r");
        size_t n = strcspn(s, " \t\n\v\f\r");
        if (n > best) best = n;
        s += n;
    }
    return best;
}

/* Parse a tuning file (format in doc/tuning.md). Caller thread (init / tools). */
weft_status_t weft__tuning_parse(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        WEFT__ERROR("WEFT_TUNING_FILE=%s: cannot open: %s", path, strerror(errno));
        return WEFT_ERR_TUNING_FILE;
    }
    char line[512];
    int lineno = 0, header = 0;
    weft_status_t st = WEFT_SUCCESS;
    S.nrules = 0;
    int nc = 0;
    double cv[3] = {0, 0, 0};
    while (fgets(line, sizeof line, f)) {
        lineno++;
        /* fgets returns a longer line in pieces: the next piece would be
         * parsed as a line of its own (the end of a comment as a rule).
         * A 511-character line fills the buffer without its newline. */
        int c;
        if (strchr(line, '\n') == NULL && (c = getc(f)) != '\n' && c != EOF) {
            WEFT__ERROR("%s:%d: line longer than %zu characters", path, lineno, sizeof line - 1);
            st = WEFT_ERR_TUNING_FILE;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        if (longest_word(line) > 127) { /* %127s would cut it in two words */
            WEFT__ERROR("%s:%d: a word longer than 127 characters", path, lineno);
            st = WEFT_ERR_TUNING_FILE;
            break;
        }
        char w[6][128];
        int n = sscanf(line, "%127s %127s %127s %127s %127s %127s", w[0], w[1], w[2], w[3], w[4], w[5]);
        if (n <= 0) continue;
        if (!header) {
            if (n == 2 && strcmp(w[0], "weft-tuning") == 0 && strcmp(w[1], "1") == 0) {
                header = 1;
                continue;
            }
            WEFT__ERROR("%s:%d: expected the header line 'weft-tuning 1'", path, lineno);
            st = WEFT_ERR_TUNING_FILE;
            break;
        }
        if (n == 2 && (!strcmp(w[0], "alpha") || !strcmp(w[0], "beta") || !strcmp(w[0], "gamma"))) {
            char *end;
            double v = strtod(w[1], &end);
            if (*end || !(v >= 0) || !isfinite(v)) {
                WEFT__ERROR("%s:%d: bad number '%s'", path, lineno, w[1]);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            cv[w[0][0] == 'a' ? 0 : w[0][0] == 'b' ? 1 : 2] = v;
            nc++;
            continue;
        }
        if (n == 6 && strcmp(w[0], "rule") == 0) {
            rule_t r;
            if (!coll_from_name(w[1], &r.coll)) {
                WEFT__ERROR("%s:%d: unknown collective '%s'", path, lineno, w[1]);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            size_t cs;
            if (strcmp(w[2], "*") == 0) r.comm_size = 0;
            else if (parse_size(w[2], &cs) && cs > 0 && cs < (1u << 30)) r.comm_size = (int)cs;
            else {
                WEFT__ERROR("%s:%d: bad communicator size '%s'", path, lineno, w[2]);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            if (!parse_size(w[3], &r.min_bytes) || !parse_size(w[4], &r.max_bytes) ||
                r.min_bytes > r.max_bytes) {
                WEFT__ERROR("%s:%d: bad byte range '%s %s'", path, lineno, w[3], w[4]);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            if (weft_algo_from_name(w[5], &r.algo) != WEFT_SUCCESS || r.algo == WEFT_ALGO_AUTO ||
                weft__algo_impl(r.coll, r.algo) == NULL) {
                WEFT__ERROR("%s:%d: algorithm '%s' does not serve %s", path, lineno, w[5], w[1]);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            if (S.nrules == MAX_RULES) {
                WEFT__ERROR("%s: more than %d rules", path, MAX_RULES);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            S.rules[S.nrules++] = r;
            continue;
        }
        WEFT__ERROR("%s:%d: cannot parse '%s'", path, lineno, w[0]);
        st = WEFT_ERR_TUNING_FILE;
        break;
    }
    if (st == WEFT_SUCCESS && !header) {
        WEFT__ERROR("%s: empty tuning file (no 'weft-tuning 1' header)", path);
        st = WEFT_ERR_TUNING_FILE;
    }
    fclose(f);
    if (st != WEFT_SUCCESS) {
        S.nrules = 0;
        return st;
    }
    if (nc == 3) {
        S.cost = (weft__cost_t){cv[0], cv[1], cv[2]};
        S.have_cost = S.file_cost = 1;
    }
    return WEFT_SUCCESS;
}

weft_status_t weft__select_load(void)
{
    S.nrules = 0;
    S.have_cost = S.file_cost = 0;
    if (weft__cfg.tuning_file[0] == '\0') return WEFT_SUCCESS;
    return weft__tuning_parse(weft__cfg.tuning_file);
}

/* ---- the process-wide cost parameters (lib/measure.c measures them) ------------- */
bool weft__select_cost_known(weft__cost_t *out)
{
    if (S.have_cost) *out = S.cost;
    return S.have_cost != 0;
}

void weft__select_cost_remember(const weft__cost_t *cost)
{
    if (S.have_cost) return;
    S.cost = *cost;
    S.have_cost = 1;
}

const weft__cost_t *weft__select_cost_default(void) { return &default_cost; }

/* ---- the choice ---------------------------------------------------------------------- */
static bool usable(const weft__algo_impl_t *impl, weft_datatype_t dtype)
{
    return impl != NULL && (impl->supports == NULL || impl->supports(dtype, WEFT_SUM));
}

weft_algo_t weft__select_model(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dtype,
                               const weft__cost_t *cost, double *best_cost)
{
    int n = 0;
    const weft__algo_impl_t *const *list = weft__algo_list(coll, &n);
    weft_algo_t best = WEFT_ALGO_AUTO;
    double bc = INFINITY;
    for (int i = 0; i < n; i++) {
        if (list[i]->cost == NULL || !usable(list[i], dtype)) continue;
        double t = list[i]->cost(p, bytes, cost);
        if (t < bc) { /* strict: the earlier entry wins ties */
            bc = t;
            best = list[i]->id;
        }
    }
    if (best_cost) *best_cost = bc;
    return best;
}

weft_algo_t weft__select(weft__comm_t *c, weft_coll_t coll, size_t bytes, weft_datatype_t dtype)
{
    weft_algo_t a = (weft_algo_t)atomic_load_explicit(&c->force_algo[coll], memory_order_relaxed);
    if (a != WEFT_ALGO_AUTO) return a;
    if (weft__cfg.force_algo[coll] != WEFT_ALGO_AUTO) return weft__cfg.force_algo[coll];
    for (int i = 0; i < S.nrules; i++) {
        const rule_t *r = &S.rules[i];
        if (r->coll == coll && (r->comm_size == 0 || r->comm_size == c->size) &&
            bytes >= r->min_bytes && bytes <= r->max_bytes &&
            usable(weft__algo_impl(coll, r->algo), dtype))
            return r->algo;
    }
    a = weft__select_model(coll, c->size, bytes, dtype, &c->cost, NULL);
    return a;
}

weft_status_t weft_query_algo(weft_comm_t comm, weft_coll_t coll, size_t count,
                              weft_datatype_t dtype, weft_algo_t *algo)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (algo == NULL || (unsigned)coll >= WEFT_COLL_COUNT) return WEFT_ERR_INVALID_ARG;
    size_t es = weft__dtype_size(dtype);
    if (es == 0) return WEFT_ERR_DATATYPE;
    if (count > SIZE_MAX / es) return WEFT_ERR_COUNT_OVERFLOW;
    const weft_algo_t a = weft__select(c, coll, count * es, dtype);
    *algo = weft__stream_query_algo(c, coll, count * es, dtype, a);
    return WEFT_SUCCESS;
}

/* For weft-info and weft-tune: the rules loaded and the cost in use. */
int weft__select_rules(const void **rules) { *rules = S.rules; return S.nrules; }
