/*
 * config.c - every WEFT_* environment variable, read once in weft_init into
 * weft__cfg. Never getenv on a hot path.
 *
 * The table below is the single source: one row per variable (name, default,
 * kind and range, the field it writes, doc text; lib/config.h). Parsing is
 * generic over the row's kind. weft-info prints the table (--config) and
 * doc/config.md's reference (--config-markdown; a test compares it with the
 * committed file), and weft(7) is generated from that reference.
 *
 * Strict (doc/config.md, "Strictness"): a malformed value fails weft_init
 * with a message that names the variable, the value and what is valid; a
 * WEFT_ variable that is not in the table is warned about with the closest
 * name that is (a typo would otherwise change nothing, silently); a forced
 * algorithm that can serve only some calls says at init what runs instead.
 */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "weft_internal.h"

weft__config_t weft__cfg;

/* The names of the NAME rows' values (index = the value stored). */
static const char *transport_value_name(int v)
{
    /* auto is WEFT_TRANSPORT_DEFAULT (resolved by backends/transport.c's table);
     * the others are the table's names (weft_transport_name). */
    if (v == WEFT_TRANSPORT_DEFAULT) return "auto";
    return v > WEFT_TRANSPORT_DEFAULT && v < WEFT_TRANSPORT_COUNT
               ? weft_transport_name((weft_transport_t)v)
               : NULL;
}

static const char *trace_keep_name(int v)
{
    static const char *const names[] = {"first", "last"};
    return v >= 0 && v < 2 ? names[v] : NULL;
}

static const char *trace_clock_name(int v)
{
    static const char *const names[] = {"node", "measure"};
    return v >= 0 && v < 2 ? names[v] : NULL;
}

static const char *shm_copy_name(int v)
{
    static const char *const names[] = {"0", "1", "auto"};
    return v >= 0 && v < 3 ? names[v] : NULL;
}

/* The field of weft__config_t a row writes. */
#define FIELD(m) .offset = offsetof(weft__config_t, m), .size = sizeof(((weft__config_t *)0)->m)
#define INT_ROW(n, def, l, h, m) .name = n, .default_value = def, .kind = WEFT__CFG_INT, \
        .lo = (l), .hi = (h), FIELD(m)
#define SIZE_ROW(n, def, l, h, m) .name = n, .default_value = def, .kind = WEFT__CFG_SIZE, \
        .lo = (l), .hi = (h), FIELD(m)
#define BOOL_ROW(n, def, m) .name = n, .default_value = def, .kind = WEFT__CFG_BOOL, \
        .lo = 0, .hi = 1, FIELD(m)
#define NAME_ROW(n, def, names, m) .name = n, .default_value = def, .kind = WEFT__CFG_NAME, \
        .value_name = names, FIELD(m)
#define TEXT_ROW(n, m) .name = n, .default_value = "", .kind = WEFT__CFG_TEXT, FIELD(m)
#define ALGO_ROW(n, c, what) {.name = n, .default_value = "auto", .kind = WEFT__CFG_ALGO, \
        .coll = c, FIELD(force_algo[c]), .doc = "force the " what " algorithm"}

/* Every WEFT_* variable, one row each. The order is the order of
 * doc/config.md and weft-info, and the line order of the fuzzer's inputs
 * (tests/fuzz/fuzz_config.c): add new rows at the end. The doc text says what
 * the variable does; the valid values come from the kind and range. */
