/*
 * bench_common.c - option parsing, interleaved timing, CSV output and small
 * helpers shared by Weft's benchmark programs. See bench_common.h.
 */
#include "bench_common.h"
#include "weft_cli.h"
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_BYTES ((size_t)1 << 30) /* 1 GiB per buffer is plenty here */

/* ---- messages ------------------------------------------------------------------ */
void bench_printf(const bench_ctx_t *b, const char *fmt, ...)
{
    if (b->rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void bench_progress(bench_ctx_t *b, const char *fmt, ...)
{
    if (b->rank != 0 || b->quiet) return;
    double now = MPI_Wtime();
    if (now - b->t_start < 2.0 || now - b->last_progress < 2.0) return;
    b->last_progress = now;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%7.1f s] ", now - b->t_start);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
}

void bench_error(const bench_ctx_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] error: ", b ? b->rank : -1);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
}

static void mpi_err(const bench_ctx_t *b, int rc, const char *call)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    bench_error(b, "%s failed: %s", call, msg);
}

/* --thp, set by bench_parse before any buffer is made (main thread). */
static int bench_hugepages;
static void print_pages(void);

#define BENCH_MPI(b, call)                                                     \
    do {                                                                       \
        int bench_rc_ = (call);                                                \
        if (bench_rc_ != MPI_SUCCESS) {                                        \
            mpi_err((b), bench_rc_, #call);                                    \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* ---- init / finalize ---------------------------------------------------------- */
int bench_init(bench_ctx_t *b, int *argc, char ***argv)
{
    memset(b, 0, sizeof *b);
    b->rank = -1;
    b->mpi_comm = MPI_COMM_NULL;
    b->ctl = MPI_COMM_NULL;
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "error: MPI_Init_thread failed (code %d)\n", rc);
        return 1;
    }
    if (MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        MPI_Comm_rank(MPI_COMM_WORLD, &b->rank) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &b->size) != MPI_SUCCESS) {
        fprintf(stderr, "error: MPI_Comm_set_errhandler/rank/size failed\n");
        MPI_Finalize();
        return 1;
    }
    b->t_start = MPI_Wtime();
    b->last_progress = b->t_start;
    if (provided < MPI_THREAD_MULTIPLE) {
        if (b->rank == 0)
            fprintf(stderr, "error: MPI gives thread level %d, Weft needs MPI_THREAD_MULTIPLE\n",
                    provided);
        MPI_Finalize();
        return 1;
    }
    weft_init_params_t params = WEFT_INIT_PARAMS_INITIALIZER;
    params.argc = argc;
    params.argv = argv;
    weft_status_t st = weft_init(&params);
    if (st != WEFT_SUCCESS) {
        bench_error(b, "weft_init: %s (%s)", weft_status_name(st), weft_strerror(st));
        MPI_Finalize();
        return 1;
    }
    st = weft_comm_create(MPI_COMM_WORLD, NULL, &b->comm);
    if (st != WEFT_SUCCESS) {
        bench_error(b, "weft_comm_create: %s (%s)", weft_status_name(st), weft_strerror(st));
        b->comm = NULL;
        weft_finalize();
        MPI_Finalize();
        return 1;
    }
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &b->mpi_comm)) != MPI_SUCCESS ||
        (rc = MPI_Comm_dup(MPI_COMM_WORLD, &b->ctl)) != MPI_SUCCESS ||
        (rc = MPI_Comm_set_errhandler(b->mpi_comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = MPI_Comm_set_errhandler(b->ctl, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
        mpi_err(b, rc, "MPI_Comm_dup/set_errhandler");
        return bench_finalize(b, 1);
    }
    return 0;
}

int bench_finalize(bench_ctx_t *b, int code)
{
    if (code == BENCH_PARSE_HELP) code = 0;
    else if (code == BENCH_PARSE_USAGE) code = 2;
    if (b->comm) {
        weft_status_t st = weft_comm_destroy(b->comm);
        if (st != WEFT_SUCCESS) {
            bench_error(b, "weft_comm_destroy: %s", weft_status_name(st));
            if (code == 0) code = 1;
        }
        b->comm = NULL;
    }
    if (b->mpi_comm != MPI_COMM_NULL) MPI_Comm_free(&b->mpi_comm);
    if (b->ctl != MPI_COMM_NULL) MPI_Comm_free(&b->ctl);
    weft_status_t st = weft_finalize();
    if (st != WEFT_SUCCESS) {
        bench_error(b, "weft_finalize: %s", weft_status_name(st));
        if (code == 0) code = 1;
    }
    MPI_Finalize();
    return code;
}

/* ---- small parsers -------------------------------------------------------------- */
static const struct {
    const char *name;
    weft_datatype_t dt;
} dtype_names[] = {
    {"float", WEFT_FLOAT32},   {"float32", WEFT_FLOAT32}, {"double", WEFT_FLOAT64},
    {"float64", WEFT_FLOAT64}, {"int", WEFT_INT32},       {"int32", WEFT_INT32},
    {"uint32", WEFT_UINT32},   {"unsigned", WEFT_UINT32}, {"int8", WEFT_INT8},
    {"char", WEFT_INT8},       {"uint8", WEFT_UINT8},     {"int64", WEFT_INT64},
    {"long", WEFT_INT64},      {"uint64", WEFT_UINT64},   {"float16", WEFT_FLOAT16},
    {"half", WEFT_FLOAT16},    {"bfloat16", WEFT_BFLOAT16}, {"bf16", WEFT_BFLOAT16},
    {"int16", WEFT_INT16},     {"short", WEFT_INT16},     {"uint16", WEFT_UINT16},
    /* OSU OMB 7's -T names */
    {"mpi_char", WEFT_INT8},   {"mpi_int", WEFT_INT32},   {"mpi_float", WEFT_FLOAT32},
};

int bench_parse_dtype(const char *name, weft_datatype_t *dt)
{
    if (!name) return -1;
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (strcmp(name, dtype_names[i].name) == 0) {
            *dt = dtype_names[i].dt;
            return 0;
        }
    return -1;
}

MPI_Datatype bench_mpi_dtype(weft_datatype_t dt)
{
    switch (dt) {
    case WEFT_INT8: return MPI_INT8_T;
    case WEFT_UINT8: return MPI_UINT8_T;
    case WEFT_INT16: return MPI_INT16_T;
    case WEFT_UINT16: return MPI_UINT16_T;
    case WEFT_INT32: return MPI_INT32_T;
    case WEFT_UINT32: return MPI_UINT32_T;
    case WEFT_INT64: return MPI_INT64_T;
    case WEFT_UINT64: return MPI_UINT64_T;
    case WEFT_FLOAT32: return MPI_FLOAT;
    case WEFT_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op bench_mpi_op(weft_op_t op)
{
    switch (op) {
    case WEFT_SUM: return MPI_SUM;
    case WEFT_AVG: return MPI_SUM;
    case WEFT_PROD: return MPI_PROD;
    case WEFT_MIN: return MPI_MIN;
    case WEFT_MAX: return MPI_MAX;
    case WEFT_BAND: return MPI_BAND;
    case WEFT_BOR: return MPI_BOR;
    case WEFT_BXOR: return MPI_BXOR;
    default: return MPI_OP_NULL;
    }
}

int bench_parse_size(const char *s, size_t *out) { return weft_cli_parse_size(s, out); }

int bench_parse_long(const char *s, long min, long *out)
{
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min) return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* ---- options ---------------------------------------------------------------------- */
void bench_usage(const bench_ctx_t *b, const bench_spec_t *spec, FILE *f)
{
    if (b->rank != 0) return;
    fprintf(
        f,
        "Usage: mpiexec -n N %s [options]\n"
        "%s%s"
        "Options:\n"
        "  -m MIN:MAX | -m MAX  message sizes in bytes, doubling from MIN (suffix K, M, G;\n"
        "                       default %zu:%zu)\n"
        "  -i ITERS             timed iterations per size and variant (default: 1000 up to\n"
        "                       8 KiB, 100 above, capped by --budget)\n"
        "  -x WARMUP            warm-up iterations per size and variant (default: 100 up\n"
        "                       to 8 KiB, 10 above)\n"
        "  -r, --rounds R       interleaved rounds; the median over rounds is reported\n"
        "                       (default 5, at most %d)\n"
        "  --budget SECONDS     time per size and variant when -i is not given (default 0.4)\n"
        "  -T TYPE              float|double|int|int8|uint8|int16|uint16|int32|uint32|\n"
        "                       int64|uint64|float16|bfloat16 (default float)\n"
        "  -a ALGO              force an algorithm with weft_comm_set_algo: auto, ring,\n"
        "                       recursive_doubling, rabenseifner, tree, mpi, ... (default auto)\n"
        "  --csv FILE           also write the figures as CSV to FILE\n"
        "  --quiet              no progress lines on stderr\n"
        "  --thp                buffers 2 MiB-aligned and advised MADV_HUGEPAGE (transparent\n"
        "                       huge pages, as on a node whose THP mode is \"always\")\n"
        "  -h, --help           this text\n"
        "  -V, -v, --version    version and build options\n"
        "%s%s%s%s"
        "OSU's spellings are taken too: --message-size (also MIN: and :MAX), --iterations,\n"
        "--warmup, --type (mpi_char, mpi_int, mpi_float).\n",
        spec->prog, spec->what ? spec->what : "", spec->what ? "\n" : "",
        spec->min_bytes ? spec->min_bytes : BENCH_DEFAULT_MIN,
        spec->max_bytes ? spec->max_bytes : BENCH_DEFAULT_MAX, BENCH_MAX_ROUNDS,
        spec->osu ? "  --osu[=weft|mpi]     OSU OMB 7's output and method instead of the comparison:\n"
                    "                       Weft's call (or MPI's, =mpi) timed alone, each iteration\n"
                    "                       between barriers, averaged over ranks as OSU does\n"
                    "  -f, --full           (--osu) also min/max over ranks and iterations\n"
                    "  -c, --validation     (--osu) check every iteration's result: Pass/Fail\n"
                  : "",
        spec->floor ? "  --floor              also time the memory floor as a third variant, interleaved\n"
                      "                       with Weft and MPI in the same rounds (same warm-up,\n"
                      "                       iterations and median; every rank at once, between the\n"
                      "                       barriers, on distinct buffers written beforehand): columns\n"
                      "                       Floor(us) and Weft/Floor, CSV floor_us and weft_floor_ratio\n"
                      "                       (not with --osu). The floor is:\n"
                    : "",
        spec->floor ? spec->floor : "",
        spec->extra_usage ? spec->extra_usage : "");
}

static int usage_error(const bench_ctx_t *b, const bench_spec_t *spec, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int usage_error(const bench_ctx_t *b, const bench_spec_t *spec, const char *fmt, ...)
{
    if (b->rank == 0) {
        char msg[1536]; /* room for an option's usage lines (bad values quote them) */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        weft_cli_usage_error(spec->prog, "%s", msg);
    }
    return BENCH_PARSE_USAGE;
}

/* Apply one short option (or its long form) with its value. */
static int apply_short(bench_ctx_t *b, const bench_spec_t *spec, bench_opts_t *o, char opt,
                       const char *val)
{
    long l;
    switch (opt) {
    case 'm': {
        size_t lo = o->min_bytes, hi = o->max_bytes;
        size_t len = strlen(val);
        int bad;
        if (len > 1 && val[len - 1] == ':') { /* OSU's "MIN:": the maximum stays */
            char buf[64];
            bad = len >= sizeof buf;
            if (!bad) {
                memcpy(buf, val, len - 1);
                buf[len - 1] = '\0';
                bad = weft_cli_parse_size(buf, &lo) != 0;
            }
        } else if (val[0] == ':') { /* OSU's ":MAX": the minimum stays */
            bad = weft_cli_parse_size(val + 1, &hi) != 0;
        } else {
            bad = weft_cli_parse_range(val, &lo, &hi) != 0;
        }
        if (bad || lo > hi)
            return usage_error(b, spec, "bad -m '%s' (MIN:MAX, MAX, MIN: or :MAX in bytes, suffix "
                                        "K, M, G)", val);
        if (lo == 0) return usage_error(b, spec, "-m: the smallest size must be at least 1 byte");
        if (hi > BENCH_MAX_BYTES)
            return usage_error(b, spec, "-m: MAX %zu is above the limit of %zu bytes", hi,
                               BENCH_MAX_BYTES);
        o->min_bytes = lo;
        o->max_bytes = hi;
        return BENCH_PARSE_OK;
    }
    case 'i':
        if (bench_parse_long(val, 1, &l) != 0 || l > 100000000L)
            return usage_error(b, spec, "bad -i '%s' (a positive number of iterations)", val);
        o->iters = l;
        return BENCH_PARSE_OK;
    case 'x':
        if (bench_parse_long(val, 0, &l) != 0 || l > 100000000L)
            return usage_error(b, spec, "bad -x '%s' (a non-negative number of iterations)", val);
        o->warmup = l;
        return BENCH_PARSE_OK;
    case 'r':
        if (bench_parse_long(val, 1, &l) != 0 || l > BENCH_MAX_ROUNDS)
            return usage_error(b, spec, "bad rounds '%s' (1..%d)", val, BENCH_MAX_ROUNDS);
        o->rounds = (int)l;
        return BENCH_PARSE_OK;
    case 'T':
        if (bench_parse_dtype(val, &o->dtype) != 0)
            return usage_error(b, spec,
                               "unknown datatype '%s' (float, double, int, int8, uint8, int16, "
                               "uint16, int32, uint32, int64, uint64, float16, bfloat16)",
                               val);
        return BENCH_PARSE_OK;
    case 'a':
        if (strcmp(val, "auto") == 0) {
            o->algo = WEFT_ALGO_AUTO;
        } else {
            weft_algo_t a;
            if (weft_algo_from_name(val, &a) != WEFT_SUCCESS) {
                char names[512] = "auto";
                for (int k = WEFT_ALGO_AUTO + 1; k < WEFT_ALGO_COUNT; k++) {
                    const char *n = weft_algo_name((weft_algo_t)k);
                    if (n == NULL) continue;
                    strncat(names, ", ", sizeof names - strlen(names) - 1);
                    strncat(names, n, sizeof names - strlen(names) - 1);
                }
                return usage_error(b, spec, "unknown algorithm '%s' (one of: %s)", val, names);
            }
            o->algo = a;
        }
        o->algo_given = 1;
        return BENCH_PARSE_OK;
    default:
        return usage_error(b, spec, "unknown option '-%c'", opt);
    }
}

/* The lines of a usage text that describe --name: the line that starts
 * with "--name" (after spaces) and the more indented lines that follow it. */
static void usage_entry(const char *usage, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    size_t nlen = strlen(name), used = 0;
    int in = 0;
    for (const char *line = usage; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        size_t ind = strspn(line, " ");
        int starts = ind < len && line[ind] == '-';
        if (starts) in = strncmp(line + ind, "--", 2) == 0 && strncmp(line + ind + 2, name, nlen) == 0 &&
                         !(isalnum((unsigned char)line[ind + 2 + nlen]) || line[ind + 2 + nlen] == '-');
        if (in && (starts || ind > 2) && used + len + 2 < cap) {
            memcpy(out + used, line, len);
            used += len;
            out[used++] = '\n';
            out[used] = '\0';
        }
        if (!end) break;
        line = end + 1;
    }
    if (used > 0) out[used - 1] = '\0'; /* no trailing newline */
}

int bench_parse(bench_ctx_t *b, int argc, char **argv, const bench_spec_t *spec, bench_opts_t *o)
{
    memset(o, 0, sizeof *o);
    b->prog = spec->prog;
    o->min_bytes = spec->min_bytes ? spec->min_bytes : BENCH_DEFAULT_MIN;
    o->max_bytes = spec->max_bytes ? spec->max_bytes : BENCH_DEFAULT_MAX;
    o->iters = 0;
    o->warmup = -1;
    o->rounds = 5;
    o->budget_s = 0.4;
    o->dtype = WEFT_FLOAT32;
    o->algo = WEFT_ALGO_AUTO;
    o->csv_path = NULL;

    /* getopt_long over the shared options and the program's own long ones.
     * The program's options are known only to its callback (bench_extra_fn),
     * so each long option on the command line that is not a shared one is
     * offered to it once without a value first, as its contract allows: it
     * answers BENCH_OPT_NEEDS_VALUE (an option with a value), BENCH_OPT_OK (a
     * flag, taken there and then) or BENCH_OPT_UNKNOWN (left for getopt_long
     * to report). */
    enum { OPT_CSV = 256, OPT_BUDGET, OPT_QUIET, OPT_OSU, OPT_FLOOR, OPT_HUGE, OPT_EXTRA };
    static const struct option shared[] = {
        {"rounds", required_argument, NULL, 'r'}, {"csv", required_argument, NULL, OPT_CSV},
        {"budget", required_argument, NULL, OPT_BUDGET}, {"quiet", no_argument, NULL, OPT_QUIET},
        {"help", no_argument, NULL, 'h'},         {"version", no_argument, NULL, 'V'},
        {"osu", optional_argument, NULL, OPT_OSU}, {"full", no_argument, NULL, 'f'},
        {"validation", no_argument, NULL, 'c'}, {"floor", no_argument, NULL, OPT_FLOOR},
        {"thp", no_argument, NULL, OPT_HUGE},
        /* OSU OMB 7's long spellings of the short options */
        {"message-size", required_argument, NULL, 'm'}, {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'x'}, {"type", required_argument, NULL, 'T'},
    };
    const int nshared = (int)(sizeof shared / sizeof shared[0]);
    struct option *longopts = calloc((size_t)nshared + (size_t)argc + 1, sizeof *longopts);
    char **names = calloc((size_t)argc + 1, sizeof *names);
    int nlong = nshared, rc = BENCH_PARSE_OK;
    if (longopts == NULL || names == NULL) {
        bench_error(b, "out of memory parsing the options");
        rc = BENCH_PARSE_USAGE;
        goto out;
    }
    memcpy(longopts, shared, sizeof shared);
    for (int i = 1; i < argc && spec->extra; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) break;
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') continue;
        size_t n = strcspn(arg + 2, "=");
        int known = 0;
        for (int k = 0; k < nlong && !known; k++)
            known = strlen(longopts[k].name) == n && strncmp(longopts[k].name, arg + 2, n) == 0;
        if (known) continue;
        char *name = strndup(arg + 2, n);
        if (name == NULL) {
            bench_error(b, "out of memory parsing the options");
            rc = BENCH_PARSE_USAGE;
            goto out;
        }
        names[nlong - nshared] = name;
        int probe = spec->extra(spec->extra_ud, name, NULL);
        if (probe == BENCH_OPT_NEEDS_VALUE || probe == BENCH_OPT_OK) {
            longopts[nlong++] = (struct option){name, probe == BENCH_OPT_OK ? no_argument
                                                                            : required_argument,
                                                NULL, OPT_EXTRA};
        } else {
            free(name);
            names[nlong - nshared] = NULL;
            if (probe == BENCH_OPT_BAD_VALUE) {
                rc = usage_error(b, spec, "bad option '%s'", arg);
                goto out;
            }
        }
    }

    /* The short options: the shared ones (-v is OSU's --version), then the
     * program's one-letter spellings of its own long options, which take a
     * value. */
    char optstring[96] = ":m:i:x:r:T:a:hVvfc";
    for (const bench_short_t *sh = spec->shorts; sh && sh->opt; sh++) {
        size_t used = strlen(optstring);
        if (strchr(optstring, sh->opt) != NULL || used + 3 > sizeof optstring) {
            bench_error(b, "%s: short option -%c defined twice (or too many)", spec->prog, sh->opt);
            rc = BENCH_PARSE_USAGE;
            goto out;
        }
        optstring[used] = sh->opt;
        optstring[used + 1] = ':';
        optstring[used + 2] = '\0';
    }
    optind = 0; /* a full reset of glibc's getopt */
    opterr = 0;
    int opt, idx = -1;
    while ((opt = getopt_long(argc, argv, optstring, longopts, &idx)) != -1) {
        const bench_short_t *sh = NULL;
        for (const bench_short_t *k = spec->shorts; k && k->opt && opt < 256; k++)
            if (k->opt == opt) sh = k;
        if (sh != NULL) {
            int r = spec->extra ? spec->extra(spec->extra_ud, sh->name, optarg) : BENCH_OPT_UNKNOWN;
            if (r != BENCH_OPT_OK) {
                char hint[1024];
                usage_entry(spec->extra_usage, sh->name, hint, sizeof hint);
                rc = usage_error(b, spec, "bad value '%s' for -%c%s%s", optarg, sh->opt,
                                 hint[0] ? ", which takes:\n" : "", hint);
                goto out;
            }
            continue;
        }
        switch (opt) {
        case 'h':
            bench_usage(b, spec, stdout);
            if (b->rank == 0) fflush(stdout);
            rc = BENCH_PARSE_HELP;
            goto out;
        case 'V':
        case 'v':
            if (b->rank == 0) weft_cli_version(stdout, spec->prog);
            rc = BENCH_PARSE_HELP;
            goto out;
        case 'm': case 'i': case 'x': case 'r': case 'T': case 'a':
            rc = apply_short(b, spec, o, (char)opt, optarg);
            if (rc != BENCH_PARSE_OK) goto out;
            break;
        case OPT_CSV:
            if (!*optarg) {
                rc = usage_error(b, spec, "--csv needs a file name");
                goto out;
            }
            o->csv_path = optarg;
            break;
        case OPT_BUDGET: {
            double d;
            if (parse_double(optarg, &d) != 0 || d <= 0 || d > 3600) {
                rc = usage_error(b, spec, "bad --budget '%s' (seconds, > 0)", optarg);
                goto out;
            }
            o->budget_s = d;
            break;
        }
        case OPT_QUIET:
            o->quiet = 1;
            b->quiet = 1;
            break;
        case OPT_OSU:
            if (optarg == NULL || strcmp(optarg, "weft") == 0) {
                o->osu = BENCH_OSU_WEFT;
            } else if (strcmp(optarg, "mpi") == 0) {
                o->osu = BENCH_OSU_MPI;
            } else {
                rc = usage_error(b, spec, "bad --osu '%s' (--osu, --osu=weft or --osu=mpi)", optarg);
                goto out;
            }
            break;
        case OPT_FLOOR:
            o->floor = 1;
            break;
        case OPT_HUGE: /* bench_alloc's, which has no options to read */
            bench_hugepages = 1;
            break;
        case 'f':
            o->full = 1;
            break;
        case 'c':
            o->validate = 1;
            break;
        case OPT_EXTRA: {
            const struct option *lo = &longopts[idx];
            if (lo->has_arg == no_argument) break; /* a flag: taken by the probe */
            int r = spec->extra(spec->extra_ud, lo->name, optarg);
            if (r != BENCH_OPT_OK) {
                /* The option's own lines of the usage text say what is valid. */
                char hint[1024];
                usage_entry(spec->extra_usage, lo->name, hint, sizeof hint);
                rc = usage_error(b, spec, "bad value '%s' for --%s%s%s", optarg, lo->name,
                                 hint[0] ? ", which takes:\n" : "", hint);
                goto out;
            }
            break;
        }
        default:
            if (b->rank == 0) weft_cli_getopt_error(spec->prog, opt, argv, longopts);
            rc = BENCH_PARSE_USAGE;
            goto out;
        }
    }
    if (optind < argc) {
        rc = usage_error(b, spec, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (o->osu && !spec->osu) {
        rc = usage_error(b, spec, "--osu: %s has no OSU mode", spec->prog);
        goto out;
    }
    if (o->floor && !spec->floor) {
        rc = usage_error(b, spec, "--floor: %s has no memory floor", spec->prog);
        goto out;
    }
    if (o->floor && o->osu) {
        rc = usage_error(b, spec, "--floor goes with the comparison of Weft and MPI, not --osu");
        goto out;
    }
    if ((o->full || o->validate) && !o->osu) {
        rc = usage_error(b, spec, "%s goes with --osu (OSU's full listing and validation)",
                         o->full ? "-f/--full" : "-c/--validation");
        goto out;
    }
    if (weft_datatype_size(o->dtype) == 0) {
        rc = usage_error(b, spec, "datatype not supported by this Weft build");
        goto out;
    }
    size_t esz = spec->bytes_only ? 1 : weft_datatype_size(o->dtype);
    if (o->max_bytes < esz) {
        rc = usage_error(b, spec, "-m: MAX %zu is smaller than one %s element (%zu bytes)",
                         o->max_bytes, weft_datatype_name(o->dtype), esz);
        goto out;
    }
    /* Whole elements only: round MIN up to a multiple of the element size so
     * that every size printed is the size sent. */
    if (o->min_bytes % esz) o->min_bytes += esz - o->min_bytes % esz;
    if (o->min_bytes > o->max_bytes)
        rc = usage_error(b, spec, "-m: no whole number of %s elements between MIN and MAX",
                         weft_datatype_name(o->dtype));
out:
    /* The program's option names are copies made above, freed here. */
    if (names)
        for (int k = 0; k < nlong - nshared; k++) free(names[k]);
    free(names);
    free(longopts);
    return rc;
}

int bench_apply_algo(const bench_ctx_t *b, const bench_opts_t *o, weft_coll_t coll)
{
    return bench_apply_algo_to(b, o, b->comm, coll);
}

int bench_apply_algo_to(const bench_ctx_t *b, const bench_opts_t *o, weft_comm_t comm,
                        weft_coll_t coll)
{
    if (!o->algo_given) return 0;
    weft_status_t st = weft_comm_set_algo(comm, coll, o->algo);
    if (st != WEFT_SUCCESS) {
        /* The ones it takes, asked of the communicator itself (then back to auto). */
        char names[512] = "auto";
        for (int k = WEFT_ALGO_AUTO + 1; k < WEFT_ALGO_COUNT; k++) {
            const char *n = weft_algo_name((weft_algo_t)k);
            if (n == NULL || weft_comm_set_algo(comm, coll, (weft_algo_t)k) != WEFT_SUCCESS) continue;
            strncat(names, ", ", sizeof names - strlen(names) - 1);
            strncat(names, n, sizeof names - strlen(names) - 1);
        }
        weft_status_t st2 = weft_comm_set_algo(comm, coll, WEFT_ALGO_AUTO);
        if (b->rank == 0) {
            char msg[700];
            snprintf(msg, sizeof msg, "-a %s: Weft refuses it for this collective (%s); valid: %s",
                     weft_algo_name(o->algo) ? weft_algo_name(o->algo) : "?", weft_status_name(st),
                     names);
            weft_cli_usage_error(b->prog ? b->prog : "benchmark", "%s", msg);
        }
        if (st2 != WEFT_SUCCESS) bench_error(b, "weft_comm_set_algo(auto): %s", weft_status_name(st2));
        return BENCH_PARSE_USAGE;
    }
    return 0;
}

/* The collective a WEFT_<COLL>_ALGO variable forces; 0, or -1 if none. */
static int bench_coll_of_env(const char *var, weft_coll_t *coll)
{
    static const struct { const char *var; weft_coll_t coll; } map[] = {
        {"WEFT_ALLREDUCE_ALGO", WEFT_COLL_ALLREDUCE}, {"WEFT_REDUCE_SCATTER_ALGO", WEFT_COLL_REDUCE_SCATTER},
        {"WEFT_ALLGATHER_ALGO", WEFT_COLL_ALLGATHER}, {"WEFT_BCAST_ALGO", WEFT_COLL_BCAST},
        {"WEFT_REDUCE_ALGO", WEFT_COLL_REDUCE},       {"WEFT_ALLTOALL_ALGO", WEFT_COLL_ALLTOALL},
        {"WEFT_GATHER_ALGO", WEFT_COLL_GATHER},       {"WEFT_SCATTER_ALGO", WEFT_COLL_SCATTER},
        {"WEFT_BARRIER_ALGO", WEFT_COLL_BARRIER},
    };
    for (size_t i = 0; var && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(var, map[i].var) == 0) {
            *coll = map[i].coll;
            return 0;
        }
    return -1;
}

void bench_print_header(const bench_ctx_t *b, const bench_opts_t *o, const char *title,
                        const char *env_algo_var)
{
    if (b->rank != 0) return;
    printf("# %s\n", title);
    printf("# Weft %s, %d ranks, datatype %s (%zu B)\n", weft_version_string(), b->size,
           weft_datatype_name(o->dtype), weft_datatype_size(o->dtype));
    const char *env_algo = env_algo_var ? getenv(env_algo_var) : NULL;
    if (o->algo_given)
        printf("# Algorithm: forced to %s with -a (weft_comm_set_algo)%s%s\n",
               o->algo == WEFT_ALGO_AUTO ? "auto" : weft_algo_name(o->algo),
               env_algo ? "; environment also sets " : "", env_algo ? env_algo_var : "");
    else if (env_algo && *env_algo)
        printf("# Algorithm: forced by the environment, %s=%s\n", env_algo_var, env_algo);
    else
        printf("# Algorithm: auto (Weft's selection)\n");
    /* A forced algorithm that cannot serve these calls (NCCL on host
     * buffers) runs another one: say which, as weft_query_algo answers for
     * host buffers on b->comm (a program timing device buffers on a comm of
     * its own says what ran in its rows). */
    weft_algo_t forced = o->algo_given ? o->algo : WEFT_ALGO_AUTO;
    if (!o->algo_given && env_algo && *env_algo && weft_algo_from_name(env_algo, &forced) != WEFT_SUCCESS)
        forced = WEFT_ALGO_AUTO;
    weft_coll_t coll = WEFT_COLL_ALLREDUCE;
    if (forced != WEFT_ALGO_AUTO && !b->own_comms && bench_coll_of_env(env_algo_var, &coll) == 0) {
        size_t esz = weft_datatype_size(o->dtype) ? weft_datatype_size(o->dtype) : 1;
        weft_algo_t lo = WEFT_ALGO_AUTO, hi = WEFT_ALGO_AUTO;
        if (weft_query_algo(b->comm, coll, o->min_bytes / esz, o->dtype, &lo) == WEFT_SUCCESS &&
            weft_query_algo(b->comm, coll, o->max_bytes / esz, o->dtype, &hi) == WEFT_SUCCESS &&
            (lo != forced || hi != forced))
            printf("# Algorithm: %s cannot serve host buffers: on them Weft runs %s at %zu B, %s at "
                   "%zu B (weft_query_algo; rows that name an algorithm say what ran)\n",
                   weft_algo_name(forced) ? weft_algo_name(forced) : "?",
                   weft_algo_name(lo) ? weft_algo_name(lo) : "?", o->min_bytes,
                   weft_algo_name(hi) ? weft_algo_name(hi) : "?", o->max_bytes);
    }
    /* The transport the benchmark's communicator runs over, and what chose it. */
    const char *tp = getenv("WEFT_TRANSPORT");
    if (b->own_comms) {
        printf("# Transport: per communicator the program times (below); WEFT_TRANSPORT=%s\n",
               tp && *tp ? tp : "auto, unset");
    } else {
        weft_transport_t used = WEFT_TRANSPORT_DEFAULT;
        const char *name = weft_comm_get_transport(b->comm, &used) == WEFT_SUCCESS
                               ? weft_transport_name(used) : NULL;
        printf("# Transport: %s (WEFT_TRANSPORT=%s)\n", name ? name : "?",
               tp && *tp ? tp : "auto, unset");
    }
    /* Weft's progress thread inherits the rank's binding: bound, it shares
     * the rank's core (mpiexec -bind-to core); unbound, the scheduler moves
     * both threads across the cores (doc/benchmarks.md, "Binding"). */
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        /* A core's hardware threads make a bound rank's set larger than one
         * CPU (mpiexec -bind-to core on an SMT machine): only the whole set
         * is "not bound". */
        const int n = CPU_COUNT(&set);
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        printf("# Binding: rank 0 may run on %d of %ld CPUs%s\n", n, online,
               n == 1        ? " (bound to one CPU; Weft's engine thread shares it)"
               : n < online  ? " (bound to a subset; Weft's engine thread shares it)"
                             : " (not bound)");
    }
    print_pages();
    if (o->iters > 0)
        printf(
            "# Timing: variants interleaved (Weft, MPI, ...), %d rounds, %ld iterations per size "
            "and variant; median over rounds of the per-iteration average (max over ranks)\n",
            o->rounds, o->iters);
    else
        printf(
            "# Timing: variants interleaved (Weft, MPI, ...), %d rounds, 1000 iterations up to 8 KiB, 100 above "
            "(capped by a budget of %.2f s per size and variant); median over rounds of the per-iteration "
            "average (max over ranks)\n",
            o->rounds, o->budget_s);
    fflush(stdout);
}

/* ---- buffers ------------------------------------------------------------------------ */
#define BENCH_HUGE_BYTES ((size_t)2 << 20)

void *bench_alloc(size_t bytes)
{
    if (bytes == 0) bytes = 1;
    size_t align = bench_hugepages ? BENCH_HUGE_BYTES : 64;
    size_t rounded = (bytes + align - 1) & ~(align - 1);
    if (rounded < bytes) return NULL;
    void *p = aligned_alloc(align, rounded);
    if (p == NULL) return NULL;
    /* Advice only: where the kernel has no huge page to give (THP "never",
     * fragmented memory) the buffer is still usable with small pages, and the
     * header's "# Pages:" line reports what the process got. */
    if (bench_hugepages && madvise(p, rounded, MADV_HUGEPAGE) != 0)
        fprintf(stderr, "warning: madvise(MADV_HUGEPAGE) on %zu bytes: %s\n", rounded,
                strerror(errno));
    memset(p, 0, rounded);
    return p;
}

/* Anonymous memory of this process in huge pages, in KiB (AnonHugePages of
 * /proc/self/smaps_rollup); -1 when it cannot be read. */
static long anon_huge_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (f == NULL) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

/* The "# Pages:" header line: what --thp asked, the kernel's mode, and
 * how much of rank 0's memory is in huge pages at the time of the header
 * (after the program's buffers are made, but for weft_osu_halo's, made per
 * size). Rank 0. */
static void print_pages(void)
{
    char mode[32];
    long kib = anon_huge_kib();
    printf("# Pages: %s; transparent huge pages: %s; rank 0 has ",
           bench_hugepages ? "--thp (buffers advised MADV_HUGEPAGE)"
                           : "buffers as aligned_alloc gives them",
           weft_cli_thp_mode(mode, sizeof mode));
    if (kib < 0)
        printf("? (AnonHugePages unreadable)");
    else
        printf("%ld MiB", kib / 1024);
    printf(" in huge pages\n");
}

int bench_all_ok(const bench_ctx_t *b, int ok)
{
    int all_ok = 0;
    int rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b->ctl);
    if (rc == MPI_SUCCESS) return all_ok != 0;
    mpi_err(b, rc, "MPI_Allreduce (agreement)");
    return 0;
}

int bench_alloc_pairs(const bench_ctx_t *b, char **sbuf, char **rbuf, int n, size_t bytes)
{
    int ok = 1;
    for (int k = 0; k < n; k++) {
        sbuf[k] = bench_alloc(bytes);
        rbuf[k] = bench_alloc(bytes);
        ok = ok && sbuf[k] && rbuf[k];
    }
    if (!ok) bench_error(b, "cannot allocate %d buffers of %zu bytes", 2 * n, bytes);
    return bench_all_ok(b, ok) ? 0 : 1;
}

static uint16_t float_to_half_bits(float f)
{
    /* Values used here are small multiples of 1/4: exact in half. */
    union { float f; uint32_t u; } x = {f};
    uint32_t sign = (x.u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((x.u >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x.u & 0x7fffffu;
    if ((x.u & 0x7fffffffu) == 0) return (uint16_t)sign;
    if (exp <= 0) return (uint16_t)sign; /* flush tiny values: not produced here */
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | ((uint32_t)exp << 10) | (mant >> 13));
}

static float half_bits_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    union { uint32_t u; float f; } x;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) x.u = sign | 0x7f800000u | (mant << 13);
    else x.u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    return x.f;
}

/* The pattern behind every benchmark buffer: -8..8, by index and seed. */
static int fill_pattern(size_t i, unsigned seed)
{
    return (int)((i * 7u + (size_t)seed * 3u) % 17u) - 8;
}

double bench_value(size_t i, unsigned seed, weft_datatype_t dt)
{
    int v = fill_pattern(i, seed);
    switch (dt) {
    case WEFT_INT8: return (double)(v / 4);
    case WEFT_UINT8: return (double)((v + 8) / 8);
    case WEFT_INT16: case WEFT_INT32: case WEFT_INT64: return (double)v;
    case WEFT_UINT16: case WEFT_UINT32: case WEFT_UINT64: return (double)(v + 8);
    default: return (double)v * 0.25; /* float32/64, float16, bfloat16: exact */
    }
}

void bench_fill_seed(void *buf, size_t count, weft_datatype_t dt, unsigned seed)
{
    for (size_t i = 0; i < count; i++) {
        double d = bench_value(i, seed, dt);
        switch (dt) {
        case WEFT_INT8: ((int8_t *)buf)[i] = (int8_t)d; break;
        case WEFT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)d; break;
        case WEFT_INT16: ((int16_t *)buf)[i] = (int16_t)d; break;
        case WEFT_UINT16: ((uint16_t *)buf)[i] = (uint16_t)d; break;
        case WEFT_INT32: ((int32_t *)buf)[i] = (int32_t)d; break;
        case WEFT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)d; break;
        case WEFT_INT64: ((int64_t *)buf)[i] = (int64_t)d; break;
        case WEFT_UINT64: ((uint64_t *)buf)[i] = (uint64_t)d; break;
        case WEFT_FLOAT32: ((float *)buf)[i] = (float)d; break;
        case WEFT_FLOAT64: ((double *)buf)[i] = d; break;
        case WEFT_FLOAT16: ((uint16_t *)buf)[i] = float_to_half_bits((float)d); break;
        case WEFT_BFLOAT16: {
            union { float f; uint32_t u; } x = {(float)d};
            ((uint16_t *)buf)[i] = (uint16_t)(x.u >> 16); /* exact: few mantissa bits */
            break;
        }
        default: return;
        }
    }
}

void bench_fill(void *buf, size_t count, weft_datatype_t dt, int rank)
{
    bench_fill_seed(buf, count, dt, (unsigned)rank);
}

double bench_get(const void *buf, size_t i, weft_datatype_t dt)
{
    switch (dt) {
    case WEFT_INT8: return ((const int8_t *)buf)[i];
    case WEFT_UINT8: return ((const uint8_t *)buf)[i];
    case WEFT_INT16: return ((const int16_t *)buf)[i];
    case WEFT_UINT16: return ((const uint16_t *)buf)[i];
    case WEFT_INT32: return ((const int32_t *)buf)[i];
    case WEFT_UINT32: return ((const uint32_t *)buf)[i];
    case WEFT_INT64: return (double)((const int64_t *)buf)[i];
    case WEFT_UINT64: return (double)((const uint64_t *)buf)[i];
    case WEFT_FLOAT32: return ((const float *)buf)[i];
    case WEFT_FLOAT64: return ((const double *)buf)[i];
    case WEFT_FLOAT16: return half_bits_to_float(((const uint16_t *)buf)[i]);
    case WEFT_BFLOAT16: {
        union { uint32_t u; float f; } x = {(uint32_t)((const uint16_t *)buf)[i] << 16};
        return x.f;
    }
    default: return NAN;
    }
}

unsigned bench_seed(int rank, long iter)
{
    /* The pattern repeats with the seed modulo 17: consecutive iterations
     * differ by 5 (mod 17), ranks by their difference. */
    return (unsigned)rank + 5u * (unsigned)((iter + 1) % 1000003L);
}

/* ---- timing -------------------------------------------------------------------------- */
double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bench_sleep(double seconds)
{
    if (!(seconds > 0)) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = floor(seconds);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

double bench_busy(double seconds)
{
    double end = bench_now() + seconds;
    volatile double acc = 1.0;
    do {
        for (int k = 0; k < 64; k++) acc = acc * 1.0000001 + 1e-9;
    } while (bench_now() < end);
    return acc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(const double *v, int n)
{
    if (n <= 0) return NAN;
    double tmp[BENCH_MAX_ROUNDS * 4];
    double *s = tmp;
    if ((size_t)n > sizeof tmp / sizeof tmp[0]) {
        s = malloc((size_t)n * sizeof *s);
        if (!s) return NAN;
    }
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = (n % 2) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    if (s != tmp) free(s);
    return m;
}

int bench_pingpong(const bench_ctx_t *b, long iters, bench_pp_step_fn step, void *ud)
{
    const int me = b->rank;
    if (me > 1) return 0;
    for (long i = 0; i < iters; i++) {
        for (int half = 0; half < 2; half++) {
            const int send = (half == 0) == (me == 0); /* rank 0 sends first */
            const int rc = step(ud, send, 1 - me);
            if (rc != 0) return rc;
        }
    }
    return 0;
}

int bench_mpi_step(const bench_ctx_t *b, const void *sbuf, void *rbuf, size_t bytes, int send,
                   int peer)
{
    const int n = (int)bytes; /* bench_parse caps -m at 1 GiB */
    int rc = send ? MPI_Send(sbuf, n, MPI_BYTE, peer, BENCH_MPI_TAG, b->mpi_comm)
                  : MPI_Recv(rbuf, n, MPI_BYTE, peer, BENCH_MPI_TAG, b->mpi_comm,
                             MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) return 0;
    bench_error(b, "%s(%zu bytes) failed (MPI code %d)", send ? "MPI_Send" : "MPI_Recv", bytes, rc);
    return 1;
}

int bench_weft_step(const bench_ctx_t *b, weft_comm_t comm, const void *sbuf, void *rbuf,
                    size_t bytes, int send, int peer)
{
    weft_status_t st = send ? weft_send(sbuf, bytes, WEFT_UINT8, peer, BENCH_WEFT_TAG, comm)
                            : weft_recv(rbuf, bytes, WEFT_UINT8, peer, BENCH_WEFT_TAG, comm);
    if (st == WEFT_SUCCESS) return 0;
    weft_transport_t tp = WEFT_TRANSPORT_DEFAULT;
    const char *tp_name = weft_comm_get_transport(comm, &tp) == WEFT_SUCCESS
                              ? weft_transport_name(tp) : NULL;
    bench_error(b, "%s(%zu bytes, %s transport): %s (%s)", send ? "weft_send" : "weft_recv", bytes,
                tp_name ? tp_name : "?", weft_status_name(st), weft_strerror(st));
    return 1;
}

int bench_max_over_ranks(const bench_ctx_t *b, double *v, int n)
{
    BENCH_MPI(b, MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, b->ctl));
    return 0;
}

bench_timing_t bench_timing_for(const bench_opts_t *o, size_t bytes)
{
    bench_timing_t t;
    t.rounds = o->rounds > 0 ? o->rounds : 5;
    if (bytes == 0) bytes = 1;
    if (o->iters > 0) {
        t.iters = o->iters;
        t.budget_s = 0;
    } else {
        /* OSU's counts: 1000 iterations up to 8 KiB, 100 above; the budget
         * caps the time a large size takes. */
        long it = bytes <= 8192 ? 1000 : 100;
        if (it < 2L * t.rounds) it = 2L * t.rounds;
        t.iters = it;
        t.budget_s = o->budget_s > 0 ? o->budget_s : 0.4;
    }
    if (o->warmup >= 0) {
        t.warmup = o->warmup;
    } else {
        t.warmup = bytes <= 8192 ? 100 : 10;
    }
    return t;
}

int bench_run_interleaved(bench_ctx_t *b, const bench_timing_t *tm, const bench_variant_t *v,
                          int nv, bench_result_t *res)
{
    if (nv <= 0 || nv > BENCH_MAX_VARIANTS || tm->rounds <= 0 || tm->rounds > BENCH_MAX_ROUNDS) {
        bench_error(b, "bench_run_interleaved: %d variants, %d rounds out of range", nv,
                    tm->rounds);
        return 1;
    }
    const int R = tm->rounds;
    double pilot[BENCH_MAX_VARIANTS + 1];
    memset(pilot, 0, sizeof pilot);

    /* Warm-up (and pilot for the budget): every variant, one after the other. */
    long w = tm->warmup;
    if (w == 0 && tm->budget_s > 0) w = 1;
    /* The first size of a run also pays for first-use costs (connections,
     * engine start, page faults): warm up longer there. */
    static int first_call = 1;
    if (first_call && w > 0) w = 2 * w + 10;
    first_call = 0;
    int failed = 0;
    for (int j = 0; j < nv && w > 0; j++) {
        BENCH_MPI(b, MPI_Barrier(b->ctl));
        if (v[j].timed_s) *v[j].timed_s = 0;
        double t0 = MPI_Wtime();
        if (v[j].run(v[j].ud, w, -1) != 0) failed = 1;
        double el = v[j].timed_s ? *v[j].timed_s : MPI_Wtime() - t0;
        pilot[j] = el / (double)w;
    }
    pilot[nv] = failed;
    if (bench_max_over_ranks(b, pilot, nv + 1) != 0) return 1;
    if (pilot[nv] != 0) return 1;

    long iters = tm->iters > 0 ? tm->iters : R;
    if (tm->budget_s > 0) {
        double est = 0;
        for (int j = 0; j < nv; j++)
            if (pilot[j] > est) est = pilot[j];
        if (est > 0 && est * (double)iters > tm->budget_s) {
            long cap = (long)(tm->budget_s / est);
            iters = cap < R ? R : cap;
        }
    }
    long k = (iters + R - 1) / R;
    if (k < 1) k = 1;

    double *t = calloc((size_t)nv * (size_t)R + 1, sizeof *t);
    if (!t) {
        bench_error(b, "out of memory");
        return 1;
    }
    for (int r = 0; r < R; r++) {
        for (int jj = 0; jj < nv; jj++) {
            int j = (jj + r) % nv; /* rotate the order from round to round */
            /* One untimed iteration first, as OSU skips its first ones: the
             * variant timed before this one may have kept this library idle
             * for milliseconds, and an idle progress thread's wake-up is
             * then the first iteration's (0.1 - 5 ms on the 2-core VM). */
            if (v[j].run(v[j].ud, 1, -1) != 0) failed = 1;
            int rc = MPI_Barrier(b->ctl);
            if (rc != MPI_SUCCESS) {
                mpi_err(b, rc, "MPI_Barrier");
                free(t);
                return 1;
            }
            if (v[j].timed_s) *v[j].timed_s = 0;
            double t0 = MPI_Wtime();
            if (v[j].run(v[j].ud, k, r) != 0) failed = 1;
            double el = v[j].timed_s ? *v[j].timed_s : MPI_Wtime() - t0;
            t[j * R + r] = el / (double)k * 1e6;
        }
    }
    t[nv * R] = failed;
    if (bench_max_over_ranks(b, t, nv * R + 1) != 0 || t[nv * R] != 0) {
        free(t);
        return 1;
    }
    for (int j = 0; j < nv; j++) {
        bench_result_t *o = &res[j];
        memset(o, 0, sizeof *o);
        o->rounds = R;
        o->iters_per_round = k;
        o->min_us = INFINITY;
        o->max_us = 0;
        for (int r = 0; r < R; r++) {
            double x = t[j * R + r];
            o->round_us[r] = x;
            if (x < o->min_us) o->min_us = x;
            if (x > o->max_us) o->max_us = x;
        }
        o->median_us = bench_median(o->round_us, R);
    }
    free(t);
    return 0;
}

/* ---- the memory floor (--floor) ------------------------------------------------------ */
/* The kernels: one plain loop per element width, restrict-qualified so that
 * the compiler vectorises it without a run-time overlap check (the buffers
 * are distinct). noinline: each pass is a real call that reads and writes
 * memory, which the optimiser cannot merge with the next pass. Integers add
 * as the unsigned type of their width (the same bits in two's complement, and
 * no signed overflow). Main thread (any thread: they touch only their
 * arguments). */
#define BENCH_FLOOR_ADD_FN(name, T)                                                      \
    static __attribute__((noinline)) void name(T *restrict c, const T *restrict a,        \
                                               const T *restrict b, size_t n)             \
    {                                                                                     \
        for (size_t i = 0; i < n; i++) c[i] = (T)(a[i] + b[i]);                           \
    }
BENCH_FLOOR_ADD_FN(floor_add_f32, float)
BENCH_FLOOR_ADD_FN(floor_add_f64, double)
BENCH_FLOOR_ADD_FN(floor_add_u8, uint8_t)
BENCH_FLOOR_ADD_FN(floor_add_u32, uint32_t)
BENCH_FLOOR_ADD_FN(floor_add_u64, uint64_t)

static __attribute__((noinline)) void floor_copy(void *restrict c, const void *restrict a,
                                                 size_t bytes)
{
    memcpy(c, a, bytes);
}

/* 1 when dt has an addition kernel above. */
static int floor_has_add(weft_datatype_t dt)
{
    switch (dt) {
    case WEFT_FLOAT32: case WEFT_FLOAT64: case WEFT_INT8: case WEFT_UINT8: case WEFT_INT32:
    case WEFT_UINT32: case WEFT_INT64: case WEFT_UINT64: return 1;
    default: return 0;
    }
}

/* One pass of the floor's kernel over `bytes` of its buffers. */
static void floor_pass(const bench_floor_t *f, size_t bytes)
{
    if (f->kind != BENCH_FLOOR_ADD) {
        floor_copy(f->c, f->a, bytes);
        return;
    }
    switch (f->dt) {
    case WEFT_FLOAT32: floor_add_f32(f->c, f->a, f->b, bytes / sizeof(float)); break;
    case WEFT_FLOAT64: floor_add_f64(f->c, f->a, f->b, bytes / sizeof(double)); break;
    case WEFT_INT8: case WEFT_UINT8: floor_add_u8(f->c, f->a, f->b, bytes); break;
    case WEFT_INT32: case WEFT_UINT32: floor_add_u32(f->c, f->a, f->b, bytes / 4); break;
    case WEFT_INT64: case WEFT_UINT64: floor_add_u64(f->c, f->a, f->b, bytes / 8); break;
    default: break; /* not reached: bench_floor_init chose COPY */
    }
}

int bench_floor_init(const bench_ctx_t *b, bench_floor_t *f, bench_floor_kind_t kind,
                     weft_datatype_t dt, size_t max_bytes)
{
    memset(f, 0, sizeof *f);
    f->asked = kind;
    f->dt = dt;
    f->kind = kind == BENCH_FLOOR_ADD && !floor_has_add(dt) ? BENCH_FLOOR_COPY : kind;
    f->cap = max_bytes;
    const size_t esz = weft_datatype_size(dt);
    int ok = kind != BENCH_FLOOR_NONE && esz > 0;
    if (!ok) bench_error(b, "--floor: no floor for this call or datatype");
    if (ok) {
        f->a = bench_alloc(max_bytes);
        f->c = bench_alloc(max_bytes);
        if (f->kind == BENCH_FLOOR_ADD) f->b = bench_alloc(max_bytes);
        ok = f->a && f->c && (f->kind != BENCH_FLOOR_ADD || f->b);
        if (!ok) bench_error(b, "--floor: cannot allocate its buffers of %zu bytes", max_bytes);
    }
    if (ok) {
        /* Realistic, finite values (bench_fill) written now: every page is
         * touched before the first timed pass. One pass over everything, then
         * its result checked, so that what the header says is what runs. */
        const size_t n = max_bytes / esz;
        bench_fill(f->a, n, dt, b->rank);
        if (f->b) bench_fill(f->b, n, dt, b->rank + 1);
        floor_pass(f, max_bytes);
        size_t bad = 0;
        if (f->kind == BENCH_FLOOR_ADD) {
            for (size_t i = 0; i < n; i++)
                bad += bench_get(f->c, i, dt) != bench_get(f->a, i, dt) + bench_get(f->b, i, dt);
        } else {
            bad = memcmp(f->c, f->a, max_bytes) != 0;
        }
        if (bad) {
            bench_error(b, "--floor: the kernel's result is wrong (%zu elements of %zu)", bad, n);
            ok = 0;
        }
    }
    if (!bench_all_ok(b, ok)) {
        bench_floor_free(f);
        return 1;
    }
    f->bytes = max_bytes;
    return 0;
}

void bench_floor_free(bench_floor_t *f)
{
    free(f->a);
    free(f->b);
    free(f->c);
    f->a = f->b = f->c = NULL;
}

int bench_floor_run(void *ud, long iters, int round)
{
    const bench_floor_t *f = ud;
    (void)round;
    const size_t bytes = f->bytes <= f->cap ? f->bytes : f->cap;
    for (long i = 0; i < iters; i++) {
        floor_pass(f, bytes);
        /* A compiler barrier: every pass's stores are made, none is merged
         * with the next pass. */
        __asm__ __volatile__("" ::: "memory");
    }
    return 0;
}

void bench_floor_header(const bench_ctx_t *b, const bench_floor_t *f, const char *over)
{
    if (b->rank != 0) return;
    const char *dt = weft_datatype_name(f->dt) ? weft_datatype_name(f->dt) : "?";
    if (f->kind == BENCH_FLOOR_ADD)
        printf("# Floor: every rank at once, between the barriers, computes c[i] = a[i] + b[i] in %s "
               "over %s (reads 2x and writes 1x those bytes; a, b, c distinct buffers written "
               "beforehand); Weft/Floor = Weft's median / the floor's median\n",
               dt, over);
    else
        printf("# Floor: every rank at once, between the barriers, copies %s (memcpy(c, a): reads "
               "1x and writes 1x those bytes; a, c distinct buffers written beforehand); "
               "Weft/Floor = Weft's median / the floor's median\n",
               over);
    if (f->asked == BENCH_FLOOR_ADD && f->kind == BENCH_FLOOR_COPY)
        printf("# Floor: note: %s has no plain C addition here, so the floor is a byte copy of the "
               "same bytes, below what a reduction moves (read 1x instead of 2x)\n",
               dt);
    fflush(stdout);
}

/* ---- OSU OMB 7 mode ------------------------------------------------------------------- */
/* OSU's column widths (its FIELD_WIDTH and FLOAT_PRECISION), its size column
 * and iterations column. */
#define OSU_FIELD 20
#define OSU_PREC 2
#define OSU_SIZE 10
#define OSU_ITERS 12

int bench_run_osu(bench_ctx_t *b, const bench_opts_t *o, size_t bytes, const bench_variant_t *v,
                  const bench_osu_check_t *chk, int block, bench_osu_result_t *res)
{
    bench_timing_t tm = bench_timing_for(o, bytes);
    int failed = 0;
    /* Warm-up (OSU's skipped iterations); it also estimates the cost of one
     * iteration, which caps the count by --budget when -i is not given. */
    long w = tm.warmup;
    if (w == 0 && tm.budget_s > 0) w = 1;
    double est = 0;
    if (w > 0) {
        BENCH_MPI(b, MPI_Barrier(b->ctl));
        if (v->timed_s) *v->timed_s = 0;
        double t0 = MPI_Wtime();
        if (v->run(v->ud, w, -1) != 0) failed = 1;
        est = (v->timed_s ? *v->timed_s : MPI_Wtime() - t0) / (double)w;
    }
    double agree[2] = {est, failed};
    if (bench_max_over_ranks(b, agree, 2) != 0) return 1;
    if (agree[1] != 0) return 1;
    long iters = tm.iters > 0 ? tm.iters : 1;
    if (tm.budget_s > 0 && agree[0] > 0 && agree[0] * (double)iters > tm.budget_s) {
        long cap = (long)(tm.budget_s / agree[0]);
        iters = cap < 1 ? 1 : cap;
    }

    double sum = 0; /* seconds in the timed parts, this rank */
    long errors = 0;
    const int check = o->validate && chk != NULL;
    if (block && !check) {
        BENCH_MPI(b, MPI_Barrier(b->ctl));
        if (v->timed_s) *v->timed_s = 0;
        double t0 = MPI_Wtime();
        if (v->run(v->ud, iters, 0) != 0) failed = 1;
        sum = v->timed_s ? *v->timed_s : MPI_Wtime() - t0;
    } else {
        /* OSU's collective loop: barrier, time the call, barrier; with -c
         * the inputs are written and the outputs cleared first, and the
         * result checked after (none of it timed). A failure does not stop
         * the loop: the other ranks are in it too. */
        /* The test of -c itself (benchmarks/check_osu_output.py): with
         * BENCH_OSU_SKIP_CALL=N in the environment of every rank, no rank makes
         * iteration N's call, whose check must then fail. */
        const char *skip_env = check ? getenv("BENCH_OSU_SKIP_CALL") : NULL;
        long skip_it = -1;
        if (skip_env && bench_parse_long(skip_env, 0, &skip_it) != 0) skip_it = -1;
        for (long it = 0; it < iters; it++) {
            if (check && chk->prepare && chk->prepare(chk->ud, it) != 0) failed = 1;
            if (it == 0 || check) BENCH_MPI(b, MPI_Barrier(b->ctl));
            if (v->timed_s) *v->timed_s = 0;
            double t0 = MPI_Wtime();
            if (it != skip_it && v->run(v->ud, 1, 0) != 0) failed = 1;
            sum += v->timed_s ? *v->timed_s : MPI_Wtime() - t0;
            BENCH_MPI(b, MPI_Barrier(b->ctl));
            if (check && chk->check) {
                long e = chk->check(chk->ud, it);
                if (e < 0) failed = 1;
                else errors += e;
            }
        }
    }
    /* OSU: each rank's mean per iteration; the average over ranks is the
     * sum over ranks divided by their number, beside the minimum and the
     * maximum over ranks. */
    double mean = sum * 1e6 / (double)iters, total = 0, lo = 0, hi = 0, r0 = mean;
    long counts[2] = {errors, failed}, all[2] = {0, 0};
    BENCH_MPI(b, MPI_Allreduce(&mean, &total, 1, MPI_DOUBLE, MPI_SUM, b->ctl));
    BENCH_MPI(b, MPI_Allreduce(&mean, &lo, 1, MPI_DOUBLE, MPI_MIN, b->ctl));
    BENCH_MPI(b, MPI_Allreduce(&mean, &hi, 1, MPI_DOUBLE, MPI_MAX, b->ctl));
    BENCH_MPI(b, MPI_Allreduce(counts, all, 2, MPI_LONG, MPI_SUM, b->ctl));
    BENCH_MPI(b, MPI_Bcast(&r0, 1, MPI_DOUBLE, 0, b->ctl));
    if (all[1] != 0) return 1;
    res->avg_us = total / (double)b->size;
    res->min_us = lo;
    res->max_us = hi;
    res->rank0_us = r0;
    res->iters = iters;
    res->errors = all[0];
    return 0;
}

void bench_osu_preamble(const bench_ctx_t *b, const bench_opts_t *o, const char *title)
{
    if (b->rank != 0) return;
    printf("\n# %s v%s\n", title, BENCH_OSU_VERSION);
    printf("# Weft %s: %s timing %s, %d ranks, in OSU OMB %s's layout and method\n",
           weft_version_string(), b->prog ? b->prog : "?",
           o->osu == BENCH_OSU_MPI ? "MPI's call (--osu=mpi)" : "Weft's call", b->size,
           BENCH_OSU_VERSION);
    fflush(stdout);
}

void bench_osu_datatype(const bench_ctx_t *b, MPI_Datatype mdt, weft_datatype_t dt)
{
    if (b->rank != 0) return;
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    if (mdt == MPI_DATATYPE_NULL || MPI_Type_get_name(mdt, name, &len) != MPI_SUCCESS || len == 0)
        snprintf(name, sizeof name, "%s", weft_datatype_name(dt) ? weft_datatype_name(dt) : "?");
    printf("# Datatype: %s.\n", name);
    fflush(stdout);
}

void bench_osu_lat_header(const bench_ctx_t *b, const bench_opts_t *o, int show_size)
{
    if (b->rank != 0) return;
    if (show_size) printf("%-*s%*s", OSU_SIZE, "# Size", OSU_FIELD, "Avg Latency(us)");
    else printf("# Avg Latency(us)");
    if (o->full)
        printf("%*s%*s%*s", OSU_FIELD, "Min Latency(us)", OSU_FIELD, "Max Latency(us)", OSU_ITERS,
               "Iterations");
    if (o->validate) printf("%*s", OSU_FIELD, "Validation");
    printf("\n");
    fflush(stdout);
}

void bench_osu_lat_row(const bench_ctx_t *b, const bench_opts_t *o, int show_size, size_t bytes,
                       const bench_osu_result_t *r)
{
    if (b->rank != 0) return;
    if (show_size) printf("%-*zu%*.*f", OSU_SIZE, bytes, OSU_FIELD, OSU_PREC, r->avg_us);
    else printf("%*.*f", 17, OSU_PREC, r->avg_us);
    if (o->full)
        printf("%*.*f%*.*f%*ld", OSU_FIELD, OSU_PREC, r->min_us, OSU_FIELD, OSU_PREC, r->max_us,
               OSU_ITERS, r->iters);
    if (o->validate) printf("%*s", OSU_FIELD, r->errors > 0 ? "Fail" : "Pass");
    printf("\n");
    fflush(stdout);
}

void bench_osu_p2p_header(const bench_ctx_t *b, const bench_opts_t *o, const char *metric)
{
    if (b->rank != 0) return;
    printf("%-*s%*s", OSU_SIZE, "# Size", OSU_FIELD, metric);
    if (o->validate) printf("%*s", OSU_FIELD, "Validation");
    printf("\n");
    fflush(stdout);
}

void bench_osu_p2p_row(const bench_ctx_t *b, const bench_opts_t *o, size_t bytes, double value,
                       long errors)
{
    if (b->rank != 0) return;
    printf("%-*zu%*.*f", OSU_SIZE, bytes, OSU_FIELD, OSU_PREC, value);
    if (o->validate) printf("%*s", OSU_FIELD, errors > 0 ? "Fail" : "Pass");
    printf("\n");
    fflush(stdout);
}

void bench_osu_nbc_preamble(const bench_ctx_t *b)
{
    if (b->rank != 0) return;
    printf("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n");
    fflush(stdout);
}

void bench_osu_nbc_header(const bench_ctx_t *b, const bench_opts_t *o)
{
    if (b->rank != 0) return;
    printf("%-*s%*s", OSU_SIZE, "# Size", OSU_FIELD, "Overall(us)");
    if (o->full)
        printf("%*s%*s%*s%*s%*s%*s%*s%*s", OSU_FIELD, "Compute(us)", OSU_FIELD, "Coll. Init(us)",
               OSU_FIELD, "MPI_Test(us)", OSU_FIELD, "MPI_Wait(us)", OSU_FIELD, "Pure Comm.(us)",
               OSU_FIELD, "Min Comm.(us)", OSU_FIELD, "Max Comm.(us)", OSU_FIELD, "Overlap(%)");
    else
        printf("%*s%*s%*s", OSU_FIELD, "Compute(us)", OSU_FIELD, "Pure Comm.(us)", OSU_FIELD,
               "Overlap(%)");
    if (o->validate) printf("%*s", OSU_FIELD, "Validation");
    printf("\n");
    fflush(stdout);
}

void bench_osu_nbc_row(const bench_ctx_t *b, const bench_opts_t *o, size_t bytes,
                       const double us[9], long errors)
{
    if (b->rank != 0) return;
    printf("%-*zu%*.*f", OSU_SIZE, bytes, OSU_FIELD, OSU_PREC, us[0]);
    if (o->full)
        for (int k = 1; k < 9; k++) printf("%*.*f", OSU_FIELD, OSU_PREC, us[k]);
    else
        printf("%*.*f%*.*f%*.*f", OSU_FIELD, OSU_PREC, us[1], OSU_FIELD, OSU_PREC, us[5], OSU_FIELD,
               OSU_PREC, us[8]);
    if (o->validate) printf("%*s", OSU_FIELD, errors > 0 ? "Fail" : "Pass");
    printf("\n");
    fflush(stdout);
}

void bench_osu_validation_failed(const bench_ctx_t *b, size_t bytes)
{
    if (b->rank != 0) return;
    printf("DATA VALIDATION ERROR: %s exited with status 1 on message size %zu.\n",
           b->prog ? b->prog : "?", bytes);
    fflush(stdout);
}

void bench_busbw(weft_coll_t coll, size_t total_bytes, int ranks, double us, double *algbw,
                 double *busbw)
{
    double n = ranks > 0 ? (double)ranks : 1, factor;
    switch (coll) {
    case WEFT_COLL_ALLREDUCE: factor = 2.0 * (n - 1) / n; break;
    case WEFT_COLL_REDUCE_SCATTER: case WEFT_COLL_ALLGATHER: case WEFT_COLL_ALLTOALL:
    case WEFT_COLL_GATHER: case WEFT_COLL_SCATTER: case WEFT_COLL_ALLGATHERV:
    case WEFT_COLL_ALLTOALLV: case WEFT_COLL_GATHERV: case WEFT_COLL_SCATTERV:
        factor = (n - 1) / n; break;
    case WEFT_COLL_BCAST: case WEFT_COLL_REDUCE: factor = 1.0; break;
    default: factor = NAN; break; /* the barrier moves no data */
    }
    /* bytes per microsecond = MB/s; / 1000 = GB/s (10^9 bytes), nccl-tests' unit */
    double a = us > 0 && !isnan(factor) ? (double)total_bytes / us / 1e3 : NAN;
    *algbw = a;
    *busbw = a * factor;
}

/* ---- CSV ------------------------------------------------------------------------------ */
/* The machine in one line: host name, CPU model, CPUs online. */
static void machine_line(char *out, size_t cap)
{
    char host[256] = "unknown host", model[256] = "unknown CPU";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown host");
    host[sizeof host - 1] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0) continue;
            const char *colon = strchr(line, ':');
            if (colon == NULL) continue;
            colon++;
            while (*colon == ' ' || *colon == '\t') colon++;
            snprintf(model, sizeof model, "%s", colon);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
        fclose(f);
    }
    snprintf(out, cap, "%s, %s, %ld CPUs", host, model, sysconf(_SC_NPROCESSORS_ONLN));
}

