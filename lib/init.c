/* init.c - weft_init / weft_finalize, global state, MPI error text. */
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "weft_internal.h"

weft__global_t weft__g;

weft_status_t weft__mpi_error(int rc, const char *call, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    const char *base = strrchr(file, '/');
    WEFT__ERROR("%s failed: %s (at %s:%d)", call, text, base ? base + 1 : file, line);
    return WEFT_ERR_MPI;
}

int weft_initialized(void) { return weft__is_init() ? 1 : 0; }

/* Count the ranks on this node and compare with the cores we may use. */
static weft_status_t detect_oversubscription(void)
{
    MPI_Comm node;
    int local = 1;
    WEFT__MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int rc = MPI_Comm_size(node, &local);
    int rc2 = MPI_Comm_free(&node);
    WEFT__MPI_CHECK(rc);
    WEFT__MPI_CHECK(rc2);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    weft__g.ncores = cores > 0 ? (int)cores : 1;
    /* Each rank has a caller thread and an engine thread; the engine sleeps
     * when idle, so count one core per rank. */
    weft__g.oversubscribed = local > weft__g.ncores;
    return WEFT_SUCCESS;
}

weft_status_t weft_init(const weft_init_params_t *params)
{
    if (weft__is_init()) return WEFT_SUCCESS;
    if (params != NULL && params->size < sizeof(size_t)) return WEFT_ERR_INVALID_ARG;
    weft_status_t st = WEFT_SUCCESS;
    int flag = 0, provided = 0;

    memset(&weft__g, 0, sizeof weft__g);
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
        goto fail_mpi;
    }
    WEFT__MPI_CHECK_GOTO(MPI_Comm_rank(MPI_COMM_WORLD, &weft__g.world_rank), st, fail_mpi);
    WEFT__MPI_CHECK_GOTO(MPI_Comm_size(MPI_COMM_WORLD, &weft__g.world_size), st, fail_mpi);
    atomic_store_explicit(&weft__log_rank, weft__g.world_rank, memory_order_relaxed);
    int *ub = NULL, ubflag = 0;
    WEFT__MPI_CHECK_GOTO(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &ubflag), st, fail_mpi);
    weft__g.tag_ub = ubflag ? *ub : 32767;
    if (weft__g.tag_ub < (int)((1u << (WEFT__COLL_TAG_BITS + 1)) - 1)) {
        WEFT__ERROR("MPI_TAG_UB is %d; Weft needs at least 2^%d - 1", weft__g.tag_ub,
                    WEFT__COLL_TAG_BITS + 1);
        st = WEFT_ERR_UNSUPPORTED;
        goto fail_mpi;
    }
    WEFT__CHECK_GOTO(weft__config_load(), st, fail_mpi);
    WEFT__CHECK_GOTO(detect_oversubscription(), st, fail_mpi);
    WEFT__CHECK_GOTO(weft__select_load(), st, fail_mpi);
    WEFT__CHECK_GOTO(weft__engine_start(), st, fail_mpi);
    WEFT__CHECK_GOTO(weft__obs_init(), st, fail_engine);
    /* release: everything above is visible to threads that see initialized. */
    atomic_store_explicit(&weft__g.initialized, 1, memory_order_release);
    return WEFT_SUCCESS;

fail_engine:
    weft__engine_stop(1.0);
fail_mpi:
    if (weft__g.we_init_mpi) PMPI_Finalize();
    weft__g.we_init_mpi = 0;
    return st;
}

weft_status_t weft_finalize(void)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    double bound = weft__cfg.timeout_s > 0 ? weft__cfg.timeout_s : 60.0;
    weft_status_t st = weft__engine_stop(bound);
    atomic_store_explicit(&weft__g.initialized, 0, memory_order_release);
    weft__obs_fini();
    weft__halo_fini();
    weft__comm_free_all();
    weft__request_fini();
    weft__scratch_trim();
    weft__op_cache_trim();
    weft__transport_ucx_shutdown();
    if (weft__g.we_init_mpi) {
        int rc = PMPI_Finalize();
        if (rc != MPI_SUCCESS && st == WEFT_SUCCESS) st = weft__mpi_error(rc, "MPI_Finalize", __FILE__, __LINE__);
        weft__g.we_init_mpi = 0;
    }
    return st;
}
