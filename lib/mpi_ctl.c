/*
 * mpi_ctl.c - the control channel (lib/ctl.h) over MPI: a weft__ctl_t wraps
 * an MPI communicator with MPI_ERRORS_RETURN. Collectives call their PMPI_
 * entry (libweft-mpi.so interposes the MPI_ ones: see mpi_interop.h);
 * point-to-point and communicator calls stay MPI_.
 *
 * Thread contract: as lib/ctl.h says (blocking; any thread but the engine's).
 */
#include <limits.h>
#include <sched.h>
#include <stdlib.h>

#include "global.h"
#include "log.h"
#include "mpi_interop.h"

struct weft__ctl {
    MPI_Comm comm;
    int rank, size;
    int owned; /* freed by weft__ctl_free (not the world's) */
};

static struct weft__ctl world = {.comm = MPI_COMM_NULL};
static _Atomic int world_ready;

/* weft__mpi_init, after MPI is initialised. */
weft_status_t weft__ctl_world_start(void)
{
    world.comm = MPI_COMM_WORLD;
    WEFT__MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank));
    WEFT__MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world.size));
    world.owned = 0;
    /* release: the fields above before the flag (read with acquire) */
    atomic_store_explicit(&world_ready, 1, memory_order_release);
    return WEFT_SUCCESS;
}

weft__ctl_t *weft__ctl_world(void)
{
    return atomic_load_explicit(&world_ready, memory_order_acquire) ? &world : NULL;
}

int weft__ctl_rank(const weft__ctl_t *ctl) { return ctl->rank; }
int weft__ctl_size(const weft__ctl_t *ctl) { return ctl->size; }
MPI_Comm weft__ctl_mpi(const weft__ctl_t *ctl) { return ctl->comm; }

/* Take over comm (MPI_ERRORS_RETURN set here) as a new owned channel; frees
 * comm on failure. */
static weft_status_t wrap(MPI_Comm comm, weft__ctl_t **out)
{
    weft_status_t st = WEFT_SUCCESS;
    weft__ctl_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        st = WEFT_ERR_NO_MEMORY;
        goto fail_comm;
    }
    c->comm = comm;
    c->owned = 1;
    WEFT__MPI_CHECK_GOTO(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), st, fail_ctl);
    WEFT__MPI_CHECK_GOTO(MPI_Comm_rank(comm, &c->rank), st, fail_ctl);
    WEFT__MPI_CHECK_GOTO(MPI_Comm_size(comm, &c->size), st, fail_ctl);
    *out = c;
    return WEFT_SUCCESS;

fail_ctl:
    free(c);
fail_comm: {
    int rc = MPI_Comm_free(&comm);
    if (rc != MPI_SUCCESS) weft__mpi_error(rc, "MPI_Comm_free", __FILE__, __LINE__);
}
    return st;
}

weft_status_t weft__ctl_from_mpi(MPI_Comm mpi_comm, weft__ctl_t **out)
{
    MPI_Comm d = MPI_COMM_NULL;
    WEFT__MPI_CHECK(MPI_Comm_dup(mpi_comm, &d));
    return wrap(d, out);
}

weft_status_t weft__ctl_dup(weft__ctl_t *ctl, weft__ctl_t **out)
{
    return weft__ctl_from_mpi(ctl->comm, out);
}

weft_status_t weft__ctl_split(weft__ctl_t *ctl, int color, int key, weft__ctl_t **out)
{
    MPI_Comm s = MPI_COMM_NULL;
    WEFT__MPI_CHECK(MPI_Comm_split(ctl->comm, color < 0 ? MPI_UNDEFINED : color, key, &s));
    if (s == MPI_COMM_NULL) {
        *out = NULL;
        return WEFT_SUCCESS;
    }
    return wrap(s, out);
}

weft_status_t weft__ctl_create_group(weft__ctl_t *ctl, const int *ranks, int n, weft__ctl_t **out)
{
    /* The tag tells this creation from another on the same channel at once
     * (MPI requires distinct tags only for concurrent creations by threads
     * of one process; Weft's callers create one at a time per comm). */
    enum { GROUP_TAG = 0x57 };
    MPI_Group all = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
    MPI_Comm s = MPI_COMM_NULL;
    weft_status_t st = WEFT_SUCCESS;
    WEFT__MPI_CHECK(MPI_Comm_group(ctl->comm, &all));
    WEFT__MPI_CHECK_GOTO(MPI_Group_incl(all, n, ranks, &sub), st, out);
    WEFT__MPI_CHECK_GOTO(MPI_Comm_create_group(ctl->comm, sub, GROUP_TAG, &s), st, out);
    st = wrap(s, out);
out:
    if (sub != MPI_GROUP_NULL) {
        int rc = MPI_Group_free(&sub);
        if (rc != MPI_SUCCESS) weft__mpi_error(rc, "MPI_Group_free", __FILE__, __LINE__);
    }
    int rc = MPI_Group_free(&all);
    if (rc != MPI_SUCCESS) weft__mpi_error(rc, "MPI_Group_free", __FILE__, __LINE__);
    return st;
}

