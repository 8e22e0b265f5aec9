/*
 * par_main.c - `mpiexec -n P loom train ... --data-parallel D [--spatial HxW]`:
 * parallel training of ResNets (data parallel) and of the mesh model (data
 * and spatial parallel) on Weft.  main.c hands the command over here when a
 * parallel option or the mesh model is named, and for `loom dp-step`, whose
 * loom_dp_step_main (dp_step.c) it runs between weft_init and weft_finalize.
 * Rank 0 prints.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "loom_mesh.h"
#include "loom_par.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>


static const char *par_usage =
    "usage: mpiexec -n P loom train --model NAME [--data-parallel D] [--spatial HxW] [options]\n"
    "  P must equal D*H*W.  D sample groups (data parallel) of H x W ranks each (each\n"
    "  sample split over an H x W grid: the mesh model only).\n"
    "  --model NAME        mesh | resnet8|resnet20|resnet(6k+2)\n"
    "  --data-parallel D   sample groups (default: P / (H*W))\n"
    "  --spatial HxW       spatial grid per sample (default 1x1)\n"
    "  --dp-mode M         overlap (default: buckets all-reduced during backward)\n"
    "                      | blocking (one all-reduce after backward)\n"
    "  --bucket-mb X       gradient bucket size in MiB (default 25)\n"
    "  --batch N           samples per sample group and step (default: 32 resnet, 4 mesh)\n"
    "  --epochs N (default 1)   --steps N  at most N steps per epoch (default: all)\n"
    "  --lr X --momentum X --wd X --seed N --threads N (default 1) --interval N (default 10)\n"
    "  resnet: --data fashion-mnist|synthetic --data-dir DIR --limit-train N --limit-test N\n"
    "          --image N --channels N --classes N (synthetic)\n"
    "  mesh:   --mesh-size N (cells per side, a multiple of 8; default 128)\n"
    "          --width X (width multiplier, default 0.125; 1 = full)\n"
    "          --train-samples N (default 64) --test-samples N (default 16) --pos-weight X (4)\n"
    "          --mesh-write FILE: write train+test generated samples to FILE and exit\n"
    "          --mesh-file FILE: train on FILE's samples (the last --test-samples are the test set)\n"
    "  --memory-probe      one forward+backward step, print memory per rank, exit\n"
    "ends with: final: pixel_precision=A pixel_recall=B test_loss=L images_per_s=R comm_wait_share=S\n"
    "      (resnet: final: test_accuracy=A test_loss=L images_per_s=R comm_wait_share=S)\n";

typedef struct {
    const char *model, *data, *data_dir, *mesh_file, *mesh_write;
    int dp, sh, sw, blocking, batch, epochs, steps, threads, interval;
    int limit_train, limit_test, image, channels, classes;
    int mesh, mesh_size, train_samples, test_samples, memory_probe;
    double bucket_mb, lr, momentum, wd, width, pos_weight;
    long seed;
} pargs_t;

/* `loom dp-step ...` */
static int is_dp_step(int argc, char **argv) { return argc > 1 && !strcmp(argv[1], "dp-step"); }

int loom_par_wanted(int argc, char **argv)
{
    if (is_dp_step(argc, argv))
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data-parallel") || !strcmp(argv[i], "--spatial") ||
            !strcmp(argv[i], "--dp-mode") || !strcmp(argv[i], "--memory-probe"))
            return 1;
        if (!strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "mesh"))
            return 1;
    }
    return 0;
}

static int bad(int rank, const char *fmt, const char *a)
{
    return loom__usage_error(rank, "train --model mesh", fmt, a);
}

