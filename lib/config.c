/*
 * config.c - every WEFT_* environment variable, read once in weft_init into
 * weft__cfg. Never getenv on a hot path. The table below is the single
 * source of the documentation (doc/config.md, weft-info and weft(7) print it).
 *
 * Strict (doc/config.md, "Strictness"): a malformed value fails weft_init
 * with a message that lists what is valid; a WEFT_ variable that is not in
 * the table is warned about with the closest name that is (a typo would
 * otherwise change nothing, silently); a forced algorithm that can serve only
 * some calls says at init what runs instead.
 */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_internal.h"

weft__config_t weft__cfg;

static const weft__config_var_t vars[] = {
    {"WEFT_ALLREDUCE_ALGO", "auto",
     "force the allreduce algorithm: auto|ring|recursive_doubling|rabenseifner|tree|mpi"},
    {"WEFT_REDUCE_SCATTER_ALGO", "auto", "force the reduce_scatter algorithm"},
    {"WEFT_ALLGATHER_ALGO", "auto", "force the allgather algorithm"},
    {"WEFT_BCAST_ALGO", "auto", "force the broadcast algorithm"},
    {"WEFT_REDUCE_ALGO", "auto", "force the reduce algorithm"},
    {"WEFT_ALLTOALL_ALGO", "auto", "force the alltoall algorithm"},
    {"WEFT_GATHER_ALGO", "auto", "force the gather algorithm"},
    {"WEFT_SCATTER_ALGO", "auto", "force the scatter algorithm"},
    {"WEFT_BARRIER_ALGO", "auto", "force the barrier algorithm"},
    {"WEFT_TUNING_FILE", "", "tuning file (doc/tuning.md) that replaces the cost-model table"},
    {"WEFT_TIMEOUT", "600",
     "hang watchdog, seconds: an operation running longer fails with WEFT_ERR_TIMEOUT and "
     "its communicator is marked broken (0 = off)"},
    {"WEFT_LOG_LEVEL", "1", "0 off, 1 error, 2 warn, 3 info, 4 debug"},
    {"WEFT_PROFILE", "", "write a per-operation, per-size profile to this path at finalize"},
    {"WEFT_TRACE", "",
     "write a Chrome/Perfetto trace of the engine to this path (.RANK added; weft-trace merge "
     "joins the ranks)"},
    {"WEFT_TRACE_EVENTS", "1048576",
     "trace buffer per rank, events (about 64 bytes each; 1024 .. 268435456)"},
    {"WEFT_TRACE_KEEP", "first",
     "when the trace buffer is full: first (keep the start, drop later events) or last "
     "(a ring: keep the most recent events)"},
    {"WEFT_TRACE_CLOCK", "node",
     "trace clock alignment: node (ranks of a node share rank 0's node clock; node leaders "
     "measure their offset from rank 0) or measure (every rank measures its offset)"},
    {"WEFT_TRANSPORT", "auto", "host transport: auto|mpi|ucx"},
    {"WEFT_RING_CHUNK", "262144", "ring pipeline chunk, bytes (0 = one chunk per block)"},
    {"WEFT_SPIN", "100", "empty progress passes before the engine starts to yield its core"},
    {"WEFT_MAX_SLEEP_US", "100",
     "longest sleep of the engine's backoff while work is in flight (oversubscribed nodes)"},
    {"WEFT_LINGER_US", "1000",
     "the engine stays awake (yielding) this long after its last op before it sleeps "
     "(0 on oversubscribed nodes)"},
    {"WEFT_WAIT_SPIN_US", "20000",
     "a waiting caller drives progress until it has seen none for this long, then hands the op "
     "to the engine and sleeps (10 on oversubscribed nodes at most)"},
    {"WEFT_FUSED_REDUCE_MAX", "8192",
     "messages of 2 KiB up to this many bytes that an algorithm reduces on arrival are reduced "
     "straight from the transport's buffers, without a scratch copy (UCX transport; 0 = never)"},
    {"WEFT_MEASURE", "1",
     "measure alpha, beta and gamma at communicator creation (0: use built-in defaults)"},
    {"WEFT_NCCL_MIN_BYTES", "65536",
     "device buffers: NCCL from this many bytes up, host transfer below"},
    {"WEFT_CUDA_MEMOPS", "1",
     "CUDA stream flags with cuStreamWrite/WaitValue32 (0: event fallback)"},
    {"WEFT_MPI_VERBOSE", "0",
     "libweft-mpi.so (read there, at MPI_Init): 1 reports per call site which MPI calls went to "
     "Weft and which fell through to MPI, and why (doc/mpi_interposition.md)"},
    {"WEFT_MPI_CALLS", "all",
     "libweft-mpi.so: comma list of the MPI collectives Weft serves (the others go to MPI)"},
    {"WEFT_CHECK_ARGS", "0",
     "1: every collective first checks with the other ranks that they all passed valid, "
     "matching arguments (count, datatype, operation, root), so a bad argument on one rank "
     "fails the call on every rank instead of leaving the others waiting (one small "
     "MPI_Allreduce per call: for debugging)"},
    {NULL, NULL, NULL},
};

