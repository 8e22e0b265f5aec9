/*
 * conv_bench.c - per-layer convolution microbenchmark: the 3x3 stride-1
 * convolutions of ResNet-20 (28x28, batch 128), ResNet-18/50 (224x224,
 * batch 32) and EDSR (48x48 patches, batch 16), each timed with im2col +
 * sgemm and with Winograd F(4x4, 3x3) in the same process, alternating
 * (A B A B ...), so that the ratio holds on a shared machine.  Prints per
 * shape the median forward and backward (dx and dW) milliseconds of each
 * algorithm, their ratio, and the largest difference between the two
 * algorithms' outputs relative to the largest output.
 *
 * usage: loom_conv_bench [--threads N] [--reps N] [--only SUBSTRING] [--algo A]
 * Built, not installed (doc/loom.md, "Performance").
 */
#include "loom.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int n, cin, cout, h, w, bias;
} shape_t;

static const shape_t shapes[] = {
    {"resnet20 16ch 28x28", 128, 16, 16, 28, 28, 0},
    {"resnet20 32ch 14x14", 128, 32, 32, 14, 14, 0},
    {"resnet20 64ch 7x7", 128, 64, 64, 7, 7, 0},
    {"resnet18 64ch 56x56", 32, 64, 64, 56, 56, 0},
    {"resnet18 128ch 28x28", 32, 128, 128, 28, 28, 0},
    {"resnet18 256ch 14x14", 32, 256, 256, 14, 14, 0},
    {"resnet18 512ch 7x7", 32, 512, 512, 7, 7, 0},
    {"edsr head 3->64 48x48", 16, 3, 64, 48, 48, 1},
    {"edsr body 64ch 48x48", 16, 64, 64, 48, 48, 1},
    {"edsr upsample 64->256 48x48", 16, 64, 256, 48, 48, 1},
    {"edsr tail 64->3 96x96", 16, 64, 3, 96, 96, 1},
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: loom_conv_bench [--threads N] [--reps N] [--only SUBSTRING] [--algo A]\n"
               "  Times each 3x3 stride-1 convolution shape of ResNet-20/18/50 and EDSR with\n"
               "  im2col + sgemm and with Winograd F(4x4,3x3), alternating, in one process;\n"
               "  prints median forward and backward ms and the ratio im2col / Winograd.\n"
               "  --threads N   Loom's threads (default 2)\n"
               "  --reps N      timed repetitions per algorithm (default 5)\n"
               "  --only S      only the shapes whose name contains S\n"
               "  --algo A      im2col, winograd or both (default both; one alone: for profilers)\n"
               "  --help, --version\n");
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5, algos = 3; /* bit 0: im2col, bit 1: Winograd */
    const char *only = NULL;
    static const struct option opts[] = {{"threads", required_argument, 0, 't'},
                                         {"reps", required_argument, 0, 'r'},
                                         {"only", required_argument, 0, 'o'},
                                         {"algo", required_argument, 0, 'a'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        char *end = NULL;
        switch (c) {
        case 't':
        case 'r': {
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > 1000) {
                fprintf(stderr, "loom_conv_bench: --%s needs an integer 1..1000, got '%s'\n",
                        c == 't' ? "threads" : "reps", optarg);
                return 2;
            }
            *(c == 't' ? &threads : &reps) = (int)v;
            break;
        }
        case 'o': only = optarg; break;
        case 'a':
            if (!strcmp(optarg, "both"))
                algos = 3;
            else if (!strcmp(optarg, "im2col"))
                algos = 1;
            else if (!strcmp(optarg, "winograd"))
                algos = 2;
            else {
                fprintf(stderr, "loom_conv_bench: --algo: im2col, winograd or both, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        case 'V':
            printf("loom_conv_bench %u.%u\n", loom_version() >> 16, loom_version() & 0xffffu);
            return 0;
        default:
            fprintf(stderr, "loom_conv_bench: unknown or incomplete option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "loom_conv_bench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    loom_set_threads(threads);
    printf("# threads %d, %d repetitions per algorithm, alternating; ms per call (median)\n", threads,
           reps);
    printf("# %-28s %9s %9s %6s %9s %9s %6s %9s\n", "shape", "fwd i2c", "fwd wino", "ratio",
           "bwd i2c", "bwd wino", "ratio", "max diff");
    int rc = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape_t *s = &shapes[i];
        if (only && !strstr(s->name, only))
            continue;
        loom_conv_desc_t d = {s->cin, s->cout, 3, 3, 1, 1, 1, 1, 1, 1, 1, s->bias};
        size_t nx = (size_t)s->n * s->cin * s->h * s->w, ny = (size_t)s->n * s->cout * s->h * s->w;
        size_t nw = (size_t)s->cout * s->cin * 9, nws = loom_conv_workspace(&d, s->n, s->h, s->w);
        float *x = malloc(sizeof(float) * nx), *dx = malloc(sizeof(float) * nx);
        float *y[2] = {malloc(sizeof(float) * ny), malloc(sizeof(float) * ny)};
        float *dy = malloc(sizeof(float) * ny), *wt = malloc(sizeof(float) * nw);
        float *dw = calloc(nw, sizeof(float)), *b = calloc((size_t)s->cout, sizeof(float));
        float *db = calloc((size_t)s->cout, sizeof(float)), *ws = malloc(sizeof(float) * nws);
        double *t[2][2];
        for (int a = 0; a < 2; a++)
            for (int k = 0; k < 2; k++)
                t[a][k] = malloc(sizeof(double) * (size_t)reps);
        if (!x || !dx || !y[0] || !y[1] || !dy || !wt || !dw || !b || !db || !ws || !t[0][0] ||
            !t[0][1] || !t[1][0] || !t[1][1]) {
            fprintf(stderr, "loom_conv_bench: out of memory for %s\n", s->name);
            return 1;
        }
        loom_rng_t g;
        loom_rng_seed(&g, 7 + i);
        for (size_t k = 0; k < nx; k++)
            x[k] = loom_rng_uniform(&g) - 0.5f;
        for (size_t k = 0; k < ny; k++)
            dy[k] = loom_rng_uniform(&g) - 0.5f;
        for (size_t k = 0; k < nw; k++)
            wt[k] = (loom_rng_uniform(&g) - 0.5f) / sqrtf((float)(9 * s->cin));
        for (int r = -1; r < reps; r++) /* r = -1: warm-up of both */
            for (int a = 0; a < 2; a++) {
                if (!(algos >> a & 1)) {
                    if (r >= 0)
                        t[a][0][r] = t[a][1][r] = 0.0;
                    continue;
                }
                loom_conv_set_algo(a ? LOOM_CONV_WINOGRAD : LOOM_CONV_IM2COL);
                double t0 = loom_now();
                loom_conv_forward(&d, s->n, s->h, s->w, x, wt, b, y[a], ws);
                double t1 = loom_now();
                loom_conv_backward(&d, s->n, s->h, s->w, x, wt, dy, dx, 0, dw, db, ws);
                double t2 = loom_now();
                if (r >= 0)
                    t[a][0][r] = (t1 - t0) * 1e3, t[a][1][r] = (t2 - t1) * 1e3;
            }
        double diff = 0.0, big = 1e-30;
        for (size_t k = 0; algos == 3 && k < ny; k++) {
            diff = fmax(diff, fabs((double)y[0][k] - y[1][k]));
            big = fmax(big, fabs((double)y[0][k]));
        }
        double f0 = median(t[0][0], reps), f1 = median(t[1][0], reps);
        double b0 = median(t[0][1], reps), b1 = median(t[1][1], reps);
        printf("%-30s %9.2f %9.2f %5.2fx %9.2f %9.2f %5.2fx %9.1e\n", s->name, f0, f1, f0 / f1, b0, b1,
               b0 / b1, diff / big);
        fflush(stdout);
        if (diff / big > 1e-4) {
            fprintf(stderr, "loom_conv_bench: %s: the algorithms differ by %.2g\n", s->name,
                    diff / big);
            rc = 1;
        }
        free(x), free(dx), free(y[0]), free(y[1]), free(dy), free(wt), free(dw), free(b), free(db);
        free(ws);
        for (int a = 0; a < 2; a++)
            free(t[a][0]), free(t[a][1]);
    }
    loom_conv_set_algo(LOOM_CONV_AUTO);
    return rc;
}
