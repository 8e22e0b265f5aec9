/*
 * transport_mpi.c - Weft's point-to-point transport over MPI nonblocking
 * send/recv on the communicator's private duplicate (so Weft's traffic never
 * matches the application's). Messages above INT_MAX bytes use MPI 4's
 * large-count calls.
 *
 * Thread contract: isend/irecv/testall/cancel run on the engine side (one
 * thread at a time, under the progress lock); comm_open/comm_close on the
 * caller thread of weft_comm_create/destroy. MPI_THREAD_MULTIPLE makes the
 * concurrent use of MPI by the application and the engine legal.
 */
#include <limits.h>

#include "comm.h"
#include "log.h"
#include "mpi_interop.h"
#include "transport.h"

static weft_status_t mpi_comm_open(weft__comm_t *comm)
{
    WEFT__UNUSED(comm);
    return WEFT_SUCCESS;
}

static void mpi_comm_close(weft__comm_t *comm) { WEFT__UNUSED(comm); }

static weft_status_t mpi_isend(weft__comm_t *comm, const void *buf, size_t bytes, int peer,
                               uint32_t tag, weft__xfer_t *x)
{
    int rc;
    if (WEFT__LIKELY(bytes <= INT_MAX))
        rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, (int)tag, comm->mpi, &x->h.mpi);
    else
        rc = MPI_Isend_c(buf, (MPI_Count)bytes, MPI_BYTE, peer, (int)tag, comm->mpi, &x->h.mpi);
    if (WEFT__UNLIKELY(rc != MPI_SUCCESS)) return weft__mpi_error(rc, "MPI_Isend", __FILE__, __LINE__);
    x->active = 1;
    return WEFT_SUCCESS;
}

static weft_status_t mpi_irecv(weft__comm_t *comm, void *buf, size_t bytes, int peer,
                               uint32_t tag, weft__xfer_t *x)
{
    int rc;
    if (WEFT__LIKELY(bytes <= INT_MAX))
        rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, (int)tag, comm->mpi, &x->h.mpi);
    else
        rc = MPI_Irecv_c(buf, (MPI_Count)bytes, MPI_BYTE, peer, (int)tag, comm->mpi, &x->h.mpi);
    if (WEFT__UNLIKELY(rc != MPI_SUCCESS)) return weft__mpi_error(rc, "MPI_Irecv", __FILE__, __LINE__);
    x->active = 1;
    return WEFT_SUCCESS;
}

static weft_status_t mpi_testall(weft__comm_t *comm, weft__xfer_t *x, int n, int *done)
{
    WEFT__UNUSED(comm);
    int all = 1;
    for (int i = 0; i < n; i++) {
        if (!x[i].active) continue;
        int flag = 0;
        MPI_Status status;
        int rc = MPI_Test(&x[i].h.mpi, &flag, &status);
        if (WEFT__UNLIKELY(rc != MPI_SUCCESS)) {
            x[i].active = 0;
            return weft__mpi_error(rc, "MPI_Test", __FILE__, __LINE__);
        }
        if (flag) x[i].active = 0;
        else all = 0;
    }
    *done = all;
    return WEFT_SUCCESS;
}

static void mpi_cancel(weft__comm_t *comm, weft__xfer_t *x)
{
    WEFT__UNUSED(comm);
    if (!x->active) return;
    /* Cancel what MPI can cancel (receives); free the rest so MPI completes it
     * on its own. Errors here are on a failure path already being reported. */
    if (MPI_Cancel(&x->h.mpi) != MPI_SUCCESS || MPI_Request_free(&x->h.mpi) != MPI_SUCCESS)
        WEFT__WARN("could not cancel a pending MPI transfer");
    x->active = 0;
}

const weft__transport_t weft__transport_mpi = {
    .name = "mpi",
    .comm_open = mpi_comm_open,
    .comm_close = mpi_comm_close,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .testall = mpi_testall,
    .cancel = mpi_cancel,
    .poll_pause = 1,
};
