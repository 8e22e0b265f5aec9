/*
 * loom_par.h - Loom's parallel training on Weft: data parallelism (gradient
 * buckets all-reduced while the backward pass runs) and the process layout
 * of data-parallel x spatial-parallel runs.
 *
 * Uses only Weft's public API (weft.h, weft_mpi.h, weft_halo.h).  Every
 * function returns a loom_status_t; Weft and MPI failures become
 * LOOM_ERR_INTERNAL with the Weft/MPI message in loom_last_error().
 *
 * Threads: all functions run on the training thread.  Weft's progress engine
 * advances the all-reductions started during backward in the background.
 */
#ifndef LOOM_PAR_H
#define LOOM_PAR_H

#include <stdio.h>

#include <mpi.h>

#include "loom.h"
#include "weft.h"
#include "weft_mpi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- layout */
/* P = D * S ranks: D sample groups (data parallel) of S = sh * sw ranks
 * each (spatial parallel).  Rank r is in sample group r / S at spatial
 * position r % S (row-major over sh x sw).  Collective over world. */
typedef struct {
    int world_rank, world_size;
    int dp, sh, sw;          /* D, spatial grid */
    int group, spatial_rank; /* which sample group, position inside it */
    weft_comm_t world;       /* all ranks: gradient reduction */
    weft_comm_t spatial;     /* the ranks of one sample (halos, batch norm) */
    weft_comm_t data;        /* the ranks at one spatial position across groups */
    MPI_Comm mpi_spatial, mpi_data;
} loom_layout_t;

/* Fails with LOOM_ERR_INVALID (message naming P, D, H, W) if dp*sh*sw does
 * not equal the world size. */
int loom_layout_create(loom_layout_t *l, MPI_Comm world, int dp, int sh, int sw);
void loom_layout_destroy(loom_layout_t *l);

/* Maps a failed Weft status to a Loom error with a message. */
int loom_weft_error(int weft_status, const char *what);

/* --------------------------------------------------------- data parallel */
typedef enum { LOOM_DP_OVERLAP = 0, LOOM_DP_BLOCKING = 1 } loom_dp_mode_t;

typedef struct {
    weft_comm_t comm;     /* ranks whose gradients are reduced together */
    size_t bucket_bytes;  /* 0: 25 MiB */
    loom_dp_mode_t mode;  /* overlap: a bucket's iallreduce starts as soon as
                             it is complete; blocking: one allreduce after backward */
    weft_op_t op;         /* WEFT_AVG or WEFT_SUM */
    float scale;          /* multiplies the reduced gradients (1: none) */
} loom_dp_desc_t;
#define LOOM_DP_DESC_INIT { NULL, 0, LOOM_DP_OVERLAP, WEFT_AVG, 1.0f }
#define LOOM_DP_DEFAULT_BUCKET_BYTES (25u << 20)

typedef struct loom_dp loom_dp_t;

/* Plans the buckets (whole parameter tensors, filled in reverse layer order
 * up to bucket_bytes each) and installs the model's backward hook. */
int loom_dp_create(loom_dp_t **out, loom_model_t *m, const loom_dp_desc_t *d);
void loom_dp_destroy(loom_dp_t *dp);
/* Broadcasts parameters and buffers from rank root of comm (weft_bcast). */
int loom_dp_broadcast(loom_dp_t *dp, int root);
/* Call before each backward pass (arms the bucket launches). */
int loom_dp_begin(loom_dp_t *dp);
/* Call after backward, before the optimiser step: launches what is left,
 * waits for every bucket, applies scale.  Gradients are then the reduced ones. */
int loom_dp_finish(loom_dp_t *dp);
/* Switches between overlap and blocking for the following steps (the
 * bucket plan stays).  LOOM_ERR_INVALID for an unknown mode, and while a
 * step is in progress: after loom_dp_begin until loom_dp_finish has
 * returned (no bucket's all-reduction is in flight otherwise).  Every rank of
 * the communicator must switch at the same step.  Thread: the training
 * thread, like every loom_dp_* function. */
int loom_dp_set_mode(loom_dp_t *dp, loom_dp_mode_t mode);
int loom_dp_num_buckets(const loom_dp_t *dp);
/* Buckets of the last step whose all-reduction started during backward. */
int loom_dp_early_buckets(const loom_dp_t *dp);
/* Seconds spent blocked in Weft waits (since creation or the last reset). */
double loom_dp_wait_seconds(const loom_dp_t *dp);
void loom_dp_reset_timers(loom_dp_t *dp);
/* Which allreduce algorithm serves each bucket (weft_query_algo). */
void loom_dp_print_algos(const loom_dp_t *dp, FILE *f);

/* Reports that gradients [ready_from, end) are final (what the model's
 * backward hook does); the spatial executor calls it. */
int loom_dp_notify(loom_dp_t *dp, size_t ready_from);

/* ------------------------------------------------------ spatial parallel */
/* One sample split over a sh x sw grid of ranks (the spatial group).  The
 * model is built by every rank for ITS tile ([n, c, tile_h, tile_w]): the
 * parameters are the same on all ranks, the activations are the tile's.
 * Supported layers: convolutions with odd kernels and "same" padding
 * (pad = (k-1)/2, dilation 1) and any stride dividing the tiles, batch norm
 * (statistics summed over the group: the split model computes what the
 * unsplit one does), ReLU, sigmoid, add, pixel shuffle.  Before each
 * convolution the input's halo (width pad below, max(0, k-stride-pad) above,
 * corners included) is exchanged with weft_halo_*; on backward the halo's
 * gradient is added back to its owner (weft_halo_start_accumulate, while
 * the weight gradient is computed, then weft_halo_wait).  Weight
 * gradients are this rank's part: the sum over the group is the unsplit
 * model's gradient (loom_dp with WEFT_SUM over the group does it). */

/* Tile `index` of `parts` over extent, in units of align (extent % align
 * == 0): sizes differ by at most one unit, lower tiles take the extra. */
void loom_spatial_split(int extent, int parts, int align, int index, int *offset, int *size);

typedef struct loom_spatial loom_spatial_t;
/* comm: the spatial group (size sh*sw, rank = row-major grid position);
 * (oy, ox): the tile's offset in the global input, gh x gw the global size.
 * Collective over comm (builds one halo plan per convolution).  The executor
 * borrows the model's convolution workspace: set the thread count
 * (loom_set_threads) before creating it. */
int loom_spatial_create(loom_spatial_t **out, loom_model_t *m, weft_comm_t comm, int sh, int sw,
                        int oy, int ox, int gh, int gw);
void loom_spatial_destroy(loom_spatial_t *s);
/* Forward / backward over the model's full batch (n must equal it). */
int loom_spatial_forward(loom_spatial_t *s, int n, int training);
int loom_spatial_backward(loom_spatial_t *s, int n);
/* Called after each layer's backward, like loom_model_set_backward_hook. */
void loom_spatial_set_backward_hook(loom_spatial_t *s, loom_backward_hook_t fn, void *arg);
/* Seconds blocked in halo exchanges and batch-norm reductions. */
double loom_spatial_wait_seconds(const loom_spatial_t *s);
/* Bytes the executor adds to the model's: halo-padded copies, workspace. */
size_t loom_spatial_extra_bytes(const loom_spatial_t *s);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_PAR_H */
