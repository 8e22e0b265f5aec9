/*
 * mpi_interop.h - Weft's use of MPI, the one private header that includes
 * mpi.h. Included only by the MPI interop (lib/mpi_interop.c, lib/mpi_ctl.c)
 * and the MPI backend (backends/mpi/); everything else reaches MPI through
 * the control channel (lib/ctl.h) and the transport interface.
 */
#ifndef WEFT_MPI_INTEROP_H
#define WEFT_MPI_INTEROP_H

#include <mpi.h>

#include "ctl.h"
#include "sys.h"
#include "weft.h"

/** MPI's datatype / op for ours; MPI_DATATYPE_NULL / MPI_OP_NULL where MPI has
 * none (float16, bfloat16). AVG maps to MPI_SUM. Any thread. */
MPI_Datatype weft__dtype_mpi(weft_datatype_t dtype);
MPI_Op weft__op_mpi(weft_op_t op);

/** The MPI communicator behind a control channel (valid until weft__ctl_free).
 * Any thread. */
MPI_Comm weft__ctl_mpi(const weft__ctl_t *ctl);
/**
 * A new control channel over a private duplicate of mpi_comm, with
 * MPI_ERRORS_RETURN (weft_comm_create). Collective over mpi_comm. Any thread.
 */
weft_status_t weft__ctl_from_mpi(MPI_Comm mpi_comm, weft__ctl_t **out);

/** Start weft__ctl_world (weft__mpi_init, MPI initialised; lib/mpi_ctl.c). */
weft_status_t weft__ctl_world_start(void);

/* ---- check macros (log once where found, then propagate) ------------------ */
/* Weft's own MPI traffic calls the PMPI_ entry of every function that
 * libweft-mpi.so (interpose/) defines: MPI_Init_thread, MPI_Query_thread, MPI_Finalize and the
 * collectives (MPI_Allreduce, MPI_Bcast, MPI_Gather, MPI_Allgather,
 * MPI_Iallreduce, MPI_Ibarrier, ...). With the interposer preloaded, the
 * MPI_ name would resolve to it and re-enter Weft (an agreement allreduce
 * inside weft_comm_create would create a Weft communicator for Weft's own
 * duplicate). The test interpose-symbols checks libweft.so for such
 * references. Point-to-point, communicator and query calls stay MPI_. */
weft_status_t weft__mpi_error(int rc, const char *call, const char *file, int line);

#define WEFT__MPI_CHECK(call)                                                   \
    do {                                                                       \
        int weft__rc = (call);                                                 \
        if (WEFT__UNLIKELY(weft__rc != MPI_SUCCESS))                           \
            return weft__mpi_error(weft__rc, #call, __FILE__, __LINE__);       \
    } while (0)

#define WEFT__MPI_CHECK_GOTO(call, st, label)                                   \
    do {                                                                       \
        int weft__rc = (call);                                                 \
        if (WEFT__UNLIKELY(weft__rc != MPI_SUCCESS)) {                         \
            (st) = weft__mpi_error(weft__rc, #call, __FILE__, __LINE__);       \
            goto label;                                                        \
        }                                                                      \
    } while (0)


#endif /* WEFT_MPI_INTEROP_H */
