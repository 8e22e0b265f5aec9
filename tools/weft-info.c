/*
 * weft-info - what this Weft is: version, build, backends, algorithms, every
 * WEFT_* variable with its value and default, and the selection table the
 * library would use for a communicator of P ranks.
 *
 *   weft-info [--ranks P] [--coll NAME] [-m MIN:MAX] [--alpha S] [--beta S]
 *             [--gamma S] [--no-vars]
 *
 * The selection table runs the library's own weft__select (forced algorithm
 * from the environment > tuning-file rule > cost model weft__select_model)
 * on a communicator description of P ranks, with the cost in use: the tuning
 * file's alpha/beta/gamma, else (under mpiexec with 2 or more ranks) the one
 * measured on MPI_COMM_WORLD, else the built-in defaults; --alpha/--beta/
 * --gamma override. Runs as a singleton (no mpiexec needed); under mpiexec
 * rank 0 prints.
 *
 * Links the internal archive (weft_core) to reach weft__* functions.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_cli.h"
#include "tuning.h"
#include "weft_internal.h"
#ifdef WEFT_HAVE_UCX
#include <ucp/api/ucp.h>
#endif


static void usage(FILE *f)
{
    fprintf(f,
            "Usage: weft-info [--ranks P] [--coll NAME] [-m MIN:MAX] [--alpha S] [--beta S]\n"
            "                 [--gamma S] [--no-vars]\n"
            "What this Weft is: version, build, backends, algorithms, WEFT_* variables, and\n"
            "the selection table for a communicator of P ranks (runs alone or under mpiexec).\n"
            "  -p, --ranks P   print the selection table for a communicator of P ranks\n"
            "  -c, --coll NAME only this collective in the table (default: all)\n"
            "  -m MIN:MAX      message sizes of the table in bytes, or MAX (suffix K, M, G;\n"
            "                  default 4:256M)\n"
            "  --alpha/--beta/--gamma S   cost-model parameters to use (seconds,\n"
            "                  seconds per byte); default: the cost in use (doc/observability.md)\n"
            "  --no-vars       do not list the WEFT_* variables\n"
            "  -h, --help      this text\n"
            "  -V, --version   version and build options\n");
}

/* The collective named s, or -1. */
static int coll_from_name(const char *s)
{
    for (int c = 0; c < WEFT_COLL_COUNT; c++)
        if (!strcmp(s, weft__coll_name((weft_coll_t)c))) return c;
    return -1;
}

/* The usage error for an unknown collective, listing the valid names. */
static int bad_coll(const char *prog, const char *s)
{
    char names[256] = "";
    for (int c = 0; c < WEFT_COLL_COUNT; c++) {
        strncat(names, c ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, weft__coll_name((weft_coll_t)c), sizeof names - strlen(names) - 1);
    }
    return weft_cli_usage_error(prog, "unknown collective '%s' (one of: %s)", s, names);
}

static void print_backends(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0, minor = 0, provided = 0;
    if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS) snprintf(lib, sizeof lib, "unknown");
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    if (MPI_Get_version(&major, &minor) != MPI_SUCCESS) major = minor = 0;
    if (MPI_Query_thread(&provided) != MPI_SUCCESS) provided = -1;
    printf("Backends:\n");
    printf("  mpi    yes  %s (MPI %d.%d, thread level %s)\n", lib, major, minor,
           provided == MPI_THREAD_MULTIPLE ? "MULTIPLE" : "below MULTIPLE");
#ifdef WEFT_HAVE_UCX
    printf("  ucx    yes  UCX %s (WEFT_TRANSPORT=ucx)\n", ucp_get_version_string());
#else
    printf("  ucx    no   (not built)\n");
#endif
#ifdef WEFT_HAVE_CUDA
    printf("  cuda   yes  (device layer built)\n");
#else
    printf("  cuda   no   (not built: host streams only)\n");
#endif
#ifdef WEFT_HAVE_NCCL
    printf("  nccl   yes  (NCCL collectives for device buffers)\n");
#else
    printf("  nccl   no   (not built)\n");
#endif
}

static void print_algorithms(void)
{
    printf("Algorithms (registry order; '*' = explicit only, never chosen by the cost model):\n");
    for (int c = 0; c < WEFT_COLL_COUNT; c++) {
        int n = 0;
        const weft__algo_impl_t *const *list = weft__algo_list((weft_coll_t)c, &n);
        printf("  %-15s", weft__coll_name((weft_coll_t)c));
        for (int i = 0; i < n; i++)
            printf(" %s%s", weft_algo_name(list[i]->id), list[i]->cost ? "" : "*");
        printf("%s\n", n ? "" : " (none)");
    }
}

static void print_vars(void)
{
    printf("Variables (value in this environment; default):\n");
    for (const weft__config_var_t *v = weft__config_vars(); v->name; v++) {
        const char *val = getenv(v->name);
        printf("  %-26s = %-10s (default \"%s\")  %s\n", v->name,
               val && *val ? val : "(unset)", v->default_value, v->doc);
    }
}

