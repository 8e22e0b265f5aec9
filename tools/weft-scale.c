/*
 * weft-scale - the scale model: the library's own cost formulas (each
 * algorithm's impl->cost) and selection (weft__select_model) evaluated for
 * 2 .. 16384 ranks, without running anything. One source of truth: the
 * numbers are those the library uses to choose at run time.
 *
 *   weft-scale [--net edr|shm] [--tuning FILE] [--alpha S] [--beta S] [--gamma S]
 *              [--coll NAME] [-p MIN:MAX] [--csv FILE] [--check]
 *
 * Prints, for the collective (default allreduce): the predicted latency of a
 * small (8 B) and a large (64 MiB) message per algorithm against p, the
 * winner map (p against message size), and the crossover sizes per p.
 * --csv writes p,size_bytes,algorithm,cost_us,chosen for weft-plot.
 * --check verifies the known shape of the small-message costs: ring grows
 * linearly with p, recursive doubling / Rabenseifner / tree with log p
 * (exit 1 if not).
 * Needs no mpiexec and does not initialise MPI.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_cli.h"
#include "tuning.h"
#include "weft_internal.h"

static void usage(FILE *f)
{
    fprintf(f, "Usage: weft-scale [--net edr|shm] [--tuning FILE] [--alpha S] [--beta S] [--gamma S]\n"
               "                  [--coll NAME] [-p MIN:MAX] [--csv FILE] [--check]\n"
               "The cost model and selection of the library for 2..16384 ranks (nothing is run).\n"
               "  --net edr       EDR InfiniBand-like: alpha 1 us, beta 1/12.5 GB/s, gamma 1/10 GB/s (default)\n"
               "  --net shm       the library's built-in shared-memory defaults (1.5 us, 5 GB/s, 4 GB/s)\n"
               "  --tuning FILE   alpha/beta/gamma from a tuning file written by weft-tune\n"
               "  --alpha/--beta/--gamma S   cost-model parameters (seconds, seconds per byte)\n"
               "  -c, --coll NAME the collective (default allreduce)\n"
               "  -p MIN:MAX      rank counts, powers of two (default 2:16384; suffix K allowed)\n"
               "  --csv FILE      write p,size_bytes,algorithm,cost_us,chosen for weft-plot\n"
               "  --check         check the shape of the small-message costs (exit 1 if wrong)\n"
               "  -h, --help      this text\n"
               "  -V, --version   version and build options\n");
}

/* alpha/beta/gamma of a tuning file, read by the library's parser (lib/tuning.c). */
static int read_cost(const char *path, weft__cost_t *c)
{
    return weft__tuning_parse(path) == WEFT_SUCCESS && weft__tuning_cost(c);
}

static const char *short_name(weft_algo_t a)
{
    switch (a) {
    case WEFT_ALGO_RING: return "ring";
    case WEFT_ALGO_RECURSIVE_DOUBLING: return "rd";
    case WEFT_ALGO_RABENSEIFNER: return "rab";
    case WEFT_ALGO_TREE: return "tree";
    case WEFT_ALGO_BINOMIAL: return "binom";
    case WEFT_ALGO_SCATTER_ALLGATHER: return "sc-ag";
    case WEFT_ALGO_RECURSIVE_HALVING: return "rh";
    case WEFT_ALGO_PAIRWISE: return "pair";
    case WEFT_ALGO_DISSEMINATION: return "diss";
    case WEFT_ALGO_LINEAR: return "lin";
    default: return weft_algo_name(a) ? weft_algo_name(a) : "-";
    }
}