static int parse(int argc, char **argv, pargs_t *a, int rank)
{
    *a = (pargs_t){.model = "mesh", .data = "fashion-mnist", .dp = 0, .sh = 1, .sw = 1,
                   .batch = -1, .epochs = 1, .threads = 1, .interval = 10, .image = 28,
                   .channels = 1, .classes = 10, .mesh_size = 128, .train_samples = 64,
                   .test_samples = 16, .bucket_mb = 25, .lr = 0.05, .momentum = 0.9, .wd = 5e-4,
                   .width = 0.125, .pos_weight = 4, .seed = 1};
    if (argc < 2 || strcmp(argv[1], "train") != 0)
        return bad(rank, "parallel runs support the train command only (got '%s')",
                   argc > 1 ? argv[1] : "");
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            if (rank == 0)
                fputs(par_usage, stdout);
            return 1;
        }
        if (!strcmp(k, "--memory-probe")) { a->memory_probe = 1; continue; }
        if (!strcmp(k, "--synthetic")) { a->data = "synthetic"; continue; }
        if (i + 1 >= argc)
            return bad(rank, "option %s needs a value", k);
        const char *v = argv[++i];
        double d = 0;
        const int kind = loom__parse_number(v, &d), num = kind > 0, isint = kind == 2;
        if (!strcmp(k, "--model")) a->model = v;
        else if (!strcmp(k, "--data")) a->data = v;
        else if (!strcmp(k, "--data-dir")) a->data_dir = v;
        else if (!strcmp(k, "--mesh-file")) a->mesh_file = v;
        else if (!strcmp(k, "--mesh-write")) a->mesh_write = v;
        else if (!strcmp(k, "--dp-mode")) {
            if (!strcmp(v, "overlap")) a->blocking = 0;
            else if (!strcmp(v, "blocking")) a->blocking = 1;
            else return bad(rank, "--dp-mode must be overlap or blocking (got '%s')", v);
        } else if (!strcmp(k, "--spatial")) {
            int h = 0, w = 0;
            char c = 0;
            if (sscanf(v, "%dx%d%c", &h, &w, &c) != 2 || h < 1 || w < 1 || h > 64 || w > 64)
                return bad(rank, "--spatial wants HxW, e.g. 2x1 (got '%s')", v);
            a->sh = h;
            a->sw = w;
        } else if (!num) {
            return bad(rank, "option needs a finite number (got '%s')", v);
        } else if (!strcmp(k, "--lr")) a->lr = d;
        else if (!strcmp(k, "--momentum")) a->momentum = d;
        else if (!strcmp(k, "--wd")) a->wd = d;
        else if (!strcmp(k, "--width")) a->width = d;
        else if (!strcmp(k, "--pos-weight")) a->pos_weight = d;
        else if (!strcmp(k, "--bucket-mb")) a->bucket_mb = d;
        else if (!isint) return bad(rank, "option needs a whole number (got '%s')", v);
        else if (!strcmp(k, "--data-parallel")) a->dp = (int)d;
        else if (!strcmp(k, "--batch")) a->batch = (int)d;
        else if (!strcmp(k, "--epochs")) a->epochs = (int)d;
        else if (!strcmp(k, "--steps")) a->steps = (int)d;
        else if (!strcmp(k, "--threads")) a->threads = (int)d;
        else if (!strcmp(k, "--interval")) a->interval = (int)d;
        else if (!strcmp(k, "--seed")) a->seed = (long)d;
        else if (!strcmp(k, "--limit-train")) a->limit_train = (int)d;
        else if (!strcmp(k, "--limit-test")) a->limit_test = (int)d;
        else if (!strcmp(k, "--image")) a->image = (int)d;
        else if (!strcmp(k, "--channels")) a->channels = (int)d;
        else if (!strcmp(k, "--classes")) a->classes = (int)d;
        else if (!strcmp(k, "--mesh-size")) a->mesh_size = (int)d;
        else if (!strcmp(k, "--train-samples")) a->train_samples = (int)d;
        else if (!strcmp(k, "--test-samples")) a->test_samples = (int)d;
        else return bad(rank, "unknown option %s", k);
    }
    a->mesh = !strcmp(a->model, "mesh");
    if (a->batch < 0)
        a->batch = a->mesh ? 4 : 32; /* not given */
    if (a->batch < 1 || a->epochs < 1 || a->threads < 1 || a->interval < 1 || a->bucket_mb <= 0 ||
        a->width <= 0 || a->mesh_size < 8 || a->train_samples < 1 || a->test_samples < 0)
        return bad(rank, "%s", "batch, epochs, threads, interval, bucket size, width, mesh size and "
                               "sample counts must be positive");
    if (!a->mesh && (a->sh != 1 || a->sw != 1))
        return bad(rank, "--spatial splits the mesh model only (model '%s' is data parallel)", a->model);
    return 0;
}

/* ------------------------------------------------------------- shared */
typedef struct {
    loom_layout_t lay;
    loom_model_t *m;
    loom_spatial_t *sp;
    loom_dp_t *dp;
    loom_optim_t *opt;
    unsigned char *mask;
    int rank;
} run_t;

static int run_fail(const run_t *r, const char *what)
{
    fprintf(stderr, "loom: rank %d: %s: %s\n", r->rank, what, loom_last_error());
    return 1;
}

static int dp_hook(void *arg, int op, size_t ready_from)
{
    (void)op;
    return loom_dp_notify(arg, ready_from);
}

static int setup_common(run_t *r, const pargs_t *a, long total_steps)
{
    loom_dp_desc_t dd = LOOM_DP_DESC_INIT;
    int S = a->sh * a->sw;
    dd.comm = r->lay.world;
    dd.mode = a->blocking ? LOOM_DP_BLOCKING : LOOM_DP_OVERLAP;
    dd.bucket_bytes = (size_t)(a->bucket_mb * 1048576.0);
    if (S > 1) {
        /* spatial ranks hold parts of one gradient (sum), groups average */
        dd.op = WEFT_SUM;
        dd.scale = 1.0f / (float)a->dp;
    } else {
        dd.op = WEFT_AVG;
    }
    int st = loom_dp_create(&r->dp, r->m, &dd);
    if (st < 0)
        return st;
    if (r->sp)
        loom_spatial_set_backward_hook(r->sp, dp_hook, r->dp);
    if ((st = loom_dp_broadcast(r->dp, 0)) < 0)
        return st;
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.lr = (float)a->lr;
    od.momentum = (float)a->momentum;
    od.weight_decay = (float)a->wd;
    od.sched = LOOM_SCHED_COSINE;
    od.total_steps = total_steps;
    if ((st = loom_optim_create(&r->opt, &od, loom_model_param_count(r->m))) < 0)
        return st;
    if (!(r->mask = loom_model_decay_mask(r->m)))
        return LOOM_ERR_NOMEM;
    return LOOM_OK;
}