static const weft__config_var_t vars[] = {
    {.name = "WEFT_ALLREDUCE_ALGO", .default_value = "auto", .kind = WEFT__CFG_ALGO,
     .coll = WEFT_COLL_ALLREDUCE, FIELD(force_algo[WEFT_COLL_ALLREDUCE]),
     .doc = "force the allreduce algorithm (nccl: device buffers on a CUDA-stream "
            "communicator only; host buffers then run the cost model's choice)"},
    ALGO_ROW("WEFT_REDUCE_SCATTER_ALGO", WEFT_COLL_REDUCE_SCATTER, "reduce_scatter"),
    ALGO_ROW("WEFT_ALLGATHER_ALGO", WEFT_COLL_ALLGATHER, "allgather"),
    ALGO_ROW("WEFT_BCAST_ALGO", WEFT_COLL_BCAST, "broadcast"),
    ALGO_ROW("WEFT_REDUCE_ALGO", WEFT_COLL_REDUCE, "reduce"),
    ALGO_ROW("WEFT_ALLTOALL_ALGO", WEFT_COLL_ALLTOALL, "alltoall"),
    ALGO_ROW("WEFT_GATHER_ALGO", WEFT_COLL_GATHER, "gather"),
    ALGO_ROW("WEFT_SCATTER_ALGO", WEFT_COLL_SCATTER, "scatter"),
    ALGO_ROW("WEFT_BARRIER_ALGO", WEFT_COLL_BARRIER, "barrier"),
    ALGO_ROW("WEFT_ALLGATHERV_ALGO", WEFT_COLL_ALLGATHERV, "allgatherv"),
    ALGO_ROW("WEFT_ALLTOALLV_ALGO", WEFT_COLL_ALLTOALLV, "alltoallv"),
    ALGO_ROW("WEFT_GATHERV_ALGO", WEFT_COLL_GATHERV, "gatherv"),
    ALGO_ROW("WEFT_SCATTERV_ALGO", WEFT_COLL_SCATTERV, "scatterv"),
    ALGO_ROW("WEFT_REDUCE_SCATTERV_ALGO", WEFT_COLL_REDUCE_SCATTERV, "reduce_scatterv"),
    {TEXT_ROW("WEFT_TUNING_FILE", tuning_file),
     .doc = "tuning file (doc/tuning.md) that replaces the cost-model table"},
    {.name = "WEFT_TIMEOUT", .default_value = "600", .kind = WEFT__CFG_DOUBLE, .lo = 0,
     .hi = 1000000000L, FIELD(timeout_s),
     .doc = "hang watchdog, seconds: an operation running longer fails with WEFT_ERR_TIMEOUT "
            "and its communicator is marked broken (0 = off)"},
    {INT_ROW("WEFT_LOG_LEVEL", "1", 0, 4, log_level),
     .doc = "0 off, 1 error, 2 warn, 3 info, 4 debug"},
    {TEXT_ROW("WEFT_PROFILE", profile_path),
     .doc = "write a per-operation, per-size profile to this path at finalize"},
    {TEXT_ROW("WEFT_TRACE", trace_path),
     .doc = "write a Chrome/Perfetto trace of the engine to this path (.RANK added; "
            "weft-trace merge joins the ranks)"},
    {SIZE_ROW("WEFT_TRACE_EVENTS", "1048576", 1024, 1L << 28, trace_events),
     .doc = "trace buffer per rank, events (about 64 bytes each)"},
    {NAME_ROW("WEFT_TRACE_KEEP", "first", trace_keep_name, trace_keep_last),
     .doc = "when the trace buffer is full: first (keep the start, drop later events) or last "
            "(a ring: keep the most recent events)"},
    {NAME_ROW("WEFT_TRACE_CLOCK", "node", trace_clock_name, trace_clock_measure),
     .doc = "trace clock alignment: node (ranks of a node share rank 0's node clock; node "
            "leaders measure their offset from rank 0) or measure (every rank measures its "
            "offset)"},
    {NAME_ROW("WEFT_TRANSPORT", "auto", transport_value_name, transport),
     .doc = "host transport (auto: UCX when built in, else MPI)"},
    {SIZE_ROW("WEFT_RING_CHUNK", "262144", 0, 1L << 40, ring_chunk),
     .doc = "ring pipeline chunk, bytes (0 = one chunk per block); also the hierarchical "
            "allreduce's pipeline segment per local rank when its phases inside the nodes run "
            "over the transport (0 = no pipeline)"},
    {SIZE_ROW("WEFT_HIER_SEGMENT", "0", 0, 1L << 40, hier_segment),
     .doc = "the hierarchical allreduce's pipeline segment per local rank, bytes, when its "
            "phases inside the nodes run on the shared-memory path (0 = no pipeline, the "
            "default: each segment costs four synchronisations of the node's ranks; "
            "doc/notes/node_measurements.md); over the transport WEFT_RING_CHUNK sets it"},
    {INT_ROW("WEFT_NODE_RANKS", "0", 0, 1 << 20, node_ranks),
     .doc = "testing: treat every k consecutive ranks as one node (0: the real nodes, "
            "MPI_COMM_TYPE_SHARED), so that hierarchical algorithms run on one machine"},
    {BOOL_ROW("WEFT_SHM", "1", shm),
     .doc = "collectives among ranks of one node may use the shared-memory single-copy path "
            "(0: the transport only)"},
    {NAME_ROW("WEFT_SHM_COPY", "auto", shm_copy_name, shm_copy),
     .doc = "large allreduce, reduce_scatter and allgather on the shared-memory path: 1 copies "
            "through the node's segment (staged: no page of another process is pinned), 0 reads "
            "the peers' buffers with "
            "cross-memory attach (fewer bytes moved), auto times both in calls 3 - 8 of "
            "each size class and of every 512 after, and runs the faster (doc/design.md)"},
    {SIZE_ROW("WEFT_SHM_CHUNK", "524288", 64, 1L << 30, shm_chunk),
     .doc = "the shared-memory path's pipeline chunk, bytes: a rank reduces and publishes its "
            "block in chunks this large, and its peers copy each as soon as it is published"},
    {INT_ROW("WEFT_SPIN", "100", 0, 100000000, spin),
     .doc = "empty progress passes before the engine starts to yield its core"},
    {INT_ROW("WEFT_MAX_SLEEP_US", "100", 0, 1000000, max_sleep_us),
     .doc = "longest sleep of the engine's backoff while work is in flight (oversubscribed "
            "nodes), microseconds"},
    {INT_ROW("WEFT_LINGER_US", "1000", 0, 10000000, linger_us),
     .doc = "the engine stays awake (yielding) this long after its last op before it sleeps, "
            "microseconds (0 on oversubscribed nodes)"},
    {INT_ROW("WEFT_WAIT_SPIN_US", "20000", 0, 10000000, wait_spin_us),
     .doc = "a waiting caller drives progress until it has seen none for this long, then "
            "hands the op to the engine and sleeps, microseconds (10 on oversubscribed nodes "
            "at most)"},
    {SIZE_ROW("WEFT_FUSED_REDUCE_MAX", "8192", 0, 1L << 40, fused_reduce_max),
     .doc = "messages of 2 KiB up to this many bytes that an algorithm reduces on arrival are "
            "reduced straight from the transport's buffers, without a scratch copy (UCX "
            "transport; 0 = never)"},
    {BOOL_ROW("WEFT_MEASURE", "1", measure),
     .doc = "measure alpha, beta and gamma at communicator creation, and the node's "
            "shared-memory path as it opens (once per pair of processes: later "
            "communicators over them reuse the figures; 0: use built-in defaults, so that "
            "every run selects the same algorithms)"},
    {SIZE_ROW("WEFT_NCCL_MIN_BYTES", "65536", 0, LONG_MAX, nccl_min_bytes),
     .doc = "device buffers: NCCL from this many bytes up, host transfer below"},
    {BOOL_ROW("WEFT_CUDA_MEMOPS", "1", cuda_memops),
     .doc = "CUDA stream flags with cuStreamWrite/WaitValue32 (0: event fallback)"},
    {BOOL_ROW("WEFT_STREAM_STAGE", "0", stream_stage),
     .doc = "testing: host buffers on a stream-bound communicator take the path of device "
            "buffers through the device's staging and stream copies (allreduce, bcast, "
            "allgather, reduce_scatter, alltoall), so that it runs without a GPU"},
    {.name = "WEFT_MPI_VERBOSE", .default_value = "0", .kind = WEFT__CFG_BOOL, .lo = 0, .hi = 1,
     .read_by = "libweft-mpi.so, at MPI_Init",
     .doc = "1 reports, at MPI_Finalize, per call site which MPI calls went to Weft and which "
            "fell through to MPI, and why (doc/mpi_interposition.md)"},
    {.name = "WEFT_MPI_CALLS", .default_value = "all", .kind = WEFT__CFG_TEXT,
     .read_by = "libweft-mpi.so, at MPI_Init",
     .doc = "comma list of the MPI collectives Weft serves, or all or none (the others go to "
            "MPI; doc/mpi_interposition.md)"},
    {BOOL_ROW("WEFT_CHECK_ARGS", "0", check_args),
     .doc = "1: every collective first checks with the other ranks that they all passed "
            "valid, matching arguments (count, datatype, operation, root), so a bad argument "
            "on one rank fails the call on every rank instead of leaving the others waiting "
            "(one small MPI_Allreduce per call: for debugging)"},
    {.name = "WEFT_LIBRARY", .default_value = "", .kind = WEFT__CFG_TEXT,
     .read_by = "the weft Python package, at import",
     .doc = "path of the libweft.so the Python package loads (default: the build tree's or "
            "the install prefix's; doc/python.md)"},
    {.name = "WEFT_PY_COMPLETION", .default_value = "thread", .kind = WEFT__CFG_TEXT,
     .read_by = "the weft Python package, at import",
     .doc = "how completions reach Python: thread (a pipe written by Weft, read by one Python "
            "thread) or inline (a ctypes callback on the completing thread; doc/python.md)"},
    {.name = "WEFT_PY_TORCH_FIRST", .default_value = "1", .kind = WEFT__CFG_TEXT,
     .read_by = "the weft Python package, at import",
     .doc = "1: import torch before libweft, whose CUDA build loads the system NCCL that a "
            "later import torch would clash with; 0: do not (doc/python.md)"},
    {.name = "WEFT_PY_TORCH_BASE", .default_value = "", .kind = WEFT__CFG_TEXT,
     .read_by = "weft.torch, at import",
     .doc = "ProcessGroup: the torch backend derives from torch's ProcessGroup, as torch 2.11 "
            "and older need, whatever torch is installed (empty: Backend where torch allows "
            "it; doc/python.md)"},
    {.name = "WEFT_PY_BOOTSTRAP_ADDR", .default_value = "", .kind = WEFT__CFG_TEXT,
     .read_by = "weft.init_with_store (weft.torch under torchrun), on rank 0",
     .doc = "host name or address at which the other processes reach rank 0's startup server "
            "(empty: rank 0's host name; doc/python.md)"},
    {.name = NULL},
};

