/*
 * weft-info - what this Weft is: version, build, backends, transports, algorithms, every
 * WEFT_* variable with its value and default, and the selection table the
 * library would use for a communicator of P ranks.
 *
 *   weft-info [--ranks P] [--nodes N] [--ppn K] [--coll NAME] [-m MIN:MAX]
 *             [--alpha S] [--beta S] [--gamma S] [--alpha-node S] [--beta-node S]
 *             [--alpha-shm S] [--beta-shm S]
 *             [--explain] [--no-vars]
 *   weft-info --config            the WEFT_* variables only
 *   weft-info --config-markdown   doc/config.md's generated reference
 *
 * The selection table asks the library's own selection (weft__select_explain:
 * forced algorithm from the environment > tuning-file rule > cost model) for
 * a communicator of P ranks described to it (weft__select_comm_t), with the
 * cost in use: the tuning file's alpha/beta/gamma, else (under mpiexec with
 * 2 or more ranks) the one measured on MPI_COMM_WORLD, else the built-in
 * defaults; --alpha/--beta/--gamma override. --nodes/--ppn describe a
 * communicator spanning nodes (its hierarchical algorithms become
 * candidates): the figures in use then stand for the transport inside a node
 * (alpha_node/beta_node, unless they came with node figures) and --alpha/--beta
 * for the links across nodes; --alpha-node/--beta-node override. The node's
 * shared-memory path's figures are the communicator's (none for a singleton);
 * --alpha-shm/--beta-shm override (0: no path), on one node (the shm
 * algorithms) or across nodes (the hierarchical allreduce's phases inside
 * the nodes). --explain adds every
 * candidate's predicted time. Runs as a singleton (no mpiexec needed); under
 * mpiexec rank 0 prints.
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
#include "weft_mpi.h"
#ifdef WEFT_HAVE_UCX
#include <ucp/api/ucp.h>
#endif


static void usage(FILE *f)
{
    fprintf(f,
            "Usage: weft-info [--ranks P] [--nodes N] [--ppn K] [--coll NAME] [-m MIN:MAX]\n"
            "                 [--alpha S] [--beta S] [--gamma S] [--alpha-node S] [--beta-node S]\n"
            "                 [--alpha-shm S] [--beta-shm S]\n"
            "                 [--explain] [--no-vars]\n"
            "       weft-info --config | --config-markdown\n"
            "What this Weft is: version, build, backends, algorithms, WEFT_* variables, and\n"
            "the selection table for a communicator of P ranks (runs alone or under mpiexec).\n"
            "  -p, --ranks P   print the selection table for a communicator of P ranks\n"
            "  --nodes N       the communicator spans N nodes (default 1)\n"
            "  --ppn K         with K ranks on each (default P / N; P defaults to N x K)\n"
            "  -c, --coll NAME only this collective in the table (default: all)\n"
            "  -m MIN:MAX      message sizes of the table in bytes, or MAX (suffix K, M, G;\n"
            "                  default 4:256M)\n"
            "  --alpha/--beta/--gamma S   cost-model parameters to use (seconds,\n"
            "                  seconds per byte); default: the cost in use (doc/observability.md);\n"
            "                  with --nodes: the links across nodes\n"
            "  --alpha-node/--beta-node S  the transport inside a node (with --nodes; default:\n"
            "                  the cost in use's node figures, else its alpha/beta)\n"
            "  --alpha-shm/--beta-shm S  the node's shared-memory path (0: none; default: the\n"
            "                  communicator's, none for a singleton); across nodes it serves\n"
            "                  the hierarchical allreduce's phases inside the nodes\n"
            "  --explain       add each candidate's predicted time to the table (cost model,\n"
            "                  microseconds; '-' = not a candidate)\n"
            "  --no-vars       do not list the WEFT_* variables\n"
            "  --config        list only the WEFT_* variables: value in effect, default,\n"
            "                  valid values, meaning\n"
            "  --config-markdown  print doc/config.md's generated reference (the table of\n"
            "                  lib/config.c; needs no MPI)\n"
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

/* The transport table (backends/transport.c), in "auto"'s order. */
static void print_transports(void)
{
    int n = 0;
    const weft__transport_row_t *rows = weft__transport_table(&n);
    const char *chosen = NULL;
    printf("Transports (WEFT_TRANSPORT=auto takes the first one built in):\n");
    for (int i = 0; i < n; i++) {
        int built = rows[i].get() != NULL;
        if (built && chosen == NULL) chosen = rows[i].name;
        if (built) printf("  %-6s yes\n", rows[i].name);
        else printf("  %-6s no   (not built: %s)\n", rows[i].name, rows[i].missing);
    }
    printf("  auto   ->   %s\n", chosen ? chosen : "(none built)");
}