static void teardown(run_t *r)
{
    free(r->mask);
    loom_optim_destroy(r->opt);
    loom_dp_destroy(r->dp);
    loom_spatial_destroy(r->sp);
    loom_model_destroy(r->m);
    loom_layout_destroy(&r->lay);
}

static int sum_world(run_t *r, double *v, int n)
{
    int ws = weft_allreduce(WEFT_IN_PLACE, v, (size_t)n, WEFT_FLOAT64, WEFT_SUM, r->lay.world);
    return ws == WEFT_SUCCESS ? LOOM_OK : loom_weft_error(ws, "weft_allreduce of the statistics");
}

static int fwd(run_t *r, int n, int training)
{
    return r->sp ? loom_spatial_forward(r->sp, n, training) : loom_model_forward(r->m, n, training);
}

static int bwd(run_t *r, int n)
{
    return r->sp ? loom_spatial_backward(r->sp, n) : loom_model_backward(r->m, n);
}

/* One optimiser step after the loss gradient is in doutput. */
static int train_step(run_t *r, int n)
{
    int st;
    loom_model_zero_grad(r->m);
    if ((st = loom_dp_begin(r->dp)) < 0 || (st = bwd(r, n)) < 0 || (st = loom_dp_finish(r->dp)) < 0)
        return st;
    loom_optim_step(r->opt, loom_model_params(r->m), loom_model_grads(r->m), r->mask);
    return LOOM_OK;
}

static double comm_wait(const run_t *r)
{
    return loom_dp_wait_seconds(r->dp) + (r->sp ? loom_spatial_wait_seconds(r->sp) : 0.0);
}

static void print_summary(run_t *r, const pargs_t *a)
{
    if (r->rank != 0)
        return;
    printf("# allreduce algorithm per gradient bucket (weft_query_algo over %d ranks):\n",
           r->lay.world_size);
    loom_dp_print_algos(r->dp, stdout);
    (void)a;
}

/* --------------------------------------------------------------- mesh */
typedef struct {
    int n, th, tw;
    float *x, *y; /* n tiles */
} tiles_t;

/* Samples first .. first+count-1, generated (set NULL) or taken from a
 * loaded set; keeps this rank's tile of each. */
static int make_tiles(tiles_t *t, const loom_mesh_desc_t *md, const loom_mesh_set_t *set,
                      uint64_t first, int count, int oy, int ox, int th, int tw)
{
    size_t N = (size_t)md->h * md->w, T = (size_t)th * tw;
    float *fx = malloc(sizeof(float) * N * LOOM_MESH_CHANNELS), *fy = malloc(sizeof(float) * N);
    t->n = count;
    t->th = th;
    t->tw = tw;
    t->x = malloc(sizeof(float) * T * LOOM_MESH_CHANNELS * (size_t)(count ? count : 1));
    t->y = malloc(sizeof(float) * T * (size_t)(count ? count : 1));
    int st = LOOM_OK;
    if (!fx || !fy || !t->x || !t->y)
        st = loom_error(LOOM_ERR_NOMEM, "mesh: out of memory for %d samples", count);
    for (int i = 0; st == LOOM_OK && i < count; i++) {
        if (set) {
            memcpy(fx, set->x + (first + (uint64_t)i) * N * LOOM_MESH_CHANNELS,
                   sizeof(float) * N * LOOM_MESH_CHANNELS);
            memcpy(fy, set->y + (first + (uint64_t)i) * N, sizeof(float) * N);
        } else if ((st = loom_mesh_sample(md, first + (uint64_t)i, fx, fy)) < 0) {
            break;
        }
        for (int c = 0; c <= LOOM_MESH_CHANNELS; c++) {
            const float *src = c < LOOM_MESH_CHANNELS ? fx + (size_t)c * N : fy;
            float *dst = c < LOOM_MESH_CHANNELS ? t->x + ((size_t)i * LOOM_MESH_CHANNELS + c) * T
                                                : t->y + (size_t)i * T;
            for (int yy = 0; yy < th; yy++)
                memcpy(dst + (size_t)yy * tw, src + (size_t)(yy + oy) * md->w + ox,
                       sizeof(float) * (size_t)tw);
        }
    }
    free(fx);
    free(fy);
    return st;
}