/* NAME rows store their index into an int, ALGO rows a weft_algo_t. */
_Static_assert(sizeof(weft_transport_t) == sizeof(int), "WEFT_TRANSPORT is a NAME row");

const weft__config_var_t *weft__config_vars(void) { return vars; }

const weft__config_var_t *weft__config_find(const char *name)
{
    for (const weft__config_var_t *v = vars; v->name; v++)
        if (strcmp(v->name, name) == 0) return v;
    return NULL;
}

/* Prefixes of WEFT_ names that are not Weft's own variables: UCX reads
 * WEFT_UCX_<NAME> for Weft's UCX context (doc/config.md), the test suite
 * passes WEFT_TEST_<NAME> to its programs. */
static const char *const foreign_prefixes[] = {"WEFT_UCX_", "WEFT_TEST_"};

/* Optimal string alignment distance (Levenshtein plus adjacent
 * transpositions, so ALOG -> ALGO is one edit); names are short. */
static size_t edit_distance(const char *a, const char *b)
{
    enum { MAXN = 64 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= MAXN || m >= MAXN) return n > m ? n : m;
    size_t d[MAXN + 1][MAXN + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

const char *weft__config_closest(const char *name)
{
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (const weft__config_var_t *c = vars; c->name; c++) {
        size_t dist = edit_distance(name, c->name);
        if (dist < bd) {
            bd = dist;
            best = c->name;
        }
    }
    /* A suggestion only when it is plausibly the same name. */
    return best != NULL && bd <= 3 ? best : NULL;
}

/* Messages that must be seen even at the default log level (errors only):
 * they are about the configuration, printed once, by rank 0 of
 * MPI_COMM_WORLD (every rank reads the same environment under mpiexec);
 * silenced by WEFT_LOG_LEVEL=0. */
#define CONFIG_NOTICE(level, ...)                                                     \
    do {                                                                              \
        if ((level) > WEFT__LOG_OFF && weft__g.world_rank == 0)                       \
            weft__log_write(WEFT__LOG_WARN, __FILE__, __LINE__, __VA_ARGS__);         \
    } while (0)

extern char **environ;

/* Every WEFT_ variable of the environment that is not in the table. */
static int warn_unknown(int log_level)
{
    int n = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "WEFT_", 5) != 0) continue;
        char name[128];
        size_t len = strcspn(*e, "=");
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        bool known = false;
        for (const weft__config_var_t *c = vars; c->name && !known; c++)
            known = strcmp(c->name, name) == 0;
        for (size_t k = 0; k < sizeof foreign_prefixes / sizeof foreign_prefixes[0] && !known; k++)
            known = strncmp(name, foreign_prefixes[k], strlen(foreign_prefixes[k])) == 0;
        if (known) continue;
        const char *close = weft__config_closest(name);
        if (close)
            CONFIG_NOTICE(log_level, "%s is not a Weft variable and is ignored; did you mean %s?",
                          name, close);
        else
            CONFIG_NOTICE(log_level,
                          "%s is not a Weft variable and is ignored (weft-info lists them all)",
                          name);
        n++;
    }
    return n;
}

