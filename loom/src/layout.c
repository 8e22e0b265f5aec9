/*
 * layout.c - the process layout of a parallel run: P = D sample groups x
 * (sh x sw) spatial ranks, and the Weft communicators over them.
 */
#include "internal.h"
#include "loom_par.h"

#include <stdio.h>

static int mpi_error(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return loom_error(LOOM_ERR_INTERNAL, "%s: %s", what, msg);
}

int loom_layout_create(loom_layout_t *l, MPI_Comm world, int dp, int sh, int sw)
{
    int st = LOOM_OK, rc, ws;
    memset(l, 0, sizeof *l);
    l->mpi_spatial = l->mpi_data = MPI_COMM_NULL;
    if ((rc = MPI_Comm_rank(world, &l->world_rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(world, &l->world_size)) != MPI_SUCCESS)
        return mpi_error(rc, "layout: MPI_Comm_rank/size");
    if (dp <= 0 || sh <= 0 || sw <= 0 || (long)dp * sh * sw != l->world_size)
        return loom_error(LOOM_ERR_INVALID,
                          "layout: %d processes but --data-parallel %d x --spatial %dx%d = %ld; "
                          "the process count must equal D*H*W",
                          l->world_size, dp, sh, sw, (long)dp * sh * sw);
    int s = sh * sw;
    l->dp = dp;
    l->sh = sh;
    l->sw = sw;
    l->group = l->world_rank / s;
    l->spatial_rank = l->world_rank % s;
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    if ((rc = MPI_Comm_split(world, l->group, l->world_rank, &l->mpi_spatial)) != MPI_SUCCESS) {
        st = mpi_error(rc, "layout: MPI_Comm_split (sample groups)");
        goto fail;
    }
    if ((rc = MPI_Comm_split(world, l->spatial_rank, l->world_rank, &l->mpi_data)) != MPI_SUCCESS) {
        st = mpi_error(rc, "layout: MPI_Comm_split (data-parallel peers)");
        goto fail;
    }
    if ((ws = weft_comm_create(world, NULL, &l->world)) != WEFT_SUCCESS) {
        st = loom_weft_error(ws, "layout: weft_comm_create (world)");
        goto fail;
    }
    if ((ws = weft_comm_create(l->mpi_spatial, NULL, &l->spatial)) != WEFT_SUCCESS) {
        st = loom_weft_error(ws, "layout: weft_comm_create (spatial group)");
        goto fail;
    }
    if ((ws = weft_comm_create(l->mpi_data, NULL, &l->data)) != WEFT_SUCCESS) {
        st = loom_weft_error(ws, "layout: weft_comm_create (data-parallel peers)");
        goto fail;
    }
    return LOOM_OK;
fail:
    loom_layout_destroy(l);
    return st;
}

void loom_layout_destroy(loom_layout_t *l)
{
    if (l->data)
        weft_comm_destroy(l->data);
    if (l->spatial)
        weft_comm_destroy(l->spatial);
    if (l->world)
        weft_comm_destroy(l->world);
    if (l->mpi_data != MPI_COMM_NULL)
        MPI_Comm_free(&l->mpi_data);
    if (l->mpi_spatial != MPI_COMM_NULL)
        MPI_Comm_free(&l->mpi_spatial);
    l->data = l->spatial = l->world = NULL;
}