/* The page size the node's shared-memory path meets in programs' buffers: it
 * reads a peer's buffer by cross-memory attach, which pins every page it
 * reads, so 2 MiB pages make large transfers cheaper (doc/design.md, "Nodes",
 * "Huge pages are the caller's to choose"). */
static void print_pages(void)
{
    char buf[32];
    const char *mode = weft_cli_thp_mode(buf, sizeof buf);
    const char *what =
        strcmp(mode, "always") == 0 ? "large buffers get 2 MiB pages unless the program declines"
        : strcmp(mode, "madvise") == 0
            ? "large buffers get 2 MiB pages only where the program asks (numpy and Loom do;\n"
              "  PyTorch with THP_MEM_ALLOC_ENABLE=1, malloc with GLIBC_TUNABLES=glibc.malloc.hugetlb=1)"
        : strcmp(mode, "never") == 0 ? "buffers stay on small pages"
                                     : "the kernel does not say";
    printf("Pages: transparent huge pages: %s\n  %s;\n"
           "  the shared-memory path pins every page it reads of another process\n",
           mode, what);
}

static void print_algorithms(void)
{
    printf("Algorithms (registry order; '*' = explicit only, never chosen by the cost model;\n"
           "  '(device)' = device buffers only):\n");
    for (int c = 0; c < WEFT_COLL_COUNT; c++) {
        int n = 0;
        const weft__algo_impl_t *const *list = weft__algo_list((weft_coll_t)c, &n);
        printf("  %-15s", weft__coll_name((weft_coll_t)c));
        for (int i = 0; i < n; i++)
            printf(" %s%s%s", weft_algo_name(list[i]->id), list[i]->cost ? "" : "*",
                   weft__algo_device_only((weft_coll_t)c, list[i]->id) ? "(device)" : "");
        printf("%s\n", n ? "" : " (none)");
    }
}

/* Every WEFT_* variable: the value in effect (weft__cfg, as weft_init parsed
 * it), its default, what it accepts, and its doc text. */
static void print_vars(void)
{
    printf("Variables (value in effect; default; valid values):\n");
    for (const weft__config_var_t *v = weft__config_vars(); v->name; v++) {
        char val[1100], range[512];
        const char *env = getenv(v->name);
        weft__config_format(v, &weft__cfg, val, sizeof val);
        weft__config_range(v, range, sizeof range);
        printf("  %s = %s (%sdefault %s; valid: %s%s%s)\n      %s\n", v->name,
               val[0] ? val : "(empty)", env && *env ? "from the environment; " : "",
               v->default_value[0] ? v->default_value : "(empty)", range,
               v->read_by ? "; read by " : "", v->read_by ? v->read_by : "", v->doc);
    }
}

/* One markdown table cell: '|' escaped, newlines as blanks. */
static void md_cell(const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", stdout);
        else putchar(*s == '\n' ? ' ' : *s);
    }
}

/* doc/config.md's generated reference (between its marker comments): the
 * table's rows in table order. Depends on the table only, never on the
 * environment or the build (weft__config_range words an algorithm of an
 * optional backend the same way in every build), so that tools-config-doc
 * passes in every build. */
static void print_vars_markdown(void)
{
    printf("| variable | default | valid values | meaning |\n|---|---|---|---|\n");
    for (const weft__config_var_t *v = weft__config_vars(); v->name; v++) {
        char range[512];
        weft__config_range(v, range, sizeof range);
        printf("| `%s` | ", v->name);
        if (v->default_value[0]) {
            putchar('`');
            md_cell(v->default_value);
            putchar('`');
        } else {
            fputs("(empty)", stdout);
        }
        fputs(" | ", stdout);
        md_cell(range);
        fputs(" | ", stdout);
        if (v->read_by) {
            fputs("read by ", stdout);
            md_cell(v->read_by);
            fputs(", not by weft_init: ", stdout);
        }
        md_cell(v->doc);
        fputs(" |\n", stdout);
    }
}

