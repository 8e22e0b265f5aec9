/*
 * mpi_interop.c - Weft over MPI: weft_init's MPI part, the public MPI
 * constructors (include/weft_mpi.h, and weft.h's weft_comm_world and
 * weft_comm_create_f, which name MPI communicators), the datatype and
 * operation maps, and MPI's error text. The control channel is in
 * lib/mpi_ctl.c. The core's other files reach MPI only through lib/ctl.h.
 *
 * Thread contract: written beside each public function in weft.h /
 * weft_mpi.h; the internal ones in mpi_interop.h.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "global.h"
#include "log.h"
#include "mpi_interop.h"
#include "transport.h"
#include "weft_mpi.h"

weft_status_t weft__mpi_error(int rc, const char *call, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    const char *base = strrchr(file, '/');
    WEFT__ERROR("%s failed: %s (at %s:%d)", call, text, base ? base + 1 : file, line);
    return WEFT_ERR_MPI;
}

/* ---- weft_init / weft_finalize: the MPI part ----------------------------- */
weft_status_t weft__mpi_init(const weft_init_params_t *params)
{
    weft_status_t st = WEFT_SUCCESS;
    int flag = 0, provided = 0;
    WEFT__MPI_CHECK(MPI_Initialized(&flag));
    if (!flag) {
        int *argc = NULL;
        char ***argv = NULL;
        if (params != NULL && params->size >= offsetof(weft_init_params_t, argv) + sizeof(char ***)) {
            argc = params->argc;
            argv = params->argv;
        }
        WEFT__MPI_CHECK(PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
        weft__g.we_init_mpi = 1;
    } else {
        int fin = 0;
        WEFT__MPI_CHECK(MPI_Finalized(&fin));
        if (fin) {
            WEFT__ERROR("weft_init: MPI has already been finalised");
            return WEFT_ERR_MPI;
        }
        WEFT__MPI_CHECK(PMPI_Query_thread(&provided));
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        /* Logged unconditionally: this is the first thing a user must fix. */
        fprintf(stderr, "[weft] weft_init: the MPI library provides thread level %d, but Weft's "
                        "progress thread needs MPI_THREAD_MULTIPLE (%d). Initialise MPI with "
                        "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or use an MPI built with "
                        "thread support.\n", provided, MPI_THREAD_MULTIPLE);
        st = WEFT_ERR_THREAD_LEVEL;
        goto fail;
    }
    WEFT__MPI_CHECK_GOTO(MPI_Comm_rank(MPI_COMM_WORLD, &weft__g.world_rank), st, fail);
    WEFT__MPI_CHECK_GOTO(MPI_Comm_size(MPI_COMM_WORLD, &weft__g.world_size), st, fail);
    atomic_store_explicit(&weft__log_rank, weft__g.world_rank, memory_order_relaxed);
    int *ub = NULL, ubflag = 0;
    WEFT__MPI_CHECK_GOTO(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &ubflag), st, fail);
    weft__g.tag_ub = ubflag ? *ub : 32767;
    if (weft__g.tag_ub < (int)((1u << (WEFT__COLL_TAG_BITS + 1)) - 1)) {
        WEFT__ERROR("MPI_TAG_UB is %d; Weft needs at least 2^%d - 1", weft__g.tag_ub,
                    WEFT__COLL_TAG_BITS + 1);
        st = WEFT_ERR_UNSUPPORTED;
        goto fail;
    }
    WEFT__CHECK_GOTO(weft__ctl_world_start(), st, fail);
    return WEFT_SUCCESS;

fail:
    (void)weft__mpi_finalize();
    return st;
}

weft_status_t weft__mpi_finalize(void)
{
    if (!weft__g.we_init_mpi) return WEFT_SUCCESS;
    weft__g.we_init_mpi = 0;
    int rc = PMPI_Finalize();
    if (rc != MPI_SUCCESS) return weft__mpi_error(rc, "MPI_Finalize", __FILE__, __LINE__);
    return WEFT_SUCCESS;
}

int weft__mpi_usable(void)
{
    int init = 0, fin = 0;
    return MPI_Initialized(&init) == MPI_SUCCESS && init && MPI_Finalized(&fin) == MPI_SUCCESS &&
           !fin;
}

/* ---- communicators from MPI ---------------------------------------------- */
weft_status_t weft_comm_create(MPI_Comm mpi_comm, weft_stream_t stream, weft_comm_t *out)
{
    return weft_comm_create_ex(mpi_comm, stream, NULL, out);
}

weft_status_t weft_comm_create_ex(MPI_Comm mpi_comm, weft_stream_t stream,
                                  const weft_comm_params_t *params, weft_comm_t *out)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (out == NULL || mpi_comm == MPI_COMM_NULL) return WEFT_ERR_INVALID_ARG;
    weft_transport_t want = WEFT_TRANSPORT_DEFAULT;
    WEFT__CHECK(weft__comm_params(params, &want));
    weft__ctl_t *ctl = NULL;
    WEFT__CHECK(weft__ctl_from_mpi(mpi_comm, &ctl));
    return weft__comm_create(ctl, stream, want, out);
}

weft_status_t weft_comm_world(weft_stream_t stream, const weft_comm_params_t *params,
                              weft_comm_t *comm)
{
    return weft_comm_create_ex(MPI_COMM_WORLD, stream, params, comm);
}

weft_status_t weft_comm_create_f(int fortran_comm, weft_stream_t stream,
                                 const weft_comm_params_t *params, weft_comm_t *comm)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    MPI_Comm mc = MPI_Comm_f2c((MPI_Fint)fortran_comm);
    if (mc == MPI_COMM_NULL) return WEFT_ERR_INVALID_ARG;
    return weft_comm_create_ex(mc, stream, params, comm);
}

weft_status_t weft_comm_get_mpi(weft_comm_t comm, MPI_Comm *mpi_comm)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (mpi_comm == NULL) return WEFT_ERR_INVALID_ARG;
    *mpi_comm = weft__ctl_mpi(c->ctl);
    return WEFT_SUCCESS;
}

/* ---- datatype and operation maps ------------------------------------------ */
MPI_Datatype weft__dtype_mpi(weft_datatype_t d)
{
    switch (d) {
    case WEFT_INT8: return MPI_INT8_T;
    case WEFT_UINT8: return MPI_UINT8_T;
    case WEFT_INT16: return MPI_INT16_T;
    case WEFT_UINT16: return MPI_UINT16_T;
    case WEFT_INT32: return MPI_INT32_T;
    case WEFT_UINT32: return MPI_UINT32_T;
    case WEFT_INT64: return MPI_INT64_T;
    case WEFT_UINT64: return MPI_UINT64_T;
    case WEFT_FLOAT32: return MPI_FLOAT;
    case WEFT_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op weft__op_mpi(weft_op_t op)
{
    switch (op) {
    case WEFT_SUM: case WEFT_AVG: return MPI_SUM;
    case WEFT_PROD: return MPI_PROD;
    case WEFT_MIN: return MPI_MIN;
    case WEFT_MAX: return MPI_MAX;
    case WEFT_BAND: return MPI_BAND;
    case WEFT_BOR: return MPI_BOR;
    case WEFT_BXOR: return MPI_BXOR;
    default: return MPI_OP_NULL;
    }
}
