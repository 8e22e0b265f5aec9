/*
 * main.c - the `loom` command: train, eval, bench, summary.
 *
 * Bad arguments print a message and exit with status 2; run-time failures
 * (missing data, corrupt checkpoint) print loom_last_error() and exit 1.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h" /* EXIT_USAGE */
#include "loom.h"
#include "loom_par.h" /* parallel train: mpiexec -n P loom train --data-parallel D ... */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *usage_text =
    "Usage: loom COMMAND [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  train     train a model (Fashion-MNIST or synthetic data)\n"
    "  eval      evaluate saved weights on the test set\n"
    "  bench     training throughput on synthetic data (Iter #k: X img/sec)\n"
    "  summary   print a model's layers, output shapes, parameters and FLOPs\n"
    "  dp-step   under mpiexec: the data-parallel step with device-style compute,\n"
    "            overlap against blocking (loom dp-step --help)\n"
    "\n"
    "Common options:\n"
    "  --model NAME        resnet8|resnet20|resnet32|resnet(6k+2)|resnet18|resnet34|resnet50\n"
    "                      (default resnet20)\n"
    "  --batch N           batch size (default 128; bench 32)\n"
    "  --threads N         Loom's threads (OpenBLAS runs on 1), its single thread setting (default 2)\n"
    "  --seed N            seed of weights, shuffling, augmentation, dropout (default 1)\n"
    "  --data NAME         fashion-mnist (default) or synthetic\n"
    "  --data-dir DIR      IDX files (default " LOOM_FASHION_MNIST_DIR ")\n"
    "  --image N           synthetic image size (default 28; bench 224)\n"
    "  --channels N        synthetic input channels (default 1; bench 3)\n"
    "  --classes N         synthetic class count (default 10; bench 1000)\n"
    "  --profile           print time per layer type at the end\n"
    "\n"
    "train options:\n"
    "  --epochs N          (default 10)\n"
    "  --lr X              base learning rate (default 0.1)\n"
    "  --optim sgd|adam    (default sgd)\n"
    "  --momentum X        (default 0.9)   --nesterov   Nesterov momentum\n"
    "  --wd X              weight decay on conv/fc weights (default 5e-4)\n"
    "  --schedule S        const|step|cosine (default cosine)\n"
    "  --step-epochs N     step schedule: epochs between decays (default 30)\n"
    "  --gamma X           step schedule factor (default 0.1)\n"
    "  --warmup-epochs X   linear warm-up (default 0)\n"
    "  --limit-train N     train on the first N samples\n"
    "  --limit-test N      evaluate on the first N test samples\n"
    "  --no-augment        no random crop and flip\n"
    "  --pad N             random-crop padding (default 2)\n"
    "  --interval N        steps between progress lines (default 50)\n"
    "  --metrics FILE      write a metrics CSV\n"
    "  --save FILE         save weights at the end   --load FILE  start from weights\n"
    "\n"
    "eval options: --load FILE (required), --model, --batch, --limit-test\n"
    "bench options: --iters N (default 10), --warmup N (default 2),\n"
    "               --batches-per-iter N (default 1), --synthetic (the only data of bench)\n"
    "\n"
    "train ends with one line: final: test_accuracy=A test_loss=L images_per_s=R\n";

typedef struct {
    const char *cmd, *model, *data, *data_dir, *metrics, *save, *load, *optim, *schedule;
    int batch, threads, image, channels, classes, epochs, limit_train, limit_test, augment, pad;
    int interval, iters, warmup, batches_per_iter, nesterov, profile;
    long seed;
    double lr, momentum, wd, gamma, warmup_epochs;
    int step_epochs;
    int set_batch, set_image, set_channels, set_classes;
} args_t;

static int usage_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "loom: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nRun 'loom --help' for usage.\n");
    return EXIT_USAGE;
}

