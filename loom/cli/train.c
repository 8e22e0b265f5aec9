/*
 * train.c - `[mpiexec -n P] loom train`: the one trainer, for ResNets (data
 * parallel) and the mesh model (data and spatial parallel); one process is
 * the P = 1 case.  What differs between the models is a task (data, loss,
 * evaluation, printing); the loop, the optimiser, the gradient reduction
 * and the checkpoints are shared.
 *
 * Rank 0 prints and writes the metrics CSV and --save.  Checkpoints
 * (--ckpt-dir) hold the whole state (loom_ckpt.h): --resume continues the
 * interrupted run exactly.
 *
 * Test hook: LOOM_TEST_KILL_AT=STEP[:RANK] makes rank RANK (default 0) kill
 * itself with SIGKILL right after step STEP, as `kill -9` would (the resume
 * tests use it to interrupt a run at a known step).
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include "loom_ckpt.h"
#include "loom_mesh.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define STATS 5

typedef struct run run_t;

/* What a model brings to the loop. */
typedef struct {
    int steps;                                   /* per epoch */
    int (*start_epoch)(run_t *r, int ep, int first);
    /* loads batch bi, runs forward and the loss (gradient into doutput);
     * adds to st: the model's statistics (see print_interval) */
    int (*forward_loss)(run_t *r, int bi, double st[STATS]);
    int (*evaluate)(run_t *r, double st[STATS]);
} task_t;

struct run {
    const cli_args_t *a;
    const cli_world_t *w;
    int mesh, synthetic, batch, threads, D;
    int image, channels, classes; /* ResNet input, resolved */
    loom_layout_t lay;
    int have_lay;
    loom_model_t *m;
    loom_spatial_t *sp;
    loom_dp_t *dp;
    loom_optim_t *opt;
    unsigned char *mask;
    loom_ckpt_t *ck;
    FILE *mf;
    task_t t;
    /* resnet */
    loom_dataset_t train, test;
    loom_loader_t *ld, *lt;
    float *gx;
    int32_t *gy;
    size_t per;
    /* mesh */
    struct {
        int n, th, tw;
        float *x, *y;
    } tr, te;
    int *order;
    float *tgt;
    double norm;
};

/* A failure every rank sees alike (bad arguments, mismatched layout or
 * checkpoint): rank 0 prints, everyone returns 2. */
static int usage(const run_t *r, const char *fmt, const char *s)
{
    if (r->w->rank == 0) {
        fprintf(stderr, "loom train: ");
        fprintf(stderr, fmt, s);
        fprintf(stderr, "\nRun 'loom train --help' for the options.\n");
    }
    return 2;
}

static int fail(const run_t *r, const char *what) { return cli_fail(r->w, what); }

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

static int dp_hook(void *arg, int op, size_t ready_from)
{
    (void)op;
    return loom_dp_notify(arg, ready_from);
}

/* Backward, gradient reduction, optimiser step (loss gradient in doutput). */
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

/* ------------------------------------------------------------- resnets */
static int resnet_start(run_t *r, int ep, int first)
{
    return loom_loader_start_epoch_at(r->ld, ep, first);
}

static int resnet_forward_loss(run_t *r, int bi, double st[STATS])
{
    int B = r->batch, G = B * r->D, s;
    (void)bi;
    int n = loom_loader_next(r->ld, r->gx, r->gy);
    if (n < G)
        return n < 0 ? n : loom_error(LOOM_ERR_INTERNAL, "loader returned %d of %d samples", n, G);
    memcpy(loom_model_input(r->m), r->gx + r->per * (size_t)r->lay.group * B,
           sizeof(float) * r->per * B);
    if ((s = fwd(r, B, 1)) < 0)
        return s;
    int correct = 0;
    loom_shape_t os = loom_model_output_shape(r->m);
    float loss = loom_softmax_xent(B, os.c, loom_model_output(r->m), r->gy + r->lay.group * B,
                                   loom_model_doutput(r->m), &correct);
    if (!isfinite(loss))
        return loom_error(LOOM_ERR_INVALID, "loss is %f: diverged (lower --lr?)", loss);
    st[0] += (double)loss * B;
    st[1] += correct;
    st[2] += B;
    return LOOM_OK;
}

/* Test set: group g takes test batches g, g+D, ...; synthetic: the training
 * batch again, with inference statistics. */