static int print_selection(int p, int only_coll, size_t lo, size_t hi, const weft__cost_t *cost,
                           const char *cost_src, int explain)
{
    const weft_datatype_t dt = WEFT_FLOAT32;
    printf("Selection table: %d ranks, float32 sum, host buffers; cost alpha %.4g s, beta %.4g s/B "
           "(%.2f GB/s), gamma %.4g s/B (%s)\n",
           p, cost->alpha, cost->beta, cost->beta > 0 ? 1e-9 / cost->beta : 0.0, cost->gamma,
           cost_src);
    if (cost->nnodes >= 2)
        printf("# %d nodes x %d ranks: alpha/beta across nodes; inside a node alpha %.4g s, "
               "beta %.4g s/B (%.2f GB/s)%s\n",
               cost->nnodes, cost->ppn, cost->alpha_node, cost->beta_node,
               cost->beta_node > 0 ? 1e-9 / cost->beta_node : 0.0,
               cost->alpha_shm > 0 ? "" : "; no shared-memory path (hierarchical's phases "
                                          "inside the nodes over the transport)");
    else
        printf("# one node (--nodes N --ppn K: a communicator spanning nodes)%s\n",
               cost->alpha_shm > 0 ? "" : "; no shared-memory path (algorithm shm cannot run)");
    if (cost->alpha_shm > 0)
        printf("# the node's shared-memory path%s: alpha %.4g s, beta %.4g s/B (%.2f GB/s)\n",
               cost->nnodes >= 2 ? " (hierarchical allreduce's phases inside the nodes)" : "",
               cost->alpha_shm, cost->beta_shm,
               cost->beta_shm > 0 ? 1e-9 / cost->beta_shm : 0.0);
    printf("# source: env = WEFT_<COLL>_ALGO, rule = WEFT_TUNING_FILE (its rule number and line\n"
           "#         under why), model = cost model\n");
    printf("# %-15s %12s  %-19s %-6s %-19s %12s  %s\n", "coll", "size_bytes", "algorithm", "source",
           "model_choice", "model_us", explain ? "why / candidates_us" : "why");
    int fallback = 0;
    for (int ci = 0; ci < WEFT_COLL_COUNT; ci++) {
        if (only_coll >= 0 && ci != only_coll) continue;
        weft_coll_t coll = (weft_coll_t)ci;
        int n = 0;
        weft__algo_list(coll, &n);
        if (n == 0) continue;
        /* A communicator of p ranks, nothing forced on it, no device stream. */
        const weft__select_comm_t sc = {.size = p, .cost = *cost, .forced = WEFT_ALGO_AUTO,
                                        .nccl = NULL};
        size_t first = coll == WEFT_COLL_BARRIER ? 0 : lo;
        size_t last = coll == WEFT_COLL_BARRIER ? 0 : hi;
        for (size_t s = first;; s = s ? s * 2 : 1) {
            if (s < first) continue;
            weft__select_explain_t ex;
            weft__select_explain(&sc, coll, s, dt, WEFT_SUM, WEFT__MEM_HOST, &ex);
            char src[16], why[64] = "-";
            snprintf(src, sizeof src, "%s%s", weft__select_source_name(ex.source),
                     ex.replaced != WEFT_ALGO_AUTO ? "*" : "");
            if (ex.replaced != WEFT_ALGO_AUTO) {
                fallback = 1;
                snprintf(why, sizeof why,
                         weft__algo_device_only(coll, ex.replaced) ? "%s_cannot_serve_host_buffers"
                                                                   : "%s_cannot_run_on_this_comm",
                         weft_algo_name(ex.replaced));
            } else if (ex.source == WEFT__SELECT_RULE) {
                snprintf(why, sizeof why, "rule_%d_line_%d", ex.rule + 1, ex.rule_line);
            }
            const char *an = weft_algo_name(ex.algo), *mn = weft_algo_name(ex.model);
            printf("  %-15s %12zu  %-19s %-6s %-19s %12.3f  %s", weft__coll_name(coll), s,
                   an ? an : "none", src, mn ? mn : "none",
                   isfinite(ex.model_cost) ? 1e6 * ex.model_cost : -1.0, why);
            for (int i = 0; explain && i < ex.ncand; i++) {
                const char *cn = weft_algo_name(ex.cand[i].algo);
                if (isnan(ex.cand[i].cost)) printf(" %s=-", cn ? cn : "?");
                else printf(" %s=%.3f", cn ? cn : "?", 1e6 * ex.cand[i].cost);
            }
            printf("\n");
            if (s >= last || s > SIZE_MAX / 2) break;
        }
    }
    if (fallback)
        printf("# env* = forced by WEFT_<COLL>_ALGO (rule* = named by a rule) to an algorithm that\n"
               "#        cannot serve host buffers (nccl: device buffers on a CUDA-stream communicator\n"
               "#        only) or cannot run on this communicator (hierarchical: on one node, or on\n"
               "#        nodes of different sizes); the row shows the algorithm that runs instead\n"
               "#        (the cost model's)\n");
    return 0;
}