static int parse_int(const char *opt, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "loom: option %s needs an integer in %ld..%ld, got '%s'\n"
                        "Run 'loom --help' for usage.\n", opt, lo, hi, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "loom: option %s needs a number in [%g, %g], got '%s'\n"
                        "Run 'loom --help' for usage.\n", opt, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, args_t *a)
{
    memset(a, 0, sizeof *a);
    a->cmd = argv[1];
    a->model = "resnet20";
    a->data = "fashion-mnist";
    a->optim = "sgd";
    a->schedule = "cosine";
    a->batch = 128;
    a->threads = 2;
    a->image = 28;
    a->channels = 1;
    a->classes = 10;
    a->epochs = 10;
    a->augment = 1;
    a->pad = 2;
    a->interval = 50;
    a->iters = 10;
    a->warmup = 2;
    a->batches_per_iter = 1;
    a->seed = 1;
    a->lr = 0.1;
    a->momentum = 0.9;
    a->wd = 5e-4;
    a->gamma = 0.1;
    a->step_epochs = 30;
    for (int i = 2; i < argc; i++) {
        char key[64];
        const char *val = NULL, *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            usage_error("unexpected argument '%s'%s", arg, "");
            return -1;
        }
        const char *eq = strchr(arg, '=');
        size_t kl = eq ? (size_t)(eq - arg) : strlen(arg);
        if (kl >= sizeof key) {
            usage_error("unknown option '%s'%s", arg, "");
            return -1;
        }
        memcpy(key, arg, kl);
        key[kl] = 0;
        /* flags */
        if (!strcmp(key, "--nesterov")) { a->nesterov = 1; continue; }
        if (!strcmp(key, "--no-augment")) { a->augment = 0; continue; }
        if (!strcmp(key, "--profile")) { a->profile = 1; continue; }
        if (!strcmp(key, "--synthetic")) { a->data = "synthetic"; continue; }
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            usage_error("option %s needs a value%s", key, "");
            return -1;
        }
        int r = 0;
        double d;
        if (!strcmp(key, "--model")) a->model = val;
        else if (!strcmp(key, "--data")) a->data = val;
        else if (!strcmp(key, "--data-dir")) a->data_dir = val;
        else if (!strcmp(key, "--metrics")) a->metrics = val;
        else if (!strcmp(key, "--save")) a->save = val;
        else if (!strcmp(key, "--load")) a->load = val;
        else if (!strcmp(key, "--optim")) a->optim = val;
        else if (!strcmp(key, "--schedule")) a->schedule = val;
        else if (!strcmp(key, "--batch")) { r = parse_int(key, val, 1, 65536, &a->batch); a->set_batch = 1; }
        else if (!strcmp(key, "--threads")) r = parse_int(key, val, 1, 256, &a->threads);
        else if (!strcmp(key, "--image")) { r = parse_int(key, val, 1, 4096, &a->image); a->set_image = 1; }
        else if (!strcmp(key, "--channels")) { r = parse_int(key, val, 1, 4096, &a->channels); a->set_channels = 1; }
        else if (!strcmp(key, "--classes")) { r = parse_int(key, val, 1, 1000000, &a->classes); a->set_classes = 1; }
        else if (!strcmp(key, "--epochs")) r = parse_int(key, val, 1, 100000, &a->epochs);
        else if (!strcmp(key, "--limit-train")) r = parse_int(key, val, 1, 1 << 30, &a->limit_train);
        else if (!strcmp(key, "--limit-test")) r = parse_int(key, val, 1, 1 << 30, &a->limit_test);
        else if (!strcmp(key, "--pad")) r = parse_int(key, val, 0, 64, &a->pad);
        else if (!strcmp(key, "--interval")) r = parse_int(key, val, 1, 1 << 30, &a->interval);
        else if (!strcmp(key, "--iters")) r = parse_int(key, val, 1, 1000000, &a->iters);
        else if (!strcmp(key, "--warmup")) r = parse_int(key, val, 0, 1000000, &a->warmup);
        else if (!strcmp(key, "--batches-per-iter")) r = parse_int(key, val, 1, 1000000, &a->batches_per_iter);
        else if (!strcmp(key, "--step-epochs")) r = parse_int(key, val, 1, 1000000, &a->step_epochs);
        else if (!strcmp(key, "--seed")) { r = parse_num(key, val, 0, 9.007199254740992e15, &d); a->seed = (long)d; }
        else if (!strcmp(key, "--lr")) r = parse_num(key, val, 0, 100, &a->lr);
        else if (!strcmp(key, "--momentum")) r = parse_num(key, val, 0, 0.999999, &a->momentum);
        else if (!strcmp(key, "--wd")) r = parse_num(key, val, 0, 1, &a->wd);
        else if (!strcmp(key, "--gamma")) r = parse_num(key, val, 0, 1, &a->gamma);
        else if (!strcmp(key, "--warmup-epochs")) r = parse_num(key, val, 0, 100000, &a->warmup_epochs);
        else {
            usage_error("unknown option '%s'%s", key, "");
            return -1;
        }
        if (r < 0)
            return -1;
    }
    if (strcmp(a->data, "fashion-mnist") && strcmp(a->data, "synthetic")) {
        usage_error("unknown data set '%s' (fashion-mnist or synthetic)%s", a->data, "");
        return -1;
    }
    if (strcmp(a->optim, "sgd") && strcmp(a->optim, "adam")) {
        usage_error("unknown optimiser '%s' (sgd or adam)%s", a->optim, "");
        return -1;
    }
    if (strcmp(a->schedule, "const") && strcmp(a->schedule, "step") && strcmp(a->schedule, "cosine")) {
        usage_error("unknown schedule '%s' (const, step or cosine)%s", a->schedule, "");
        return -1;
    }
    return 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "loom: %s: %s\n", what, loom_last_error());
    return 1;
}