static int resnet_evaluate(run_t *r, double v[STATS])
{
    int B = r->batch, s, c;
    loom_shape_t os = loom_model_output_shape(r->m);
    if (r->synthetic) {
        loom_loader_start_epoch(r->ld, 0);
        if (loom_loader_next(r->ld, r->gx, r->gy) == B * r->D) {
            memcpy(loom_model_input(r->m), r->gx + r->per * (size_t)r->lay.group * B,
                   sizeof(float) * r->per * B);
            if ((s = fwd(r, B, 0)) < 0)
                return s;
            v[0] = (double)loom_softmax_xent(B, os.c, loom_model_output(r->m),
                                             r->gy + r->lay.group * B, NULL, &c) * B;
            v[1] = c;
            v[2] = B;
        }
        return sum_world(r, v, STATS);
    }
    loom_loader_start_epoch(r->lt, 0);
    int n, k = 0;
    while ((n = loom_loader_next(r->lt, loom_model_input(r->m), r->gy)) > 0) {
        if (k++ % r->D != r->lay.group)
            continue;
        if ((s = fwd(r, n, 0)) < 0)
            return s;
        v[0] += (double)loom_softmax_xent(n, os.c, loom_model_output(r->m), r->gy, NULL, &c) * n;
        v[1] += c;
        v[2] += n;
    }
    if (n < 0)
        return n;
    return sum_world(r, v, STATS);
}

static int resnet_setup(run_t *r)
{
    const cli_args_t *a = r->a;
    int B = r->batch, G = B * r->D;
    int channels = r->synthetic ? (a->channels > 0 ? a->channels : 1) : 1;
    int image = r->synthetic ? (a->image > 0 ? a->image : 28) : 28;
    int classes = r->synthetic ? (a->classes > 0 ? a->classes : 10) : 10;
    if (!r->synthetic && (loom_fashion_mnist_load(&r->train, a->data_dir, 1) < 0 ||
                          loom_fashion_mnist_load(&r->test, a->data_dir, 0) < 0))
        return fail(r, "cannot load the data set");
    r->image = image;
    r->channels = channels;
    r->classes = classes;
    if (loom_resnet_create(&r->m, a->model, (loom_shape_t){B, channels, image, image}, classes,
                           (uint64_t)a->seed) < 0)
        return fail(r, "cannot build the model");
    /* every rank draws the same global batch of D*B and trains on its slice */
    int lim = a->limit_train;
    loom_loader_desc_t dd = {.ds = r->synthetic ? NULL : &r->train, .batch = G, .limit = lim,
                             .shuffle = 1, .augment = !a->no_augment, .pad = a->pad,
                             .mean = 0.2860f, .std = 0.3530f, .seed = (uint64_t)a->seed + 17,
                             .drop_last = 1, .synth = {G, channels, image, image},
                             .synth_classes = classes,
                             .synth_batches = lim ? (lim + G - 1) / G : 20};
    if (loom_loader_create(&r->ld, &dd) < 0)
        return fail(r, "cannot create the data loader");
    if (!r->synthetic) {
        loom_loader_desc_t td = {.ds = &r->test, .batch = B, .limit = a->limit_test,
                                 .mean = 0.2860f, .std = 0.3530f};
        if (loom_loader_create(&r->lt, &td) < 0)
            return fail(r, "cannot create the test loader");
    }
    r->t.steps = loom_loader_batches(r->ld);
    r->per = (size_t)channels * image * image;
    r->gx = malloc(sizeof(float) * r->per * (size_t)G);
    r->gy = malloc(sizeof(int32_t) * (size_t)G);
    if (!r->gx || !r->gy) {
        loom_error(LOOM_ERR_NOMEM, "out of memory");
        return fail(r, "setup");
    }
    r->t.start_epoch = resnet_start;
    r->t.forward_loss = resnet_forward_loss;
    r->t.evaluate = resnet_evaluate;
    return 0;
}

/* --------------------------------------------------------------- mesh */
/* Samples first .. first+count-1, generated (set NULL) or from a loaded
 * set; keeps this rank's tile of each. */
static int make_tiles(float **tx, float **ty, const loom_mesh_desc_t *md, const loom_mesh_set_t *set,
                      uint64_t first, int count, int oy, int ox, int th, int tw)
{
    size_t N = (size_t)md->h * md->w, T = (size_t)th * tw;
    float *fx = malloc(sizeof(float) * N * LOOM_MESH_CHANNELS), *fy = malloc(sizeof(float) * N);
    *tx = malloc(sizeof(float) * T * LOOM_MESH_CHANNELS * (size_t)(count ? count : 1));
    *ty = malloc(sizeof(float) * T * (size_t)(count ? count : 1));
    int st = LOOM_OK;
    if (!fx || !fy || !*tx || !*ty)
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
            float *dst = c < LOOM_MESH_CHANNELS ? *tx + ((size_t)i * LOOM_MESH_CHANNELS + c) * T
                                                : *ty + (size_t)i * T;
            for (int yy = 0; yy < th; yy++)
                memcpy(dst + (size_t)yy * tw, src + (size_t)(yy + oy) * md->w + ox,
                       sizeof(float) * (size_t)tw);
        }
    }
    free(fx);
    free(fy);
    return st;
}

