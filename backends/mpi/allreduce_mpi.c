/*
 * allreduce_mpi.c - allreduce passed through to MPI_Iallreduce on the
 * communicator's duplicated MPI_Comm, completed with MPI_Test: the algorithm
 * the MPI backend provides (a row of lib/coll/algos.c's table like any other;
 * it reaches the MPI_Comm through the interop, lib/mpi_interop.h).
 *
 * Cost = whatever the MPI library's own algorithm costs; not modelled (cost
 * is NULL), so selection uses it only when forced or tuned.
 *
 * MPI has no float16/bfloat16 reduction here: supports() refuses them. It
 * also refuses uint8 MIN/MAX: MPICH 4.0.2 (Debian 12) compares MPI_UINT8_T
 * and MPI_UNSIGNED_CHAR as signed (measured: max(119, 179) = 119). AVG
 * is sent as MPI_SUM (the caller divides at the end, as for every
 * algorithm). Counts above INT_MAX use the MPI 4 large-count call.
 */
#include <limits.h>
#include <string.h>

#include "algo.h"
#include "mpi_interop.h"

typedef struct mpi_state {
    MPI_Request req;
    int active;   /* req posted and not yet complete */
} mpi_state_t;
_Static_assert(sizeof(mpi_state_t) <= WEFT__PRIV_BYTES, "mpi_state_t does not fit op->priv");

/* Thread contract: engine side. Never blocks. */
static weft_status_t mpi_step(weft__op_t *op)
{
    mpi_state_t *s = (mpi_state_t *)op->priv;
    int flag = 0;
    if (!s->active) return WEFT_SUCCESS;
    WEFT__MPI_CHECK(MPI_Test(&s->req, &flag, MPI_STATUS_IGNORE));
    if (!flag) return WEFT_INPROGRESS;
    s->active = 0;
    return WEFT_SUCCESS;
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t mpi_start(weft__op_t *op)
{
    mpi_state_t *s = (mpi_state_t *)op->priv;
    MPI_Datatype dt = weft__dtype_mpi(op->dtype);
    MPI_Op mop = weft__op_mpi(op->rop);

    memset(s, 0, sizeof(*s));
    s->req = MPI_REQUEST_NULL;
    if (op->count == 0) return WEFT_SUCCESS;
    if (dt == MPI_DATATYPE_NULL || mop == MPI_OP_NULL) {
        WEFT__ERROR("allreduce mpi: datatype %s / op %s has no MPI equivalent",
                    weft_datatype_name(op->dtype), weft_op_name(op->rop));
        return WEFT_ERR_ALGORITHM;
    }
    const void *sbuf = op->sendbuf == op->recvbuf ? MPI_IN_PLACE : op->sendbuf;
    MPI_Comm mc = weft__ctl_mpi(op->comm->ctl);
    if (op->count <= (size_t)INT_MAX)
        WEFT__MPI_CHECK(PMPI_Iallreduce(sbuf, op->recvbuf, (int)op->count, dt, mop, mc, &s->req));
    else
        WEFT__MPI_CHECK(PMPI_Iallreduce_c(sbuf, op->recvbuf, (MPI_Count)op->count, dt, mop, mc,
                                         &s->req));
    s->active = 1;
    return mpi_step(op);
}

/* Thread contract: engine side, exactly once. MPI forbids cancelling or
 * freeing a nonblocking collective's request, so an op abandoned in flight
 * (timeout, finalize) leaves it to MPI; the communicator is broken anyway. */
static void mpi_cleanup(weft__op_t *op)
{
    mpi_state_t *s = (mpi_state_t *)op->priv;
    if (s->active)
        WEFT__WARN("allreduce mpi: abandoning an MPI_Iallreduce still in flight (tag %u)",
                   (unsigned)op->tag);
    s->active = 0;
}

/* Thread contract: any thread. */
static bool mpi_supports(weft_datatype_t dtype, weft_op_t op)
{
    if (dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16) return false;
    /* MPICH 4.0's MIN and MAX compare MPI_UINT8_T and MPI_UINT16_T as signed
     * (min(200, 100) is 200): Weft's own algorithms serve those */
    if ((dtype == WEFT_UINT8 || dtype == WEFT_UINT16) && (op == WEFT_MIN || op == WEFT_MAX))
        return false;
    return true;
}

const weft__algo_impl_t weft__allreduce_mpi_impl = {
    .id = WEFT_ALGO_MPI,
    .kind = WEFT__OP_ALLREDUCE,
    .cost = NULL,
    .supports = mpi_supports,
    .start = mpi_start,
    .step = mpi_step,
    .cleanup = mpi_cleanup,
};