static int write_csv_meta(const bench_ctx_t *b, FILE *f)
{
    char machine[600], date[64] = "unknown";
    machine_line(machine, sizeof machine);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
    return fprintf(f, "# program: %s\n# weft: %s\n# ranks: %d\n# machine: %s\n# date: %s\n",
                   b->prog ? b->prog : "?", weft_version_string(), b->size, machine, date);
}

int bench_csv_open(const bench_ctx_t *b, bench_csv_t *csv, const char *path, const char *header)
{
    csv->f = NULL;
    int ok = 1;
    if (path && b->rank == 0) {
        csv->f = fopen(path, "w");
        if (!csv->f) {
            fprintf(stderr, "error: cannot open CSV file '%s': %s\n", path, strerror(errno));
            ok = 0;
        } else if (write_csv_meta(b, csv->f) < 0 || fprintf(csv->f, "%s\n", header) < 0) {
            fprintf(stderr, "error: cannot write CSV file '%s': %s\n", path, strerror(errno));
            fclose(csv->f);
            csv->f = NULL;
            ok = 0;
        }
    }
    BENCH_MPI(b, MPI_Bcast(&ok, 1, MPI_INT, 0, b->ctl));
    return ok ? 0 : 1;
}

void bench_csv_row(bench_csv_t *csv, const char *fmt, ...)
{
    if (!csv || !csv->f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(csv->f, fmt, ap);
    va_end(ap);
    fputc('\n', csv->f);
    fflush(csv->f);
}

int bench_csv_close(bench_csv_t *csv)
{
    if (!csv || !csv->f) return 0;
    int bad = ferror(csv->f);
    if (fclose(csv->f) != 0) bad = 1;
    csv->f = NULL;
    if (bad) fprintf(stderr, "error: writing the CSV file failed\n");
    return bad ? 1 : 0;
}