static int mesh_start(run_t *r, int ep, int first)
{
    (void)first; /* the order of the epoch is drawn whole; the loop starts at first */
    int n = r->t.steps * r->batch;
    loom_rng_t g;
    loom_rng_seed(&g, (uint64_t)r->a->seed * 7919 + (uint64_t)ep); /* same on the group's ranks */
    for (int i = 0; i < n; i++)
        r->order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)loom_rng_below(&g, (uint32_t)i + 1), t = r->order[i];
        r->order[i] = r->order[j];
        r->order[j] = t;
    }
    return LOOM_OK;
}

static int mesh_forward_loss(run_t *r, int s, double iv[STATS])
{
    int B = r->batch, st;
    size_t T = (size_t)r->tr.th * r->tr.tw;
    for (int b = 0; b < B; b++) {
        int k = r->order[s * B + b];
        memcpy(loom_model_input(r->m) + (size_t)b * LOOM_MESH_CHANNELS * T,
               r->tr.x + (size_t)k * LOOM_MESH_CHANNELS * T, sizeof(float) * LOOM_MESH_CHANNELS * T);
        memcpy(r->tgt + (size_t)b * T, r->tr.y + (size_t)k * T, sizeof(float) * T);
    }
    if ((st = fwd(r, B, 1)) < 0)
        return st;
    long c[3] = {0, 0, 0};
    double l = loom_mesh_bce((size_t)B * T, loom_model_output(r->m), r->tgt,
                             (float)r->a->pos_weight, r->norm, loom_model_doutput(r->m), c);
    if (!isfinite(l))
        return loom_error(LOOM_ERR_INVALID, "loss is %f: diverged (lower --lr?)", l);
    iv[0] += l;
    iv[1] += (double)c[0];
    iv[2] += (double)c[1];
    iv[3] += (double)c[2];
    iv[4] += (double)B * T;
    return LOOM_OK;
}

