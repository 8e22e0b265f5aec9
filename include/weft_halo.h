/*
 * weft_halo.h - halo exchange for spatially decomposed tensors.
 *
 * A tensor of shape [lead...][X0][X1][X2] (e.g. NCHW: lead = N, C; spatial
 * H, W) is split over a process grid along its 1, 2 or 3 spatial dimensions.
 * Each rank stores its block WITH its halo: along spatial dimension d the
 * stored extent is width_lo[d] + local[d] + width_hi[d], the interior starting
 * at index width_lo[d]; leading dimensions are not split and have no halo.
 * Spatial dimension 0 varies slowest, the last one fastest (C order), and
 * the leading dimensions are outermost.
 *
 * A plan (built once, collectively) knows the neighbours, the regions to
 * pack and unpack, and owns the staging buffers. An exchange fills every
 * halo cell with the value its owner holds (faces, plus edges and corners
 * when `corners` is set). Halo cells with no owner (a non-periodic boundary)
 * are left untouched. The accumulating variant goes the other way: every
 * halo cell's value is ADDED to the cell of its owner (the backward pass of
 * a convolution over a halo), the halo itself is left as it was.
 *
 * Overlap pattern (see doc/halo.md and doc/examples/halo_overlap.c):
 *     weft_halo_start(plan, x);       // packs and posts, returns at once
 *     compute_interior(x);            // cells that need no halo
 *     weft_halo_wait(plan);           // halo cells now valid
 *     compute_border(x);
 *
 * Thread contract: plan create/destroy are collective over the plan's
 * communicator and ordered with its other collectives. start/wait/exchange
 * may be called from any thread, one exchange per plan in flight at a time;
 * every rank of the communicator starts the plan's exchanges in the same
 * order as its other Weft operations on that communicator.
 */
#ifndef WEFT_HALO_H
#define WEFT_HALO_H

#include <stddef.h>

#include "weft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_HALO_MAX_DIMS 3 /**< spatial dimensions */
#define WEFT_HALO_MAX_LEAD 4 /**< leading (non-split) dimensions */

typedef struct weft_halo_plan *weft_halo_plan_t;

/**
 * Plan parameters. Extensible: set `size` to sizeof(weft_halo_params_t)
 * (WEFT_HALO_PARAMS_INITIALIZER does, and zeroes the rest).
 */
typedef struct weft_halo_params {
    size_t size;
    int ndims;                            /**< spatial dimensions, 1..3 */
    /** Process grid; product = communicator size. All zero: take dims and
     * periodicity from the communicator's MPI_Cart topology. Ranks map onto
     * the grid in row-major order (the last dimension fastest), as
     * MPI_Cart_create without reordering does. */
    int grid[WEFT_HALO_MAX_DIMS];
    int periodic[WEFT_HALO_MAX_DIMS];     /**< 1: wrap around (ignored with a Cart grid) */
    int nlead;                            /**< leading dimensions, 0..WEFT_HALO_MAX_LEAD */
    size_t lead[WEFT_HALO_MAX_LEAD];      /**< their extents (N, C, ...) */
    size_t local[WEFT_HALO_MAX_DIMS];     /**< this rank's interior extent per spatial dim */
    int width_lo[WEFT_HALO_MAX_DIMS];     /**< halo width below the interior (same on all ranks) */
    int width_hi[WEFT_HALO_MAX_DIMS];     /**< halo width above the interior (same on all ranks) */
    weft_datatype_t dtype;
    int corners;                          /**< 1: also exchange edges and corners */
} weft_halo_params_t;

#define WEFT_HALO_PARAMS_INITIALIZER { sizeof(weft_halo_params_t), 0, {0, 0, 0}, {0, 0, 0}, 0, \
        {0, 0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, WEFT_FLOAT32, 0 }

/**
 * Build a plan on comm (no stream-bound comms for now). Collective over
 * comm; every rank returns the same status. WEFT_ERR_HALO_PLAN, with a
 * message naming the problem, when the grid does not match the communicator
 * size, a halo is wider than the block it is filled from, the ranks disagree
 * on widths, datatype, leading dimensions, or the sizes of blocks that share
 * a face. Local sizes may differ between ranks (uneven partitions).
 */
WEFT_EXPORT weft_status_t weft_halo_plan_create(weft_comm_t comm, const weft_halo_params_t *params,
                                                weft_halo_plan_t *plan);
/** Waits for an exchange in flight, then frees the plan. Not collective. */
WEFT_EXPORT weft_status_t weft_halo_plan_destroy(weft_halo_plan_t plan);

/** Elements of this rank's buffer, halos included. */
WEFT_EXPORT weft_status_t weft_halo_buffer_count(weft_halo_plan_t plan, size_t *count);
/** This rank's coordinates in the grid (ndims entries). */
WEFT_EXPORT weft_status_t weft_halo_coords(weft_halo_plan_t plan, int coords[WEFT_HALO_MAX_DIMS]);

/** Start filling the halo of buffer (nonblocking). */
WEFT_EXPORT weft_status_t weft_halo_start(weft_halo_plan_t plan, void *buffer);
/** Start adding the halo of buffer into the owners' cells (nonblocking). */
WEFT_EXPORT weft_status_t weft_halo_start_accumulate(weft_halo_plan_t plan, void *buffer);
/** Wait for the plan's exchange in flight (WEFT_SUCCESS if none). */
WEFT_EXPORT weft_status_t weft_halo_wait(weft_halo_plan_t plan);
/** *done = 1 (and the exchange finished) or 0; never blocks. */
WEFT_EXPORT weft_status_t weft_halo_test(weft_halo_plan_t plan, int *done);
/** Blocking forms: start + wait. */
WEFT_EXPORT weft_status_t weft_halo_exchange(weft_halo_plan_t plan, void *buffer);
WEFT_EXPORT weft_status_t weft_halo_accumulate(weft_halo_plan_t plan, void *buffer);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_HALO_H */