/* Algorithms the registry (lib/coll/algos.c) holds in every build but that
 * only an optional backend runs: forcing one where it is not built is refused
 * at init, as doc/config.md says, rather than failing each call. */
static const struct {
    weft_algo_t algo;
    const char *backend;
    bool built;
} optional_algos[] = {
#ifdef WEFT_HAVE_NCCL
    {WEFT_ALGO_NCCL, "NCCL", true},
#else
    {WEFT_ALGO_NCCL, "NCCL", false},
#endif
};

/* The backend an algorithm needs, or NULL for none; *built: is it built in. */
static const char *algo_backend(weft_algo_t a, bool *built)
{
    for (size_t i = 0; i < sizeof optional_algos / sizeof optional_algos[0]; i++) {
        if (optional_algos[i].algo == a) {
            *built = optional_algos[i].built;
            return optional_algos[i].backend;
        }
    }
    *built = true;
    return NULL;
}

/* "auto, ring, recursive_doubling, ...": the algorithms that serve coll; only
 * those of this build (every_build false: an error message), or every build's,
 * each optional one followed by its backend (the reference: the same text in
 * every build). */
static void algo_names(weft_coll_t coll, bool every_build, char *out, size_t cap)
{
    snprintf(out, cap, "auto");
    for (int a = WEFT_ALGO_AUTO + 1; a < WEFT_ALGO_COUNT; a++) {
        if (weft__algo_impl(coll, (weft_algo_t)a) == NULL) continue;
        bool built;
        const char *backend = algo_backend((weft_algo_t)a, &built);
        if (!built && !every_build) continue;
        const char *n = weft_algo_name((weft_algo_t)a);
        size_t used = strlen(out);
        if (n == NULL || used + 2 >= cap) continue;
        if (backend != NULL && every_build)
            snprintf(out + used, cap - used, ", %s (builds with %s)", n, backend);
        else
            snprintf(out + used, cap - used, ", %s", n);
    }
}