static int mesh_evaluate(run_t *r, double v[STATS])
{
    int B = r->batch, st;
    size_t T = (size_t)r->te.th * r->te.tw;
    for (int b = 0; b < r->te.n / B; b++) {
        memcpy(loom_model_input(r->m), r->te.x + (size_t)b * B * LOOM_MESH_CHANNELS * T,
               sizeof(float) * (size_t)B * LOOM_MESH_CHANNELS * T);
        if ((st = fwd(r, B, 0)) < 0)
            return st;
        long c[3] = {0, 0, 0};
        v[0] += loom_mesh_bce((size_t)B * T, loom_model_output(r->m), r->te.y + (size_t)b * B * T,
                              1.0f, 1.0, NULL, c);
        v[1] += (double)c[0];
        v[2] += (double)c[1];
        v[3] += (double)c[2];
        v[4] += (double)B * T;
    }
    return sum_world(r, v, STATS);
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static int memory_probe(run_t *r, int th, int tw)
{
    const cli_args_t *a = r->a;
    loom_rng_t g;
    loom_rng_seed(&g, 5 + (uint64_t)r->w->rank);
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
        return fail(r, "memory probe step");
    double v[5] = {(double)loom_model_activation_bytes(r->m),
                   (double)(r->sp ? loom_spatial_extra_bytes(r->sp) : 0),
                   (double)loom_model_memory_bytes(r->m), (double)peak_rss_kib() * 1024.0,
                   loom_now() - t0};
    int P = r->lay.world_size;
    double *all = r->w->rank == 0 ? malloc(sizeof v * (size_t)P) : NULL;
    if (r->w->rank == 0 && !all) {
        loom_error(LOOM_ERR_NOMEM, "out of memory");
        return fail(r, "memory probe");
    }
    int ws = weft_gather(v, all, 5, WEFT_FLOAT64, 0, r->lay.world);
    if (ws != WEFT_SUCCESS) {
        free(all);
        loom_weft_error(ws, "weft_gather");
        return fail(r, "memory probe");
    }
    if (all) {
        printf("# memory probe: mesh model %dx%d, width %g, batch %d, grid %dx%d (tile %dx%d), "
               "one forward+backward step\n",
               a->mesh_size, a->mesh_size, a->width, r->batch, a->sh, a->sw, th, tw);
        printf("# rank  activations+grads_MiB  halo_buffers+workspace_MiB  model_total_MiB  "
               "peak_rss_MiB  step_s\n");
        for (int i = 0; i < P; i++)
            printf("%6d %22.1f %27.1f %16.1f %13.1f %7.2f\n", i, all[5 * i] / 1048576.0,
                   all[5 * i + 1] / 1048576.0, all[5 * i + 2] / 1048576.0,
                   all[5 * i + 3] / 1048576.0, all[5 * i + 4]);
        printf("memory: activation_mib_per_rank=%.1f peak_rss_mib_rank0=%.1f\n", all[0] / 1048576.0,
               all[3] / 1048576.0);
    }
    free(all);
    return 0;
}

static int setup_dp_optim(run_t *r, long total_steps, int nb);

/* Returns 0 to train, -1 when done without training (mesh-write, memory
 * probe: *rc set), or an exit status > 0. */
static int mesh_setup(run_t *r, int *rc)
{
    const cli_args_t *a = r->a;
    int N = a->mesh_size, B = r->batch, D = r->D, st;
    loom_mesh_set_t set = {0};
    if (N % 8 || N / 8 < a->sh || N / 8 < a->sw) {
        if (r->w->rank == 0)
            fprintf(stderr, "loom train: --mesh-size %d must be a multiple of 8 with at least 8 rows "
                            "and columns per rank of --spatial %dx%d\n", N, a->sh, a->sw);
        return 2;
    }
    int oy, ox, th, tw;
    loom_spatial_split(N, a->sh, 8, r->lay.spatial_rank / a->sw, &oy, &th);
    loom_spatial_split(N, a->sw, 8, r->lay.spatial_rank % a->sw, &ox, &tw);
    if (loom_mesh_model_create(&r->m, (loom_shape_t){B, LOOM_MESH_CHANNELS, th, tw}, (float)a->width,
                               (uint64_t)a->seed) < 0)
        return fail(r, "cannot build the mesh model");
    if (a->sh * a->sw > 1 &&
        loom_spatial_create(&r->sp, r->m, r->lay.spatial, a->sh, a->sw, oy, ox, N, N) < 0)
        return fail(r, "cannot split the model");
    loom_mesh_desc_t md = LOOM_MESH_DESC_INIT;
    md.h = md.w = N;
    md.seed = (uint64_t)a->seed;
    if (a->mesh_write) {
        /* rank 0 writes train + test samples (indices 0..), the others wait */
        st = r->w->rank == 0 ? loom_mesh_write(&md, 0, a->train_samples + a->test_samples,
                                               a->mesh_write)
                             : LOOM_OK;
        int ws = weft_barrier(r->lay.world);
        if (st < 0)
            return fail(r, "writing the mesh samples");
        if (ws != WEFT_SUCCESS) {
            loom_weft_error(ws, "weft_barrier");
            return fail(r, "writing the mesh samples");
        }
        if (r->w->rank == 0)
            printf("wrote %d samples of %dx%d cells (seed %ld) to %s\n",
                   a->train_samples + a->test_samples, N, N, a->seed, a->mesh_write);
        *rc = 0;
        return -1;
    }
    int train_count = a->train_samples;
    if (a->mesh_file) {
        if (loom_mesh_read(&set, a->mesh_file) < 0)
            return fail(r, "reading the mesh samples");
        if (set.h != N || set.w != N || set.count <= a->test_samples) {
            if (r->w->rank == 0)
                fprintf(stderr, "loom train: %s holds %d samples of %dx%d cells; --mesh-size is %d "
                                "and --test-samples %d (the last samples are the test set)\n",
                        a->mesh_file, set.count, set.h, set.w, N, a->test_samples);
            loom_mesh_set_free(&set);
            return 2;
        }
        train_count = set.count - a->test_samples;
    }
    int per_group = train_count / D, steps = per_group / B;
    if (a->memory_probe) {
        loom_mesh_set_free(&set);
        if (setup_dp_optim(r, 1, 1) < 0)
            return fail(r, "setup");
        *rc = memory_probe(r, th, tw);
        return -1;
    }
    if (steps < 1) {
        loom_mesh_set_free(&set);
        if (r->w->rank == 0)
            fprintf(stderr, "loom train: %d training samples are less than one step of %d groups x "
                            "batch %d\n", train_count, D, B);
        return 2;
    }
    double tg = loom_now();
    int test_per_group = (a->test_samples / D / B) * B;
    /* generated test samples come from index 1000000 on; in a file they follow the training ones */
    uint64_t test0 = a->mesh_file ? (uint64_t)train_count : 1000000u;
    r->tr.n = steps * B;
    r->te.n = test_per_group;
    r->tr.th = r->te.th = th;
    r->tr.tw = r->te.tw = tw;
    st = make_tiles(&r->tr.x, &r->tr.y, &md, a->mesh_file ? &set : NULL,
                    (uint64_t)r->lay.group * per_group, steps * B, oy, ox, th, tw);
    if (st == LOOM_OK)
        st = make_tiles(&r->te.x, &r->te.y, &md, a->mesh_file ? &set : NULL,
                        test0 + (uint64_t)r->lay.group * test_per_group, test_per_group, oy, ox, th,
                        tw);
    loom_mesh_set_free(&set); /* the tiles hold what this rank needs */
    if (st < 0)
        return fail(r, "preparing the mesh data");
    r->order = malloc(sizeof(int) * (size_t)(steps * B));
    r->tgt = malloc(sizeof(float) * (size_t)B * th * tw);
    if (!r->order || !r->tgt) {
        loom_error(LOOM_ERR_NOMEM, "out of memory");
        return fail(r, "setup");
    }
    r->norm = (double)B * N * N;
    r->t.steps = steps;
    r->t.start_epoch = mesh_start;
    r->t.forward_loss = mesh_forward_loss;
    r->t.evaluate = mesh_evaluate;
    if (r->w->rank == 0) {
        printf("# data: %d train + %d test samples per group %s in %.1f s (not timed)\n",
               steps * B, test_per_group, a->mesh_file ? "read" : "generated", loom_now() - tg);
        fflush(stdout);
    }
    return 0;
}

/* ------------------------------------------------------------- shared */
static int setup_dp_optim(run_t *r, long total_steps, int nb)
{
    const cli_args_t *a = r->a;
    loom_dp_desc_t dd = LOOM_DP_DESC_INIT;
    dd.comm = r->lay.world;
    dd.mode = !strcmp(a->dp_mode, "blocking") ? LOOM_DP_BLOCKING : LOOM_DP_OVERLAP;
    dd.bucket_bytes = (size_t)(a->bucket_mb * 1048576.0);
    if (a->sh * a->sw > 1) {
        /* spatial ranks hold parts of one gradient (sum), groups average */
        dd.op = WEFT_SUM;
        dd.scale = 1.0f / (float)r->D;
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
    od.kind = !strcmp(a->optim, "adam") ? LOOM_ADAM : LOOM_SGD;
    od.lr = (float)a->lr;
    od.momentum = (float)a->momentum;
    od.weight_decay = (float)a->wd;
    od.nesterov = a->nesterov;
    od.sched = !strcmp(a->schedule, "cosine") ? LOOM_SCHED_COSINE
               : !strcmp(a->schedule, "step") ? LOOM_SCHED_STEP : LOOM_SCHED_CONST;
    od.total_steps = total_steps;
    od.warmup_steps = (long)(a->warmup_epochs * nb);
    od.step_size = (long)a->step_epochs * nb;
    od.gamma = (float)a->gamma;
    if ((st = loom_optim_create(&r->opt, &od, loom_model_param_count(r->m))) < 0)
        return st;
    if (!(r->mask = loom_model_decay_mask(r->m)))
        return loom_error(LOOM_ERR_NOMEM, "out of memory");
    return LOOM_OK;
}

/* The options that fix the run's trajectory, for the checkpoint manifest. */
static void config_text(const run_t *r, char *s, size_t n)
{
    const cli_args_t *a = r->a;
    int k = snprintf(s, n, "model=%s batch=%d epochs=%d steps=%d seed=%ld optim=%s lr=%.9g "
                     "momentum=%.9g nesterov=%d wd=%.9g schedule=%s step-epochs=%d gamma=%.9g "
                     "warmup-epochs=%.9g", a->model, r->batch, a->epochs, a->steps, a->seed,
                     a->optim, a->lr, a->momentum, a->nesterov, a->wd, a->schedule, a->step_epochs,
                     a->gamma, a->warmup_epochs);
    if (k < 0 || (size_t)k >= n)
        return;
    if (r->mesh)
        snprintf(s + k, n - (size_t)k, " mesh-size=%d width=%.9g train-samples=%d test-samples=%d "
                 "pos-weight=%.9g mesh-file=%s", a->mesh_size, a->width, a->train_samples,
                 a->test_samples, a->pos_weight, a->mesh_file ? a->mesh_file : "-");
    else
        snprintf(s + k, n - (size_t)k, " data=%s limit-train=%d augment=%d pad=%d image=%d "
                 "channels=%d classes=%d", r->synthetic ? "synthetic" : "fashion-mnist",
                 a->limit_train, !a->no_augment, a->pad, r->image, r->channels, r->classes);
}

static void print_interval(run_t *r, int ep, int bi, const double *v, float lr, double dt,
                           double t_wait, double t_train, long step, double t_start)
{
    const cli_args_t *a = r->a;
    int nb = r->t.steps;
    double eta = ((double)nb * a->epochs - step) * (t_train / (step > 0 ? step : 1));
    if (r->mesh) {
        double N2 = (double)a->mesh_size * a->mesh_size;
        double prec = v[1] + v[2] > 0 ? v[1] / (v[1] + v[2]) : 0.0;
        double rec = v[1] + v[3] > 0 ? v[1] / (v[1] + v[3]) : 0.0;
        printf("epoch %d/%d step %d/%d loss %.4f prec %.3f rec %.3f lr %.4g img/s %.2f "
               "comm_wait %.1f%% eta %.0fs\n", ep + 1, a->epochs, bi, nb, v[0] / v[4], prec, rec,
               lr, v[4] / N2 / dt, t_train > 0 ? 100.0 * t_wait / t_train : 0.0, eta);
        if (r->mf)
            fprintf(r->mf, "train,%d,%ld,%.6f,%.6f,%.6f,%.6g,%.2f,%.2f\n", ep + 1, step,
                    v[0] / v[4], prec, rec, lr, v[4] / N2 / dt, loom_now() - t_start);
    } else {
        printf("epoch %d/%d step %d/%d loss %.4f acc %.2f%% lr %.4g img/s %.1f comm_wait %.1f%% "
               "eta %.0fs\n", ep + 1, a->epochs, bi, nb, v[0] / v[2], 100.0 * v[1] / v[2], lr,
               v[2] / dt, t_train > 0 ? 100.0 * t_wait / t_train : 0.0, eta);
        if (r->mf)
            fprintf(r->mf, "train,%d,%ld,%.6f,%.6f,%.6g,%.2f,%.2f\n", ep + 1, step, v[0] / v[2],
                    v[1] / v[2], lr, v[2] / dt, loom_now() - t_start);
    }
    fflush(stdout);
}

/* A fault for the resume tests: LOOM_TEST_KILL_AT=STEP[:RANK]. */
static void parse_kill(long *step, int *rank)
{
    const char *e = getenv("LOOM_TEST_KILL_AT");
    *step = -1;
    *rank = 0;
    if (e && sscanf(e, "%ld:%d", step, rank) < 1)
        *step = -1;
}

static int train_loop(run_t *r)
{
    const cli_args_t *a = r->a;
    int nb = r->t.steps, rank = r->w->rank, st;
    loom_ckpt_pos_t pos = {0};
    char config[1024];
    config_text(r, config, sizeof config);
    loom_ckpt_desc_t cd = {.dir = a->ckpt_dir, .flush_dir = a->flush_dir,
                           .flush_every = a->flush_every, .keep = a->ckpt_keep,
                           .async = !a->ckpt_sync, .comm = r->lay.world, .rank = rank,
                           .size = r->w->size, .model = a->model, .config = config, .dp = r->D,
                           .sh = a->sh, .sw = a->sw};
    if (a->resume) {
        st = loom_ckpt_resume(a->resume, &cd, r->m, r->opt, &pos, stderr);
        if (st == LOOM_ERR_MISMATCH) {
            if (rank == 0)
                fprintf(stderr, "loom train: %s\n", loom_last_error());
            return 2;
        }
        if (st < 0) {
            if (st == LOOM_ERR_IO) { /* no checkpoint: the same on every rank */
                if (rank == 0)
                    fprintf(stderr, "loom train: cannot resume: %s\n", loom_last_error());
                return 1;
            }
            return fail(r, "cannot resume");
        }
        *loom_model_rng(r->m) = pos.rng;
        if (rank == 0) {
            printf("# resumed from %s/step-%010ld: epoch %d, batch %d, step %ld\n", a->resume,
                   pos.step, pos.epoch + 1, pos.batch, pos.step);
            fflush(stdout);
        }
    }
    if (a->ckpt_dir && loom_ckpt_create(&r->ck, &cd) < 0)
        return fail(r, "cannot set up checkpoints");
    int every = a->ckpt_every > 0 ? a->ckpt_every : nb;
    if (rank == 0 && a->metrics) {
        /* a resumed run appends to the metrics of the run it continues */
        if (!(r->mf = fopen(a->metrics, a->resume ? "a" : "w"))) {
            loom_error(LOOM_ERR_IO, "cannot create metrics file %s: %s", a->metrics, strerror(errno));
            return fail(r, "metrics");
        }
        if (ftell(r->mf) == 0)
            fprintf(r->mf, r->mesh ? "kind,epoch,step,loss,precision,recall,lr,images_per_s,elapsed_s\n"
                                   : "kind,epoch,step,loss,accuracy,lr,images_per_s,elapsed_s\n");
    }
    long kill_step;
    int kill_rank;
    parse_kill(&kill_step, &kill_rank);
    loom_model_set_profile(r->m, a->profile);
    double t_train = 0.0, t_wait = 0.0, t_start = loom_now(), test[STATS] = {0};
    long images = 0, step = pos.step, steps_run = 0;
    for (int ep = pos.epoch; ep < a->epochs; ep++) {
        int first = ep == pos.epoch ? pos.batch : 0;
        if ((st = r->t.start_epoch(r, ep, first)) < 0)
            return fail(r, "data");
        double iv[STATS] = {0}, iv_t0 = loom_now();
        for (int bi = first; bi < nb; bi++) {
            double t0 = loom_now(), w0 = comm_wait(r);
            if ((st = r->t.forward_loss(r, bi, iv)) < 0)
                return fail(r, "forward");
            float lr = loom_optim_lr(r->opt);
            if ((st = train_step(r, r->batch)) < 0)
                return fail(r, "training step");
            t_train += loom_now() - t0;
            t_wait += comm_wait(r) - w0;
            images += (long)r->batch * r->D;
            step++;
            steps_run++;
            if ((bi + 1) % a->interval == 0 || bi + 1 == nb) {
                if ((st = sum_world(r, iv, STATS)) < 0)
                    return fail(r, "statistics");
                if (rank == 0)
                    print_interval(r, ep, bi + 1, iv, lr, loom_now() - iv_t0, t_wait, t_train, step,
                                   t_start);
                memset(iv, 0, sizeof iv);
                iv_t0 = loom_now();
            }
            if (r->ck && step % every == 0) {
                loom_ckpt_pos_t p = {.step = step, .epoch = ep, .batch = bi + 1,
                                     .rng = *loom_model_rng(r->m)};
                if (loom_ckpt_save(r->ck, r->m, r->opt, &p) < 0)
                    return fail(r, "checkpoint");
            }
            if (step == kill_step && rank == kill_rank) {
                fflush(stdout);
                raise(SIGKILL);
            }
        }
        memset(test, 0, sizeof test);
        double te0 = loom_now();
        if ((st = r->t.evaluate(r, test)) < 0)
            return fail(r, "evaluation");
        if (rank == 0) {
            double secs = loom_now() - te0;
            if (r->mesh) {
                double prec = test[1] + test[2] > 0 ? test[1] / (test[1] + test[2]) : 0.0;
                double rec = test[1] + test[3] > 0 ? test[1] / (test[1] + test[3]) : 0.0;
                printf("epoch %d/%d test_loss %.4f pixel_precision %.3f pixel_recall %.3f (eval "
                       "%.1fs, elapsed %.0fs)\n", ep + 1, a->epochs, test[4] > 0 ? test[0] / test[4] : 0,
                       prec, rec, secs, loom_now() - t_start);
                if (r->mf)
                    fprintf(r->mf, "test,%d,%ld,%.6f,%.6f,%.6f,%.6g,%.2f,%.2f\n", ep + 1, step,
                            test[4] > 0 ? test[0] / test[4] : 0, prec, rec,
                            (double)loom_optim_lr(r->opt), t_train > 0 ? images / t_train : 0.0,
                            loom_now() - t_start);
            } else {
                printf("epoch %d/%d test_loss %.4f test_accuracy %.2f%% (eval %.1fs, elapsed "
                       "%.0fs)\n", ep + 1, a->epochs, test[2] > 0 ? test[0] / test[2] : 0,
                       test[2] > 0 ? 100.0 * test[1] / test[2] : 0, secs, loom_now() - t_start);
                if (r->mf)
                    fprintf(r->mf, "test,%d,%ld,%.6f,%.6f,%.6g,%.2f,%.2f\n", ep + 1, step,
                            test[2] > 0 ? test[0] / test[2] : 0, test[2] > 0 ? test[1] / test[2] : 0,
                            (double)loom_optim_lr(r->opt), t_train > 0 ? images / t_train : 0.0,
                            loom_now() - t_start);
            }
            if (r->mf)
                fflush(r->mf);
            fflush(stdout);
        }
    }
    if (pos.epoch >= a->epochs && (st = r->t.evaluate(r, test)) < 0) /* resumed after the last step */
        return fail(r, "evaluation");
    if (r->ck && loom_ckpt_wait(r->ck) < 0)
        return fail(r, "checkpoint");
    if (rank == 0 && a->profile)
        loom_model_profile_print(r->m, stdout, (int)steps_run, r->batch);
    if (rank == 0 && a->save && loom_checkpoint_save(r->m, a->save) < 0)
        return fail(r, "cannot save weights");
    if (r->w->size > 1 && rank == 0) {
        printf("# allreduce algorithm per gradient bucket (weft_query_algo over %d ranks):\n",
               r->lay.world_size);
        loom_dp_print_algos(r->dp, stdout);
    }
    if (r->ck && rank == 0) {
        int saved;
        double cs, wsec;
        loom_ckpt_stats(r->ck, &saved, &cs, &wsec);
        printf("# checkpoints: %d to %s every %d steps (%s), training thread held %.2f ms per "
               "checkpoint, writer %.2f ms per checkpoint (rank 0)\n", saved, a->ckpt_dir, every,
               a->ckpt_sync ? "sync" : "async", saved ? 1e3 * cs / saved : 0.0,
               saved ? 1e3 * wsec / saved : 0.0);
    }
    double ips = t_train > 0 ? images / t_train : 0.0, share = t_train > 0 ? t_wait / t_train : 0.0;
    if (rank == 0) {
        if (r->mesh)
            printf("final: pixel_precision=%.4f pixel_recall=%.4f test_loss=%.4f images_per_s=%.2f "
                   "comm_wait_share=%.3f\n",
                   test[1] + test[2] > 0 ? test[1] / (test[1] + test[2]) : 0.0,
                   test[1] + test[3] > 0 ? test[1] / (test[1] + test[3]) : 0.0,
                   test[4] > 0 ? test[0] / test[4] : 0.0, ips, share);
        else
            printf("final: test_accuracy=%.4f test_loss=%.4f images_per_s=%.1f comm_wait_share=%.3f\n",
                   test[2] > 0 ? test[1] / test[2] : 0.0, test[2] > 0 ? test[0] / test[2] : 0.0, ips,
                   share);
        fflush(stdout);
    }
    if (r->mf) {
        FILE *f = r->mf;
        r->mf = NULL;
        if (fclose(f) != 0) {
            loom_error(LOOM_ERR_IO, "cannot write metrics file %s", a->metrics);
            return fail(r, "metrics");
        }
    }
    return 0;
}

static void teardown(run_t *r)
{
    if (r->mf)
        fclose(r->mf);
    loom_ckpt_destroy(r->ck);
    free(r->mask);
    loom_optim_destroy(r->opt);
    loom_dp_destroy(r->dp);
    loom_spatial_destroy(r->sp);
    loom_model_destroy(r->m);
    loom_loader_destroy(r->lt);
    loom_loader_destroy(r->ld);
    loom_dataset_free(&r->train);
    loom_dataset_free(&r->test);
    free(r->gx);
    free(r->gy);
    free(r->tr.x);
    free(r->tr.y);
    free(r->te.x);
    free(r->te.y);
    free(r->order);
    free(r->tgt);
    if (r->have_lay)
        loom_layout_destroy(&r->lay);
}

int cli_train(const cli_args_t *a, const cli_world_t *w)
{
    run_t r;
    memset(&r, 0, sizeof r);
    r.a = a;
    r.w = w;
    r.mesh = !strcmp(a->model, "mesh");
    r.synthetic = a->synthetic || !strcmp(a->data, "synthetic");
    r.batch = a->batch > 0 ? a->batch : r.mesh ? 4 : 128;
    r.threads = cli_threads(a);
    int rc = 1, S = a->sh * a->sw;
    if (!r.mesh && S > 1)
        return usage(&r, "--spatial splits the mesh model only (model '%s' is data parallel)",
                     a->model);
    if (!r.mesh && a->memory_probe)
        return usage(&r, "--memory-probe measures the mesh model only (got '%s')", a->model);
    if (!a->ckpt_dir && (a->ckpt_every || a->flush_dir || a->ckpt_sync))
        return usage(&r, "--ckpt-every, --ckpt-flush-dir and --ckpt-sync need --ckpt-dir%s", "");
    if (a->ckpt_dir && a->flush_dir && !strcmp(a->ckpt_dir, a->flush_dir))
        return usage(&r, "--ckpt-flush-dir must differ from --ckpt-dir (%s)", a->ckpt_dir);
    r.D = a->dp > 0 ? a->dp : (w->size % S == 0 ? w->size / S : 0);
    loom_set_threads(r.threads);
    if (loom_layout_create(&r.lay, MPI_COMM_WORLD, r.D, a->sh, a->sw) < 0) {
        /* every rank sees the same mismatch */
        if (w->rank == 0)
            fprintf(stderr, "loom train: %s\nRun 'loom train --help' for the options.\n",
                    loom_last_error());
        return 2;
    }
    r.have_lay = 1;
    int pre = 0;
    if (r.mesh) {
        int st = mesh_setup(&r, &pre);
        if (st != 0) {
            rc = st < 0 ? pre : st;
            goto out;
        }
    } else if ((rc = resnet_setup(&r)) != 0) {
        goto out;
    }
    rc = 1;
    int nb = r.t.steps;
    if (a->steps && a->steps < nb)
        nb = r.t.steps = a->steps;
    if (nb < 1) {
        if (w->rank == 0)
            fprintf(stderr, "loom train: fewer training samples than one global batch of %d\n",
                    r.batch * r.D);
        rc = 2;
        goto out;
    }
    if (a->load && loom_checkpoint_load(r.m, a->load) < 0) {
        rc = fail(&r, "cannot load weights");
        goto out;
    }
    if (setup_dp_optim(&r, (long)nb * a->epochs, nb) < 0) {
        rc = fail(&r, "setup");
        goto out;
    }
    if (w->rank == 0) {
        printf("# loom train: model %s, %s, %zu parameters, %.1f MFLOPs/sample; %d ranks = %d "
               "sample groups x spatial %dx%d; batch %d per group (%d global); %d steps/epoch, %d "
               "epochs; dp-mode %s, %d buckets of <= %g MiB; %d threads per rank\n",
               a->model, r.mesh ? "generated meshes" : r.synthetic ? "synthetic" : "fashion-mnist",
               loom_model_param_count(r.m), loom_model_flops(r.m) * 1e-6 * S, w->size, r.D, a->sh,
               a->sw, r.batch, r.batch * r.D, nb, a->epochs, a->dp_mode,
               loom_dp_num_buckets(r.dp), a->bucket_mb, r.threads);
        fflush(stdout);
    }
    rc = train_loop(&r);
out:
    teardown(&r);
    return rc;
}