weft_status_t weft__ctl_split_node(weft__ctl_t *ctl, weft__ctl_t **out)
{
    MPI_Comm s = MPI_COMM_NULL;
    WEFT__MPI_CHECK(MPI_Comm_split_type(ctl->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &s));
    return wrap(s, out);
}

void weft__ctl_free(weft__ctl_t **ctl)
{
    weft__ctl_t *c = *ctl;
    *ctl = NULL;
    if (c == NULL || !c->owned) return;
    int rc = MPI_Comm_free(&c->comm);
    if (rc != MPI_SUCCESS) weft__mpi_error(rc, "MPI_Comm_free", __FILE__, __LINE__);
    free(c);
}

/* ---- collectives ------------------------------------------------------------ */
static MPI_Datatype type_of(weft__ctl_type_t t)
{
    switch (t) {
    case WEFT__CTL_INT: return MPI_INT;
    case WEFT__CTL_LLONG: return MPI_LONG_LONG;
    case WEFT__CTL_U64: return MPI_UINT64_T;
    case WEFT__CTL_DOUBLE: return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}

static MPI_Op op_of(weft__ctl_op_t op)
{
    switch (op) {
    case WEFT__CTL_MIN: return MPI_MIN;
    case WEFT__CTL_MAX: return MPI_MAX;
    case WEFT__CTL_SUM: return MPI_SUM;
    }
    return MPI_OP_NULL;
}

/* bytes as an MPI int count, or WEFT_ERR_INVALID_ARG (logged). */
static weft_status_t int_count(size_t bytes, const char *what, int *out)
{
    if (bytes > (size_t)INT_MAX) {
        WEFT__ERROR("%s: %zu bytes exceed an MPI int count", what, bytes);
        return WEFT_ERR_INVALID_ARG;
    }
    *out = (int)bytes;
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_allreduce(weft__ctl_t *ctl, const void *in, void *out, int n,
                                  weft__ctl_type_t t, weft__ctl_op_t op)
{
    WEFT__MPI_CHECK(PMPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, n, type_of(t), op_of(op),
                                   ctl->comm));
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_bcast(weft__ctl_t *ctl, void *buf, size_t bytes, int root)
{
    int n = 0;
    WEFT__CHECK(int_count(bytes, "control bcast", &n));
    WEFT__MPI_CHECK(PMPI_Bcast(buf, n, MPI_BYTE, root, ctl->comm));
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_allgather(weft__ctl_t *ctl, const void *mine, void *all, size_t bytes)
{
    int n = 0;
    WEFT__CHECK(int_count(bytes, "control allgather", &n));
    if (mine == NULL)
        WEFT__MPI_CHECK(PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, MPI_BYTE,
                                       ctl->comm));
    else
        WEFT__MPI_CHECK(PMPI_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, ctl->comm));
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_gather(weft__ctl_t *ctl, const void *mine, size_t bytes, void *all,
                               int root)
{
    int n = 0;
    WEFT__CHECK(int_count(bytes, "control gather", &n));
    WEFT__MPI_CHECK(PMPI_Gather(mine, n, MPI_BYTE, all, n, MPI_BYTE, root, ctl->comm));
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_gatherv(weft__ctl_t *ctl, const void *mine, int count, void *all,
                                const int *counts, const int *displs, weft__ctl_type_t t, int root)
{
    WEFT__MPI_CHECK(PMPI_Gatherv(mine, count, type_of(t), all, counts, displs, type_of(t), root,
                                 ctl->comm));
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_barrier(weft__ctl_t *ctl, void (*poll)(void *), void *arg)
{
    MPI_Request req = MPI_REQUEST_NULL;
    WEFT__MPI_CHECK(PMPI_Ibarrier(ctl->comm, &req));
    int flag = 0;
    while (!flag) {
        if (poll != NULL) poll(arg);
        WEFT__MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        /* Leave the core to the peers on an oversubscribed node. */
        if (!flag) sched_yield();
    }
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_send(weft__ctl_t *ctl, const void *buf, size_t bytes, int peer, int tag)
{
    int n = 0;
    WEFT__CHECK(int_count(bytes, "control send", &n));
    WEFT__MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, tag, ctl->comm));
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_recv(weft__ctl_t *ctl, void *buf, size_t bytes, int peer, int tag)
{
    int n = 0;
    WEFT__CHECK(int_count(bytes, "control recv", &n));
    WEFT__MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, tag, ctl->comm, MPI_STATUS_IGNORE));
    return WEFT_SUCCESS;
}

weft_status_t weft__ctl_cart(weft__ctl_t *ctl, int maxdims, int *ndims, int *dims, int *periodic,
                             int *coords)
{
    int topo = MPI_UNDEFINED, nd = 0;
    *ndims = 0;
    WEFT__MPI_CHECK(MPI_Topo_test(ctl->comm, &topo));
    if (topo != MPI_CART) return WEFT_SUCCESS;
    WEFT__MPI_CHECK(MPI_Cartdim_get(ctl->comm, &nd));
    if (nd <= maxdims) WEFT__MPI_CHECK(MPI_Cart_get(ctl->comm, nd, dims, periodic, coords));
    *ndims = nd;
    return WEFT_SUCCESS;
}
