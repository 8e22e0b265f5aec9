/*
 * main.c - the `loom` command: train, eval, bench, summary.
 *
 * One option table (below) for every subcommand and every rank count: `loom
 * train` on one process is the N = 1 case of `mpiexec -n N loom train`, which
 * is data parallel by default (--spatial HxW splits each sample over H x W
 * ranks for the mesh model).  train, eval and bench run on Weft (weft_init
 * initialises MPI, as a singleton without mpiexec); rank 0 alone prints and
 * writes files.  Exit status: 0, 1 run-time failure, 2 bad command line
 * (the message names the option).
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define F(x) offsetof(cli_args_t, x)
#define T CMD_TRAIN
#define E CMD_EVAL
#define B CMD_BENCH
#define S CMD_SUMMARY
#define ALL (T | E | B | S)
#define G_COMMON "Common options"
#define G_TRAIN "Training"
#define G_PAR "Parallelism (mpiexec -n P loom ...: P = D * H * W)"
#define G_MESH "Mesh model (--model mesh)"
#define G_CKPT "Checkpoints"
#define G_BENCH "Benchmark"
#define MODELS "resnet8|resnet20|resnet32|resnet(6k+2)|resnet18|resnet34|resnet50|mesh"

const cli_opt_t loom_cli_options[] = {
    {"model", CLI_STR, F(model), 0, 0, 0, NULL, ALL, "NAME", MODELS " (default resnet20)", G_COMMON},
    {"batch", CLI_INT, F(batch), 1, 65536, 0, NULL, ALL, "N",
     "samples per step and sample group (default 128; mesh 4; bench 32)", G_COMMON},
    {"threads", CLI_INT, F(threads), 1, 256, 0, NULL, T | E | B, "N",
     "Loom's threads per rank (default: the node's cores / its ranks, at most 8)", G_COMMON},
    {"seed", CLI_LONG, F(seed), 0, 9007199254740992.0, 0, NULL, T | B, "N",
     "seed of weights, shuffling, augmentation, dropout, mesh samples (default 1)", G_COMMON},
    {"data", CLI_CHOICE, F(data), 0, 0, 0, "fashion-mnist|synthetic", T, "NAME",
     "fashion-mnist (default) or synthetic (ResNets)", G_COMMON},
    {"synthetic", CLI_FLAG, F(synthetic), 0, 0, 0, NULL, T | B, NULL, "same as --data synthetic",
     G_COMMON},
    {"data-dir", CLI_STR, F(data_dir), 0, 0, 0, NULL, T | E, "DIR",
     "IDX files (default " LOOM_FASHION_MNIST_DIR ")", G_COMMON},
    {"image", CLI_INT, F(image), 1, 4096, 0, NULL, T | B | S, "N",
     "synthetic image size (default 28; bench 224)", G_COMMON},
    {"channels", CLI_INT, F(channels), 1, 4096, 0, NULL, T | B | S, "N",
     "synthetic input channels (default 1; bench 3)", G_COMMON},
    {"classes", CLI_INT, F(classes), 1, 1000000, 0, NULL, T | B | S, "N",
     "synthetic class count (default 10; bench 1000)", G_COMMON},
    {"profile", CLI_FLAG, F(profile), 0, 0, 0, NULL, T | B, NULL,
     "print the time per layer type at the end (rank 0's)", G_COMMON},
    {"limit-test", CLI_INT, F(limit_test), 1, 1 << 30, 0, NULL, T | E, "N",
     "evaluate on the first N test samples", G_COMMON},
    {"load", CLI_STR, F(load), 0, 0, 0, NULL, T | E, "FILE",
     "start from saved weights (eval: required)", G_COMMON},

    {"epochs", CLI_INT, F(epochs), 1, 100000, 0, NULL, T, "N", "(default 10)", G_TRAIN},
    {"steps", CLI_INT, F(steps), 1, 1 << 30, 0, NULL, T, "N",
     "at most N steps per epoch (default: all)", G_TRAIN},
    {"lr", CLI_NUM, F(lr), 0, 100, 0, NULL, T, "X", "base learning rate (default 0.1)", G_TRAIN},
    {"optim", CLI_CHOICE, F(optim), 0, 0, 0, "sgd|adam", T, "NAME", "sgd (default) or adam", G_TRAIN},
    {"momentum", CLI_NUM, F(momentum), 0, 0.999999, 0, NULL, T, "X", "(default 0.9)", G_TRAIN},
    {"nesterov", CLI_FLAG, F(nesterov), 0, 0, 0, NULL, T, NULL, "Nesterov momentum", G_TRAIN},
    {"wd", CLI_NUM, F(wd), 0, 1, 0, NULL, T, "X", "weight decay on conv/fc weights (default 5e-4)",
     G_TRAIN},
    {"schedule", CLI_CHOICE, F(schedule), 0, 0, 0, "const|step|cosine", T, "S",
     "const|step|cosine (default cosine)", G_TRAIN},
    {"step-epochs", CLI_INT, F(step_epochs), 1, 1000000, 0, NULL, T, "N",
     "step schedule: epochs between decays (default 30)", G_TRAIN},
    {"gamma", CLI_NUM, F(gamma), 0, 1, 0, NULL, T, "X", "step schedule factor (default 0.1)", G_TRAIN},
    {"warmup-epochs", CLI_NUM, F(warmup_epochs), 0, 100000, 0, NULL, T, "X",
     "linear warm-up (default 0)", G_TRAIN},
    {"limit-train", CLI_INT, F(limit_train), 1, 1 << 30, 0, NULL, T, "N",
     "train on the first N samples", G_TRAIN},
    {"no-augment", CLI_FLAG, F(no_augment), 0, 0, 0, NULL, T, NULL, "no random crop and flip",
     G_TRAIN},
    {"pad", CLI_INT, F(pad), 0, 64, 0, NULL, T, "N", "random-crop padding (default 2)", G_TRAIN},
    {"interval", CLI_INT, F(interval), 1, 1 << 30, 0, NULL, T, "N",
     "steps between progress lines (default 50)", G_TRAIN},
    {"metrics", CLI_STR, F(metrics), 0, 0, 0, NULL, T, "FILE", "write a metrics CSV (rank 0)", G_TRAIN},
    {"save", CLI_STR, F(save), 0, 0, 0, NULL, T, "FILE", "save the weights at the end (rank 0)",
     G_TRAIN},

    {"data-parallel", CLI_INT, F(dp), 1, 1 << 20, 0, NULL, T | B, "D",
     "sample groups (default: P / (H*W), all ranks)", G_PAR},
    {"spatial", CLI_GRID, F(sh), 1, 64, F(sw), NULL, T, "HxW",
     "split each sample over H x W ranks (mesh model; default 1x1)", G_PAR},
    {"dp-mode", CLI_CHOICE, F(dp_mode), 0, 0, 0, "overlap|blocking", T | B, "M",
     "overlap (default: buckets all-reduced during backward) | blocking", G_PAR},
    {"bucket-mb", CLI_NUM, F(bucket_mb), 1e-6, 1e6, 0, NULL, T | B, "X",
     "gradient bucket size in MiB (default 25)", G_PAR},

    {"mesh-size", CLI_INT, F(mesh_size), 8, 1 << 16, 0, NULL, T | S, "N",
     "cells per side, a multiple of 8 (default 128)", G_MESH},
    {"width", CLI_NUM, F(width), 1e-3, 64, 0, NULL, T | S, "X",
     "width multiplier (default 0.125; 1 = full)", G_MESH},
    {"train-samples", CLI_INT, F(train_samples), 1, 1 << 30, 0, NULL, T, "N", "(default 64)", G_MESH},
    {"test-samples", CLI_INT, F(test_samples), 0, 1 << 30, 0, NULL, T, "N", "(default 16)", G_MESH},
    {"pos-weight", CLI_NUM, F(pos_weight), 0, 1e6, 0, NULL, T, "X",
     "weight of the tangled class in the loss (default 4)", G_MESH},
    {"mesh-write", CLI_STR, F(mesh_write), 0, 0, 0, NULL, T, "FILE",
     "write the train+test samples to FILE and exit", G_MESH},
    {"mesh-file", CLI_STR, F(mesh_file), 0, 0, 0, NULL, T, "FILE",
     "train on FILE's samples (the last --test-samples are the test set)", G_MESH},
    {"memory-probe", CLI_FLAG, F(memory_probe), 0, 0, 0, NULL, T, NULL,
     "one forward+backward step, print memory per rank, exit", G_MESH},

    {"ckpt-dir", CLI_STR, F(ckpt_dir), 0, 0, 0, NULL, T, "DIR",
     "checkpoint the whole run into DIR (level 1, fast/local)", G_CKPT},
    {"ckpt-every", CLI_INT, F(ckpt_every), 1, 1 << 30, 0, NULL, T, "N",
     "steps between checkpoints (default: one epoch)", G_CKPT},
    {"ckpt-keep", CLI_INT, F(ckpt_keep), 2, 1 << 20, 0, NULL, T, "K",
     "checkpoints kept per level (default 2, at least 2)", G_CKPT},
    {"ckpt-flush-dir", CLI_STR, F(flush_dir), 0, 0, 0, NULL, T, "DIR",
     "level 2 (parallel file system): a copy of every M-th checkpoint", G_CKPT},
    {"ckpt-flush-every", CLI_INT, F(flush_every), 1, 1 << 20, 0, NULL, T, "M",
     "checkpoints between copies to level 2 (default 4)", G_CKPT},
    {"ckpt-sync", CLI_FLAG, F(ckpt_sync), 0, 0, 0, NULL, T, NULL,
     "write checkpoints in the training thread (default: a background thread)", G_CKPT},
    {"resume", CLI_STR, F(resume), 0, 0, 0, NULL, T, "DIR",
     "continue the run from DIR's newest complete checkpoint", G_CKPT},

    {"iters", CLI_INT, F(iters), 1, 1000000, 0, NULL, B, "N", "timed iterations (default 10)",
     G_BENCH},
    {"warmup", CLI_INT, F(warmup), 0, 1000000, 0, NULL, B, "N", "untimed iterations (default 2)",
     G_BENCH},
    {"batches-per-iter", CLI_INT, F(batches_per_iter), 1, 1000000, 0, NULL, B, "N",
     "training steps per iteration (default 1)", G_BENCH},
    CLI_END};

void cli_defaults(cli_args_t *a)
{
    *a = (cli_args_t){.model = "resnet20", .data = "fashion-mnist", .optim = "sgd",
                      .schedule = "cosine", .dp_mode = "overlap", .batch = -1, .threads = -1,
                      .image = -1, .channels = -1, .classes = -1, .epochs = 10, .pad = 2,
                      .interval = 50, .iters = 10, .warmup = 2, .batches_per_iter = 1, .sh = 1,
                      .sw = 1, .mesh_size = 128, .train_samples = 64, .test_samples = 16,
                      .step_epochs = 30, .ckpt_keep = 2, .flush_every = 4, .seed = 1, .lr = 0.1,
                      .momentum = 0.9, .wd = 5e-4, .gamma = 0.1, .bucket_mb = 25, .width = 0.125,
                      .pos_weight = 4};
}

static const char *top_usage =
    "Usage: loom COMMAND [OPTIONS]          (one process)\n"
    "       mpiexec -n P loom COMMAND [OPTIONS]   (P ranks, data parallel by default)\n"
    "\n"
    "Commands:\n"
    "  train     train a model: ResNets on Fashion-MNIST or synthetic data, the mesh model;\n"
    "            checkpoint/restart (--ckpt-dir, --resume)\n"
    "  eval      evaluate saved weights on the test set\n"
    "  bench     training throughput on synthetic data (Horovod-style Iter #k lines;\n"
    "            per rank and in total under mpiexec)\n"
    "  summary   print a model's layers, output shapes, parameters and FLOPs\n"
    "\n"
    "Every command takes --help (its options) and --version.  The same options and\n"
    "defaults apply on one rank and on many; rank 0 alone prints and writes files.\n"
    "Bad options exit with status 2, run-time failures with 1.\n"
    "\n"
    "Examples:\n"
    "  loom train --model resnet20 --epochs 8 --nesterov --save w.ckpt\n"
    "  mpiexec -n 2 loom train --model resnet20 --batch 64      (2 ranks, global batch 128)\n"
    "  mpiexec -n 4 loom train --model mesh --spatial 2x1      (2 sample groups x 2x1 split)\n"
    "  loom train --model resnet8 --ckpt-dir ck --ckpt-every 100; loom train ... --resume ck\n"
    "  mpiexec -n 2 loom bench --model resnet50 --synthetic\n";

static const char *synopsis(const char *cmd)
{
    if (!strcmp(cmd, "train"))
        return "[mpiexec -n P] loom train [--model NAME] [OPTIONS]\n"
               "  P ranks = D sample groups (--data-parallel, default P / (H*W)) x H*W spatial "
               "ranks (--spatial HxW).\n"
               "  Ends with one line: final: test_accuracy=A test_loss=L images_per_s=R "
               "comm_wait_share=S\n"
               "  (mesh: final: pixel_precision=A pixel_recall=B test_loss=L images_per_s=R "
               "comm_wait_share=S)";
    if (!strcmp(cmd, "eval"))
        return "[mpiexec -n P] loom eval --model NAME --load FILE [OPTIONS]\n"
               "  Prints: eval: test_accuracy=A test_loss=L images_per_s=R";
    if (!strcmp(cmd, "bench"))
        return "[mpiexec -n P] loom bench --model NAME --synthetic [OPTIONS]\n"
               "  Data-parallel training steps on one random batch; prints Iter #k: X img/sec per "
               "rank,\n  Img/sec per rank: M +-C and Total img/sec on P ranks: T +-C (C: 1.96 "
               "standard deviations)";
    return "loom summary --model NAME [--image S --channels C --classes K | --mesh-size N --width X]";
}

int cli_fail(const cli_world_t *w, const char *what)
{
    if (w->size > 1)
        fprintf(stderr, "loom: rank %d: %s: %s\n", w->rank, what, loom_last_error());
    else
        fprintf(stderr, "loom: %s: %s\n", what, loom_last_error());
    if (w->size > 1) {
        /* the other ranks may be inside a collective: stop the job */
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 1;
}

