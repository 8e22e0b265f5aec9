/*
 * commands.c - `loom eval`, `loom bench`, `loom summary`.
 *
 * eval and bench run on every rank of the job: eval splits the test
 * batches over the ranks and sums the statistics; bench times data-parallel
 * training steps (the gradients all-reduced as in train) and prints, as
 * Horovod's synthetic benchmark does, one "Iter #k: X img/sec per rank"
 * line per iteration, then the per-rank mean and the total over the ranks,
 * each +- 1.96 standard deviations.  Rank 0 prints.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include "loom_mesh.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_eval(const cli_args_t *a, const cli_world_t *w)
{
    int rc = 1, batch = a->batch > 0 ? a->batch : 128;
    loom_dataset_t test = {0};
    loom_model_t *m = NULL;
    loom_loader_t *l = NULL;
    int32_t *labels = NULL;
    weft_comm_t comm = NULL;
    if (!a->load) {
        if (w->rank == 0)
            cli_usage_error("loom eval", stderr, "needs --load FILE");
        return 2;
    }
    if (!strncmp(a->model, "mesh", 4)) {
        if (w->rank == 0)
            cli_usage_error("loom eval", stderr, "evaluates ResNets on Fashion-MNIST (the mesh "
                            "model's test metrics are part of loom train)");
        return 2;
    }
    loom_set_threads(cli_threads(a));
    int ws = weft_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (ws != WEFT_SUCCESS) {
        loom_weft_error(ws, "weft_comm_create");
        return cli_fail(w, "setup");
    }
    if (loom_fashion_mnist_load(&test, a->data_dir, 0) < 0) {
        rc = cli_fail(w, "cannot load the data set");
        goto out;
    }
    if (loom_resnet_create(&m, a->model, (loom_shape_t){batch, 1, 28, 28}, 10, 1) < 0) {
        rc = cli_fail(w, "cannot build the model");
        goto out;
    }
    if (loom_checkpoint_load(m, a->load) < 0) {
        rc = cli_fail(w, "cannot load weights");
        goto out;
    }
    loom_loader_desc_t ld = {.ds = &test, .batch = batch, .limit = a->limit_test, .mean = 0.2860f,
                             .std = 0.3530f};
    if (loom_loader_create(&l, &ld) < 0 || !(labels = malloc(sizeof(int32_t) * (size_t)batch))) {
        rc = cli_fail(w, "setup");
        goto out;
    }
    loom_shape_t os = loom_model_output_shape(m);
    double v[3] = {0, 0, 0}, t0 = loom_now();
    int n, k = 0;
    loom_loader_start_epoch(l, 0);
    while ((n = loom_loader_next(l, loom_model_input(m), labels)) > 0) {
        if (k++ % w->size != w->rank)
            continue;
        if (loom_model_forward(m, n, 0) < 0) {
            rc = cli_fail(w, "evaluation");
            goto out;
        }
        int c;
        v[0] += (double)loom_softmax_xent(n, os.c, loom_model_output(m), labels, NULL, &c) * n;
        v[1] += c;
        v[2] += n;
    }
    if (n < 0) {
        rc = cli_fail(w, "data loader");
        goto out;
    }
    if ((ws = weft_allreduce(WEFT_IN_PLACE, v, 3, WEFT_FLOAT64, WEFT_SUM, comm)) != WEFT_SUCCESS) {
        loom_weft_error(ws, "weft_allreduce");
        rc = cli_fail(w, "evaluation");
        goto out;
    }
    double secs = loom_now() - t0;
    if (w->rank == 0)
        printf("eval: test_accuracy=%.4f test_loss=%.4f images_per_s=%.1f\n",
               v[2] > 0 ? v[1] / v[2] : 0.0, v[2] > 0 ? v[0] / v[2] : 0.0, v[2] / secs);
    rc = 0;
out:
    free(labels);
    loom_loader_destroy(l);
    loom_model_destroy(m);
    loom_dataset_free(&test);
    if (comm)
        weft_comm_destroy(comm);
    return rc;
}

int cli_bench(const cli_args_t *a, const cli_world_t *w)
{
    int rc = 1, ws;
    loom_model_t *m = NULL;
    loom_optim_t *opt = NULL;
    loom_loader_t *ld = NULL;
    loom_dp_t *dp = NULL;
    weft_comm_t comm = NULL;
    int32_t *labels = NULL;
    double *rates = NULL;
    int batch = a->batch > 0 ? a->batch : 32, image = a->image > 0 ? a->image : 224;
    int channels = a->channels > 0 ? a->channels : 3, classes = a->classes > 0 ? a->classes : 1000;
    int threads = cli_threads(a);
    if (!a->synthetic) {
        if (w->rank == 0)
            cli_usage_error("loom bench", stderr, "runs on synthetic data only: add --synthetic");
        return 2;
    }
    if (a->dp > 0 && a->dp != w->size) {
        if (w->rank == 0)
            cli_usage_error("loom bench", stderr, "--data-parallel %d: bench is data parallel over "
                            "all %d ranks", a->dp, w->size);
        return 2;
    }
    loom_set_threads(threads);
    if ((ws = weft_comm_create(MPI_COMM_WORLD, NULL, &comm)) != WEFT_SUCCESS) {
        loom_weft_error(ws, "weft_comm_create");
        return cli_fail(w, "setup");
    }
    if (loom_resnet_create(&m, a->model, (loom_shape_t){batch, channels, image, image}, classes,
                           (uint64_t)a->seed) < 0) {
        rc = cli_fail(w, "cannot build the model");
        goto out;
    }
    loom_loader_desc_t dd = {.batch = batch, .synth = {batch, channels, image, image},
                             .synth_classes = classes, .synth_batches = 1 << 30,
                             .seed = (uint64_t)a->seed + (uint64_t)w->rank};
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.lr = 0.01f;
    loom_dp_desc_t pd = LOOM_DP_DESC_INIT;
    pd.comm = comm;
    pd.mode = !strcmp(a->dp_mode, "blocking") ? LOOM_DP_BLOCKING : LOOM_DP_OVERLAP;
    pd.bucket_bytes = (size_t)(a->bucket_mb * 1048576.0);
    if (loom_loader_create(&ld, &dd) < 0 ||
        loom_optim_create(&opt, &od, loom_model_param_count(m)) < 0 ||
        loom_dp_create(&dp, m, &pd) < 0 || loom_dp_broadcast(dp, 0) < 0) {
        rc = cli_fail(w, "setup");
        goto out;
    }
    labels = malloc(sizeof(int32_t) * (size_t)batch);
    rates = calloc((size_t)a->iters, sizeof(double));
    if (!labels || !rates) {
        loom_error(LOOM_ERR_NOMEM, "out of memory");
        rc = cli_fail(w, "setup");
        goto out;
    }
    if (w->rank == 0) {
        printf("Model: %s\nBatch size: %d\nImage: %dx%dx%d\nThreads: %d\nNumber of ranks: %d\n"
               "FLOPs per sample (fwd): %.3f G\n", a->model, batch, channels, image, image, threads,
               w->size, loom_model_flops(m) * 1e-9);
        printf("Running warmup...\n");
        fflush(stdout);
    }
    loom_loader_start_epoch(ld, 0);
    loom_shape_t os = loom_model_output_shape(m);
    for (int it = -a->warmup; it < a->iters; it++) {
        if (it == 0) {
            if (a->profile) {
                loom_model_profile_reset(m);
                loom_model_set_profile(m, 1);
            }
            if (w->rank == 0) {
                printf("Running benchmark...\n");
                fflush(stdout);
            }
        }
        double t0 = loom_now();
        for (int b = 0; b < a->batches_per_iter; b++) {
            int n = loom_loader_next(ld, loom_model_input(m), labels);
            if (n <= 0 || loom_model_forward(m, n, 1) < 0) {
                rc = cli_fail(w, "forward");
                goto out;
            }
            loom_softmax_xent(n, os.c, loom_model_output(m), labels, loom_model_doutput(m), NULL);
            loom_model_zero_grad(m);
            if (loom_dp_begin(dp) < 0 || loom_model_backward(m, n) < 0 || loom_dp_finish(dp) < 0) {
                rc = cli_fail(w, "backward");
                goto out;
            }
            loom_optim_step(opt, loom_model_params(m), loom_model_grads(m), NULL);
        }
        /* an iteration lasts as long as its slowest rank */
        double dt = loom_now() - t0;
        if ((ws = weft_allreduce(WEFT_IN_PLACE, &dt, 1, WEFT_FLOAT64, WEFT_MAX, comm)) !=
            WEFT_SUCCESS) {
            loom_weft_error(ws, "weft_allreduce");
            rc = cli_fail(w, "timing");
            goto out;
        }
        double r = (double)batch * a->batches_per_iter / dt;
        if (it >= 0) {
            rates[it] = r;
            if (w->rank == 0)
                printf("Iter #%d: %.1f img/sec per rank\n", it, r);
        }
        if (w->rank == 0)
            fflush(stdout);
    }
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < a->iters; i++)
        mean += rates[i] / a->iters;
    for (int i = 0; i < a->iters; i++)
        var += (rates[i] - mean) * (rates[i] - mean) / a->iters;
    double conf = 1.96 * sqrt(var);
    if (w->rank == 0) {
        printf("Img/sec per rank: %.1f +-%.1f\n", mean, conf);
        printf("Total img/sec on %d rank%s: %.1f +-%.1f\n", w->size, w->size > 1 ? "s" : "",
               mean * w->size, conf * w->size);
        if (a->profile)
            loom_model_profile_print(m, stdout, a->iters * a->batches_per_iter, batch);
    }
    rc = 0;
out:
    free(rates);
    free(labels);
    loom_dp_destroy(dp);
    loom_loader_destroy(ld);
    loom_optim_destroy(opt);
    loom_model_destroy(m);
    if (comm)
        weft_comm_destroy(comm);
    return rc;
}

int cli_summary(const cli_args_t *a)
{
    loom_model_t *m = NULL;
    int batch = a->batch > 0 ? a->batch : 1, st;
    if (!strcmp(a->model, "mesh"))
        st = loom_mesh_model_create(&m, (loom_shape_t){batch, LOOM_MESH_CHANNELS, a->mesh_size,
                                                       a->mesh_size}, (float)a->width, 1);
    else
        st = loom_resnet_create(&m, a->model, (loom_shape_t){batch, a->channels > 0 ? a->channels : 1,
                                                             a->image > 0 ? a->image : 28,
                                                             a->image > 0 ? a->image : 28},
                                a->classes > 0 ? a->classes : 10, 1);
    if (st < 0) {
        fprintf(stderr, "loom summary: cannot build the model: %s\n", loom_last_error());
        return 1;
    }
    loom_model_summary(m, stdout);
    loom_model_destroy(m);
    return 0;
}