/* Mean loss and correct count over a data set (inference statistics). */
static int evaluate(loom_model_t *m, const loom_dataset_t *ds, int limit, int batch, double *loss,
                    double *acc, double *secs)
{
    loom_loader_desc_t ld = {.ds = ds, .batch = batch, .limit = limit, .mean = 0.2860f,
                             .std = 0.3530f, .seed = 0};
    loom_loader_t *l = NULL;
    int st = loom_loader_create(&l, &ld);
    if (st < 0)
        return st;
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
    loom_shape_t os = loom_model_output_shape(m);
    double tl = 0.0, t0 = loom_now();
    long ok = 0, seen = 0;
    if (!labels) {
        loom_loader_destroy(l);
        return loom_error(LOOM_ERR_NOMEM, "out of memory");
    }
    loom_loader_start_epoch(l, 0);
    int n;
    while ((n = loom_loader_next(l, loom_model_input(m), labels)) > 0) {
        if ((st = loom_model_forward(m, n, 0)) < 0)
            break;
        int c;
        tl += (double)loom_softmax_xent(n, os.c, loom_model_output(m), labels, NULL, &c) * n;
        ok += c;
        seen += n;
    }
    *secs = loom_now() - t0;
    free(labels);
    loom_loader_destroy(l);
    if (st < 0)
        return st;
    if (n < 0)
        return n;
    *loss = seen ? tl / seen : 0.0;
    *acc = seen ? (double)ok / seen : 0.0;
    return LOOM_OK;
}