static void tiles_free(tiles_t *t)
{
    free(t->x);
    free(t->y);
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static int mesh_memory_probe(run_t *r, const pargs_t *a, int th, int tw)
{
    loom_rng_t g;
    loom_rng_seed(&g, 5 + (uint64_t)r->rank);
    loom_shape_t is = loom_model_input_shape(r->m);
    float *x = loom_model_input(r->m);
    for (size_t i = 0; i < loom_shape_count(is); i++)
        x[i] = loom_rng_normal(&g);
    double t0 = loom_now();
    int st = fwd(r, is.n, 1);
    loom_shape_t os = loom_model_output_shape(r->m);
    float *d = loom_model_doutput(r->m);
    for (size_t i = 0; st == LOOM_OK && i < loom_shape_count(os); i++)
        d[i] = 1e-3f;
    if (st == LOOM_OK)
        st = train_step(r, is.n);
    if (st < 0)
        return run_fail(r, "memory probe step");
    double secs = loom_now() - t0;
    double v[5] = {(double)loom_model_activation_bytes(r->m),
                   (double)(r->sp ? loom_spatial_extra_bytes(r->sp) : 0),
                   (double)loom_model_memory_bytes(r->m), (double)peak_rss_kib() * 1024.0, secs};
    double *all = r->rank == 0 ? malloc(sizeof v * (size_t)r->lay.world_size) : NULL;
    int ws = weft_gather(v, all, 5, WEFT_FLOAT64, 0, r->lay.world);
    if (ws != WEFT_SUCCESS) {
        free(all);
        loom_weft_error(ws, "weft_gather");
        return run_fail(r, "memory probe");
    }
    if (r->rank == 0 && all) {
        printf("# memory probe: mesh model %dx%d, width %g, batch %d, grid %dx%d (tile %dx%d), "
               "one forward+backward step\n",
               a->mesh_size, a->mesh_size, a->width, a->batch, a->sh, a->sw, th, tw);
        printf("# rank  activations+grads_MiB  halo_buffers+workspace_MiB  model_total_MiB  "
               "peak_rss_MiB  step_s\n");
        for (int i = 0; i < r->lay.world_size; i++)
            printf("%6d %22.1f %27.1f %16.1f %13.1f %7.2f\n", i, all[5 * i] / 1048576.0,
                   all[5 * i + 1] / 1048576.0, all[5 * i + 2] / 1048576.0,
                   all[5 * i + 3] / 1048576.0, all[5 * i + 4]);
        printf("memory: activation_mib_per_rank=%.1f peak_rss_mib_rank0=%.1f\n", all[0] / 1048576.0,
               all[3] / 1048576.0);
    }
    free(all);
    return 0;
}

static int mesh_eval(run_t *r, const pargs_t *a, const tiles_t *te, double *loss, double *prec,
                     double *rec)
{
    int B = a->batch, st;
    size_t T = (size_t)te->th * te->tw;
    double v[4] = {0, 0, 0, 0}, pixels = 0;
    int nb = te->n / B;
    for (int b = 0; b < nb; b++) {
        memcpy(loom_model_input(r->m), te->x + (size_t)b * B * LOOM_MESH_CHANNELS * T,
               sizeof(float) * (size_t)B * LOOM_MESH_CHANNELS * T);
        if ((st = fwd(r, B, 0)) < 0)
            return st;
        long c[3] = {0, 0, 0};
        v[0] += loom_mesh_bce((size_t)B * T, loom_model_output(r->m), te->y + (size_t)b * B * T,
                              1.0f, 1.0, NULL, c);
        v[1] += (double)c[0];
        v[2] += (double)c[1];
        v[3] += (double)c[2];
        pixels += (double)B * T;
    }
    double all[5] = {v[0], v[1], v[2], v[3], pixels};
    if ((st = sum_world(r, all, 5)) < 0)
        return st;
    *loss = all[4] > 0 ? all[0] / all[4] : 0.0;
    *prec = all[1] + all[2] > 0 ? all[1] / (all[1] + all[2]) : 0.0;
    *rec = all[1] + all[3] > 0 ? all[1] / (all[1] + all[3]) : 0.0;
    return LOOM_OK;
}

static int run_mesh(run_t *r, const pargs_t *a)
{
    int N = a->mesh_size, S = a->sh * a->sw, B = a->batch, D = a->dp, rc = 1, st;
    tiles_t tr = {0}, te = {0};
    loom_mesh_set_t set = {0};
    int *order = NULL;
    if (N % 8 || N / 8 < a->sh || N / 8 < a->sw) {
        if (r->rank == 0)
            fprintf(stderr, "loom: --mesh-size %d must be a multiple of 8 with at least 8 rows and "
                            "columns per rank of --spatial %dx%d\n", N, a->sh, a->sw);
        return EXIT_USAGE;
    }
    int oy, ox, th, tw;
    loom_spatial_split(N, a->sh, 8, r->lay.spatial_rank / a->sw, &oy, &th);
    loom_spatial_split(N, a->sw, 8, r->lay.spatial_rank % a->sw, &ox, &tw);
    if (loom_mesh_model_create(&r->m, (loom_shape_t){B, LOOM_MESH_CHANNELS, th, tw}, (float)a->width,
                               (uint64_t)a->seed) < 0)
        return run_fail(r, "cannot build the mesh model");
    if (S > 1 && loom_spatial_create(&r->sp, r->m, r->lay.spatial, a->sh, a->sw, oy, ox, N, N) < 0)
        return run_fail(r, "cannot split the model");
    loom_mesh_desc_t md = LOOM_MESH_DESC_INIT;
    md.h = md.w = N;
    md.seed = (uint64_t)a->seed;
    if (a->mesh_write) {
        /* rank 0 writes train + test samples (indices 0..), the others wait */
        st = r->rank == 0 ? loom_mesh_write(&md, 0, a->train_samples + a->test_samples, a->mesh_write)
                          : LOOM_OK;
        int ws = weft_barrier(r->lay.world);
        if (st < 0)
            return run_fail(r, "writing the mesh samples");
        if (ws != WEFT_SUCCESS) {
            loom_weft_error(ws, "weft_barrier");
            return run_fail(r, "writing the mesh samples");
        }
        if (r->rank == 0)
            printf("wrote %d samples of %dx%d cells (seed %ld) to %s\n",
                   a->train_samples + a->test_samples, N, N, a->seed, a->mesh_write);
        return 0;
    }
    int train_count = a->train_samples;
    if (a->mesh_file) {
        if (loom_mesh_read(&set, a->mesh_file) < 0)
            return run_fail(r, "reading the mesh samples");
        if (set.h != N || set.w != N || set.count <= a->test_samples) {
            if (r->rank == 0)
                fprintf(stderr, "loom: %s holds %d samples of %dx%d cells; --mesh-size is %d and "
                                "--test-samples %d (the last samples are the test set)\n",
                        a->mesh_file, set.count, set.h, set.w, N, a->test_samples);
            rc = EXIT_USAGE;
            goto out;
        }
        train_count = set.count - a->test_samples;
    }
    /* each group trains on its shard of the samples */
    int per_group = train_count / D, steps = per_group / B;
    if (a->memory_probe) {
        rc = setup_common(r, a, 1) < 0 ? run_fail(r, "setup") : mesh_memory_probe(r, a, th, tw);
        goto out;
    }
    if (steps < 1) {
        if (r->rank == 0)
            fprintf(stderr, "loom: %d training samples are less than one step of %d groups x batch %d\n",
                    train_count, D, B);
        rc = EXIT_USAGE;
        goto out;
    }
    if (a->steps && a->steps < steps)
        steps = a->steps;
    if (setup_common(r, a, (long)steps * a->epochs) < 0) {
        rc = run_fail(r, "setup");
        goto out;
    }
    double tg = loom_now();
    int test_per_group = (a->test_samples / D / B) * B;
    /* generated test samples come from index 1000000 on; in a file they follow the training ones */
    uint64_t test0 = a->mesh_file ? (uint64_t)train_count : 1000000u;
    if (make_tiles(&tr, &md, a->mesh_file ? &set : NULL, (uint64_t)r->lay.group * per_group, steps * B,
                   oy, ox, th, tw) < 0 ||
        make_tiles(&te, &md, a->mesh_file ? &set : NULL, test0 + (uint64_t)r->lay.group * test_per_group,
                   test_per_group, oy, ox, th, tw) < 0) {
        rc = run_fail(r, "preparing the mesh data");
        goto out;
    }
    loom_mesh_set_free(&set); /* the tiles hold what this rank needs: free it now */
    if (r->rank == 0) {
        printf("# loom train: model mesh %dx%d width %g, %zu parameters, %.1f MFLOPs/sample; "
               "%d ranks = %d sample groups x spatial %dx%d (tile %dx%d); batch %d per group "
               "(%d global); %d steps/epoch, %d epochs; dp-mode %s, buckets of %g MiB; %d threads\n",
               N, N, a->width, loom_model_param_count(r->m), loom_model_flops(r->m) * 1e-6 * S,
               r->lay.world_size, D, a->sh, a->sw, th, tw, B, B * D, steps, a->epochs,
               a->blocking ? "blocking" : "overlap", a->bucket_mb, a->threads);
        printf("# data: %d train + %d test samples per group %s in %.1f s (not timed)\n",
               steps * B, test_per_group, a->mesh_file ? "read" : "generated", loom_now() - tg);
        fflush(stdout);
    }
    size_t T = (size_t)th * tw;
    double norm = (double)B * N * N, t_train = 0.0;
    long images = 0, step = 0;
    order = malloc(sizeof(int) * (size_t)(steps * B));
    if (!order) {
        loom_error(LOOM_ERR_NOMEM, "out of memory");
        rc = run_fail(r, "setup");
        goto out;
    }
    double test_loss = 0, prec = 0, rec = 0;
    double t_wait = 0.0; /* Weft waits inside training steps */
    for (int ep = 0; ep < a->epochs; ep++) {
        loom_rng_t g;
        loom_rng_seed(&g, (uint64_t)a->seed * 7919 + (uint64_t)ep); /* same on the group's ranks */
        for (int i = 0; i < steps * B; i++)
            order[i] = i;
        for (int i = steps * B - 1; i > 0; i--) {
            int j = (int)loom_rng_below(&g, (uint32_t)i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        double iv[5] = {0, 0, 0, 0, 0}, iv_t0 = loom_now();
        for (int s = 0; s < steps; s++) {
            double t0 = loom_now(), w0 = comm_wait(r);
            for (int b = 0; b < B; b++) {
                int k = order[s * B + b];
                memcpy(loom_model_input(r->m) + (size_t)b * LOOM_MESH_CHANNELS * T,
                       tr.x + (size_t)k * LOOM_MESH_CHANNELS * T, sizeof(float) * LOOM_MESH_CHANNELS * T);
            }
            if ((st = fwd(r, B, 1)) < 0) {
                rc = run_fail(r, "forward");
                goto out;
            }
            long c[3] = {0, 0, 0};
            float *tgt = malloc(sizeof(float) * (size_t)B * T);
            if (!tgt) {
                loom_error(LOOM_ERR_NOMEM, "out of memory");
                rc = run_fail(r, "step");
                goto out;
            }
            for (int b = 0; b < B; b++)
                memcpy(tgt + (size_t)b * T, tr.y + (size_t)order[s * B + b] * T, sizeof(float) * T);
            double l = loom_mesh_bce((size_t)B * T, loom_model_output(r->m), tgt, (float)a->pos_weight,
                                     norm, loom_model_doutput(r->m), c);
            free(tgt);
            float lr = loom_optim_lr(r->opt);
            if ((st = train_step(r, B)) < 0) {
                rc = run_fail(r, "training step");
                goto out;
            }
            t_train += loom_now() - t0;
            t_wait += comm_wait(r) - w0;
            step++;
            images += (long)B * D;
            iv[0] += l;
            iv[1] += (double)c[0];
            iv[2] += (double)c[1];
            iv[3] += (double)c[2];
            iv[4] += (double)B * T;
            if ((s + 1) % a->interval == 0 || s + 1 == steps) {
                if ((st = sum_world(r, iv, 5)) < 0) {
                    rc = run_fail(r, "statistics");
                    goto out;
                }
                double dt = loom_now() - iv_t0;
                if (r->rank == 0) {
                    double ips = iv[4] / ((double)N * N) / dt;
                    printf("epoch %d/%d step %d/%d loss %.4f prec %.3f rec %.3f lr %.4g img/s %.2f "
                           "comm_wait %.1f%% eta %.0fs\n",
                           ep + 1, a->epochs, s + 1, steps, iv[0] / iv[4],
                           iv[1] + iv[2] > 0 ? iv[1] / (iv[1] + iv[2]) : 0.0,
                           iv[1] + iv[3] > 0 ? iv[1] / (iv[1] + iv[3]) : 0.0, lr, ips,
                           100.0 * t_wait / t_train,
                           ((double)steps * a->epochs - step) * (t_train / step));
                    fflush(stdout);
                }
                memset(iv, 0, sizeof iv);
                iv_t0 = loom_now();
            }
        }
        double te0 = loom_now();
        if ((st = mesh_eval(r, a, &te, &test_loss, &prec, &rec)) < 0) {
            rc = run_fail(r, "evaluation");
            goto out;
        }
        if (r->rank == 0) {
            printf("epoch %d/%d test_loss %.4f pixel_precision %.3f pixel_recall %.3f (eval %.1fs)\n",
                   ep + 1, a->epochs, test_loss, prec, rec, loom_now() - te0);
            fflush(stdout);
        }
    }
    free(order);
    order = NULL;
    print_summary(r, a);
    if (r->rank == 0)
        printf("final: pixel_precision=%.4f pixel_recall=%.4f test_loss=%.4f images_per_s=%.2f "
               "comm_wait_share=%.3f\n",
               prec, rec, test_loss, t_train > 0 ? images / t_train : 0.0,
               t_train > 0 ? t_wait / t_train : 0.0);
    rc = 0;
out:
    loom_mesh_set_free(&set);
    free(order);
    tiles_free(&tr);
    tiles_free(&te);
    return rc;
}

/* ------------------------------------------------------------- resnet */
static int run_resnet(run_t *r, const pargs_t *a)
{
    int synthetic = !strcmp(a->data, "synthetic"), B = a->batch, D = a->dp, G = B * D, rc = 1, st;
    loom_dataset_t train = {0}, test = {0};
    loom_loader_t *ld = NULL, *lt = NULL;
    float *gx = NULL;
    int32_t *gy = NULL;
    int channels = synthetic ? a->channels : 1, image = synthetic ? a->image : 28;
    int classes = synthetic ? a->classes : 10;
    if (!synthetic && (loom_fashion_mnist_load(&train, a->data_dir, 1) < 0 ||
                       loom_fashion_mnist_load(&test, a->data_dir, 0) < 0)) {
        rc = run_fail(r, "cannot load the data set");
        goto out;
    }
    if (loom_resnet_create(&r->m, a->model, (loom_shape_t){B, channels, image, image}, classes,
                           (uint64_t)a->seed) < 0) {
        rc = run_fail(r, "cannot build the model");
        goto out;
    }
    /* every rank draws the same global batch of D*B and trains on its slice */
    loom_loader_desc_t dd = {.ds = synthetic ? NULL : &train, .batch = G, .limit = a->limit_train,
                             .shuffle = 1, .augment = 1, .pad = 2, .mean = 0.2860f, .std = 0.3530f,
                             .seed = (uint64_t)a->seed + 17, .drop_last = 1,
                             .synth = {G, channels, image, image}, .synth_classes = classes,
                             .synth_batches = a->limit_train ? a->limit_train / G : 20};
    if (loom_loader_create(&ld, &dd) < 0) {
        rc = run_fail(r, "cannot create the data loader");
        goto out;
    }
    int nb = loom_loader_batches(ld);
    if (a->steps && a->steps < nb)
        nb = a->steps;
    if (nb < 1) {
        loom_error(LOOM_ERR_INVALID, "fewer training samples than one global batch of %d", G);
        rc = run_fail(r, "setup");
        goto out;
    }
    if (setup_common(r, a, (long)nb * a->epochs) < 0) {
        rc = run_fail(r, "setup");
        goto out;
    }
    size_t per = (size_t)channels * image * image;
    gx = malloc(sizeof(float) * per * (size_t)G);
    gy = malloc(sizeof(int32_t) * (size_t)G);
    if (!gx || !gy) {
        loom_error(LOOM_ERR_NOMEM, "out of memory");
        rc = run_fail(r, "setup");
        goto out;
    }
    if (r->rank == 0) {
        printf("# loom train: model %s, %s, %d ranks data parallel, batch %d per rank (%d global), "
               "%d steps/epoch, %d epochs, dp-mode %s, buckets of %g MiB (%d buckets), %d threads, "
               "%zu parameters\n",
               a->model, synthetic ? "synthetic" : "fashion-mnist", D, B, G, nb, a->epochs,
               a->blocking ? "blocking" : "overlap", a->bucket_mb, loom_dp_num_buckets(r->dp),
               a->threads, loom_model_param_count(r->m));
        fflush(stdout);
    }
    loom_shape_t os = loom_model_output_shape(r->m);
    double t_train = 0.0, test_loss = 0.0, test_acc = 0.0;
    long images = 0, step = 0;
    double t_wait = 0.0; /* Weft waits inside training steps */
    for (int ep = 0; ep < a->epochs; ep++) {
        double iv[3] = {0, 0, 0}, iv_t0 = loom_now();
        loom_loader_start_epoch(ld, ep);
        for (int bi = 0; bi < nb; bi++) {
            double t0 = loom_now(), w0 = comm_wait(r);
            int n = loom_loader_next(ld, gx, gy);
            if (n < G) {
                loom_error(LOOM_ERR_INTERNAL, "loader returned %d of %d samples", n, G);
                rc = run_fail(r, "data loader");
                goto out;
            }
            memcpy(loom_model_input(r->m), gx + per * (size_t)r->lay.group * B, sizeof(float) * per * B);
            int correct = 0;
            if ((st = fwd(r, B, 1)) < 0) {
                rc = run_fail(r, "forward");
                goto out;
            }
            float loss = loom_softmax_xent(B, os.c, loom_model_output(r->m), gy + r->lay.group * B,
                                           loom_model_doutput(r->m), &correct);
            float lr = loom_optim_lr(r->opt);
            if ((st = train_step(r, B)) < 0) {
                rc = run_fail(r, "training step");
                goto out;
            }
            t_train += loom_now() - t0;
            t_wait += comm_wait(r) - w0;
            images += G;
            step++;
            iv[0] += (double)loss * B;
            iv[1] += correct;
            iv[2] += B;
            if ((bi + 1) % a->interval == 0 || bi + 1 == nb) {
                if ((st = sum_world(r, iv, 3)) < 0) {
                    rc = run_fail(r, "statistics");
                    goto out;
                }
                if (r->rank == 0) {
                    double ips = iv[2] / (loom_now() - iv_t0);
                    printf("epoch %d/%d step %d/%d loss %.4f acc %.2f%% lr %.4g img/s %.1f "
                           "comm_wait %.1f%% eta %.0fs\n",
                           ep + 1, a->epochs, bi + 1, nb, iv[0] / iv[2], 100.0 * iv[1] / iv[2], lr,
                           ips, 100.0 * t_wait / t_train,
                           ((double)nb * a->epochs - step) * (t_train / step));
                    fflush(stdout);
                }
                memset(iv, 0, sizeof iv);
                iv_t0 = loom_now();
            }
        }
        /* evaluation: group g takes test batches g, g+D, ... */
        double v[3] = {0, 0, 0};
        if (synthetic) {
            loom_loader_start_epoch(ld, 0);
            if (loom_loader_next(ld, gx, gy) == G) {
                memcpy(loom_model_input(r->m), gx + per * (size_t)r->lay.group * B, sizeof(float) * per * B);
                if ((st = fwd(r, B, 0)) < 0) {
                    rc = run_fail(r, "evaluation");
                    goto out;
                }
                int c;
                v[0] = (double)loom_softmax_xent(B, os.c, loom_model_output(r->m), gy + r->lay.group * B,
                                                 NULL, &c) * B;
                v[1] = c;
                v[2] = B;
            }
        } else {
            loom_loader_desc_t td = {.ds = &test, .batch = B, .limit = a->limit_test, .mean = 0.2860f,
                                     .std = 0.3530f};
            if (!lt && loom_loader_create(&lt, &td) < 0) {
                rc = run_fail(r, "test loader");
                goto out;
            }
            loom_loader_start_epoch(lt, 0);
            int n, k = 0;
            while ((n = loom_loader_next(lt, loom_model_input(r->m), gy)) > 0) {
                if (k++ % D != r->lay.group)
                    continue;
                if ((st = fwd(r, n, 0)) < 0) {
                    rc = run_fail(r, "evaluation");
                    goto out;
                }
                int c;
                v[0] += (double)loom_softmax_xent(n, os.c, loom_model_output(r->m), gy, NULL, &c) * n;
                v[1] += c;
                v[2] += n;
            }
        }
        if ((st = sum_world(r, v, 3)) < 0) {
            rc = run_fail(r, "statistics");
            goto out;
        }
        test_loss = v[2] > 0 ? v[0] / v[2] : 0.0;
        test_acc = v[2] > 0 ? v[1] / v[2] : 0.0;
        if (r->rank == 0) {
            printf("epoch %d/%d test_loss %.4f test_accuracy %.2f%%\n", ep + 1, a->epochs, test_loss,
                   100.0 * test_acc);
            fflush(stdout);
        }
    }
    print_summary(r, a);
    if (r->rank == 0)
        printf("final: test_accuracy=%.4f test_loss=%.4f images_per_s=%.1f comm_wait_share=%.3f\n",
               test_acc, test_loss, t_train > 0 ? images / t_train : 0.0,
               t_train > 0 ? t_wait / t_train : 0.0);
    rc = 0;
out:
    free(gx);
    free(gy);
    loom_loader_destroy(lt);
    loom_loader_destroy(ld);
    loom_dataset_free(&train);
    loom_dataset_free(&test);
    return rc;
}

void loom__abort_job(int size)
{
    /* a run-time failure on one rank leaves the others inside a collective:
     * stop the job rather than hang (the message is printed) */
    if (size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int loom_par_main(int argc, char **argv)
{
    weft_init_params_t ip = WEFT_INIT_PARAMS_INITIALIZER;
    ip.argc = &argc;
    ip.argv = &argv;
    int ws = weft_init(&ip);
    if (ws != WEFT_SUCCESS) {
        fprintf(stderr, "loom: weft_init: %s (%s)\n", weft_strerror(ws), weft_status_name(ws));
        return 1;
    }
    if (is_dp_step(argc, argv)) {
        int rc = loom_dp_step_main(argc, argv);
        ws = weft_finalize();
        if (ws != WEFT_SUCCESS && rc == 0) {
            fprintf(stderr, "loom: weft_finalize: %s (%s)\n", weft_strerror(ws), weft_status_name(ws));
            rc = 1;
        }
        return rc;
    }
    int rank = 0, size = 1, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pargs_t a;
    run_t r;
    memset(&r, 0, sizeof r);
    r.rank = rank;
    int pr = parse(argc, argv, &a, rank);
    if (pr != 0) {
        weft_finalize();
        return pr > 0 ? 0 : EXIT_USAGE;
    }
    if (!a.dp)
        a.dp = size % (a.sh * a.sw) == 0 ? size / (a.sh * a.sw) : 0;
    loom_set_threads(a.threads);
    if (loom_layout_create(&r.lay, MPI_COMM_WORLD, a.dp, a.sh, a.sw) < 0) {
        if (rank == 0)
            fprintf(stderr, "loom: %s\n", loom_last_error());
        weft_finalize();
        return EXIT_USAGE;
    }
    rc = a.mesh ? run_mesh(&r, &a) : run_resnet(&r, &a);
    if (rc == 1)
        loom__abort_job(size);
    teardown(&r);
    weft_finalize();
    return rc;
}
