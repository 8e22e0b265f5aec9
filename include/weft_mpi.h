/*
 * weft_mpi.h - MPI interop for Weft.
 */
#ifndef WEFT_MPI_H
#define WEFT_MPI_H

#include <mpi.h>
#include "weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a Weft communicator over the processes of `mpi_comm`, bound to
 * `stream` (NULL: no stream; the collective runs on the engine and the host
 * waits in weft_wait). The MPI communicator is duplicated with
 * MPI_ERRORS_RETURN: Weft's traffic never mixes with the caller's, and no MPI
 * error aborts the process. Collective over mpi_comm (every rank calls it, in
 * the same order as its other collective calls on mpi_comm).
 * Thread: any, after weft_init.
 */
WEFT_EXPORT weft_status_t weft_comm_create(MPI_Comm mpi_comm, weft_stream_t stream,
                                           weft_comm_t *comm);
/* weft_comm_params_t and WEFT_COMM_PARAMS_INITIALIZER: see weft.h. */
/**
 * weft_comm_create with options (params NULL: all defaults, as
 * weft_comm_create). WEFT_ERR_UNSUPPORTED, on every rank, when the asked-for
 * transport is not built in; WEFT_ERR_UCX when UCX cannot start here.
 * Collective over mpi_comm, as weft_comm_create. Thread: any, after weft_init.
 */
WEFT_EXPORT weft_status_t weft_comm_create_ex(MPI_Comm mpi_comm, weft_stream_t stream,
                                              const weft_comm_params_t *params,
                                              weft_comm_t *comm);
/** The duplicated MPI communicator Weft uses (do not free it). Any thread. */
WEFT_EXPORT weft_status_t weft_comm_get_mpi(weft_comm_t comm, MPI_Comm *mpi_comm);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_MPI_H */
