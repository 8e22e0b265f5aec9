/*
 * ctl.h - the control channel: the few blocking collectives and messages
 * that Weft itself runs outside its operations (agreement steps at
 * communicator creation, address exchange of a transport, clock sync,
 * profile gathers, the alpha-beta measurement). Implemented over MPI by the
 * MPI interop (lib/mpi_interop.c); nothing here names an MPI type, so the
 * core and the transports use it without mpi.h.
 *
 * A weft__ctl_t is one control communicator: the world's (weft__ctl_world),
 * or the private duplicate behind a Weft communicator (weft__comm_t's ctl).
 * Every call logs the failing MPI call with MPI's error text, once, and
 * returns WEFT_ERR_MPI (WEFT_ERR_NO_MEMORY, WEFT_ERR_INVALID_ARG where said).
 *
 * Thread contract: the collectives are collective over the ctl's ranks, in
 * the same order on every rank; any thread after MPI is initialised
 * (MPI_THREAD_MULTIPLE), never on the engine side (they block).
 */
#ifndef WEFT_CTL_H
#define WEFT_CTL_H

#include <stddef.h>

#include "weft.h"

typedef struct weft__ctl weft__ctl_t;

/**
 * weft_init's MPI part (lib/mpi_interop.c): initialise MPI (PMPI_Init_thread,
 * recorded in weft__g.we_init_mpi) unless the application did, insist on
 * MPI_THREAD_MULTIPLE and a tag range of 2^(WEFT__COLL_TAG_BITS + 1) - 1, fill
 * weft__g's world rank/size/tag_ub and start weft__ctl_world. On failure MPI is
 * left as found. weft_init's thread.
 */
weft_status_t weft__mpi_init(const weft_init_params_t *params);
/** PMPI_Finalize if weft__mpi_init initialised MPI (weft_finalize, and weft_init's
 * failure path); MPI's error logged and returned. That thread. */
weft_status_t weft__mpi_finalize(void);
/** 1 if MPI is initialised and not finalised (so the control channel works). Any thread. */
int weft__mpi_usable(void);

typedef enum { WEFT__CTL_INT, WEFT__CTL_LLONG, WEFT__CTL_U64, WEFT__CTL_DOUBLE } weft__ctl_type_t;
typedef enum { WEFT__CTL_MIN, WEFT__CTL_MAX, WEFT__CTL_SUM } weft__ctl_op_t;

/** The world's channel (MPI_COMM_WORLD); NULL before weft__mpi_init. Any thread. */
weft__ctl_t *weft__ctl_world(void);
/** This rank and the number of ranks. Any thread. */
int weft__ctl_rank(const weft__ctl_t *ctl);
int weft__ctl_size(const weft__ctl_t *ctl);

/** out[i] = op over ranks of in[i], i < n, elements of type t; in may equal
 * out (in place). */
weft_status_t weft__ctl_allreduce(weft__ctl_t *ctl, const void *in, void *out, int n,
                                  weft__ctl_type_t t, weft__ctl_op_t op);
/** bytes of buf from root to every rank. */
weft_status_t weft__ctl_bcast(weft__ctl_t *ctl, void *buf, size_t bytes, int root);
/** all[r * bytes ..] = rank r's `bytes`; mine == NULL: this rank's block is in
 * all already (in place). */
weft_status_t weft__ctl_allgather(weft__ctl_t *ctl, const void *mine, void *all, size_t bytes);
/** all[r * bytes ..] (root only) = rank r's `bytes`. */
weft_status_t weft__ctl_gather(weft__ctl_t *ctl, const void *mine, size_t bytes, void *all,
                               int root);
/** MPI_Gatherv: count elements of t from each rank land at all + displs[r]
 * elements, counts[r] of them (root only: all, counts, displs). */
weft_status_t weft__ctl_gatherv(weft__ctl_t *ctl, const void *mine, int count, void *all,
                                const int *counts, const int *displs, weft__ctl_type_t t,
                                int root);
/** A barrier during which poll(arg) runs between tests (poll NULL: a plain
 * barrier); the thread yields the core between polls. */
weft_status_t weft__ctl_barrier(weft__ctl_t *ctl, void (*poll)(void *), void *arg);
/** Blocking point-to-point bytes (tag >= 0; not collective). */
weft_status_t weft__ctl_send(weft__ctl_t *ctl, const void *buf, size_t bytes, int peer, int tag);
weft_status_t weft__ctl_recv(weft__ctl_t *ctl, void *buf, size_t bytes, int peer, int tag);

/** A private duplicate of ctl (errors returned, never fatal). */
weft_status_t weft__ctl_dup(weft__ctl_t *ctl, weft__ctl_t **out);
/** MPI_Comm_split: color < 0 joins none (*out = NULL). */
weft_status_t weft__ctl_split(weft__ctl_t *ctl, int color, int key, weft__ctl_t **out);
/** MPI_Comm_create_group: the n ranks of ctl listed in ranks (in that
 * order, this rank among them). Collective over those ranks only. */
weft_status_t weft__ctl_create_group(weft__ctl_t *ctl, const int *ranks, int n, weft__ctl_t **out);
/** The ranks of ctl that share this rank's node (shared memory), in ctl's order. */
weft_status_t weft__ctl_split_node(weft__ctl_t *ctl, weft__ctl_t **out);
/** Free a channel made by dup/split (NULL and the world's: no-op); *ctl = NULL.
 * Collective over its ranks; errors are logged. */
void weft__ctl_free(weft__ctl_t **ctl);

/**
 * The Cartesian topology of ctl: *ndims = 0 if it has none (not an error),
 * else its number of dimensions; dims/periodic/coords of this rank are
 * filled when *ndims <= maxdims. Not collective.
 */
weft_status_t weft__ctl_cart(weft__ctl_t *ctl, int maxdims, int *ndims, int *dims, int *periodic,
                             int *coords);

#endif /* WEFT_CTL_H */
