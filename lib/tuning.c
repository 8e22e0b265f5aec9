/*
 * tuning.c - the tuning file (WEFT_TUNING_FILE): a header line, optional
 * alpha/beta/gamma (and alpha_node/beta_node) lines for the cost model, and rules that name the
 * algorithm for ranges of (collective, communicator size, bytes). Format and
 * reasons: doc/tuning.md. Selection (lib/select.c) asks weft__tuning_lookup
 * for the first matching rule; nothing else here knows about selection.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuning.h"
#include "weft_internal.h"

typedef struct rule {
    weft_coll_t coll;
    int comm_size;         /* 0 = any */
    size_t min_bytes, max_bytes;
    weft_algo_t algo;
    int line;              /* in the file, for explanations */
} rule_t;

static struct {
    rule_t rules[WEFT__TUNING_MAX_RULES];
    int nrules;
    int have_cost;         /* the file had alpha, beta and gamma */
    weft__cost_t cost;
} T;

static int coll_from_name(const char *s, weft_coll_t *out)
{
    for (int i = 0; i < WEFT_COLL_COUNT; i++)
        if (strcmp(s, weft__coll_name((weft_coll_t)i)) == 0) {
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

static bool usable(const weft__algo_impl_t *impl, weft_datatype_t dtype)
{
    return impl != NULL && (impl->supports == NULL || impl->supports(dtype, WEFT_SUM));
}

void weft__tuning_clear(void)
{
    T.nrules = 0;
    T.have_cost = 0;
}

/* Caller thread of weft_init or a tool's main thread (see tuning.h). */
weft_status_t weft__tuning_parse(const char *path)
{
    weft__tuning_clear();
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        WEFT__ERROR("WEFT_TUNING_FILE=%s: cannot open: %s", path, strerror(errno));
        return WEFT_ERR_TUNING_FILE;
    }
    char line[512];
    int lineno = 0, header = 0;
    weft_status_t st = WEFT_SUCCESS;
    int nc = 0, nn = 0; /* alpha/beta/gamma lines; bits: alpha_node, beta_node, alpha_shm,
                           beta_shm seen */
    double cv[7] = {0, 0, 0, 0, 0, 0, 0};
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
        static const char *const cost_words[7] = {"alpha",      "beta",      "gamma",
                                                  "alpha_node", "beta_node", "alpha_shm",
                                                  "beta_shm"};
        int cw = -1;
        for (int i = 0; n == 2 && i < 7; i++)
            if (!strcmp(w[0], cost_words[i])) cw = i;
        if (cw >= 0) {
            char *end;
            double v = strtod(w[1], &end);
            if (*end || !(v >= 0) || !isfinite(v)) {
                WEFT__ERROR("%s:%d: bad number '%s'", path, lineno, w[1]);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            cv[cw] = v;
            if (cw < 3) nc++;
            else nn |= 1 << (cw - 3);
            continue;
        }
        if (n == 6 && strcmp(w[0], "rule") == 0) {
            rule_t r;
            r.line = lineno;
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
            if (T.nrules == WEFT__TUNING_MAX_RULES) {
                WEFT__ERROR("%s: more than %d rules", path, WEFT__TUNING_MAX_RULES);
                st = WEFT_ERR_TUNING_FILE;
                break;
            }
            T.rules[T.nrules++] = r;
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
        weft__tuning_clear();
        return st;
    }
    if (nc == 3) {
        T.cost = (weft__cost_t){.alpha = cv[0], .beta = cv[1], .gamma = cv[2]};
        if ((nn & 3) == 3) { /* both node figures: the transport inside a node */
            T.cost.alpha_node = cv[3];
            T.cost.beta_node = cv[4];
        }
        if ((nn & 12) == 12 && cv[5] > 0) { /* both figures of the node's shared-memory path */
            T.cost.alpha_shm = cv[5];
            T.cost.beta_shm = cv[6];
        }
        T.have_cost = 1;
    }
    return WEFT_SUCCESS;
}

/* Any thread (the rules change only under weft_init). */
int weft__tuning_lookup(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dtype,
                        weft_algo_t *algo)
{
    for (int i = 0; i < T.nrules; i++) {
        const rule_t *r = &T.rules[i];
        if (r->coll == coll && (r->comm_size == 0 || r->comm_size == p) &&
            bytes >= r->min_bytes && bytes <= r->max_bytes &&
            usable(weft__algo_impl(coll, r->algo), dtype)) {
            *algo = r->algo;
            return i;
        }
    }
    return -1;
}

int weft__tuning_rule_line(int i) { return i >= 0 && i < T.nrules ? T.rules[i].line : 0; }

int weft__tuning_nrules(void) { return T.nrules; }

int weft__tuning_cost(weft__cost_t *cost)
{
    if (!T.have_cost) return 0;
    *cost = T.cost;
    return 1;
}