static int cmd_train(const args_t *a)
{
    int rc = 1, st;
    loom_dataset_t train = {0}, test = {0};
    int synthetic = !strcmp(a->data, "synthetic");
    loom_model_t *m = NULL;
    loom_loader_t *ld = NULL;
    loom_optim_t *opt = NULL;
    unsigned char *mask = NULL;
    int32_t *labels = NULL;
    FILE *mf = NULL;
    int channels = synthetic ? a->channels : 1, image = synthetic ? a->image : 28;
    int classes = synthetic ? a->classes : 10;

    loom_set_threads(a->threads);
    if (!synthetic) {
        if (loom_fashion_mnist_load(&train, a->data_dir, 1) < 0 ||
            loom_fashion_mnist_load(&test, a->data_dir, 0) < 0) {
            rc = fail("cannot load the data set");
            goto out;
        }
    }
    if (loom_resnet_create(&m, a->model, (loom_shape_t){a->batch, channels, image, image}, classes,
                           (uint64_t)a->seed) < 0) {
        rc = fail("cannot build the model");
        goto out;
    }
    if (a->load && loom_checkpoint_load(m, a->load) < 0) {
        rc = fail("cannot load weights");
        goto out;
    }
    loom_loader_desc_t dd = {.ds = synthetic ? NULL : &train, .batch = a->batch,
                             .limit = a->limit_train, .shuffle = 1, .augment = a->augment,
                             .pad = a->pad, .mean = 0.2860f, .std = 0.3530f,
                             .seed = (uint64_t)a->seed + 17, .drop_last = 1,
                             .synth = {a->batch, channels, image, image}, .synth_classes = classes,
                             .synth_batches = a->limit_train ? (a->limit_train + a->batch - 1) / a->batch : 20};
    if (loom_loader_create(&ld, &dd) < 0) {
        rc = fail("cannot create the data loader");
        goto out;
    }
    int nb = loom_loader_batches(ld);
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.kind = !strcmp(a->optim, "adam") ? LOOM_ADAM : LOOM_SGD;
    od.lr = (float)a->lr;
    od.momentum = (float)a->momentum;
    od.weight_decay = (float)a->wd;
    od.nesterov = a->nesterov;
    od.sched = !strcmp(a->schedule, "cosine") ? LOOM_SCHED_COSINE
               : !strcmp(a->schedule, "step") ? LOOM_SCHED_STEP : LOOM_SCHED_CONST;
    od.total_steps = (long)nb * a->epochs;
    od.warmup_steps = (long)(a->warmup_epochs * nb);
    od.step_size = (long)a->step_epochs * nb;
    od.gamma = (float)a->gamma;
    if (loom_optim_create(&opt, &od, loom_model_param_count(m)) < 0 ||
        !(mask = loom_model_decay_mask(m))) {
        rc = fail("cannot create the optimiser");
        goto out;
    }
    if (!(labels = malloc(sizeof(int32_t) * (size_t)a->batch))) {
        rc = fail("out of memory");
        goto out;
    }
    if (a->metrics) {
        if (!(mf = fopen(a->metrics, "w"))) {
            fprintf(stderr, "loom: cannot create metrics file %s: %s\n", a->metrics, strerror(errno));
            goto out;
        }
        fprintf(mf, "kind,epoch,step,loss,accuracy,lr,images_per_s,elapsed_s\n");
    }
    loom_model_set_profile(m, a->profile);
    printf("# loom train: model %s, %s, %d train batches of %d per epoch, %d epochs, %d threads, "
           "%zu parameters, %.1f MFLOPs/sample\n", a->model, synthetic ? "synthetic" : "fashion-mnist",
           nb, a->batch, a->epochs, a->threads, loom_model_param_count(m),
           loom_model_flops(m) * 1e-6);
    fflush(stdout);

    loom_shape_t os = loom_model_output_shape(m);
    double t_train = 0.0, t_start = loom_now();
    long images = 0, step = 0, total_steps = (long)nb * a->epochs;
    double test_loss = 0.0, test_acc = 0.0;
    for (int ep = 0; ep < a->epochs; ep++) {
        double iv_loss = 0.0, iv_t0 = loom_now();
        long iv_ok = 0, iv_n = 0;
        int n, bi = 0;
        loom_loader_start_epoch(ld, ep);
        for (;;) {
            double t0 = loom_now();
            n = loom_loader_next(ld, loom_model_input(m), labels);
            if (n <= 0)
                break;
            int correct;
            if ((st = loom_model_forward(m, n, 1)) < 0) {
                rc = fail("forward");
                goto out;
            }
            float loss = loom_softmax_xent(n, os.c, loom_model_output(m), labels,
                                           loom_model_doutput(m), &correct);
            if (!isfinite(loss)) {
                fprintf(stderr, "loom: loss is %f at step %ld: diverged (lower --lr?)\n", loss, step);
                goto out;
            }
            loom_model_zero_grad(m);
            if ((st = loom_model_backward(m, n)) < 0) {
                rc = fail("backward");
                goto out;
            }
            float lr = loom_optim_lr(opt);
            loom_optim_step(opt, loom_model_params(m), loom_model_grads(m), mask);
            t_train += loom_now() - t0;
            images += n;
            step++;
            bi++;
            iv_loss += (double)loss * n;
            iv_ok += correct;
            iv_n += n;
            if (bi % a->interval == 0 || bi == nb) {
                double ips = iv_n / (loom_now() - iv_t0);
                double eta = (total_steps - step) * (t_train / step);
                printf("epoch %d/%d step %d/%d loss %.4f acc %.2f%% lr %.4g img/s %.1f eta %.0fs\n",
                       ep + 1, a->epochs, bi, nb, iv_loss / iv_n, 100.0 * iv_ok / iv_n, lr, ips, eta);
                fflush(stdout);
                if (mf)
                    fprintf(mf, "train,%d,%ld,%.6f,%.6f,%.6g,%.2f,%.2f\n", ep + 1, step,
                            iv_loss / iv_n, (double)iv_ok / iv_n, lr, ips, loom_now() - t_start);
                iv_loss = 0.0;
                iv_ok = iv_n = 0;
                iv_t0 = loom_now();
            }
        }
        if (n < 0) {
            rc = fail("data loader");
            goto out;
        }
        double secs = 0.0;
        {
            if (synthetic) {
                /* the synthetic batch again, with inference statistics */
                double t0 = loom_now();
                int c;
                loom_loader_start_epoch(ld, 0);
                int k = loom_loader_next(ld, loom_model_input(m), labels);
                if (k <= 0 || loom_model_forward(m, k, 0) < 0) {
                    rc = fail("evaluation");
                    goto out;
                }
                test_loss = loom_softmax_xent(k, os.c, loom_model_output(m), labels, NULL, &c);
                test_acc = (double)c / k;
                secs = loom_now() - t0;
            } else if (evaluate(m, &test, a->limit_test, a->batch, &test_loss, &test_acc, &secs) < 0) {
                rc = fail("evaluation");
                goto out;
            }
            printf("epoch %d/%d test_loss %.4f test_accuracy %.2f%% (eval %.1fs, elapsed %.0fs)\n",
                   ep + 1, a->epochs, test_loss, 100.0 * test_acc, secs, loom_now() - t_start);
            fflush(stdout);
            if (mf) {
                fprintf(mf, "test,%d,%ld,%.6f,%.6f,%.6g,%.2f,%.2f\n", ep + 1, step, test_loss,
                        test_acc, loom_optim_lr(opt), images / t_train, loom_now() - t_start);
                fflush(mf);
            }
        }
    }
    if (a->profile)
        loom_model_profile_print(m, stdout, (int)step, a->batch);
    if (a->save && loom_checkpoint_save(m, a->save) < 0) {
        rc = fail("cannot save weights");
        goto out;
    }
    printf("final: test_accuracy=%.4f test_loss=%.4f images_per_s=%.1f\n", test_acc, test_loss,
           t_train > 0 ? images / t_train : 0.0);
    rc = 0;
out:
    if (mf && fclose(mf) != 0 && rc == 0) {
        fprintf(stderr, "loom: cannot write metrics file %s\n", a->metrics);
        rc = 1;
    }
    free(labels);
    free(mask);
    loom_optim_destroy(opt);
    loom_loader_destroy(ld);
    loom_model_destroy(m);
    loom_dataset_free(&train);
    loom_dataset_free(&test);
    return rc;
}

