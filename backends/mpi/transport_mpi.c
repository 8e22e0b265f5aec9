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
 *
 * Includes: transport.h (the interface), mpi_interop.h (the MPI_Comm behind
 * the communicator's control channel), base/ headers.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mpi_interop.h"
#include "transport.h"

_Static_assert(sizeof(MPI_Request) <= WEFT__XFER_HANDLE_BYTES,
               "an MPI_Request must fit weft__xfer_t's handle");

/* Per-communicator state (weft__tp_comm_t's state): the MPI communicator
 * the transfers use, the communicator's private duplicate. */
typedef struct mpi_comm_state {
    MPI_Comm comm;
} mpi_comm_state_t;

static inline MPI_Comm comm_of(struct weft__comm *comm)
{
    return ((const mpi_comm_state_t *)weft__tp_comm(comm)->state)->comm;
}

/* The MPI_Request kept in x's handle (copied: the handle is bytes). */
static inline MPI_Request *req_at(weft__xfer_t *x, MPI_Request *r)
{
    memcpy(r, x->h.bytes, sizeof *r);
    return r;
}
static inline void req_store(weft__xfer_t *x, const MPI_Request *r)
{
    memcpy(x->h.bytes, r, sizeof *r);
}

/* Caller thread of weft_comm_create (not collective: nothing to agree). */
static weft_status_t mpi_comm_open(struct weft__comm *comm)
{
    weft__tp_comm_t *t = weft__tp_comm(comm);
    mpi_comm_state_t *ms = malloc(sizeof *ms);
    if (ms == NULL) return WEFT_ERR_NO_MEMORY;
    ms->comm = weft__ctl_mpi(t->ctl);
    t->state = ms;
    return WEFT_SUCCESS;
}

static void mpi_comm_close(struct weft__comm *comm)
{
    weft__tp_comm_t *t = weft__tp_comm(comm);
    free(t->state);
    t->state = NULL;
}

static weft_status_t mpi_isend(struct weft__comm *comm, const void *buf, size_t bytes, int peer,
                               uint32_t tag, weft__xfer_t *x)
{
    int rc;
    MPI_Request r = MPI_REQUEST_NULL;
    if (WEFT__LIKELY(bytes <= INT_MAX))
        rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, (int)tag, comm_of(comm), &r);
    else
        rc = MPI_Isend_c(buf, (MPI_Count)bytes, MPI_BYTE, peer, (int)tag, comm_of(comm), &r);
    if (WEFT__UNLIKELY(rc != MPI_SUCCESS)) return weft__mpi_error(rc, "MPI_Isend", __FILE__, __LINE__);
    req_store(x, &r);
    x->active = 1;
    return WEFT_SUCCESS;
}

static weft_status_t mpi_irecv(struct weft__comm *comm, void *buf, size_t bytes, int peer,
                               uint32_t tag, weft__xfer_t *x)
{
    int rc;
    MPI_Request r = MPI_REQUEST_NULL;
    if (WEFT__LIKELY(bytes <= INT_MAX))
        rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, (int)tag, comm_of(comm), &r);
    else
        rc = MPI_Irecv_c(buf, (MPI_Count)bytes, MPI_BYTE, peer, (int)tag, comm_of(comm), &r);
    if (WEFT__UNLIKELY(rc != MPI_SUCCESS)) return weft__mpi_error(rc, "MPI_Irecv", __FILE__, __LINE__);
    req_store(x, &r);
    x->active = 1;
    return WEFT_SUCCESS;
}

static weft_status_t mpi_testall(struct weft__comm *comm, weft__xfer_t *x, int n, int *done)
{
    WEFT__UNUSED(comm);
    int all = 1;
    for (int i = 0; i < n; i++) {
        if (!x[i].active) continue;
        int flag = 0;
        MPI_Status status;
        MPI_Request r;
        int rc = MPI_Test(req_at(&x[i], &r), &flag, &status);
        req_store(&x[i], &r);
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

static void mpi_cancel(struct weft__comm *comm, weft__xfer_t *x)
{
    WEFT__UNUSED(comm);
    if (!x->active) return;
    /* Cancel what MPI can cancel (receives); free the rest so MPI completes it
     * on its own. Errors here are on a failure path already being reported. */
    MPI_Request r;
    req_at(x, &r);
    if (MPI_Cancel(&r) != MPI_SUCCESS || MPI_Request_free(&r) != MPI_SUCCESS)
        WEFT__WARN("could not cancel a pending MPI transfer");
    req_store(x, &r);
    x->active = 0;
}

static const weft__transport_t transport_mpi = {
    .name = "mpi",
    .comm_open = mpi_comm_open,
    .comm_close = mpi_comm_close,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .testall = mpi_testall,
    .cancel = mpi_cancel,
    .poll_pause = 1,
};

/** The MPI row of the transport table (backends/transport.c). Any thread. */
const weft__transport_t *weft__transport_mpi(void) { return &transport_mpi; }