const weft__config_var_t *weft__config_vars(void) { return vars; }

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

/* "ring, recursive_doubling, ..." : the algorithms that serve coll. */
static void algo_names(weft_coll_t coll, char *out, size_t cap)
{
    snprintf(out, cap, "auto");
    for (int a = WEFT_ALGO_AUTO + 1; a < WEFT_ALGO_COUNT; a++) {
        if (weft__algo_impl(coll, (weft_algo_t)a) == NULL) continue;
        const char *n = weft_algo_name((weft_algo_t)a);
        size_t used = strlen(out);
        if (n && used + 2 < cap) snprintf(out + used, cap - used, ", %s", n);
    }
}

static const char *value_of(const char *name)
{
    const char *v = getenv(name);
    if (v != NULL && *v != '\0') return v;
    for (const weft__config_var_t *c = vars; c->name; c++)
        if (strcmp(c->name, name) == 0) return c->default_value;
    return "";
}

static weft_status_t parse_long(const char *name, long lo, long hi, long *out)
{
    const char *v = value_of(name);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || end == v || *end || x < lo || x > hi) {
        WEFT__ERROR("%s=\"%s\" is not an integer in [%ld, %ld]", name, v, lo, hi);
        return WEFT_ERR_INVALID_ARG;
    }
    *out = x;
    return WEFT_SUCCESS;
}

static weft_status_t parse_double(const char *name, double lo, double hi, double *out)
{
    const char *v = value_of(name);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        WEFT__ERROR("%s=\"%s\" is not a number in [%g, %g]", name, v, lo, hi);
        return WEFT_ERR_INVALID_ARG;
    }
    *out = x;
    return WEFT_SUCCESS;
}

static weft_status_t copy_str(const char *name, char *dst, size_t cap)
{
    const char *v = value_of(name);
    if (strlen(v) >= cap) {
        WEFT__ERROR("%s is longer than %zu characters", name, cap - 1);
        return WEFT_ERR_INVALID_ARG;
    }
    strcpy(dst, v);
    return WEFT_SUCCESS;
}

/* WEFT_TRANSPORT: "auto" is WEFT_TRANSPORT_DEFAULT (the rule of
 * backends/transport_select.c), the others are weft_transport_name's names. */
static weft_status_t parse_transport(weft_transport_t *out)
{
    const char *v = value_of("WEFT_TRANSPORT");
    if (strcmp(v, "auto") == 0) {
        *out = WEFT_TRANSPORT_DEFAULT;
        return WEFT_SUCCESS;
    }
    for (int t = WEFT_TRANSPORT_DEFAULT + 1; t < WEFT_TRANSPORT_COUNT; t++) {
        if (strcmp(v, weft_transport_name((weft_transport_t)t)) == 0) {
            *out = (weft_transport_t)t;
            return WEFT_SUCCESS;
        }
    }
    WEFT__ERROR("WEFT_TRANSPORT=\"%s\": expected auto, mpi or ucx", v);
    return WEFT_ERR_INVALID_ARG;
}

static const char *const coll_env[WEFT_COLL_COUNT] = {
    [WEFT_COLL_ALLREDUCE] = "WEFT_ALLREDUCE_ALGO", [WEFT_COLL_REDUCE_SCATTER] = "WEFT_REDUCE_SCATTER_ALGO",
    [WEFT_COLL_ALLGATHER] = "WEFT_ALLGATHER_ALGO", [WEFT_COLL_BCAST] = "WEFT_BCAST_ALGO",
    [WEFT_COLL_REDUCE] = "WEFT_REDUCE_ALGO",       [WEFT_COLL_ALLTOALL] = "WEFT_ALLTOALL_ALGO",
    [WEFT_COLL_GATHER] = "WEFT_GATHER_ALGO",       [WEFT_COLL_SCATTER] = "WEFT_SCATTER_ALGO",
    [WEFT_COLL_BARRIER] = "WEFT_BARRIER_ALGO",
};