int cli_threads(const cli_args_t *a)
{
    if (a->threads > 0)
        return a->threads;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int local = 1, inited = 0;
    MPI_Initialized(&inited);
    if (inited) {
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
            MPI_SUCCESS) {
            MPI_Comm_size(node, &local);
            MPI_Comm_free(&node);
        }
    }
    long t = cores > 0 ? cores / local : 1;
    return t < 1 ? 1 : t > 8 ? 8 : (int)t;
}

int main(int argc, char **argv)
{
    char version[64];
    snprintf(version, sizeof version, "loom %d.%d (Weft %s)", LOOM_VERSION_MAJOR,
             LOOM_VERSION_MINOR, weft_version_string());
    if (argc < 2) {
        fputs(top_usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(top_usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("%s\n", version);
        return 0;
    }
    unsigned bit = !strcmp(cmd, "train") ? CMD_TRAIN : !strcmp(cmd, "eval") ? CMD_EVAL
                   : !strcmp(cmd, "bench") ? CMD_BENCH : !strcmp(cmd, "summary") ? CMD_SUMMARY : 0;
    if (!bit) {
        fprintf(stderr, "loom: unknown command '%s'\nRun 'loom --help' for the commands.\n", cmd);
        return 2;
    }
    char prog[32];
    snprintf(prog, sizeof prog, "loom %s", cmd);
    cli_args_t a;
    cli_defaults(&a);
    if (bit == CMD_SUMMARY) { /* no Weft: a description of the model */
        int pr = cli_parse(loom_cli_options, bit, prog, synopsis(cmd), version, argc - 1, argv + 1,
                           &a, 1);
        return pr == 1 ? 0 : pr ? pr : cli_summary(&a);
    }
    weft_init_params_t ip = WEFT_INIT_PARAMS_INITIALIZER;
    ip.argc = &argc;
    ip.argv = &argv;
    int ws = weft_init(&ip);
    if (ws != WEFT_SUCCESS) {
        fprintf(stderr, "loom: weft_init: %s (%s)\n", weft_strerror(ws), weft_status_name(ws));
        return 1;
    }
    cli_world_t w = {0, 1};
    if (MPI_Comm_rank(MPI_COMM_WORLD, &w.rank) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &w.size) != MPI_SUCCESS) {
        fprintf(stderr, "loom: MPI_Comm_rank/size failed\n");
        weft_finalize();
        return 1;
    }
    int rc = cli_parse(loom_cli_options, bit, prog, synopsis(cmd), version, argc - 1, argv + 1, &a,
                       w.rank == 0);
    if (rc == 1)
        rc = 0;
    else if (rc == 0)
        rc = bit == CMD_TRAIN ? cli_train(&a, &w) : bit == CMD_EVAL ? cli_eval(&a, &w)
                                                                    : cli_bench(&a, &w);
    ws = weft_finalize();
    if (ws != WEFT_SUCCESS && rc == 0) {
        fprintf(stderr, "loom: weft_finalize: %s (%s)\n", weft_strerror(ws), weft_status_name(ws));
        rc = 1;
    }
    return rc;
}