static int cmd_eval(const args_t *a)
{
    int rc = 1;
    loom_dataset_t test = {0};
    loom_model_t *m = NULL;
    double loss, acc, secs;
    if (!a->load) {
        usage_error("eval needs --load FILE%s%s", "", "");
        return EXIT_USAGE;
    }
    loom_set_threads(a->threads);
    if (loom_fashion_mnist_load(&test, a->data_dir, 0) < 0) {
        rc = fail("cannot load the data set");
        goto out;
    }
    if (loom_resnet_create(&m, a->model, (loom_shape_t){a->batch, 1, 28, 28}, 10, 1) < 0) {
        rc = fail("cannot build the model");
        goto out;
    }
    if (loom_checkpoint_load(m, a->load) < 0) {
        rc = fail("cannot load weights");
        goto out;
    }
    if (evaluate(m, &test, a->limit_test, a->batch, &loss, &acc, &secs) < 0) {
        rc = fail("evaluation");
        goto out;
    }
    printf("eval: test_accuracy=%.4f test_loss=%.4f images_per_s=%.1f\n", acc, loss,
           (a->limit_test && a->limit_test < test.count ? a->limit_test : test.count) / secs);
    rc = 0;
out:
    loom_model_destroy(m);
    loom_dataset_free(&test);
    return rc;
}