weft_status_t weft__config_load(void)
{
    weft__config_t c;
    long l;
    memset(&c, 0, sizeof c);

    /* Log level first, so that the other parse errors are shown. */
    WEFT__CHECK(parse_long("WEFT_LOG_LEVEL", 0, 4, &l));
    c.log_level = (int)l;
    atomic_store_explicit(&weft__log_level, c.log_level, memory_order_relaxed);

    for (int i = 0; i < WEFT_COLL_COUNT; i++) {
        const char *v = value_of(coll_env[i]);
        weft_algo_t a;
        if (weft_algo_from_name(v, &a) != WEFT_SUCCESS ||
            (a != WEFT_ALGO_AUTO && weft__algo_impl((weft_coll_t)i, a) == NULL)) {
            char names[512];
            algo_names((weft_coll_t)i, names, sizeof names);
            WEFT__ERROR("%s=\"%s\": no such algorithm for %s in this build; valid: %s",
                        coll_env[i], v, weft__coll_name((weft_coll_t)i), names);
            return WEFT_ERR_ALGORITHM;
        }
        c.force_algo[i] = a;
    }
    /* NCCL serves device buffers on a CUDA-stream communicator only: every
     * other allreduce runs the host cost model's choice (lib/stream.c), which
     * weft_query_algo, weft-info and the benchmarks report. Said once here. */
    if (c.force_algo[WEFT_COLL_ALLREDUCE] == WEFT_ALGO_NCCL)
        CONFIG_NOTICE(c.log_level,
                      "WEFT_ALLREDUCE_ALGO=nccl: NCCL serves device buffers on communicators "
                      "bound to a CUDA stream only; host buffers run the host cost model's "
                      "algorithm instead (weft_query_algo and weft-info say which)");
    warn_unknown(c.log_level);
    WEFT__CHECK(copy_str("WEFT_TUNING_FILE", c.tuning_file, sizeof c.tuning_file));
    WEFT__CHECK(parse_double("WEFT_TIMEOUT", 0, 1e9, &c.timeout_s));
    WEFT__CHECK(copy_str("WEFT_PROFILE", c.profile_path, sizeof c.profile_path));
    WEFT__CHECK(copy_str("WEFT_TRACE", c.trace_path, sizeof c.trace_path));
    WEFT__CHECK(parse_long("WEFT_TRACE_EVENTS", 1024, 1L << 28, &l));
    c.trace_events = (size_t)l;
    {
        const char *keep = value_of("WEFT_TRACE_KEEP");
        if (strcmp(keep, "first") == 0) {
            c.trace_keep_last = 0;
        } else if (strcmp(keep, "last") == 0) {
            c.trace_keep_last = 1;
        } else {
            WEFT__ERROR("WEFT_TRACE_KEEP=\"%s\": expected first or last", keep);
            return WEFT_ERR_INVALID_ARG;
        }
    }
    {
        const char *clock = value_of("WEFT_TRACE_CLOCK");
        if (strcmp(clock, "node") == 0) {
            c.trace_clock_measure = 0;
        } else if (strcmp(clock, "measure") == 0) {
            c.trace_clock_measure = 1;
        } else {
            WEFT__ERROR("WEFT_TRACE_CLOCK=\"%s\": expected node or measure", clock);
            return WEFT_ERR_INVALID_ARG;
        }
    }
    WEFT__CHECK(parse_transport(&c.transport));
    WEFT__CHECK(parse_long("WEFT_RING_CHUNK", 0, 1L << 40, &l));
    c.ring_chunk = (size_t)l;
    WEFT__CHECK(parse_long("WEFT_SPIN", 0, 100000000, &l));
    c.spin = (int)l;
    WEFT__CHECK(parse_long("WEFT_MAX_SLEEP_US", 0, 1000000, &l));
    c.max_sleep_us = (int)l;
    WEFT__CHECK(parse_long("WEFT_LINGER_US", 0, 10000000, &l));
    c.linger_us = (int)l;
    WEFT__CHECK(parse_long("WEFT_WAIT_SPIN_US", 0, 10000000, &l));
    c.wait_spin_us = (int)l;
    WEFT__CHECK(parse_long("WEFT_FUSED_REDUCE_MAX", 0, 1L << 40, &l));
    c.fused_reduce_max = (size_t)l;
    WEFT__CHECK(parse_long("WEFT_MEASURE", 0, 1, &l));
    c.measure = (int)l;
    WEFT__CHECK(parse_long("WEFT_NCCL_MIN_BYTES", 0, LONG_MAX, &l));
    c.nccl_min_bytes = (size_t)l;
    WEFT__CHECK(parse_long("WEFT_CUDA_MEMOPS", 0, 1, &l));
    c.cuda_memops = (int)l;
    WEFT__CHECK(parse_long("WEFT_CHECK_ARGS", 0, 1, &l));
    c.check_args = (int)l;

    weft__cfg = c;
    return WEFT_SUCCESS;
}