int main(int argc, char **argv)
{
    weft__cost_t cost = {.alpha = 1e-6, .beta = 1.0 / 12.5e9, .gamma = 1.0 / 10e9};
    const char *net = "EDR InfiniBand-like (alpha 1 us, beta 1/12.5 GB/s, gamma 1/10 GB/s)";
    const char *csv = NULL;
    int check = 0, pmin = 2, pmax = 16384;
    weft_coll_t coll = WEFT_COLL_ALLREDUCE;
    enum { OPT_NET = 256, OPT_TUNING, OPT_ALPHA, OPT_BETA, OPT_GAMMA, OPT_CSV, OPT_CHECK };
    static const struct option longopts[] = {
        {"net", required_argument, NULL, OPT_NET},     {"tuning", required_argument, NULL, OPT_TUNING},
        {"alpha", required_argument, NULL, OPT_ALPHA}, {"beta", required_argument, NULL, OPT_BETA},
        {"gamma", required_argument, NULL, OPT_GAMMA}, {"coll", required_argument, NULL, 'c'},
        {"csv", required_argument, NULL, OPT_CSV},     {"check", no_argument, NULL, OPT_CHECK},
        {"help", no_argument, NULL, 'h'},              {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    static const char *const prog = "weft-scale";
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":c:p:hV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case 'V': weft_cli_version(stdout, prog); return 0;
        case OPT_CHECK: check = 1; break;
        case OPT_NET:
            if (!strcmp(optarg, "edr")) {
                cost = (weft__cost_t){.alpha = 1e-6, .beta = 1.0 / 12.5e9, .gamma = 1.0 / 10e9};
            } else if (!strcmp(optarg, "shm")) {
                cost = (weft__cost_t){.alpha = 1.5e-6, .beta = 2.0e-10, .gamma = 2.5e-10};
                net = "shared memory (the library's built-in defaults)";
            } else {
                return weft_cli_usage_error(prog, "unknown --net '%s' (one of: edr, shm)", optarg);
            }
            break;
        case OPT_TUNING:
            if (!read_cost(optarg, &cost))
                return weft_cli_usage_error(prog, "--tuning %s: no valid alpha/beta/gamma lines",
                                            optarg);
            net = "from the tuning file";
            break;
        case OPT_ALPHA: case OPT_BETA: case OPT_GAMMA: {
            double x;
            if (weft_cli_parse_double(optarg, 0, 1e6, &x) != 0)
                return weft_cli_usage_error(prog, "bad --%s '%s' (a non-negative number)",
                                            longopts[opt - OPT_ALPHA + 2].name, optarg);
            if (opt == OPT_ALPHA) cost.alpha = x;
            else if (opt == OPT_BETA) cost.beta = x;
            else cost.gamma = x;
            net = "given on the command line";
            break;
        }
        case 'c': {
            int found = 0;
            char names[256] = "";
            for (int c = 0; c < WEFT_COLL_COUNT; c++) {
                if (!strcmp(optarg, weft__coll_name((weft_coll_t)c))) coll = (weft_coll_t)c, found = 1;
                strncat(names, c ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, weft__coll_name((weft_coll_t)c), sizeof names - strlen(names) - 1);
            }
            if (!found)
                return weft_cli_usage_error(prog, "unknown collective '%s' (one of: %s)", optarg,
                                            names);
            break;
        }
        case 'p': {
            size_t lo = 2, hi = 0;
            if (weft_cli_parse_range(optarg, &lo, &hi) != 0 || lo < 2 || hi > ((size_t)1 << 24))
                return weft_cli_usage_error(prog, "bad -p '%s' (MIN:MAX ranks, 2 <= MIN <= MAX <= 16M)",
                                            optarg);
            pmin = (int)lo;
            pmax = (int)hi;
            break;
        }
        case OPT_CSV: csv = optarg; break;
        default: return weft_cli_getopt_error(prog, opt, argv, longopts);
        }
    }
    if (optind < argc) return weft_cli_usage_error(prog, "unexpected argument '%s'", argv[optind]);

    int n = 0;
    const weft__algo_impl_t *const *list = weft__algo_list(coll, &n);
    const weft__algo_impl_t *model[WEFT_ALGO_COUNT];
    int nm = 0;
    for (int i = 0; i < n; i++)
        if (list[i]->cost) model[nm++] = list[i];
    if (nm == 0) {
        fprintf(stderr, "weft-scale: %s has no algorithm with a cost model\n", weft__coll_name(coll));
        return 1;
    }
    FILE *f = NULL;
    if (csv) {
        f = fopen(csv, "w");
        if (!f) {
            fprintf(stderr, "weft-scale: cannot write %s: %s\n", csv, strerror(errno));
            return 1;
        }
        /* '#' lines: what the figures are (weft-plot's titles). */
        fprintf(f, "# program: weft-scale\n# collective: %s\n# model: %s", weft__coll_name(coll), net);
        if (strstr(net, "alpha") == NULL) /* the numbers, unless the name gives them */
            fprintf(f, ": alpha %.3g s, beta %.3g s/B, gamma %.3g s/B", cost.alpha, cost.beta,
                    cost.gamma);
        fprintf(f, "\n");
        fprintf(f, "p,size_bytes,algorithm,cost_us,chosen\n");
    }
    printf("# weft-scale: %s; alpha %.3g s, beta %.3g s/B, gamma %.3g s/B; %s, float32 sum\n", net,
           cost.alpha, cost.beta, cost.gamma, weft__coll_name(coll));

    const size_t small = 8, large = (size_t)64 << 20;
    for (int pass = 0; pass < 2; pass++) {
        size_t s = pass ? large : small;
        printf("\n# predicted latency (us) of a %zu-byte %s\n# %8s", s, weft__coll_name(coll), "ranks");
        for (int i = 0; i < nm; i++) printf(" %14s", weft_algo_name(model[i]->id));
        printf("  chosen\n");
        for (int p = pmin; p <= pmax; p *= 2) {
            printf("  %8d", p);
            for (int i = 0; i < nm; i++) printf(" %14.2f", 1e6 * model[i]->cost(p, s, &cost));
            printf("  %s\n", weft_algo_name(weft__select_model(coll, p, s, WEFT_FLOAT32, &cost, NULL)));
        }
    }

    printf("\n# winner map (weft__select_model): ranks down, message size across\n# %6s", "ranks");
    for (size_t s = 4; s <= ((size_t)256 << 20); s *= 4) {
        char lab[16];
        if (s >= (1u << 20)) snprintf(lab, sizeof lab, "%zuM", s >> 20);
        else if (s >= 1024) snprintf(lab, sizeof lab, "%zuK", s >> 10);
        else snprintf(lab, sizeof lab, "%zu", s);
        printf(" %5s", lab);
    }
    printf("\n");
    for (int p = pmin; p <= pmax; p *= 2) {
        printf("  %6d", p);
        for (size_t s = 4; s <= ((size_t)256 << 20); s *= 4)
            printf(" %5s", short_name(weft__select_model(coll, p, s, WEFT_FLOAT32, &cost, NULL)));
        printf("\n");
    }

    printf("\n# crossovers per rank count (sizes in powers of two, 4 B .. 256 MiB)\n");
    for (int p = pmin; p <= pmax; p *= 2) {
        weft_algo_t prev = WEFT_ALGO_AUTO;
        printf("  %6d:", p);
        for (size_t s = 4; s <= ((size_t)256 << 20); s *= 2) {
            double bc = 0;
            weft_algo_t w = weft__select_model(coll, p, s, WEFT_FLOAT32, &cost, &bc);
            if (w != prev) printf("%s %s from %zu B", prev == WEFT_ALGO_AUTO ? "" : ",",
                                  weft_algo_name(w), s);
            prev = w;
            if (f)
                for (int i = 0; i < nm; i++)
                    fprintf(f, "%d,%zu,%s,%.6f,%s\n", p, s, weft_algo_name(model[i]->id),
                            1e6 * model[i]->cost(p, s, &cost), weft_algo_name(w));
        }
        printf("\n");
    }
    int rc = 0;
    if (f && (ferror(f) | (fclose(f) != 0))) {
        fprintf(stderr, "weft-scale: writing %s failed\n", csv);
        rc = 1;
    }

    if (check) {
        /* Small messages: ring pays 2(p-1) alpha, the others about lg p alpha. */
        int p1 = 1024, p2 = 16384;
        printf("\n# check: 8-byte cost ratio between %d and %d ranks (linear: %.1f, log: %.2f)\n",
               p2, p1, (double)(p2 - 1) / (p1 - 1), 14.0 / 10.0);
        for (int i = 0; i < nm; i++) {
            double c1 = model[i]->cost(p1, small, &cost), c2 = model[i]->cost(p2, small, &cost);
            double r = c1 > 0 ? c2 / c1 : INFINITY;
            int is_ring = model[i]->id == WEFT_ALGO_RING;
            int logish = model[i]->id == WEFT_ALGO_RECURSIVE_DOUBLING ||
                         model[i]->id == WEFT_ALGO_RABENSEIFNER || model[i]->id == WEFT_ALGO_TREE;
            const char *verdict = "";
            if (isinf(c1) && isinf(c2) && cost.nnodes < 2)
                verdict = "- (spans nodes only; this model is one node)";
            else if (!(c1 > 0) || !isfinite(c2)) verdict = "FAIL (not a positive finite cost)", rc = 1;
            else if (is_ring) verdict = r > 10 ? "linear in p: ok" : (rc = 1, "FAIL: expected linear");
            else if (logish) verdict = r < 2 ? "log p: ok" : (rc = 1, "FAIL: expected log p");
            printf("  %-20s %10.2f us -> %10.2f us  ratio %7.2f  %s\n", weft_algo_name(model[i]->id),
                   1e6 * c1, 1e6 * c2, r, verdict);
        }
        printf("%s\n", rc ? "check: FAILED" : "check: ok");
    }
    return rc;
}