/* Which step of the precedence decided (coll, p, bytes) for this table row. */
static const char *source_of(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dt,
                             weft_algo_t sel, weft_algo_t model)
{
    if (weft__cfg.force_algo[coll] != WEFT_ALGO_AUTO) return "env";
    weft_algo_t ra = WEFT_ALGO_AUTO;
    if (weft__tuning_lookup(coll, p, bytes, dt, &ra) >= 0) return ra == sel ? "rule" : "?";
    return sel == model ? "model" : "?";
}

static int print_selection(int p, int only_coll, size_t lo, size_t hi, const weft__cost_t *cost,
                           const char *cost_src)
{
    weft__comm_t c;
    memset(&c, 0, sizeof c);
    c.mpi = MPI_COMM_SELF;
    c.rank = 0;
    c.size = p;
    c.pof2 = 1;
    while (c.pof2 * 2 <= p) c.pof2 *= 2;
    c.cost = *cost;
    c.id = -1;
    for (int i = 0; i < WEFT_COLL_COUNT; i++) atomic_init(&c.force_algo[i], WEFT_ALGO_AUTO);
    const weft_datatype_t dt = WEFT_FLOAT32;
    printf("Selection table: %d ranks, float32 sum; cost alpha %.4g s, beta %.4g s/B "
           "(%.2f GB/s), gamma %.4g s/B (%s)\n",
           p, cost->alpha, cost->beta, cost->beta > 0 ? 1e-9 / cost->beta : 0.0, cost->gamma,
           cost_src);
    printf("# source: env = WEFT_<COLL>_ALGO, rule = WEFT_TUNING_FILE, model = cost model\n");
    printf("# %-15s %12s  %-19s %-6s %-19s %12s\n", "coll", "size_bytes", "algorithm", "source",
           "model_choice", "model_us");
    int fallback = 0;
    for (int ci = 0; ci < WEFT_COLL_COUNT; ci++) {
        if (only_coll >= 0 && ci != only_coll) continue;
        weft_coll_t coll = (weft_coll_t)ci;
        int n = 0;
        weft__algo_list(coll, &n);
        if (n == 0) continue;
        size_t first = coll == WEFT_COLL_BARRIER ? 0 : lo;
        size_t last = coll == WEFT_COLL_BARRIER ? 0 : hi;
        for (size_t s = first;; s = s ? s * 2 : 1) {
            if (s < first) continue;
            double mc = 0;
            weft_algo_t model = weft__select_model(coll, p, s, dt, cost, &mc);
            weft_algo_t sel = weft__select(&c, coll, s, dt);
            /* What runs on host buffers (a forced NCCL cannot serve them):
             * the same answer weft_query_algo gives. */
            weft_algo_t runs = weft__stream_query_algo(&c, coll, s, dt, sel);
            const char *src = source_of(coll, p, s, dt, sel, model);
            if (runs != sel) {
                src = "env*";
                fallback = 1;
            }
            const char *an = weft_algo_name(runs), *mn = weft_algo_name(model);
            printf("  %-15s %12zu  %-19s %-6s %-19s %12.3f\n", weft__coll_name(coll), s,
                   an ? an : "none", src, mn ? mn : "none", isfinite(mc) ? 1e6 * mc : -1.0);
            if (s >= last || s > SIZE_MAX / 2) break;
        }
    }
    if (fallback)
        printf("# env* = forced by WEFT_<COLL>_ALGO to an algorithm that cannot serve host buffers\n"
               "#        (nccl: device buffers on a CUDA-stream communicator only); the row shows\n"
               "#        the algorithm that runs instead\n");
    return 0;
}

/* Has the tuning file alpha/beta/gamma lines? (only to label the cost's source) */
static int file_has_cost(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512], w[64];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s", w) == 1 &&
            (!strcmp(w, "alpha") || !strcmp(w, "beta") || !strcmp(w, "gamma")))
            n++;
    fclose(f);
    return n == 3;
}

enum { OPT_ALPHA = 256, OPT_BETA, OPT_GAMMA, OPT_NO_VARS };