/* The environment's value of var, its default when unset or empty. */
static const char *value_of(const weft__config_var_t *var)
{
    const char *v = getenv(var->name);
    return v != NULL && *v != '\0' ? v : var->default_value;
}

/* A decimal integer in [lo, hi]; trailing blanks allowed (strtol takes
 * leading ones). */
static bool text_to_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || end == v || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

/* A number in [lo, hi] (NaN is in no range). */
static bool text_to_double(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) return false;
    *out = x;
    return true;
}

/* "a, b or c": a NAME row's values, for its error message. */
static void name_list(const weft__config_var_t *var, const char *last_sep, char *out, size_t cap)
{
    int n = 0;
    while (var->value_name(n) != NULL) n++;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", i == 0 ? "" : i == n - 1 ? last_sep : ", ",
                 var->value_name(i));
    }
}

weft_status_t weft__config_parse(const weft__config_var_t *var, const char *value,
                                 weft__config_t *into)
{
    void *field = into != NULL && var->size > 0 ? (char *)into + var->offset : NULL;
    switch (var->kind) {
    case WEFT__CFG_INT:
    case WEFT__CFG_BOOL:
    case WEFT__CFG_SIZE: {
        long x;
        if (!text_to_long(value, var->lo, var->hi, &x)) {
            WEFT__ERROR("%s=\"%s\" is not an integer in [%ld, %ld]", var->name, value, var->lo,
                        var->hi);
            return WEFT_ERR_INVALID_ARG;
        }
        if (field != NULL && var->kind == WEFT__CFG_SIZE) *(size_t *)field = (size_t)x;
        else if (field != NULL) *(int *)field = (int)x;
        return WEFT_SUCCESS;
    }
    case WEFT__CFG_DOUBLE: {
        double x;
        if (!text_to_double(value, (double)var->lo, (double)var->hi, &x)) {
            WEFT__ERROR("%s=\"%s\" is not a number in [%g, %g]", var->name, value,
                        (double)var->lo, (double)var->hi);
            return WEFT_ERR_INVALID_ARG;
        }
        if (field != NULL) *(double *)field = x;
        return WEFT_SUCCESS;
    }
    case WEFT__CFG_NAME: {
        for (int i = 0; var->value_name(i) != NULL; i++) {
            if (strcmp(value, var->value_name(i)) == 0) {
                if (field != NULL) *(int *)field = i;
                return WEFT_SUCCESS;
            }
        }
        char names[256];
        name_list(var, " or ", names, sizeof names);
        WEFT__ERROR("%s=\"%s\": expected %s", var->name, value, names);
        return WEFT_ERR_INVALID_ARG;
    }
    case WEFT__CFG_ALGO: {
        weft_algo_t a;
        bool known = weft_algo_from_name(value, &a) == WEFT_SUCCESS, built = true;
        if (known) algo_backend(a, &built);
        if (!known || (a != WEFT_ALGO_AUTO && weft__algo_impl(var->coll, a) == NULL) || !built) {
            char names[512];
            algo_names(var->coll, false, names, sizeof names);
            WEFT__ERROR("%s=\"%s\": no such algorithm for %s in this build; valid: %s", var->name,
                        value, weft__coll_name(var->coll), names);
            return WEFT_ERR_ALGORITHM;
        }
        if (field != NULL) *(weft_algo_t *)field = a;
        return WEFT_SUCCESS;
    }
    case WEFT__CFG_TEXT:
        if (var->size > 0 && strlen(value) >= var->size) {
            WEFT__ERROR("%s=\"%.40s...\" is longer than %zu characters", var->name, value,
                        var->size - 1);
            return WEFT_ERR_INVALID_ARG;
        }
        if (field != NULL) memcpy(field, value, strlen(value) + 1);
        return WEFT_SUCCESS;
    case WEFT__CFG_KIND_COUNT: break;
    }
    WEFT__ERROR("%s: no parser for its kind %d", var->name, (int)var->kind);
    return WEFT_ERR_INTERNAL;
}