enum { OPT_ALPHA = 256, OPT_BETA, OPT_GAMMA, OPT_ALPHA_NODE, OPT_BETA_NODE, OPT_NO_VARS,
       OPT_CONFIG, OPT_CONFIG_MD, OPT_EXPLAIN, OPT_NODES, OPT_PPN, OPT_ALPHA_SHM,
       OPT_BETA_SHM };
/* What to print: everything, the variables (--config), the reference (--config-markdown). */
enum { SHOW_ALL, SHOW_CONFIG, SHOW_CONFIG_MARKDOWN };

int main(int argc, char **argv)
{
    int ranks = 0, only_coll = -1, vars = 1, show = SHOW_ALL, explain = 0, nodes = 0, ppn = 0;
    size_t lo = 4, hi = (size_t)256 << 20;
    double ov[5] = {-1, -1, -1, -1, -1}; /* alpha, beta, gamma, alpha_node, beta_node */
    double shm_ov[2] = {-1, -1};          /* alpha_shm, beta_shm */
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'p'},       {"coll", required_argument, NULL, 'c'},
        {"alpha", required_argument, NULL, OPT_ALPHA}, {"beta", required_argument, NULL, OPT_BETA},
        {"gamma", required_argument, NULL, OPT_GAMMA},
        {"alpha-node", required_argument, NULL, OPT_ALPHA_NODE},
        {"beta-node", required_argument, NULL, OPT_BETA_NODE},
        {"nodes", required_argument, NULL, OPT_NODES}, {"ppn", required_argument, NULL, OPT_PPN},
        {"alpha-shm", required_argument, NULL, OPT_ALPHA_SHM},
        {"beta-shm", required_argument, NULL, OPT_BETA_SHM},
        {"no-vars", no_argument, NULL, OPT_NO_VARS},
        {"config", no_argument, NULL, OPT_CONFIG},
        {"config-markdown", no_argument, NULL, OPT_CONFIG_MD},
        {"help", no_argument, NULL, 'h'},              {"version", no_argument, NULL, 'V'},
        {"explain", no_argument, NULL, OPT_EXPLAIN},
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
        case OPT_CONFIG: show = SHOW_CONFIG; break;
        case OPT_CONFIG_MD: show = SHOW_CONFIG_MARKDOWN; break;
        case OPT_EXPLAIN: explain = 1; break;
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
        case OPT_NODES: case OPT_PPN:
            if (weft_cli_parse_long(optarg, 1, 1L << 24, &l) != 0)
                return weft_cli_usage_error(prog, "bad --%s '%s' (an integer in [1, 16777216])",
                                            opt == OPT_NODES ? "nodes" : "ppn", optarg);
            *(opt == OPT_NODES ? &nodes : &ppn) = (int)l;
            break;
        case OPT_ALPHA: case OPT_BETA: case OPT_GAMMA: case OPT_ALPHA_NODE: case OPT_BETA_NODE: {
            int k = opt - OPT_ALPHA;
            if (weft_cli_parse_double(optarg, 0, 1e6, &ov[k]) != 0)
                return weft_cli_usage_error(prog, "bad --%s '%s' (a non-negative number)",
                                            longopts[2 + k].name, optarg);
            break;
        }
        case OPT_ALPHA_SHM: case OPT_BETA_SHM: {
            const int k = opt - OPT_ALPHA_SHM;
            if (weft_cli_parse_double(optarg, 0, 1e6, &shm_ov[k]) != 0)
                return weft_cli_usage_error(prog, "bad --%s '%s' (a non-negative number)",
                                            k ? "beta-shm" : "alpha-shm", optarg);
            break;
        }
        default: return weft_cli_getopt_error(prog, opt, argv, longopts);
        }
    }
    if (optind < argc) return weft_cli_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    /* The described communicator: P = N x K ranks, any one of them derived */
    if (nodes > 0 || ppn > 0) {
        if (ranks == 0 && (nodes == 0 || ppn == 0))
            return weft_cli_usage_error(prog, "--%s needs --ranks or --%s", nodes ? "nodes" : "ppn",
                                        nodes ? "ppn" : "nodes");
        if (ranks == 0 && (long long)nodes * ppn > (1LL << 24))
            return weft_cli_usage_error(prog, "--nodes x --ppn is over 16777216 ranks");
        if (ranks == 0) ranks = nodes * ppn;
        if (nodes == 0) nodes = ranks / ppn;
        if (ppn == 0) ppn = ranks / nodes;
        if ((long long)nodes * ppn != ranks)
            return weft_cli_usage_error(prog, "%d ranks are not %d nodes x %d ranks", ranks, nodes,
                                        ppn);
    }
    if (show == SHOW_CONFIG_MARKDOWN) {
        /* The reference is the table's, not this environment's: no weft_init. */
        print_vars_markdown();
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }

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
    if (show == SHOW_CONFIG) {
        /* As weft_init parsed this environment (rank 0 prints). */
        if (rank == 0) print_vars();
        if (fflush(stdout) != 0 || ferror(stdout)) rc = 1;
        goto out;
    }

    /* The cost in use: the tuning file's, else measured on MPI_COMM_WORLD
     * (2+ ranks, WEFT_MEASURE=1), else the built-in defaults. */
    weft__cost_t cost;
    const char *src;
    weft_comm_t world = NULL;
    weft__cost_t file_c;
    int file_cost = weft__tuning_cost(&file_c);
    /* A real communicator over MPI_COMM_WORLD (one rank alone): its creation
     * takes the tuning file's cost, measures (2+ ranks, WEFT_MEASURE=1) or
     * keeps the defaults, as an application's would. */
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
    src = file_cost                                      ? "tuning file"
          : weft__cfg.measure && weft__g.world_size > 1 ? "measured on MPI_COMM_WORLD"
                                                        : "built-in defaults";
    /* The described machine: one node unless --nodes/--ppn say otherwise. The
     * figures in use describe a node where they have no node figures (this
     * communicator's ranks share one) */
    if (nodes >= 2) {
        if (cost.alpha_node <= 0 || cost.beta_node <= 0) {
            cost.alpha_node = cost.alpha;
            cost.beta_node = cost.beta;
        }
        cost.nnodes = nodes;
        cost.ppn = ppn;
    } else {
        if (cost.alpha_node > 0 && cost.beta_node > 0) { /* a one-node comm: the node's figures */
            cost.alpha = cost.alpha_node;
            cost.beta = cost.beta_node;
        }
        cost.alpha_node = cost.beta_node = 0;
        cost.nnodes = 1;
        cost.ppn = ranks;
    }
    if (ov[0] >= 0 || ov[1] >= 0 || ov[2] >= 0 || ov[3] >= 0 || ov[4] >= 0) {
        if (ov[0] >= 0) cost.alpha = ov[0];
        if (ov[1] >= 0) cost.beta = ov[1];
        if (ov[2] >= 0) cost.gamma = ov[2];
        if (ov[3] >= 0 && nodes >= 2) cost.alpha_node = ov[3];
        if (ov[4] >= 0 && nodes >= 2) cost.beta_node = ov[4];
        src = "given on the command line";
    }
    if (shm_ov[0] >= 0 || shm_ov[1] >= 0) { /* the path: both figures, or none */
        if (shm_ov[0] >= 0) cost.alpha_shm = shm_ov[0];
        if (shm_ov[1] >= 0) cost.beta_shm = shm_ov[1];
        if (cost.alpha_shm <= 0 || cost.beta_shm <= 0) cost.alpha_shm = cost.beta_shm = 0;
    }

    if (rank == 0) {
        printf("Weft %s (header %d.%d.%d)\n", weft_version_string(), WEFT_VERSION_MAJOR,
               WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
        printf("Build: %s, %s; options: %s\n", WEFT_BUILD_TYPE, WEFT_BUILD_COMPILER,
               WEFT_BUILD_OPTIONS);
        printf("Processes: %d (MPI_COMM_WORLD)%s\n", weft__g.world_size,
               weft__g.oversubscribed ? ", oversubscribed node" : "");
        print_backends();
        print_transports();
        print_pages();
        print_algorithms();
        if (vars) print_vars();
        int nrules = weft__tuning_nrules();
        if (weft__cfg.tuning_file[0])
            printf("Tuning file: %s (%d rules%s)\n", weft__cfg.tuning_file, nrules,
                   file_cost ? ", alpha/beta/gamma" : "");
        else
            printf("Tuning file: none (WEFT_TUNING_FILE unset)\n");
        if (ranks > 0) print_selection(ranks, only_coll, lo, hi, &cost, src, explain);
        else printf("Selection table: use --ranks P\n");
        fflush(stdout);
    }
out:
    if (world) weft_comm_destroy(world);
    st = weft_finalize();
    if (st != WEFT_SUCCESS && rc == 0) rc = 1;
    return rc;
}