int main(int argc, char **argv)
{
    int ranks = 0, only_coll = -1, vars = 1;
    size_t lo = 4, hi = (size_t)256 << 20;
    double ov[3] = {-1, -1, -1};
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'p'},       {"coll", required_argument, NULL, 'c'},
        {"alpha", required_argument, NULL, OPT_ALPHA}, {"beta", required_argument, NULL, OPT_BETA},
        {"gamma", required_argument, NULL, OPT_GAMMA}, {"no-vars", no_argument, NULL, OPT_NO_VARS},
        {"help", no_argument, NULL, 'h'},              {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    static const char *const prog = "weft-info";
    opterr = 0;
    int opt;
    long l;
    while ((opt = getopt_long(argc, argv, ":p:c:m:hV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case 'V': weft_cli_version(stdout, prog); return 0;
        case OPT_NO_VARS: vars = 0; break;
        case 'p':
            if (weft_cli_parse_long(optarg, 1, 1L << 24, &l) != 0)
                return weft_cli_usage_error(prog, "bad --ranks '%s' (an integer in [1, 16777216])",
                                            optarg);
            ranks = (int)l;
            break;
        case 'c':
            if ((only_coll = coll_from_name(optarg)) < 0) return bad_coll(prog, optarg);
            break;
        case 'm':
            if (weft_cli_parse_range(optarg, &lo, &hi) != 0)
                return weft_cli_usage_error(
                    prog, "bad -m '%s' (MIN:MAX or MAX in bytes, suffix K, M, G)", optarg);
            break;
        case OPT_ALPHA: case OPT_BETA: case OPT_GAMMA: {
            int k = opt - OPT_ALPHA;
            if (weft_cli_parse_double(optarg, 0, 1e6, &ov[k]) != 0)
                return weft_cli_usage_error(prog, "bad --%s '%s' (a non-negative number)",
                                            longopts[2 + k].name, optarg);
            break;
        }
        default: return weft_cli_getopt_error(prog, opt, argv, longopts);
        }
    }
    if (optind < argc) return weft_cli_usage_error(prog, "unexpected argument '%s'", argv[optind]);

    weft_init_params_t params = WEFT_INIT_PARAMS_INITIALIZER;
    params.argc = &argc;
    params.argv = &argv;
    weft_status_t st = weft_init(&params);
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "weft-info: weft_init failed: %s (%s)\n", weft_strerror(st),
                weft_status_name(st));
        return 1;
    }
    int rank = weft__g.world_rank, rc = 0;

    /* The cost in use: the tuning file's, else measured on MPI_COMM_WORLD
     * (2+ ranks, WEFT_MEASURE=1), else the built-in defaults. */
    weft__cost_t cost;
    const char *src;
    weft_comm_t world = NULL;
    int file_cost = weft__cfg.tuning_file[0] && file_has_cost(weft__cfg.tuning_file);
    if (weft__g.world_size > 1) {
        st = weft_comm_create(MPI_COMM_WORLD, NULL, &world);
        if (st != WEFT_SUCCESS) {
            fprintf(stderr, "weft-info: weft_comm_create failed: %s\n", weft_strerror(st));
            rc = 1;
            goto out;
        }
        weft__comm_t *wc = NULL;
        st = weft__comm_get(world, &wc);
        if (st != WEFT_SUCCESS) {
            fprintf(stderr, "weft-info: %s\n", weft_strerror(st));
            rc = 1;
            goto out;
        }
        cost = wc->cost;
        src = file_cost ? "tuning file" : weft__cfg.measure ? "measured on MPI_COMM_WORLD" : "built-in defaults";
    } else {
        /* Same path as a real communicator's creation, on one rank: takes the
         * tuning file's values or the defaults (nothing to measure alone). */
        weft__comm_t one;
        memset(&one, 0, sizeof one);
        one.mpi = MPI_COMM_SELF;
        one.size = 1;
        st = weft__select_init(&one);
        if (st != WEFT_SUCCESS) {
            fprintf(stderr, "weft-info: cannot set up the cost model: %s\n", weft_strerror(st));
            rc = 1;
            goto out;
        }
        cost = one.cost;
        src = file_cost ? "tuning file" : "built-in defaults";
    }
    if (ov[0] >= 0 || ov[1] >= 0 || ov[2] >= 0) {
        if (ov[0] >= 0) cost.alpha = ov[0];
        if (ov[1] >= 0) cost.beta = ov[1];
        if (ov[2] >= 0) cost.gamma = ov[2];
        src = "given on the command line";
    }

    if (rank == 0) {
        printf("Weft %s (header %d.%d.%d)\n", weft_version_string(), WEFT_VERSION_MAJOR,
               WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
        printf("Build: %s, %s; options: %s\n", WEFT_BUILD_TYPE, WEFT_BUILD_COMPILER,
               WEFT_BUILD_OPTIONS);
        printf("Processes: %d (MPI_COMM_WORLD)%s\n", weft__g.world_size,
               weft__g.oversubscribed ? ", oversubscribed node" : "");
        print_backends();
        print_algorithms();
        if (vars) print_vars();
        int nrules = weft__tuning_nrules();
        if (weft__cfg.tuning_file[0])
            printf("Tuning file: %s (%d rules%s)\n", weft__cfg.tuning_file, nrules,
                   file_cost ? ", alpha/beta/gamma" : "");
        else
            printf("Tuning file: none (WEFT_TUNING_FILE unset)\n");
        if (ranks > 0) print_selection(ranks, only_coll, lo, hi, &cost, src);
        else printf("Selection table: use --ranks P\n");
        fflush(stdout);
    }
out:
    if (world) weft_comm_destroy(world);
    st = weft_finalize();
    if (st != WEFT_SUCCESS && rc == 0) rc = 1;
    return rc;
}