void weft__config_range(const weft__config_var_t *var, char *buf, size_t cap)
{
    if (cap == 0) return;
    switch (var->kind) {
    case WEFT__CFG_INT:
    case WEFT__CFG_SIZE:
    case WEFT__CFG_DOUBLE: {
        const char *what = var->kind == WEFT__CFG_DOUBLE ? "a number, " : "";
        if (var->hi == LONG_MAX) snprintf(buf, cap, "%s%ld or more", what, var->lo);
        else snprintf(buf, cap, "%s%ld .. %ld", what, var->lo, var->hi);
        return;
    }
    case WEFT__CFG_BOOL: snprintf(buf, cap, "0, 1"); return;
    case WEFT__CFG_NAME: name_list(var, ", ", buf, cap); return;
    case WEFT__CFG_ALGO: algo_names(var->coll, true, buf, cap); return;
    case WEFT__CFG_TEXT:
        if (var->size > 0) snprintf(buf, cap, "text, up to %zu characters", var->size - 1);
        else snprintf(buf, cap, "text");
        return;
    case WEFT__CFG_KIND_COUNT: break;
    }
    snprintf(buf, cap, "?");
}

void weft__config_format(const weft__config_var_t *var, const weft__config_t *c, char *buf,
                         size_t cap)
{
    if (cap == 0) return;
    if (var->size == 0) {
        snprintf(buf, cap, "%s", value_of(var));
        return;
    }
    const void *field = (const char *)c + var->offset;
    switch (var->kind) {
    case WEFT__CFG_INT:
    case WEFT__CFG_BOOL: snprintf(buf, cap, "%d", *(const int *)field); return;
    case WEFT__CFG_SIZE: snprintf(buf, cap, "%zu", *(const size_t *)field); return;
    case WEFT__CFG_DOUBLE: snprintf(buf, cap, "%.15g", *(const double *)field); return;
    case WEFT__CFG_NAME: {
        const char *n = var->value_name(*(const int *)field);
        snprintf(buf, cap, "%s", n ? n : "?");
        return;
    }
    case WEFT__CFG_ALGO: {
        weft_algo_t a = *(const weft_algo_t *)field;
        const char *n = weft_algo_name(a);
        snprintf(buf, cap, "%s", a == WEFT_ALGO_AUTO ? "auto" : n ? n : "?");
        return;
    }
    case WEFT__CFG_TEXT: snprintf(buf, cap, "%.*s", (int)var->size, (const char *)field); return;
    case WEFT__CFG_KIND_COUNT: break;
    }
    snprintf(buf, cap, "?");
}

