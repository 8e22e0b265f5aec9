/*
 * loom_ckpt.h - checkpoint/restart of a whole training run (one rank or
 * many), so that a resumed run is the run that was interrupted, bit for bit.
 *
 * A checkpoint is a directory DIR/step-NNNNNNNNNN holding
 *   MANIFEST         text: format version, model, configuration (and its
 *                    hash), layout, step, epoch, schedule state, and per rank
 *                    its RNG state, data position, file name and size; ends
 *                    with the CRC-32 of the lines before it;
 *   rank-RRRRR.bin   one per rank: parameters, batch-norm statistics and
 *                    optimiser moments, with a header and a CRC-32 trailer.
 * Every file is written to a temporary name, fsynced, renamed, and its
 * directory fsynced.  A checkpoint is complete when its MANIFEST and every
 * rank's file are present and pass their checks; the newest complete one
 * wins, a damaged one is skipped with a message, the last `keep` are kept.
 *
 * Two levels (as SCR): level 1 (`dir`, fast, local) every save; every
 * `flush_every`-th checkpoint is copied to level 2 (`flush_dir`, the
 * parallel file system).  With `async` set, loom_ckpt_save copies the state
 * into memory and returns; a background thread writes and copies it while
 * training continues (the next save waits for it first).
 *
 * Thread contract: every function is called from the training thread; save,
 * resume and create are collective over desc.comm (every rank, same order).
 * The writer thread touches only its own snapshot and files.
 */
#ifndef LOOM_CKPT_H
#define LOOM_CKPT_H

#include <stdio.h>

#include "loom.h"
#include "weft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_CKPT_STATE_VERSION 1

typedef struct {
    const char *dir;       /* level 1 directory (created if missing) */
    const char *flush_dir; /* level 2 directory, NULL: none */
    int flush_every;       /* copy every flush_every-th checkpoint to flush_dir (>= 1) */
    int keep;              /* complete checkpoints kept per level (>= 2) */
    int async;             /* 1: background writer; 0: written before save returns */
    weft_comm_t comm;      /* all ranks of the run */
    int rank, size;        /* this rank and the number of ranks in comm */
    const char *model;     /* model name */
    const char *config;    /* "key=value ..." on one line: what fixes the run's trajectory */
    int dp, sh, sw;        /* layout: sample groups, spatial grid */
} loom_ckpt_desc_t;

/* Where the run stands: after `step` optimiser steps, the next batch is
 * batch `batch` of epoch `epoch`; rng is the model's stream (dropout). */
typedef struct {
    long step;
    int epoch, batch;
    loom_rng_t rng;
    long optim_steps; /* set by loom_ckpt_resume (save takes the optimiser's own) */
} loom_ckpt_pos_t;

typedef struct loom_ckpt loom_ckpt_t;

/* Validates the descriptor, creates the directories, starts the writer
 * thread (async).  Collective. */
int loom_ckpt_create(loom_ckpt_t **out, const loom_ckpt_desc_t *d);
/* Checkpoints the state of m and o at pos.  Waits for the previous write of
 * this rank first; returns an error the writer met since (sticky).
 * Collective (one weft_gather of each rank's position to rank 0). */
int loom_ckpt_save(loom_ckpt_t *ck, loom_model_t *m, loom_optim_t *o, const loom_ckpt_pos_t *pos);
/* Waits until this rank's writes are on disk; returns the writer's error. */
int loom_ckpt_wait(loom_ckpt_t *ck);
/* Waits, stops the writer thread, frees.  NULL is accepted. */
void loom_ckpt_destroy(loom_ckpt_t *ck);
/* Statistics of this rank: checkpoints saved, seconds the caller was held
 * in loom_ckpt_save (waiting, copying, writing when not async), seconds the
 * writer spent writing. */
void loom_ckpt_stats(const loom_ckpt_t *ck, int *saved, double *caller_s, double *writer_s);

/* Loads the newest complete checkpoint of `dir` into m and o and sets *pos.
 * d gives the run's model, configuration and layout (dir, flush_dir, keep,
 * async are not used).  Damaged or partial checkpoints are skipped with a
 * message on `log` (each rank reports what it found; NULL: silent).
 * Returns LOOM_ERR_MISMATCH when the newest complete checkpoint is of another
 * model, layout or configuration (the message names what differs),
 * LOOM_ERR_IO when there is no complete checkpoint.  The same result on
 * every rank.  Collective. */
int loom_ckpt_resume(const char *dir, const loom_ckpt_desc_t *d, loom_model_t *m, loom_optim_t *o,
                     loom_ckpt_pos_t *pos, FILE *log);

/* Checks one rank file (buffer of `bytes` bytes, as read from disk) against
 * the model's and optimiser's sizes; on success copies it into m and o.
 * Never reads outside the buffer.  The loader's core, exposed for tests and
 * the fuzzer.  Thread: the model's. */
int loom_ckpt_load_rank_buffer(const unsigned char *buf, size_t bytes, long step, int rank,
                               loom_model_t *m, loom_optim_t *o);
/* Parses and checks a MANIFEST's text (CRC, fields).  Fills *pos with rank
 * `rank`'s position and checks model, layout and configuration against d
 * (LOOM_ERR_MISMATCH).  Any thread. */
int loom_ckpt_parse_manifest(const char *text, size_t len, const loom_ckpt_desc_t *d, int rank,
                             loom_ckpt_pos_t *pos);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_CKPT_H */