static int cmd_bench(const args_t *a)
{
    int rc = 1;
    loom_model_t *m = NULL;
    loom_optim_t *opt = NULL;
    loom_loader_t *ld = NULL;
    int32_t *labels = NULL;
    double *rates = NULL;
    int batch = a->set_batch ? a->batch : 32, image = a->set_image ? a->image : 224;
    int channels = a->set_channels ? a->channels : 3, classes = a->set_classes ? a->classes : 1000;
    if (strcmp(a->data, "synthetic") != 0) {
        usage_error("bench runs on synthetic data only: add --synthetic%s%s", "", "");
        return EXIT_USAGE;
    }
    loom_set_threads(a->threads);
    if (loom_resnet_create(&m, a->model, (loom_shape_t){batch, channels, image, image}, classes,
                           (uint64_t)a->seed) < 0) {
        rc = fail("cannot build the model");
        goto out;
    }
    loom_loader_desc_t dd = {.batch = batch, .synth = {batch, channels, image, image},
                             .synth_classes = classes, .synth_batches = 1 << 30,
                             .seed = (uint64_t)a->seed};
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.lr = 0.01f;
    if (loom_loader_create(&ld, &dd) < 0 ||
        loom_optim_create(&opt, &od, loom_model_param_count(m)) < 0) {
        rc = fail("setup");
        goto out;
    }
    labels = malloc(sizeof(int32_t) * (size_t)batch);
    rates = calloc((size_t)a->iters, sizeof(double));
    if (!labels || !rates) {
        fprintf(stderr, "loom: out of memory\n");
        goto out;
    }
    printf("Model: %s\nBatch size: %d\nImage: %dx%dx%d\nThreads: %d\nFLOPs per sample (fwd): %.3f G\n",
           a->model, batch, channels, image, image, a->threads, loom_model_flops(m) * 1e-9);
    loom_loader_start_epoch(ld, 0);
    loom_shape_t os = loom_model_output_shape(m);
    for (int it = -a->warmup; it < a->iters; it++) {
        if (it == 0 && a->profile) {
            loom_model_profile_reset(m);
            loom_model_set_profile(m, 1);
        }
        double t0 = loom_now();
        for (int b = 0; b < a->batches_per_iter; b++) {
            int n = loom_loader_next(ld, loom_model_input(m), labels);
            if (n <= 0 || loom_model_forward(m, n, 1) < 0) {
                rc = fail("forward");
                goto out;
            }
            loom_softmax_xent(n, os.c, loom_model_output(m), labels, loom_model_doutput(m), NULL);
            loom_model_zero_grad(m);
            if (loom_model_backward(m, n) < 0) {
                rc = fail("backward");
                goto out;
            }
            loom_optim_step(opt, loom_model_params(m), loom_model_grads(m), NULL);
        }
        double r = (double)batch * a->batches_per_iter / (loom_now() - t0);
        if (it < 0) {
            printf("Warmup #%d: %.1f img/sec\n", it + a->warmup, r);
        } else {
            rates[it] = r;
            printf("Iter #%d: %.1f img/sec\n", it, r);
        }
        fflush(stdout);
    }
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < a->iters; i++)
        mean += rates[i] / a->iters;
    for (int i = 0; i < a->iters; i++)
        var += (rates[i] - mean) * (rates[i] - mean) / (a->iters > 1 ? a->iters - 1 : 1);
    printf("Img/sec: %.1f +- %.1f\n", mean, sqrt(var));
    if (a->profile)
        loom_model_profile_print(m, stdout, a->iters * a->batches_per_iter, batch);
    rc = 0;
out:
    free(rates);
    free(labels);
    loom_loader_destroy(ld);
    loom_optim_destroy(opt);
    loom_model_destroy(m);
    return rc;
}

static int cmd_summary(const args_t *a)
{
    loom_model_t *m = NULL;
    int batch = a->set_batch ? a->batch : 1;
    if (loom_resnet_create(&m, a->model, (loom_shape_t){batch, a->channels, a->image, a->image},
                           a->classes, 1) < 0)
        return fail("cannot build the model");
    loom_model_summary(m, stdout);
    loom_model_destroy(m);
    return 0;
}

int main(int argc, char **argv)
{
    args_t a;
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("loom %d.%d\n", LOOM_VERSION_MAJOR, LOOM_VERSION_MINOR);
        return 0;
    }
    if (loom_par_wanted(argc, argv))
        return loom_par_main(argc, argv);
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
    if (parse_args(argc, argv, &a) < 0)
        return EXIT_USAGE;
    if (!strcmp(a.cmd, "train"))
        return cmd_train(&a);
    if (!strcmp(a.cmd, "eval"))
        return cmd_eval(&a);
    if (!strcmp(a.cmd, "bench"))
        return cmd_bench(&a);
    if (!strcmp(a.cmd, "summary"))
        return cmd_summary(&a);
    return usage_error("unknown command '%s'%s", a.cmd, "");
}