weft_status_t weft__config_load(void)
{
    weft__config_t c;
    memset(&c, 0, sizeof c);

    /* The log level first, so that the other rows' errors are shown, then
     * the names that are not Weft's (a typo may explain a later error). */
    const weft__config_var_t *level = weft__config_find("WEFT_LOG_LEVEL");
    if (level == NULL) return WEFT_ERR_INTERNAL;
    WEFT__CHECK(weft__config_parse(level, value_of(level), &c));
    atomic_store_explicit(&weft__log_level, c.log_level, memory_order_relaxed);
    warn_unknown(c.log_level);

    for (const weft__config_var_t *v = vars; v->name; v++) {
        if (v == level || v->read_by != NULL) continue;
        WEFT__CHECK(weft__config_parse(v, value_of(v), &c));
    }

    /* NCCL serves device buffers on a CUDA-stream communicator only: every
     * other allreduce runs the host cost model's choice (lib/stream.c), which
     * weft_query_algo, weft-info and the benchmarks report. Said once here. */
    if (c.force_algo[WEFT_COLL_ALLREDUCE] == WEFT_ALGO_NCCL)
        CONFIG_NOTICE(c.log_level,
                      "WEFT_ALLREDUCE_ALGO=nccl: NCCL serves device buffers on communicators "
                      "bound to a CUDA stream only; host buffers run the host cost model's "
                      "algorithm instead (weft_query_algo and weft-info say which)");

    weft__cfg = c;
    return WEFT_SUCCESS;
}
