/*
 * cli.h - the `loom` command (loom/cli/): one option table for every
 * subcommand, one trainer for one rank or many.  Not part of the library.
 */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include "options.h"

#include "loom.h"
#include "loom_par.h"

enum { CMD_TRAIN = 1, CMD_EVAL = 2, CMD_BENCH = 4, CMD_SUMMARY = 8 };

/* Every subcommand's options (a field is used by the commands whose table
 * rows name it).  -1: "not given", resolved per model or command. */
typedef struct {
    const char *model, *data, *data_dir, *metrics, *save, *load, *optim, *schedule, *dp_mode;
    const char *mesh_file, *mesh_write, *resume, *ckpt_dir, *flush_dir;
    int batch, threads, image, channels, classes, epochs, steps, limit_train, limit_test;
    int no_augment, pad, interval, iters, warmup, batches_per_iter, nesterov, profile, synthetic;
    int dp, sh, sw, mesh_size, train_samples, test_samples, memory_probe, step_epochs;
    int ckpt_every, ckpt_keep, flush_every, ckpt_sync;
    long seed;
    double lr, momentum, wd, gamma, warmup_epochs, bucket_mb, width, pos_weight;
} cli_args_t;

/* The table and the defaults (cli.c). */
extern const cli_opt_t loom_cli_options[];
void cli_defaults(cli_args_t *a);

/* The world this process runs in (main.c): rank, size, and whether this
 * rank prints (rank 0). */
typedef struct {
    int rank, size;
} cli_world_t;

/* Subcommands: return the exit status (0, 1 run-time failure, 2 usage).
 * Thread: the main thread, between weft_init and weft_finalize (summary:
 * without Weft); collective over MPI_COMM_WORLD except summary. */
int cli_train(const cli_args_t *a, const cli_world_t *w);
int cli_eval(const cli_args_t *a, const cli_world_t *w);
int cli_bench(const cli_args_t *a, const cli_world_t *w);
int cli_summary(const cli_args_t *a);

/* Thread: the main thread.  A run-time failure on this rank: message "loom: [rank R: ]what: error",
 * then, with more than one rank, MPI_Abort (others may wait in a collective).
 * Returns 1. */
int cli_fail(const cli_world_t *w, const char *what);
/* Thread count default: the node's cores shared by its ranks (at least 1, at
 * most 8), when --threads is not given.  Collective over MPI_COMM_WORLD
 * (MPI_Comm_split_type) when MPI is initialised.  Thread: the main thread. */
int cli_threads(const cli_args_t *a);

#endif
